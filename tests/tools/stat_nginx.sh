#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim stat` on a real prefork server: Debian's nginx (stripped, as
# shipped) with a master and two workers under the shim.  The workers are
# fork children that rewrite their argv ("nginx: worker process"); each
# publishes its own live file once it has run a second, named "nginx", and
# between them they count the requests' socket writes.  The master, idle
# after start, makes no file (a process publishes once it has taken a
# pooled buffer or counted calls past its first second).  The Prometheus
# scrape of the workers passes promtool where Debian's prometheus is there.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
NGINX=${PST_NGINX:-/usr/sbin/nginx}
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
[ -x "$NGINX" ] || skip "no $NGINX (Debian package nginx)"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
N=300
P="$PST_TMP/ng"
# On tmpfs: a live file takes blocks only while the directory keeps a
# quarter free, which a disk shared with other work may not.
D=$(mktemp -d /dev/shm/pst-stat-nginx.XXXXXX) || skip "no /dev/shm"
at_exit "rm -rf '$D'"
nginx_prefix "$P" "worker_processes 2;"
# Run as root, nginx's workers are nobody: they read the file and make
# their live files.
chmod a+rx "$PST_TMP" "$P" "$P/html" && chmod a+r "$P/html/f" && chmod 1777 "$D"
at_exit '[ -s "$P/nginx.pid" ] && kill -KILL "$(cat "$P/nginx.pid")" 2>/dev/null; pkill -KILL -f "nginx -p $P" 2>/dev/null'
env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$D" LD_PRELOAD="$SHIM" \
	"$NGINX" -p "$P" -c "$P/nginx.conf" -e "$P/logs/error.log" >"$P/out" 2>&1 &
for _ in $(seq 100); do [ -S "$P/sock" ] && [ -s "$P/nginx.pid" ] && break; sleep 0.1; done
master=$(cat "$P/nginx.pid" 2>/dev/null)
[ -n "$master" ] || { fail "nginx did not start: $(cat "$P/out" "$P/logs/error.log")"; finish; }
# Past the workers' first second, then requests on new connections (both
# workers take some), then a little more for the slow branch to come by.
sleep 1.2
pids=
for _ in 1 2 3; do
	curl -s -m 20 --unix-socket "$P/sock" "http://localhost/f?[1-$((N / 3))]" >/dev/null &
	pids="$pids $!"
done
# shellcheck disable=SC2086
wait $pids
sleep 0.3
curl -s -m 20 --unix-socket "$P/sock" "http://localhost/f?[1-100]" >/dev/null
workers=$(pgrep -P "$master" | tr '\n' ' ')
# shellcheck disable=SC2086
"$STAT" --live-dir "$D" --json "$master" $workers >"$PST_TMP/j" 2>"$PST_TMP/j.err"
python3 - "$PST_TMP/j" "$master" $workers <<'PY' >"$PST_TMP/v"
import json, sys
rows = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        rows[r["pid"]] = r
master, workers = int(sys.argv[2]), [int(w) for w in sys.argv[3:]]
print(f"ok: {len(workers)} workers" if len(workers) == 2 else f"FAIL: workers {workers}")
shown = [w for w in workers if w in rows]
print(f"ok: every worker has a live file" if shown == workers and workers
      else f"FAIL: stat shows {sorted(rows)}; master {master}, workers {workers}")
names = {rows[w]["program"] for w in shown} | ({rows[master]["program"]} if master in rows else set())
print(f"ok: named {names}" if names == {"nginx"} else f"FAIL: program names {names}")
out = sum(c["calls"] for w in shown for c in rows[w]["calls"]
          if c["kind"] == "socket" and c["call"] in ("write", "writev", "send", "sendmsg", "sendfile"))
print(f"ok: workers counted {out} socket writes for {300 + 100} requests" if out >= 400
      else f"FAIL: workers counted {out} socket writes for 400 requests")
PY
while read -r line; do
	case $line in ok:*) pass "${line#ok: }" ;; *) fail "$line" ;; esac
done <"$PST_TMP/v"
if command -v promtool >/dev/null 2>&1; then
	# shellcheck disable=SC2086
	"$STAT" --live-dir "$D" --prometheus $workers >"$PST_TMP/scrape" 2>&1 &&
		promtool check metrics <"$PST_TMP/scrape" >"$PST_TMP/lint" 2>&1 &&
		pass "Prometheus scrape of the workers: promtool accepts it" ||
		fail "scrape: $(head -5 "$PST_TMP/lint" "$PST_TMP/scrape")"
fi
kill -QUIT "$master" 2>/dev/null
for _ in $(seq 50); do [ -z "$(ls "$D")" ] && break; sleep 0.1; done
[ -z "$(ls "$D")" ] && pass "no live file left after nginx quit" || fail "left: $(ls "$D")"
finish
