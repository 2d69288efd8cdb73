#!/bin/sh
# SPDX-License-Identifier: MIT
# The live file is made late (issue 26): not at start, but on the first
# counted call past a process's first second (or its first pooled
# buffer).  Four threads count writes before it exists and go on after:
# `poolshim stat` must show every one of them, the early ones included
# (each thread moves its own counters in), a process must make no file in
# its first second without real work, and `poolshim stat -i` started
# before the file exists waits for it.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
D="$PST_TMP/live"
mkdir -p "$D"

env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$D" LD_PRELOAD="$SHIM" \
	"$PRELOAD_BIN/live_late" 4 300 300 >"$PST_TMP/out" 2>&1 &
pid=$!
at_exit "kill -KILL $pid 2>/dev/null"
# `poolshim stat -i` on it from the start waits for the file, then follows it.
"$STAT" --live-dir "$D" --json -i 0.3 -c 10 "$pid" >"$PST_TMP/follow.json" 2>"$PST_TMP/follow.err" &
follow=$!
# The threads have made their early writes and sleep: no file yet.
sleep 0.6
[ -z "$(ls -A "$D")" ] && pass "no live file in the first second" ||
	fail "a live file before any real work: $(ls -A "$D")"
state=
for _ in $(seq 100); do
	state=$(sed 's/.*) \(.\).*/\1/' "/proc/$pid/stat" 2>/dev/null)
	[ "$state" = T ] || [ ! -e "/proc/$pid" ] && break
	sleep 0.1
done
[ "$state" = T ] || fail "helper did not stop: $(cat "$PST_TMP/out")"
"$STAT" --live-dir "$D" --json "$pid" >"$PST_TMP/stat.json" 2>"$PST_TMP/stat.err"
n=$(json_get "$PST_TMP/stat.json" "sum(c['calls'] for c in r['calls'] if c['call']=='write')" 2>/dev/null)
[ "$n" = 2400 ] && pass "the live file has all 2400 writes of 4 threads, 1200 made before it existed" ||
	fail "the live file has $n writes, want 2400 $(cat "$PST_TMP/stat.err")"
wait "$follow"
rc=$?
grep -q "no live statistics yet" "$PST_TMP/follow.err" && [ $rc = 0 ] &&
	pass "stat -i waited for the file (exit 0)" || fail "stat -i: status $rc, $(cat "$PST_TMP/follow.err")"
w=$(python3 -c '
import json, sys
dec, buf, best = json.JSONDecoder(), open(sys.argv[1]).read(), 0
i = 0
while True:
    while i < len(buf) and buf[i].isspace(): i += 1
    if i >= len(buf): break
    r, i = dec.raw_decode(buf, i)
    best = max(best, sum(c["calls"] for c in r.get("calls", []) if c["call"] == "write"))
print(best)' "$PST_TMP/follow.json" 2>/dev/null)
[ "${w:-0}" -gt 0 ] && pass "stat -i followed the file once it came ($w writes in a round)" ||
	fail "stat -i showed no writes: $(head -c 300 "$PST_TMP/follow.json")"
kill -CONT "$pid"
wait "$pid"
rc=$?
[ $rc = 0 ] && pass "helper exits 0" || fail "helper exit status $rc"
[ -z "$(ls -A "$D")" ] && pass "no live file left" || fail "live file left: $(ls -A "$D")"
finish
