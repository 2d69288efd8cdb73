#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim stat -i`: under "change over Ns" every number is a change,
# page faults and CPU time (read from /proc) as much as the counters.  A
# process that faults and burns CPU at start, then sleeps, shows large
# totals first and then changes near zero (it used to show the totals
# again under "change over").
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
D="$PST_TMP/live"
mkdir "$D"
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$D" LD_PRELOAD="$SHIM" $PY -c '
import time
b = bytearray(64 << 20)          # page faults
for i in range(0, len(b), 4096):
    b[i] = 1
t = time.process_time()
while time.process_time() - t < 0.4:   # CPU
    pass
print("ready", flush=True)
time.sleep(30)' >"$PST_TMP/py.out" 2>&1 &
pid=$!
at_exit "kill $pid 2>/dev/null"
for _ in $(seq 100); do grep -q '^ready' "$PST_TMP/py.out" && break; sleep 0.1; done
grep -q '^ready' "$PST_TMP/py.out" || { fail "helper did not start: $(cat "$PST_TMP/py.out")"; finish; }

"$STAT" --live-dir "$D" -i 0.5 -c 3 "$pid" >"$PST_TMP/s" 2>&1
rc=$?
# faults and CPU (user + sys) of each frame, in order: "MINOR CPU"
sed -n 's/^process  page faults \([0-9]*\) minor, [0-9]* major; cpu \([0-9.]*\)s user, \([0-9.]*\)s sys.*/\1 \2 \3/p' "$PST_TMP/s" |
	awk '{ print $1, $2 + $3 }' >"$PST_TMP/f"
set -- $(cat "$PST_TMP/f")
if [ $rc != 0 ] || [ $# != 6 ]; then
	fail "stat -i: rc=$rc, frames: '$(cat "$PST_TMP/f")' $(head -5 "$PST_TMP/s")"
else
	grep -q "^---- pid $pid (python3): totals so far ----" "$PST_TMP/s" &&
		[ "$(grep -c "^---- pid $pid (python3): change over 0.5s ----" "$PST_TMP/s")" = 2 ] &&
		pass "a totals frame, then two change frames" || fail "frames: $(grep '^----' "$PST_TMP/s")"
	[ "$1" -gt 500 ] && [ "$3" -lt $(($1 / 4)) ] && [ "$5" -lt $(($1 / 4)) ] &&
		pass "page faults: $1 so far, then changes $3 and $5" ||
		fail "page faults under change over 0.5s: totals $1, then $3 and $5"
	awk -v a="$2" -v b="$4" -v c="$6" 'BEGIN { exit !(a >= 0.3 && b <= 0.1 && c <= 0.1) }' &&
		pass "CPU: ${2}s so far, then changes ${4}s and ${6}s" ||
		fail "CPU under change over 0.5s: totals $2 s, then $4 s and $6 s"
fi
finish
