#!/bin/sh
# SPDX-License-Identifier: MIT
# POOLSHIM_LIVE_DIR and `poolshim stat --live-dir`: the live file goes to
# the directory given (and not to /dev/shm), stat reads it there by option
# or by the same variable; a bad directory is said in one line and the
# program runs on without a live file.  `stat --json -i` lines carry a
# timestamp, and a process started after stat began is picked up, one that
# ended dropped.  The private directory keeps other tests' files out of
# the scan.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
H="$PS_TOP_BUILDDIR/tests/preload/signal_helper"
NS=$(stat -L -c %i /proc/self/ns/pid)
D="$PST_TMP/live"
mkdir "$D"

start() {  # start NAME: a helper publishing in $D; its pid in $pid
	env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$D" LD_PRELOAD="$SHIM" "$H" --signals 1000000 \
		>"$PST_TMP/$1.out" 2>&1 &
	pid=$!
	at_exit "kill $pid 2>/dev/null"
	for _ in $(seq 100); do grep -q '^ready' "$PST_TMP/$1.out" && break; sleep 0.1; done
	# The file comes with its first pooled buffer, which follows "ready".
	for _ in $(seq 50); do [ -n "$(ls -A "$D" "/dev/shm" 2>/dev/null | grep "^poolshim-$pid-")" ] && break; sleep 0.05; done
}

start a; a=$pid
[ -f "$D/poolshim-$a-$NS.stats" ] && [ ! -e "/dev/shm/poolshim-$a-$NS.stats" ] &&
	pass "live file in POOLSHIM_LIVE_DIR, not /dev/shm" || fail "live file: $(ls "$D")"
"$STAT" --live-dir "$D" "$a" >"$PST_TMP/s1" 2>&1 && grep -q "pid $a (signal_helper)" "$PST_TMP/s1" &&
	pass "stat --live-dir reads it" || fail "stat --live-dir: $(head -3 "$PST_TMP/s1")"
POOLSHIM_LIVE_DIR="$D" "$STAT" >"$PST_TMP/s2" 2>&1 && grep -q "pid $a (signal_helper)" "$PST_TMP/s2" &&
	pass "stat with POOLSHIM_LIVE_DIR scans it" || fail "stat env: $(head -3 "$PST_TMP/s2")"

# late pick-up and drop, with timestamps
"$STAT" --live-dir "$D" --json -i 0.2 -c 14 >"$PST_TMP/j" 2>"$PST_TMP/j.err" &
st=$!
sleep 0.7
start b; b=$pid
sleep 0.6
kill "$a"; wait "$a" 2>/dev/null
wait $st; rc=$?
python3 - "$PST_TMP/j" "$a" "$b" <<'PY' && pass "json -i: timestamps rise, late pid $b picked up, ended pid $a dropped" || fail "json -i rc=$rc: $(cat "$PST_TMP/j.err")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"timestamp"')]
a, b = int(sys.argv[2]), int(sys.argv[3])
ts = [r["timestamp"] for r in rows]
assert ts and ts == sorted(ts) and ts[-1] - ts[0] > 1, ts
pa = [r for r in rows if r["pid"] == a]; pb = [r for r in rows if r["pid"] == b]
assert pb, "late process not picked up"
assert pa and pa[-1]["timestamp"] < pb[-1]["timestamp"] - 0.3, "ended process still shown"
PY

env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$PST_TMP/nonesuch" LD_PRELOAD="$SHIM" sleep 0.5 \
	>"$PST_TMP/bad.out" 2>"$PST_TMP/bad.err" &
bp=$!
sleep 0.2
[ ! -e "/dev/shm/poolshim-$bp-$NS.stats" ] && [ -z "$(ls "$D" | grep "poolshim-$bp-")" ] && nofile=1 || nofile=0
wait $bp
rc=$?
[ $rc = 0 ] && [ "$(grep -c . "$PST_TMP/bad.err")" = 1 ] &&
	grep -q "POOLSHIM_LIVE_DIR=$PST_TMP/nonesuch: .*running without a live statistics file" "$PST_TMP/bad.err" &&
	[ $nofile = 1 ] &&
	pass "bad dir: $(cat "$PST_TMP/bad.err")" || fail "bad dir: rc=$rc $(cat "$PST_TMP/bad.err")"
kill "$b"; wait "$b" 2>/dev/null
finish
