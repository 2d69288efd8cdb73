# SPDX-License-Identifier: MIT
# Helpers for the shell tests (sourced).  PS_TOP_BUILDDIR/PS_TOP_SRCDIR come
# from make check; running a test by hand from the build directory works too.
: "${PS_TOP_BUILDDIR:=$(pwd)}"
: "${PS_TOP_SRCDIR:=$PS_TOP_BUILDDIR}"
SHIM="$PS_TOP_BUILDDIR/.libs/libpoolshim.so"
# The test build (tests/preload/local.mk): the same library with the fault
# injection hooks compiled in.  Only the tests that force a fault preload it.
SHIM_TEST="$PS_TOP_BUILDDIR/tests/preload/.libs/libpoolshim-test.so"
PRELOAD_BIN="$PS_TOP_BUILDDIR/tests/preload"
PST_TMP=$(mktemp -d /tmp/pst.XXXXXX)
pst_cleanups="rm -rf '$PST_TMP'"
trap 'eval "$pst_cleanups"' EXIT INT TERM
# Each test's shimmed processes publish their live records in a directory of
# its own, removed with it: a record kept for `poolshim collect` (a report
# that could not be delivered, a process killed) never outlives the test or
# meets another test's.  A test about /dev/shm itself sets PST_LIVE_DIR=default.
if [ "${PST_LIVE_DIR:-}" != default ] && [ -z "${POOLSHIM_LIVE_DIR:-}" ]; then
	mkdir -p "$PST_TMP/live.default"
	POOLSHIM_LIVE_DIR="$PST_TMP/live.default"
	export POOLSHIM_LIVE_DIR
fi

pst_fail=0
fail() { echo "FAIL: $*"; pst_fail=1; }
pass() { echo "ok: $*"; }
skip() { echo "SKIP: $*"; exit 77; }
# Register a command to run at exit, even on failure (restores system settings).
at_exit() { pst_cleanups="$1; $pst_cleanups"; }
finish() { [ "$pst_fail" = 0 ] && exit 0; exit 1; }

# Run a command under the shim: shim VAR=VAL ... -- cmd args
shim() {
	pst_lib=$SHIM
	shim_with "$@"
}
# The same under the test build, for a test that forces a fault through a
# hook (it calls need_test_hooks first).
shim_test() {
	pst_lib=$SHIM_TEST
	shim_with "$@"
}
shim_with() {
	vars=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
	shift
	# shellcheck disable=SC2086
	env $vars LD_PRELOAD="$pst_lib" "$@"
}

# need_test_hooks: unless $SHIM_TEST is the test build with every hook in
# it, end the test as a hard error (99).  A test that forces a fault would
# otherwise pass without the fault ever happening.
need_test_hooks() {
	for h in POOLSHIM_URING_TEST PS_TEST_POOL_DELAY_US; do
		grep -q -F "$h" "$SHIM_TEST" 2>/dev/null && continue
		echo "ERROR: $SHIM_TEST does not name $h: not built, or built without -DPS_TEST_HOOKS"
		exit 99
	done
}

# json_get FILE EXPR: evaluate a Python expression over the parsed report r.
json_get() {
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# uring_lock -s|-x: take the system-wide io_uring lock on fd 9.  io_nouring.sh
# switches io_uring off for every process (kernel.io_uring_disabled) for a
# moment under -x; the tests that need io_uring working hold it -s.
uring_lock() {
	L="${TMPDIR:-/tmp}/poolshim-io_uring.lock"
	(umask 0; : >>"$L") 2>/dev/null
	{ [ -r "$L" ] && command -v flock >/dev/null; } || return 0
	exec 9<"$L"
	flock "$1" 9
}

# nginx_prefix DIR PROCESS-DIRECTIVES: a prefix for Debian's nginx in DIR
# serving DIR/html/f (1 KiB) on the Unix socket DIR/sock, with its pid,
# log and temporary files inside DIR.  The directives say how it runs
# ("master_process off; worker_processes 1;" or "worker_processes 2;").
nginx_prefix() {
	mkdir -p "$1/html" "$1/logs" "$1/tmp"
	head -c 1024 /dev/zero | tr '\0' 'n' >"$1/html/f"
	cat >"$1/nginx.conf" <<EOF_NGINX
daemon off;
$2
pid $1/nginx.pid;
error_log $1/logs/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $1/tmp;
	proxy_temp_path $1/tmp;
	fastcgi_temp_path $1/tmp;
	uwsgi_temp_path $1/tmp;
	scgi_temp_path $1/tmp;
	server {
		listen unix:$1/sock;
		root $1/html;
	}
}
EOF_NGINX
}

# memory_cgroup NAME BYTES: a memory cgroup limited to BYTES (swap off where
# it can be), removed at exit; its directory in $PST_CG (write a pid to its
# cgroup.procs to move a process in).  cgroup v2 where this process's
# cgroup can have a child with the memory controller, else cgroup v1's
# memory hierarchy; skips the test (77) without either (no root, no
# delegation).
memory_cgroup() {
	PST_CG=
	v2=/sys/fs/cgroup
	own=$(sed -n 's/^0:://p' /proc/self/cgroup)
	if grep -qw memory "$v2/cgroup.controllers" 2>/dev/null &&
		mkdir "$v2$own/$1.$$" 2>/dev/null; then
		PST_CG="$v2$own/$1.$$"
		if ! echo "$2" >"$PST_CG/memory.max" 2>/dev/null; then
			rmdir "$PST_CG"
			skip "cgroup v2: memory.max not writable in a child of $own"
		fi
		echo 0 >"$PST_CG/memory.swap.max" 2>/dev/null
	else
		v1=/sys/fs/cgroup/memory
		own=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}://p' /proc/self/cgroup)
		[ -n "$own" ] && [ -d "$v1$own" ] && mkdir "$v1$own/$1.$$" 2>/dev/null ||
			skip "no cgroup v2 delegation with the memory controller, and no writable cgroup v1 memory hierarchy"
		PST_CG="$v1$own/$1.$$"
		echo "$2" >"$PST_CG/memory.limit_in_bytes" ||
			{ rmdir "$PST_CG"; skip "cgroup v1: limit not writable"; }
		echo "$2" >"$PST_CG/memory.memsw.limit_in_bytes" 2>/dev/null
	fi
	at_exit "rmdir '$PST_CG' 2>/dev/null"
}

# pst_killed_record RUN: the record a dd SIGKILLed under the shim leaves,
# made in the test's own live directory L ($PST_TMP/live) with
# POOLSHIM_RUN=RUN and moved to $PST_TMP/good, a template for crafted
# records; sets L, pid (the dd's) and ns (its pid namespace), and writes
# the header's field offsets to $PST_TMP/offsets (tests/tools/live_offsets).
# Fails the test and returns 1 when there is no such record.
pst_killed_record() {
	L="$PST_TMP/live"
	mkdir -p "$L"
	"$PS_TOP_BUILDDIR/tests/tools/live_offsets" >"$PST_TMP/offsets" || { fail "no live_offsets"; return 1; }
	env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN="$1" LD_PRELOAD="$SHIM" \
		dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
	pid=$!
	for _ in $(seq 100); do ls "$L"/poolshim-"$pid"-*.stats >/dev/null 2>&1 && break; sleep 0.1; done
	sleep 0.3
	kill -KILL "$pid"; wait "$pid" 2>/dev/null
	src=$(ls "$L"/poolshim-"$pid"-*.stats 2>/dev/null | head -n 1)
	[ -n "$src" ] || { fail "no record of the dd"; return 1; }
	ns=${src##*-}; ns=${ns%.stats}
	mv "$src" "$PST_TMP/good"
}

# pst_log_listener DIR: a datagram socket at DIR/dev/log (DIR/dev must
# exist) whose messages land one a line in DIR/log.txt, for tests that
# bind it over /dev/log in a mount namespace; it stops 20 s after the last
# message and at the test's end.  Fails the test and returns 1 when it
# does not start.
pst_log_listener() {
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
open(sys.argv[3], "w").close()
try:
    while True:
        with open(sys.argv[2], "ab") as f:
            f.write(s.recv(4096) + b"\n")
except socket.timeout:
    pass' "$1/dev/log" "$1/log.txt" "$1/ready" >"$1/py.err" 2>&1 &
	at_exit "kill $! 2>/dev/null"
	for _ in $(seq 100); do [ -e "$1/ready" ] && break; sleep 0.05; done
	[ -e "$1/ready" ] || { fail "the /dev/log listener did not start: $(cat "$1/py.err")"; return 1; }
}
