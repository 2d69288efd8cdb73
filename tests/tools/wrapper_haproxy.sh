#!/bin/sh
# SPDX-License-Identifier: MIT
# haproxy in master-worker mode (-W) under the `poolshim` wrapper (issue
# 34): the worker answers some requests itself (`http-request return`),
# then SIGTERM to the master (poolshim execs it in place), which stops the
# worker with SIGTERM; the worker's report, with the requests' socket calls, and
# the master's come out on the wrapper's stderr.  Before, the worker
# stopped by TERM left no report at all.
. "$PS_TOP_SRCDIR/tests/lib.sh"
HAPROXY=${PST_HAPROXY:-/usr/sbin/haproxy}
PS="$PS_TOP_BUILDDIR/poolshim"
[ -x "$HAPROXY" ] || skip "no $HAPROXY (Debian package haproxy)"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
export POOLSHIM_LIBRARY="$SHIM"
unset POOLSHIM_STATS POOLSHIM_STATS_FORMAT LD_PRELOAD POOLSHIM_RUN
mkdir "$PST_TMP/live"
export POOLSHIM_LIVE_DIR="$PST_TMP/live"
N=100
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$PST_TMP/haproxy.cfg" <<EOF
global
	pidfile $PST_TMP/haproxy.pid
defaults
	mode http
	timeout connect 1s
	timeout client 10s
	timeout server 10s
frontend web
	bind 127.0.0.1:$port
	http-request return status 200 content-type text/plain string ok
EOF
"$PS" "$HAPROXY" -W -f "$PST_TMP/haproxy.cfg" >"$PST_TMP/out" 2>"$PST_TMP/err" &
wp=$!
at_exit "kill -KILL $wp 2>/dev/null; pkill -KILL -f 'haproxy -W -f $PST_TMP/haproxy.cfg' 2>/dev/null"
for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
master=$wp
worker=$(pgrep -P "$master" 2>/dev/null | head -1)
[ -n "$worker" ] || { fail "haproxy did not start: $(cat "$PST_TMP/err")"; finish; }
curl -s -m 20 "http://127.0.0.1:$port/?[1-$N]" >/dev/null
kill -TERM $wp
n=0
while kill -0 $wp 2>/dev/null && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
if kill -0 $wp 2>/dev/null; then
	fail "the wrapper still runs 60 s after SIGTERM"
	kill -KILL $wp
fi
wait $wp
rc=$?
# haproxy's master exits 0 when its worker ended by the signal it was sent (2.6: 0 or 143).
echo "the wrapper exits $rc"
# The helper writes the worker's kept report once it has ended: within
# milliseconds, 10 s on a busy machine.
n=0
while [ "$(grep -c '^==== end of poolshim report' "$PST_TMP/err")" -lt 2 ] && [ $n -lt 100 ]; do
	sleep 0.1
	n=$((n + 1))
done
grep -q "^==== poolshim report: pid $master (haproxy) ====" "$PST_TMP/err" &&
	pass "the master's report on the wrapper's stderr" ||
	fail "no report of the master $master: $(cat "$PST_TMP/err")"
calls=$(awk -v pid="$worker" '
	$0 ~ "^==== poolshim report: pid " pid " " { cur = 1; next }
	/^==== end of poolshim report/ { cur = 0 }
	cur && $2 == "socket" && ($1 == "send" || $1 == "sendto" || $1 == "sendmsg" || $1 == "write" || $1 == "writev") { s += $3 }
	END { print s + 0 }' "$PST_TMP/err")
[ "$calls" -ge $N ] && pass "the worker stopped by TERM: its report, $calls socket sends for $N requests" ||
	fail "the worker $worker stopped by TERM: $calls socket sends in its report: $(cat "$PST_TMP/err")"
finish
