#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim collect` renders the report of a process killed with SIGKILL
# from the record it left: dd copying /dev/zero to /dev/null under the
# shim, killed, then collected (`poolshim stat` shows it gone and leaves it).  The report has dd's read and write counts
# and says how it ended; the record is removed.  POOLSHIM_STATS=PATH is
# honoured (a JSON report at the expanded path, valid by the schema, its
# configuration as the process had it), and
# --run takes only the processes of that run.  A fork child that did no
# work of its own leaves a record that is removed without a report.
# Everything runs in the test's own live directory (POOLSHIM_LIVE_DIR).
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
L="$PST_TMP/live"
mkdir "$L"

# dd under the shim, in run $1, with more VAR=VALUE; its pid in $pid once
# its record is there.  POOLSHIM_RUN makes the record at the first counted call.
start_dd() {
	run=$1
	shift
	env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN="$run" "$@" LD_PRELOAD="$SHIM" \
		dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
	pid=$!
	for _ in $(seq 100); do
		ls "$L"/poolshim-"$pid"-*.stats >/dev/null 2>&1 && break
		sleep 0.1
	done
	sleep 0.3
}
kill_dd() { kill -KILL "$1"; wait "$1" 2>/dev/null; }

# 1. Killed, report to stderr (the default): printed on collect's stdout.
start_dd one
p1=$pid
kill_dd "$p1"
ls "$L"/poolshim-"$p1"-*.stats >/dev/null 2>&1 || fail "no record left by the killed dd"
# poolshim stat shows it as gone, says how to collect it, and leaves it.
timeout 60 "$PS_TOP_BUILDDIR/tools/poolshim-stat" --live-dir "$L" "$p1" >"$PST_TMP/stat" 2>&1
grep -q "^---- pid $p1 (dd): totals \[process gone: \`poolshim collect\` writes its report\]" "$PST_TMP/stat" &&
	grep -q "poolshim collect $p1" "$PST_TMP/stat" && pass "stat says to collect it" ||
	fail "stat on the gone process: $(head -3 "$PST_TMP/stat")"
ls "$L"/poolshim-"$p1"-*.stats >/dev/null 2>&1 && pass "stat leaves the record" ||
	fail "stat removed the record"
timeout 60 "$COLLECT" --live-dir "$L" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && pass "collect: exit status 0" || fail "collect: exit status $rc: $(cat "$PST_TMP/err")"
grep -q "==== poolshim report: pid $p1 (dd) ====" "$PST_TMP/out" && pass "dd's report printed" ||
	fail "no report of $p1: $(head -c 600 "$PST_TMP/out")"
grep -Eq "^read +other +[1-9][0-9]{3,}" "$PST_TMP/out" &&
	grep -Eq "^write +other +[1-9][0-9]{3,}" "$PST_TMP/out" && pass "with dd's read and write counts" ||
	fail "counts missing: $(grep -E '^(read|write) ' "$PST_TMP/out")"
grep -q "^ended    no exit seen: ended by a signal (TERM or KILL left at their default, the OOM killer, a crash)" "$PST_TMP/out" &&
	pass "the report says it saw no exit" || fail "no ended line: $(grep ended "$PST_TMP/out")"
ls "$L"/poolshim-"$p1"-*.stats >/dev/null 2>&1 && fail "the record is still there" ||
	pass "the record is removed"
timeout 60 "$COLLECT" --live-dir "$L" >/dev/null 2>&1
rc=$?
[ $rc = 1 ] && pass "nothing left: exit status 1" || fail "second collect: status $rc, want 1"

# 2. POOLSHIM_STATS=PATH with %p, JSON: written there, for that pid.  A
# size that is no round number of K or M (POOLSHIM_POOL_MIN=100000) goes
# through the record's configuration and back exactly.
start_dd two POOLSHIM_STATS="$PST_TMP/r-%e-%p.json" POOLSHIM_POOL_MIN=100000
p2=$pid
kill_dd "$p2"
# 3. Another run, left alone by --run two.
start_dd three
p3=$pid
kill_dd "$p3"
timeout 60 "$COLLECT" --live-dir "$L" --run two >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && pass "--run two: exit status 0" || fail "--run two: status $rc: $(cat "$PST_TMP/err")"
f="$PST_TMP/r-dd-$p2.json"
if [ -f "$f" ]; then
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$f" && pass "the JSON report is valid" ||
		fail "the JSON report fails the schema"
	[ "$(json_get "$f" "r['config']['POOLSHIM_POOL_MIN'], r['pool']['threshold']")" = "('100000', 100000)" ] &&
		pass "its configuration came through the record exactly" ||
		fail "configuration: $(json_get "$f" "r['config']['POOLSHIM_POOL_MIN'], r['pool']['threshold']")"
	[ "$(json_get "$f" "r['ended']['how']")" = unseen ] && pass "JSON says how it ended" ||
		fail "JSON ended: $(json_get "$f" "r.get('ended')")"
	[ "$(json_get "$f" "sum(c['calls'] for c in r['calls'] if c['call'] == 'read')")" -gt 1000 ] &&
		pass "JSON has dd's reads" || fail "JSON reads: $(json_get "$f" "r['calls']")"
else
	fail "no report at $f: $(cat "$PST_TMP/err")"
fi
[ -s "$PST_TMP/out" ] && fail "--run two printed a report: $(head -3 "$PST_TMP/out")"
ls "$L"/poolshim-"$p3"-*.stats >/dev/null 2>&1 && pass "--run two left run three's record" ||
	fail "--run two took run three's record"
timeout 60 "$COLLECT" --live-dir "$L" --run three >"$PST_TMP/out" 2>"$PST_TMP/err"
grep -q "==== poolshim report: pid $p3 (dd) ====" "$PST_TMP/out" && pass "--run three collects it" ||
	fail "--run three: $(cat "$PST_TMP/err")"

# 4. A fork child that did no work of its own, killed: its record goes, no
# report.  The child is a subshell of sh that reads /dev/null a few times,
# then blocks opening a FIFO nobody writes.
# TIMING_SAMPLE=1: every counted call visits the slow path, where the record is made.
mkfifo "$PST_TMP/fifo"
env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=four POOLSHIM_TIMING_SAMPLE=1 LD_PRELOAD="$SHIM" \
	sh -c '( for i in 1 2 3 4 5 6 7 8; do read x </dev/null; done; exec 3<"$1" ) &
		echo $! >"$2"; wait' sh "$PST_TMP/fifo" "$PST_TMP/child" 2>/dev/null &
parent=$!
for _ in $(seq 100); do [ -s "$PST_TMP/child" ] && break; sleep 0.1; done
child=$(cat "$PST_TMP/child")
for _ in $(seq 50); do ls "$L"/poolshim-"$child"-*.stats >/dev/null 2>&1 && break; sleep 0.1; done
if ls "$L"/poolshim-"$child"-*.stats >/dev/null 2>&1; then
	kill -KILL "$child"
	wait "$parent" 2>/dev/null
	timeout 60 "$COLLECT" --live-dir "$L" "$child" >"$PST_TMP/out" 2>"$PST_TMP/err"
	rc=$?
	[ $rc = 0 ] && [ ! -s "$PST_TMP/out" ] && pass "the idle fork child: no report" ||
		fail "idle fork child: status $rc, $(head -3 "$PST_TMP/out") $(cat "$PST_TMP/err")"
	ls "$L"/poolshim-"$child"-*.stats >/dev/null 2>&1 && fail "the idle child's record is kept" ||
		pass "the idle child's record is removed"
else
	kill -KILL "$child" 2>/dev/null
	wait "$parent" 2>/dev/null
	fail "the fork child made no record"
fi
finish
