#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's first example, `poolshim nginx -g 'daemon off;'` (issue 34):
# Debian's nginx with a master and two workers running as nobody (`user
# nobody;`, as root), listening on a free 127.0.0.1 port, some requests,
# then SIGTERM to nginx (poolshim execs it in place): the master and both
# workers' reports come out on the wrapper's stderr (by its helper),
# although nginx points its own fd 2 at its error log, and the workers count the requests' socket writes; the
# wrapper exits as nginx did (0), and no record is left behind.
. "$PS_TOP_SRCDIR/tests/lib.sh"
NGINX=${PST_NGINX:-/usr/sbin/nginx}
PS="$PS_TOP_BUILDDIR/poolshim"
[ -x "$NGINX" ] || skip "no $NGINX (Debian package nginx)"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
[ "$(id -u)" = 0 ] || skip "needs root (workers as nobody)"
id nobody >/dev/null 2>&1 || skip "no user nobody"
export POOLSHIM_LIBRARY="$SHIM"
unset POOLSHIM_STATS POOLSHIM_STATS_FORMAT LD_PRELOAD POOLSHIM_RUN
N=200
P="$PST_TMP/ng"
# The workers (nobody) make their records here: a sticky directory anyone can write.
D=$(mktemp -d /dev/shm/pst-wrap-nginx.XXXXXX) || skip "no /dev/shm"
at_exit "rm -rf '$D'"
chmod 1777 "$D"
export POOLSHIM_LIVE_DIR="$D"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$P/html" "$P/logs" "$P/tmp"
head -c 100000 /dev/zero | tr '\0' 'n' >"$P/html/f"
chmod a+rx "$PST_TMP" "$P" "$P/html" && chmod a+r "$P/html/f"
cat >"$P/nginx.conf" <<EOF
user nobody nogroup;
worker_processes 2;
pid $P/nginx.pid;
error_log $P/logs/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $P/tmp;
	proxy_temp_path $P/tmp;
	fastcgi_temp_path $P/tmp;
	uwsgi_temp_path $P/tmp;
	scgi_temp_path $P/tmp;
	server {
		listen 127.0.0.1:$port;
		root $P/html;
	}
}
EOF
at_exit '[ -s "$P/nginx.pid" ] && kill -KILL "$(cat "$P/nginx.pid")" 2>/dev/null'
"$PS" "$NGINX" -p "$P" -c "$P/nginx.conf" -g 'daemon off;' >"$PST_TMP/out" 2>"$PST_TMP/err" &
wp=$!
for _ in $(seq 200); do [ -s "$P/nginx.pid" ] && curl -s -o /dev/null "http://127.0.0.1:$port/f" && break; sleep 0.1; done
master=$(cat "$P/nginx.pid" 2>/dev/null)
[ -n "$master" ] || { fail "nginx did not start: $(cat "$PST_TMP/err" "$P/logs/error.log")"; kill -KILL $wp; finish; }
[ "$master" = "$wp" ] && pass "nginx's master is the process poolshim was (exec'd in place)" ||
	fail "nginx's master $master is not the process poolshim was ($wp)"
workers=$(pgrep -P "$master" | tr '\n' ' ')
for w in $workers; do
	[ "$(ps -o user= -p "$w")" = nobody ] || fail "worker $w runs as $(ps -o user= -p "$w")"
done
pids=
for _ in 1 2; do
	curl -s -m 20 "http://127.0.0.1:$port/f?[1-$((N / 2))]" >/dev/null &
	pids="$pids $!"
done
# shellcheck disable=SC2086
wait $pids
kill -TERM $wp
# A hang detector, not a benchmark.
n=0
while kill -0 $wp 2>/dev/null && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
if kill -0 $wp 2>/dev/null; then
	fail "the wrapper still runs 60 s after SIGTERM"
	kill -KILL $wp
fi
wait $wp
rc=$?
[ $rc = 0 ] && pass "the wrapper exits as nginx did (0)" || fail "the wrapper exits $rc"
grep -q "poolshim report" "$P/logs/error.log" && fail "a report went to nginx's error log"
# The helper writes the reports nginx's processes kept (their stderr is the
# error log) once they end: within milliseconds, 10 s on a busy machine.
n=0
while [ "$(grep -c '^==== end of poolshim report' "$PST_TMP/err")" -lt 3 ] || [ -n "$(ls "$D")" ]; do
	[ $n -lt 100 ] || break
	sleep 0.1
	n=$((n + 1))
done
for p in $master $workers; do
	grep -q "^==== poolshim report: pid $p (nginx) ====" "$PST_TMP/err" &&
		pass "report of $p on the wrapper's stderr" ||
		fail "no report of $p on the wrapper's stderr: $(cat "$PST_TMP/err")"
done
# The workers' socket writes, summed over their reports: at least one per request.
out=$(awk -v ws=" $workers " '
	/^==== poolshim report: pid / { split($5, a, " "); cur = index(ws, " " $5 " ") ? 1 : 0 }
	/^==== end of poolshim report/ { cur = 0 }
	cur && $2 == "socket" && ($1 == "write" || $1 == "writev" || $1 == "sendfile" || $1 == "send") { s += $3 }
	END { print s + 0 }' "$PST_TMP/err")
[ "$out" -ge $N ] && pass "the workers' reports count $out socket writes for $N requests" ||
	fail "the workers' reports count $out socket writes for $N requests"
left=$(ls "$D")
[ -z "$left" ] && pass "no record left" || fail "records left: $left"
finish
