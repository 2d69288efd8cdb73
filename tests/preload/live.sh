#!/bin/sh
# SPDX-License-Identifier: MIT
# Reports while the program runs and before exec, and the live view:
# a dump on POOLSHIM_DUMP_SIGNAL while the program's own handler still runs;
# the report written before exec replaces the image; `poolshim stat` on a
# running process, on one killed with SIGKILL (numbers still readable, the
# record left for `poolshim collect`, which removes it).
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/signal_helper"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
NS=$(stat -L -c %i /proc/self/ns/pid)  # live files are named by pid and pid namespace

wait_ready() {  # wait_ready FILE: until the helper printed its pid
	for _ in $(seq 100); do
		grep -q '^ready' "$1" 2>/dev/null && { sed -n 's/^ready //p' "$1"; return; }
		sleep 0.1
	done
	echo 0
}

# 1. dump on signal, twice, while the program runs; its handler still runs
shim POOLSHIM_DUMP_SIGNAL=USR2 "POOLSHIM_STATS=$PST_TMP/sig-%p.json" -- "$H" --signals 2 >"$PST_TMP/sig.out" 2>&1 &
bg=$!
pid=$(wait_ready "$PST_TMP/sig.out")
[ "$pid" != 0 ] || fail "helper did not start: $(cat "$PST_TMP/sig.out")"
sleep 0.3; kill -USR2 "$pid"; sleep 0.3
[ -f "$PST_TMP/sig-$pid.json" ] && pass "report dumped on SIGUSR2 while running" || fail "no dump on signal"
first=$(json_get "$PST_TMP/sig-$pid.json" "sum(c['calls'] for c in r['calls'] if c['call']=='malloc')" 2>/dev/null)
kill -USR2 "$pid"
wait "$bg"; rc=$?
[ $rc = 0 ] && grep -q "handler ran 2" "$PST_TMP/sig.out" && pass "program's own handler ran for both signals" ||
	fail "handler: rc=$rc $(cat "$PST_TMP/sig.out")"
last=$(json_get "$PST_TMP/sig-$pid.json" "sum(c['calls'] for c in r['calls'] if c['call']=='malloc')")
[ -n "$first" ] && [ "$last" -gt "$first" ] && pass "exit report ($last mallocs) after the dump ($first)" || fail "dump $first, final $last"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/sig-$pid.json" || fail "schema"

# 2. the report is written before exec replaces the image
shim POOLSHIM_DUMP_SIGNAL=USR2 "POOLSHIM_STATS=$PST_TMP/exec-%e.json" -- "$H" --signals 1 --exec /bin/true >"$PST_TMP/exec.out" 2>&1 &
bg=$!
pid=$(wait_ready "$PST_TMP/exec.out")
sleep 0.2; kill -USR2 "$pid"; wait "$bg"
[ -f "$PST_TMP/exec-signal_helper.json" ] &&
	[ "$(json_get "$PST_TMP/exec-signal_helper.json" "r['pool']['allocations'] > 0")" = True ] &&
	pass "report of the image replaced by exec" || fail "no report before exec: $(ls "$PST_TMP")"
[ -f "$PST_TMP/exec-true.json" ] && pass "the exec'd program reports on its own" || fail "no report from the exec'd image"

# 3. live view of a running process, then of one killed with SIGKILL
shim POOLSHIM_STATS=off -- "$H" --signals 1000000 >"$PST_TMP/live.out" 2>&1 &
bg=$!
pid=$(wait_ready "$PST_TMP/live.out")
sleep 0.5
"$STAT" "$pid" >"$PST_TMP/stat1" 2>&1
grep -q "pid $pid (signal_helper)" "$PST_TMP/stat1" && grep -Eq "^malloc +- +[1-9]" "$PST_TMP/stat1" &&
	pass "stat reads a running process" || fail "stat: $(cat "$PST_TMP/stat1")"
"$STAT" -i 0.3 -c 2 "$pid" >"$PST_TMP/stat2" 2>&1
grep -q "change over 0.3s" "$PST_TMP/stat2" && pass "stat -i prints deltas" || fail "stat -i: $(cat "$PST_TMP/stat2")"
kill -KILL "$pid"; wait "$bg" 2>/dev/null
[ -f "/dev/shm/poolshim-$pid-$NS.stats" ] && pass "SIGKILL leaves the numbers" || fail "no file after SIGKILL"
"$STAT" "$pid" >"$PST_TMP/stat3" 2>&1
grep -q "process gone" "$PST_TMP/stat3" && grep -Eq "^malloc +- +[1-9]" "$PST_TMP/stat3" &&
	pass "stat reads a killed process" || fail "stat after kill: $(cat "$PST_TMP/stat3")"
# stat leaves the record of a process that is gone to `poolshim collect`,
# which removes it (POOLSHIM_STATS=off: no report to write).
grep -q "poolshim collect $pid" "$PST_TMP/stat3" && [ -e "/dev/shm/poolshim-$pid-$NS.stats" ] &&
	pass "stat leaves a dead process's record, saying to collect it" || fail "stat on a dead process's record"
"$PS_TOP_BUILDDIR/tools/poolshim-collect" "$pid" >"$PST_TMP/collect" 2>&1 ||
	fail "collect: $(cat "$PST_TMP/collect")"
[ ! -e "/dev/shm/poolshim-$pid-$NS.stats" ] && pass "collect removes the dead process's record" ||
	fail "file left behind"

# 4. a clean exit removes the file; POOLSHIM_LIVE=off makes none
shim POOLSHIM_STATS=off -- "$PRELOAD_BIN/alloc_helper" --count 3 >/dev/null
shim POOLSHIM_STATS=off POOLSHIM_LIVE=off -- "$H" --signals 1000000 >"$PST_TMP/off.out" 2>&1 &
bg=$!
pid=$(wait_ready "$PST_TMP/off.out")
sleep 0.2
[ ! -e "/dev/shm/poolshim-$pid-$NS.stats" ] && pass "POOLSHIM_LIVE=off publishes nothing" || fail "live file with LIVE=off"
kill "$pid"; wait "$bg" 2>/dev/null
# 5. POOLSHIM_DUMP_SIGNAL=TERM on a program that leaves SIGTERM at its
# default (as haproxy -db does): the report is written, the live file
# removed, and the program still dies by SIGTERM; USR2 at its default is
# absorbed (the program keeps running).
env POOLSHIM_DUMP_SIGNAL=TERM POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/term.json" \
	LD_PRELOAD="$SHIM" sleep 30 &
bg=$!
sleep 1
kill -TERM "$bg"
wait "$bg"
rc=$?
[ $rc = 143 ] && pass "default SIGTERM still ends the program (status $rc)" ||
	fail "exit status $rc after SIGTERM, want 143 (killed by SIGTERM)"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/term.json" &&
	pass "report written on SIGTERM" || fail "no report on SIGTERM"
[ ! -e "/dev/shm/poolshim-$bg-$NS.stats" ] && pass "live file removed on SIGTERM" ||
	{ fail "live file left after SIGTERM"; rm -f "/dev/shm/poolshim-$bg-$NS.stats"; }
env POOLSHIM_DUMP_SIGNAL=USR2 POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/usr2.json" \
	LD_PRELOAD="$SHIM" sleep 3 &
bg=$!
sleep 1
kill -USR2 "$bg"
sleep 0.3
kill -0 "$bg" 2>/dev/null && pass "default USR2 absorbed: still running after the dump" ||
	fail "USR2 ended the program"
[ -s "$PST_TMP/usr2.json" ] && pass "report written on USR2" || fail "no report on USR2"
wait "$bg"
finish
