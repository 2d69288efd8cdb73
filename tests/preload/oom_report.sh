#!/bin/sh
# SPDX-License-Identifier: MIT
# A process OOM-killed in a memory cgroup (issue 34): it dies by SIGKILL as
# without the shim, writes nothing as it dies, and `poolshim collect`
# renders its report from its live record: the reads it made, and an
# ended line that says no exit was seen.  cgroup v2 where this process's
# cgroup can have a child with the memory controller, else cgroup v1's
# memory hierarchy; skipped (77) without either.
. "$PS_TOP_SRCDIR/tests/lib.sh"
V="$PRELOAD_BIN/oom_victim"
PS="$PS_TOP_BUILDDIR/poolshim"
LIMIT=$((96 * 1024 * 1024))

memory_cgroup pst_oom "$LIMIT"
cg=$PST_CG

LIVE="$PST_TMP/live"
mkdir -p "$LIVE"
# run VARS...: the victim inside the cgroup, bounded in time; its exit status
run() {
	timeout 120 env "$@" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$1"' "$cg" "$V" \
		>"$PST_TMP/out" 2>"$PST_TMP/err"
}

run PST=none
rc_none=$?
[ "$rc_none" = 137 ] || skip "the victim was not OOM-killed without the shim (exit $rc_none): no OOM killer here"
run POOLSHIM_LIVE_DIR="$LIVE" LD_PRELOAD="$SHIM"
rc=$?
[ "$rc" = 137 ] && pass "OOM-killed under the shim (137), as without it" ||
	fail "exit $rc under the shim, 137 without: $(head -c 300 "$PST_TMP/err")"
grep -q worked "$PST_TMP/out" || fail "the victim did not get to its work: $(cat "$PST_TMP/out")"
grep -q "poolshim report: pid [0-9]* (oom_victim)" "$PST_TMP/err" && fail "a report was written as it died"
[ "$(ls -A "$LIVE" | wc -l)" = 1 ] && pass "its record is left" || fail "records left: $(ls -A "$LIVE")"

"$PS" collect --live-dir "$LIVE" >"$PST_TMP/report" 2>"$PST_TMP/collect.err"
rc=$?
[ $rc = 0 ] || fail "poolshim collect: exit $rc: $(cat "$PST_TMP/collect.err")"
grep -q "poolshim report: pid [0-9]* (oom_victim)" "$PST_TMP/report" &&
	pass "collect rendered its report" || fail "no report: $(head -c 500 "$PST_TMP/report")"
grep -Eq "^read +(file|other|devices?|char) +100 " "$PST_TMP/report" ||
	grep -Eq "^read +[a-z]+ +100 " "$PST_TMP/report" &&
	pass "the report counts its 100 reads" || fail "reads: $(grep '^read' "$PST_TMP/report")"
grep -qi "ended" "$PST_TMP/report" && pass "the report says how it ended: $(grep -i ended "$PST_TMP/report" | head -1)" ||
	fail "no ended line"
[ -z "$(ls -A "$LIVE")" ] && pass "no record left after collect" || fail "records left after collect"
finish
