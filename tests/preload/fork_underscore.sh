#!/bin/sh
# SPDX-License-Identifier: MIT
# A child made by _Fork() (no fork handlers run) gets its own pid, counters
# and report, as a fork() child does (tests/preload/fork_underscore.c): each
# JSON report is under its own pid and counts only its own file writes.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/fork_underscore"
out=$(shim POOLSHIM_STATS="$PST_TMP/x-%p.json" -- "$P" "$PST_TMP/data" 2>"$PST_TMP/err")
rc=$?
[ $rc = 77 ] && skip "$(cat "$PST_TMP/err")"
[ $rc = 0 ] || { fail "exit $rc: $(cat "$PST_TMP/err")"; finish; }
child=$(echo "$out" | sed -n 's/^child //p')
parent=$(ls "$PST_TMP" | sed -n 's/^x-\([0-9]*\)\.json$/\1/p' | grep -vx "$child")
writes() { json_get "$PST_TMP/x-$1.json" "sum(c['calls'] for c in r['calls'] if c['call'] == 'write' and c['kind'] == 'file')"; }
if [ -f "$PST_TMP/x-$child.json" ]; then
	pass "the child's report is under its pid ($child)"
	[ "$(json_get "$PST_TMP/x-$child.json" "r['pid']")" = "$child" ] && pass "child report: pid $child" ||
		fail "child report: pid $(json_get "$PST_TMP/x-$child.json" "r['pid']")"
	[ "$(writes "$child")" = 5 ] && pass "child counts its own 5 writes" ||
		fail "child counts $(writes "$child") writes, not 5"
else
	fail "no report for the child $child: $(ls "$PST_TMP")"
fi
if [ -n "$parent" ] && [ -f "$PST_TMP/x-$parent.json" ]; then
	[ "$(writes "$parent")" = 10 ] && pass "parent counts its own 10 writes" ||
		fail "parent counts $(writes "$parent") writes, not 10"
else
	fail "no report for the parent: $(ls "$PST_TMP")"
fi
finish
