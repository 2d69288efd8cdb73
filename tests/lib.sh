# SPDX-License-Identifier: MIT
# Helpers for the shell tests (sourced).  PS_TOP_BUILDDIR/PS_TOP_SRCDIR come
# from make check; running a test by hand from the build directory works too.
: "${PS_TOP_BUILDDIR:=$(pwd)}"
: "${PS_TOP_SRCDIR:=$PS_TOP_BUILDDIR}"
SHIM="$PS_TOP_BUILDDIR/.libs/libpoolshim.so"
PRELOAD_BIN="$PS_TOP_BUILDDIR/tests/preload"
PST_TMP=$(mktemp -d /tmp/pst.XXXXXX)
pst_cleanups="rm -rf '$PST_TMP'"
trap 'eval "$pst_cleanups"' EXIT INT TERM

pst_fail=0
fail() { echo "FAIL: $*"; pst_fail=1; }
pass() { echo "ok: $*"; }
skip() { echo "SKIP: $*"; exit 77; }
# Register a command to run at exit, even on failure (restores system settings).
at_exit() { pst_cleanups="$1; $pst_cleanups"; }
finish() { [ "$pst_fail" = 0 ] && exit 0; exit 1; }

# Run a command under the shim: shim VAR=VAL ... -- cmd args
shim() {
	vars=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
	shift
	# shellcheck disable=SC2086
	env $vars LD_PRELOAD="$SHIM" "$@"
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
