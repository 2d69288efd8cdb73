#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 37, what the pool saved, in `poolshim report`: merged reports sum
# their "saved" objects in the --json output as in the text (with how many
# reports had one), a group whose every process ran with POOLSHIM_POOL=off
# says it saved nothing and why, and --plot draws a panel of what the pool
# saved (its allocations and pages against glibc's estimated mmaps and
# faults, a range) beside the others, none for a run that pooled nothing.
. "$PS_TOP_SRCDIR/tests/lib.sh"
TOOL="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
H="$PRELOAD_BIN/advice_helper"
T=$PST_TMP
shim "POOLSHIM_STATS=$T/loop.json" -- "$H" loop 50 1048576 >/dev/null || fail "helper (loop)"
shim "POOLSHIM_STATS=$T/live.json" -- "$H" alloc 20 1048576 >/dev/null || fail "helper (alloc)"
shim POOLSHIM_POOL=off "POOLSHIM_STATS=$T/off.json" -- "$H" loop 50 1048576 >/dev/null ||
	fail "helper (off)"
# A report from before the saved object: the merge says how many had one.
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); del r["saved"]; json.dump(r, open(sys.argv[2], "w"))' \
	"$T/live.json" "$T/old.json"

# 1. --json: the sum, per group, and how many reports had one.
python3 "$TOOL" --json "$T/m.json" "$T/loop.json" "$T/live.json" >/dev/null 2>"$T/err" ||
	fail "merge: $(cat "$T/err")"
got=$(json_get "$T/m.json" "[r['total']['saved'][k] for k in ('allocations', 'reused', 'fresh')] + \
[r['total']['saved_reports'], r['total']['saved']['taken'] == r['total']['pool']['backed'], \
sorted(p['saved']['allocations'] for p in r['processes'])]")
[ "$got" = "[70, 49, 21, 2, True, [20, 50]]" ] &&
	pass "--json: saved summed over the reports (49+0 reused, 1+20 fresh), per process too" ||
	fail "--json saved: $got"
python3 "$TOOL" --json "$T/m2.json" "$T/loop.json" "$T/old.json" >"$T/text2" 2>&1 || fail "merge (old)"
got=$(json_get "$T/m2.json" "[r['total']['saved']['allocations'], r['total']['saved_reports'], \
[p['saved'] is None for p in r['processes']]]")
[ "$got" = "[50, 1, [False, True]]" ] && grep -q "^saved    50 pooled allocations: .*(1 of 2 reports have it)" "$T/text2" &&
	pass "a report without saved: summed from the others, and said" || fail "old report: $got $(grep '^saved' "$T/text2")"

# 2. The pool off everywhere: nothing saved, and why.
cp "$T/off.json" "$T/off2.json"
python3 "$TOOL" "$T/off.json" "$T/off2.json" >"$T/offtext" 2>&1 || fail "merge (off): $(cat "$T/offtext")"
grep -q "^pool     mode off " "$T/offtext" &&
	grep -q "^saved    nothing: the pool was off (POOLSHIM_POOL=off) in every process" "$T/offtext" &&
	pass "merged pool-off reports: saved nothing, said why" || fail "off: $(grep '^saved\|^pool' "$T/offtext")"

# 3. --plot: the panel, its rows and their values.
python3 - "$TOOL" "$T/loop.json" "$T/off.json" "$T" <<'PY' >"$T/v"
import importlib.util, json, re, sys
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
spec = importlib.util.spec_from_file_location("psreport", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)

def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)

def group(path):
    g = m.Group("program t")
    g.add(path, json.load(open(path)))
    return g

def block(script, name):
    b = re.search(r"^\$" + name + r" << EOD\n(.*?)^EOD$", script, re.S | re.M)
    return [re.findall(r'"[^"]*"|\S+', l) for l in b.group(1).splitlines()] if b else None

g = group(sys.argv[2])
sv = g.saved
ov = m.plot_group(g, "p-", sys.argv[4], 10)["p-overview.png"]
rows = block(ov, "saved")
want = [['"reused"', "49", "49"], ['"fresh"', "1", "1"],
        ['"pool pages"', str(sv["pages"]), str(sv["pages"])],
        ['"glibc mmaps ~"', str(sv["glibc_mmaps_min"]), str(sv["glibc_mmaps_max"])],
        ['"glibc faults ~"', str(sv["glibc_faults_min"]), str(sv["glibc_faults_max"])]]
check(rows is not None and [r[:3] for r in rows] == want and "what the pool saved" in ov and
      "set logscale y" in ov and f"layout 1,{ov.count('set title')}" in ov,
      f"overview: a panel of what the pool saved ({rows})")
check(rows is not None and rows[4][3] == f'"{sv["glibc_faults_min"]}-{sv["glibc_faults_max"]}"',
      "the estimate labelled as its range")
off = m.plot_group(group(sys.argv[3]), "o-", sys.argv[4], 10)["o-overview.png"]
check(block(off, "saved") is None and block(off, "pool") is None and
      "the pool was off (POOLSHIM_POOL=off)" in off,
      "the pool off: no saved or pool panel, the caption says why")
PY
while read -r line; do
	case $line in ok:*) pass "${line#ok: }" ;; *) fail "${line#FAIL: }" ;; esac
done <"$T/v"
[ "$(grep -c '^ok:' "$T/v")" = 3 ] || fail "want 3 checks passed: $(cat "$T/v")"

# 4. drawn: gnuplot takes the panel.
if command -v gnuplot >/dev/null 2>&1; then
	python3 "$TOOL" --plot "$T/png" "$T/loop.json" >"$T/out" 2>"$T/err" &&
		[ -s "$T/png/advice_helper-overview.png" ] &&
		pass "drawn: $(ls "$T/png" | tr '\n' ' ')" || fail "--plot: $(cat "$T/err")"
fi
finish
