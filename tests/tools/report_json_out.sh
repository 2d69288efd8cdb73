#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim report --json OUT`: OUT is the merged document's new file.  Given
# a report there (`--json A.json B.json`, two inputs meant) or one of the
# inputs, the tool refuses with one line and exit status 2, and the file is
# left as it was; a new name, or -, works as before.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/alloc_helper"
TOOL="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
report() { python3 "$TOOL" "$@"; }

shim "POOLSHIM_STATS=$PST_TMP/A.json" -- "$H" --count 20 --size 1048576 >/dev/null || fail "helper run A"
shim "POOLSHIM_STATS=$PST_TMP/B.json" -- "$H" --count 30 --size 200000 >/dev/null || fail "helper run B"
[ -s "$PST_TMP/A.json" ] && [ -s "$PST_TMP/B.json" ] || { fail "no reports"; finish; }
cp "$PST_TMP/A.json" "$PST_TMP/A.orig"
cp "$PST_TMP/B.json" "$PST_TMP/B.orig"

# 1. --json A.json B.json: A.json is a report, not an output
report --json "$PST_TMP/A.json" "$PST_TMP/B.json" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 2 ] && grep -q "A.json is a poolshim report, not an output" "$PST_TMP/err" &&
	grep -q "refusing to overwrite" "$PST_TMP/err" && pass "--json REPORT refused: $(tail -1 "$PST_TMP/err" | cut -c1-120)" ||
	fail "--json A.json B.json: rc=$rc $(cat "$PST_TMP/err")"
cmp -s "$PST_TMP/A.json" "$PST_TMP/A.orig" && pass "A.json unchanged" || fail "A.json was overwritten"

# 2. --json naming one of the inputs
report --json "$PST_TMP/B.json" "$PST_TMP/A.json" "$PST_TMP/B.json" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 2 ] && grep -q "also an input report" "$PST_TMP/err" && pass "--json INPUT refused" ||
	fail "--json B.json A.json B.json: rc=$rc $(cat "$PST_TMP/err")"
cmp -s "$PST_TMP/B.json" "$PST_TMP/B.orig" && pass "B.json unchanged" || fail "B.json was overwritten"

# 3. a new name and stdout still work; writing the merged file again is allowed
for n in 1 2; do
	report --json "$PST_TMP/m.json" "$PST_TMP/A.json" "$PST_TMP/B.json" >/dev/null 2>"$PST_TMP/err" ||
		fail "--json m.json (time $n): $(cat "$PST_TMP/err")"
done
[ "$(json_get "$PST_TMP/m.json" "r['schema'], r['total']['processes']")" = "('poolshim-merged-report', 2)" ] &&
	pass "--json NEW writes the merged document, and again over it" || fail "m.json: $(head -c 200 "$PST_TMP/m.json")"
report --json - "$PST_TMP/A.json" "$PST_TMP/B.json" 2>/dev/null | python3 -c 'import json,sys; assert json.load(sys.stdin)["total"]["processes"] == 2' &&
	pass "--json - to stdout" || fail "--json -"
finish
