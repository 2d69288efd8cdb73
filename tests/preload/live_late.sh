#!/bin/sh
# SPDX-License-Identifier: MIT
# The live file is made late (issue 26): not at start, but on the first
# counted call past a process's first second (or its first pooled
# buffer).  Four threads count writes before it exists and go on after:
# `poolshim stat` must show every one of them, the early ones included
# (each thread moves its own counters in), and a short process must make
# no file at all.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
D="$PST_TMP/live"
mkdir -p "$D"

env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$D" LD_PRELOAD="$SHIM" \
	"$PRELOAD_BIN/live_late" 4 300 300 >"$PST_TMP/out" 2>&1 &
pid=$!
at_exit "kill -KILL $pid 2>/dev/null"
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
kill -CONT "$pid"
wait "$pid"
rc=$?
[ $rc = 0 ] && pass "helper exits 0" || fail "helper exit status $rc"
[ -z "$(ls -A "$D")" ] && pass "no live file left" || fail "live file left: $(ls -A "$D")"
finish
