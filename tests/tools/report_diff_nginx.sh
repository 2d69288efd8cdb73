#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 46, the before/after as a user runs it: Debian's nginx, a master
# and two workers as www-data (`user www-data;`, as Debian's nginx.conf
# has it), serving a 4 MiB file with directio and 1 MiB output_buffers
# (O_DIRECT reads into large buffers), each run's JSON reports in a
# directory of its own made for the workers' user as docs/quickstart.md
# says (`install -d -o www-data`), once with POOLSHIM_POOL=off and once
# with the pool.  Every run must leave three reports, the workers' written
# by www-data: a worker whose report is lost fails the test.  `poolshim
# report --diff OFF ON` names the busiest worker (not the master), says
# that io_uring was used on one side only (pooled O_DIRECT buffers are the
# ring's), shows no mean latency over different mixes of calls, and gives
# a verdict; one report of a master against one of a worker is warned
# about.  Skips without nginx, curl, root, the user www-data or O_DIRECT
# under /var/tmp.
. "$PS_TOP_SRCDIR/tests/lib.sh"
NGINX=${PST_NGINX:-/usr/sbin/nginx}
PS="$PS_TOP_BUILDDIR/poolshim"
TOOL="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
[ -x "$NGINX" ] || skip "no $NGINX (Debian package nginx)"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
[ "$(id -u)" = 0 ] || skip "needs root (workers as www-data)"
id www-data >/dev/null 2>&1 || skip "no user www-data (Debian's base-passwd has it; nginx's workers run as it)"
export POOLSHIM_LIBRARY="$SHIM"
unset POOLSHIM_STATS POOLSHIM_STATS_FORMAT LD_PRELOAD POOLSHIM_RUN
D=${TMPDIR:-/var/tmp}
[ -d /var/tmp ] && D=/var/tmp
P=$(mktemp -d "$D/pst-diffnginx.XXXXXX") || skip "no temporary directory under $D"
at_exit "rm -rf '$P'"
L=$(mktemp -d /dev/shm/pst-diffnginx.XXXXXX) || skip "no /dev/shm"
at_exit "rm -rf '$L'"
chmod 1777 "$L"
export POOLSHIM_LIVE_DIR="$L"
mkdir -p "$P/html" "$P/logs" "$P/tmp"
head -c 4194304 /dev/zero | tr '\0' 'n' >"$P/html/f"
python3 -c 'import os,sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT))' "$P/html/f" 2>/dev/null ||
	skip "no O_DIRECT under $D"
chmod a+rx "$P" "$P/html" && chmod a+r "$P/html/f"

# master DIR: the pid of the run's master, the report with the fewest socket calls
master() {
	python3 -c 'import json, glob, sys
rs = [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/nginx-*.json")]
print(min(rs, key=lambda r: sum(c["calls"] for c in r["calls"] if c["kind"] == "socket"))["pid"])' "$1"
}

# run NAME POOL: nginx under the wrapper, 40 GETs, its reports in $P/NAME,
# a directory the workers' user owns (the quick-start's install -d -o)
run() {
	install -d -o www-data "$P/$1"
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	{
		echo "user www-data;"
		echo "worker_processes 2;"
		echo "pid $P/nginx.pid;"
		echo "error_log $P/logs/error.log;"
		echo "events { worker_connections 64; }"
		echo "http {"
		echo "	access_log off; sendfile off; directio 1m; output_buffers 2 1m;"
		echo "	client_body_temp_path $P/tmp; proxy_temp_path $P/tmp; fastcgi_temp_path $P/tmp;"
		echo "	uwsgi_temp_path $P/tmp; scgi_temp_path $P/tmp;"
		echo "	server { listen 127.0.0.1:$port; root $P/html; }"
		echo "}"
	} >"$P/nginx.conf"
	rm -f "$P/nginx.pid"
	"$PS" POOLSHIM_POOL="$2" POOLSHIM_STATS="$P/$1/%e-%p.json" \
		"$NGINX" -p "$P" -c "$P/nginx.conf" -g 'daemon off;' >"$P/$1.out" 2>"$P/$1.err" &
	wp=$!
	for _ in $(seq 200); do
		[ -s "$P/nginx.pid" ] && curl -s -o /dev/null "http://127.0.0.1:$port/f" && break
		kill -0 $wp 2>/dev/null || break
		sleep 0.1
	done
	if ! [ -s "$P/nginx.pid" ] || ! kill -0 $wp 2>/dev/null; then
		fail "nginx ($1) did not start: $(cat "$P/$1.err" "$P/logs/error.log")"
		kill -KILL $wp 2>/dev/null
		return 1
	fi
	got=$(curl -s -m 60 "http://127.0.0.1:$port/f?[1-40]" | wc -c)
	[ "$got" = $((40 * 4194304)) ] || fail "run $1: served $got bytes"
	kill -TERM $wp
	n=0
	while kill -0 $wp 2>/dev/null && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
	if kill -0 $wp 2>/dev/null; then
		fail "run $1: the wrapper still runs 60 s after SIGTERM"
		kill -KILL $wp
	fi
	wait $wp
}
run off off || finish
run on on || finish
# three reports a run: the master's, written as root, and each worker's,
# written as www-data (a worker that could not write its path keeps its
# report in its record instead: lost here)
for r in off on; do
	n=0 w=0
	for f in "$P/$r"/nginx-*.json; do
		[ -s "$f" ] || continue
		n=$((n + 1))
		[ "$(stat -c %U "$f")" = www-data ] && w=$((w + 1))
	done
	[ "$n" = 3 ] && [ "$w" = 2 ] && pass "run $r: 3 reports, the two workers' written as www-data" ||
		fail "run $r: $n reports, $w by www-data: $(ls -l "$P/$r"; cat "$P/$r.err")"
done
python3 "$TOOL" --diff "$P/off" "$P/on" --throughput 100,100 >"$P/diff" 2>"$P/diff.err" ||
	{ fail "--diff: $(cat "$P/diff.err")"; finish; }
sed -n 2p "$P/diff" | grep -q "^verdict  nginx, B against A: throughput x1.00 (yours), faults x" &&
	pass "$(sed -n 2p "$P/diff")" || fail "verdict: $(head -3 "$P/diff")"
m_on=$(master "$P/on")
busy=$(sed -n 's/^B        nginx: 3 processes (pid [0-9, ]*), summed; busiest pid \([0-9]*\) (.*/\1/p' "$P/diff")
[ -n "$busy" ] && [ "$busy" != "$m_on" ] && [ -s "$P/on/nginx-$busy.json" ] &&
	[ "$(stat -c %U "$P/on/nginx-$busy.json")" = www-data ] &&
	pass "the busiest worker named: $(grep '^B  ' "$P/diff" | cut -d';' -f2)" ||
	fail "busiest: '$busy', master $m_on: $(grep '^[AB]  ' "$P/diff")"
# the pooled run's SQEs, and whether its workers had a ring (state ok
# unless the kernel refused one: kernel.io_uring_disabled, seccomp)
set -- $(python3 -c 'import json, glob, sys
rs = [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/nginx-*.json")]
print(sum(r["uring"]["sqes"] for r in rs), "ok" if any(r["uring"]["state"] == "ok" for r in rs)
      else rs[0]["uring"]["state"] if rs else "none")' "$P/on")
sqes=${1:-0}
if [ "${2:-}" = ok ]; then
	# the router samples both routes before it picks one: some pooled
	# O_DIRECT reads went through the ring
	[ "$sqes" -gt 0 ] && grep -q "^differs  io_uring: A 0 SQEs, B $sqes: O_DIRECT I/O went through the ring in B only" "$P/diff" &&
		pass "io_uring on one side only: said ($sqes SQEs)" ||
		fail "io_uring ($sqes SQEs in B): $(grep '^differs' "$P/diff")"
else
	echo "io_uring ${2:-?} in the pooled run here (no ring): the io_uring line is not checked"
fi
grep -q "mean latency of timed I/O calls" "$P/diff" && fail "a mixed-latency row" || pass "no mixed-latency row"
grep -q "^latency  mean per call, B/A" "$P/diff" && pass "latency call by call" || fail "no per-call latency line"
grep -q "^warning" "$P/diff" && fail "a warning, like against like: $(grep '^warning' "$P/diff")" ||
	pass "no warning, like against like"
# one report of a master against one of a worker: warned
python3 "$TOOL" --diff "$P/off/nginx-$(master "$P/off").json" "$P/on/nginx-$busy.json" >"$P/d2" 2>&1
grep -q "^warning  A's nginx process made [0-9]* I/O calls (.*) against [0-9]* (.*): a master" "$P/d2" &&
	pass "master against worker: warned" || fail "master/worker: $(head -8 "$P/d2")"
finish
