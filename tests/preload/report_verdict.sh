#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 46: every report says its answer first.  A text report's second
# line (under the header) is its verdict, and a JSON report has the same
# in "verdict" {kind, text}: pooled and reused (saved), a pool with
# nothing to serve (idle), a POOLSHIM_POOL=off baseline.  A process that
# did no work (no counted I/O call, no allocation of POOLSHIM_POOL_MIN/4
# or more) gets no text report, under LD_PRELOAD or the wrapper: its
# stderr and exit are as without the shim (POOLSHIM_VERBOSE says why in
# one line); the same program doing
# work gets its report.  A JSON report asked for is still written, with
# the verdict no_work.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/advice_helper"
PS="$PS_TOP_BUILDDIR/poolshim"
SCHEMA="$PS_TOP_SRCDIR/tests/report_schema.py"

# verdict FILE KIND PATTERN: JSON verdict of kind KIND whose text matches PATTERN (grep -E)
verdict() {
	k=$(json_get "$1" "r['verdict']['kind']") t=$(json_get "$1" "r['verdict']['text']")
	[ "$k" = "$2" ] && printf '%s\n' "$t" | grep -Eq "$3" && pass "$2: $t" ||
		fail "$1: verdict $k '$t', want $2 /$3/"
}

# 1. JSON: the kinds
shim "POOLSHIM_STATS=$PST_TMP/saved.json" -- "$H" loop 64 1048576 >/dev/null || fail "helper (saved)"
verdict "$PST_TMP/saved.json" saved "^pool reused memory for 6[0-9] of 64 large allocations; glibc would have needed [0-9]+-[0-9]+ mmap"
shim "POOLSHIM_STATS=$PST_TMP/idle.json" -- "$H" alloc 40 49152 >/dev/null || fail "helper (idle)"
verdict "$PST_TMP/idle.json" idle "^pool idle: the largest allocations were 32K-64K, below POOLSHIM_POOL_MIN=64K; the shim only counts here$"
shim POOLSHIM_POOL=off "POOLSHIM_STATS=$PST_TMP/off.json" -- "$H" loop 64 1048576 >/dev/null || fail "helper (off)"
verdict "$PST_TMP/off.json" baseline "^baseline: the pool was off"
shim "POOLSHIM_STATS=$PST_TMP/none.json" -- /bin/true || fail "true under the shim"
verdict "$PST_TMP/none.json" no_work "^no work: no counted I/O call and no allocation of 16K or more"
for f in saved idle off none; do
	python3 "$SCHEMA" "$PST_TMP/$f.json" >"$PST_TMP/schema" 2>&1 || fail "schema $f: $(head -3 "$PST_TMP/schema")"
done

# 2. text: line 2 is the verdict, the same text as the JSON's
shim -- "$H" loop 64 1048576 >/dev/null 2>"$PST_TMP/saved.txt"
head -1 "$PST_TMP/saved.txt" | grep -q "^==== poolshim report: pid [0-9]* (advice_helper) ====" &&
	sed -n 2p "$PST_TMP/saved.txt" | grep -Eq "^verdict  pool reused memory for 6[0-9] of 64 large" &&
	pass "text: the verdict right under the header" || fail "text: $(head -3 "$PST_TMP/saved.txt")"
shim POOLSHIM_POOL=off -- "$H" loop 64 1048576 >/dev/null 2>"$PST_TMP/off.txt"
sed -n 2p "$PST_TMP/off.txt" | grep -q "^verdict  baseline: " && pass "text: baseline verdict" ||
	fail "text baseline: $(head -3 "$PST_TMP/off.txt")"

# 2b. `poolshim report` tables: each process's verdict under its header, the program's tally
python3 "$PS_TOP_SRCDIR/scripts/poolshim-report.py" "$PST_TMP/saved.json" "$PST_TMP/idle.json" >"$PST_TMP/merged" 2>&1
grep -A1 "^==== program advice_helper: 2 processes" "$PST_TMP/merged" | grep -Eq "^verdict  2 of 2 processes' verdicts: (saved:1 idle:1|idle:1 saved:1)$" &&
	grep -A1 "^==== process: pid [0-9]* (advice_helper), $PST_TMP/saved.json" "$PST_TMP/merged" | grep -q "^verdict  pool reused memory" &&
	pass "merged tables: verdicts under the headers" || fail "merged: $(grep -E '^(====|verdict)' "$PST_TMP/merged")"

# 3. no work, no text report: LD_PRELOAD and the wrapper; the exit status as without the shim
sh -c 'exit 5'
want=$?
env LD_PRELOAD="$SHIM" sh -c 'exit 5' 2>"$PST_TMP/e1"
rc=$?
[ $rc = $want ] && [ ! -s "$PST_TMP/e1" ] && pass "LD_PRELOAD sh -c 'exit 5': exit $rc, stderr empty" ||
	fail "LD_PRELOAD sh -c 'exit 5': exit $rc (want $want): $(head -5 "$PST_TMP/e1")"
env LD_PRELOAD="$SHIM" POOLSHIM_VERBOSE=1 sh -c 'exit 5' 2>"$PST_TMP/e1v"
grep -q "^poolshim\[[0-9]*\] sh: no report: no counted I/O call and no allocation of 16K or more$" "$PST_TMP/e1v" &&
	! grep -q "poolshim report" "$PST_TMP/e1v" && pass "POOLSHIM_VERBOSE: one line says why there is no report" ||
	fail "POOLSHIM_VERBOSE sh -c 'exit 5': $(tail -5 "$PST_TMP/e1v")"
"$PS" sh -c 'exit 5' 2>"$PST_TMP/e2"
rc=$?
[ $rc = $want ] && [ ! -s "$PST_TMP/e2" ] && pass "poolshim sh -c 'exit 5': exit $rc, stderr empty" ||
	fail "poolshim sh -c 'exit 5': exit $rc (want $want): $(head -5 "$PST_TMP/e2")"
# with work: the report, with its verdict
"$PS" sh -c 'dd if=/dev/zero bs=64k count=32 2>/dev/null | cat >/dev/null; exit 5' 2>"$PST_TMP/e3"
rc=$?
# On a loaded machine the wrapper's helper may deliver after the program's
# exit stopped waiting for it (poolshim(1)): give the reports 20 s.
reports() { grep -c "^==== end of poolshim report ====" "$PST_TMP/e3"; }
for _ in $(seq 200); do [ "$(reports)" -ge 2 ] && break; sleep 0.1; done
n=$(grep -c "^==== poolshim report: pid [0-9]* (\(dd\|cat\)) ====" "$PST_TMP/e3")
[ $rc = $want ] && [ "$n" = 2 ] && [ "$(grep -c '^verdict  ' "$PST_TMP/e3")" = 2 ] &&
	! grep -q "sh: no report\|(sh) ====" "$PST_TMP/e3" &&
	pass "poolshim sh -c 'dd | cat': reports for dd and cat, each with a verdict; none for sh" ||
	fail "with work: exit $rc, $n reports: $(grep -E '^(====|verdict|poolshim)' "$PST_TMP/e3")"
finish
