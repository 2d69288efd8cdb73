#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim report` (scripts/poolshim-report.py) on real reports: two runs of
# a helper under the shim, merged; the merged numbers are the sums of the two
# files' numbers (computed here independently), --plot writes PNG files,
# call sites are listed when a report has them, a corrupt or invalid file
# is named on one line with exit status 2, never a traceback, and the
# placement of pooled blocks (pool.allocator) is said per process, tallied
# per group (pages:1 jemalloc:1 when they differ; unknown for a report that
# does not say) and named for A and B by --diff.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/alloc_helper"
TOOL="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
report() { python3 "$TOOL" "$@"; }

# 1. two real reports, different sizes of work
shim "POOLSHIM_STATS=$PST_TMP/r-%p.json" -- "$H" --count 20 --size 1048576 >/dev/null || fail "helper run 1"
shim "POOLSHIM_STATS=$PST_TMP/r-%p.json" -- "$H" --count 30 --size 200000 >/dev/null || fail "helper run 2"
set -- "$PST_TMP"/r-*.json
[ $# = 2 ] && [ -f "$1" ] && [ -f "$2" ] || { fail "want 2 reports, have: $*"; finish; }
A=$1 B=$2
for f in "$A" "$B"; do
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$f" || fail "schema: $f"
done

# Independent sums over the two files: EXPR evaluated on each report r.
sum2() {
	python3 -c 'import json,sys
print(sum(eval(sys.argv[1], {"r": json.load(open(f))}) for f in sys.argv[2:]))' "$1" "$A" "$B"
}
# The same expression over the merged file's "total" (and first program).
merged() { json_get "$PST_TMP/m.json" "$1"; }

# 2. merge: exit 0, a table per program and per process
report --json "$PST_TMP/m.json" --exact "$A" "$B" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && [ ! -s "$PST_TMP/err" ] && pass "merged two reports" || fail "merge: rc=$rc $(cat "$PST_TMP/err")"
grep -q "^==== program alloc_helper: 2 processes" "$PST_TMP/out" && pass "per-program table" || fail "no per-program table"
[ "$(grep -c "^==== process: pid [0-9]* (alloc_helper)" "$PST_TMP/out")" = 2 ] &&
	pass "two per-process tables" || fail "per-process tables: $(grep '^====' "$PST_TMP/out")"
grep -q "^malloc  " "$PST_TMP/out" && grep -q "^pool     " "$PST_TMP/out" && grep -q "^io_uring " "$PST_TMP/out" &&
	grep -q "^process  page faults" "$PST_TMP/out" && pass "call, pool, io_uring, page fault lines" ||
	fail "lines missing: $(cat "$PST_TMP/out")"

# 3. the merged numbers add up
check_sum() {  # check_sum WHAT PER-REPORT-EXPR MERGED-EXPR
	want=$(sum2 "$2") got=$(merged "$3")
	[ -n "$want" ] && [ "$want" = "$got" ] && pass "$1: $got = sum of the two" || fail "$1: merged $got, sum $want"
}
C="c['call'] == 'malloc'"
check_sum "malloc calls" "sum(c['calls'] for c in r['calls'] if $C)" \
	"sum(c['calls'] for c in r['total']['calls'] if $C)"
check_sum "malloc bytes" "sum(c['bytes'] for c in r['calls'] if $C)" \
	"sum(c['bytes'] for c in r['total']['calls'] if $C)"
check_sum "1M..2M malloc bucket" "sum(n for c in r['calls'] if $C for b, n in c['size_hist'] if b == 1048576)" \
	"sum(n for c in r['total']['calls'] if $C for b, n in c['size_hist'] if b == 1048576)"
check_sum "free calls" "sum(c['calls'] for c in r['calls'] if c['call'] == 'free')" \
	"sum(c['calls'] for c in r['programs'][0]['calls'] if c['call'] == 'free')"
check_sum "pool allocations" "r['pool']['allocations']" "r['total']['pool']['allocations']"
check_sum "pool backed" "r['pool']['backed']" "r['total']['pool']['backed']"
check_sum "pool allocations from the caches" "r['pool']['cached']" "r['total']['pool']['cached']"
check_sum "pool frees past the caches (the pace)" "r['pool']['paced']" "r['total']['pool']['paced']"
check_sum "pool frees that gave back their tail" "r['pool']['tails']" "r['total']['pool']['tails']"
c=$(sum2 "r['pool']['cached']")
pc=$(sum2 "r['pool']['paced']")
tc=$(sum2 "r['pool']['tails']")
grep -Eq "^pool     [0-9]+ allocations served \($c from the CPUs' caches; $pc frees went past them, their CPUs slower than the pace; $tc gave back their block's unwritten tail\)" "$PST_TMP/out" &&
	pass "text: $c allocations from the CPUs' caches, $pc frees past them" ||
	fail "text: no '($c from the CPUs' caches; $pc frees went past them...)': $(grep '^pool  ' "$PST_TMP/out")"
check_sum "minor faults" "r['process']['minflt']" "r['total']['process']['minflt']"
[ "$(merged "r['total']['processes']")" = 2 ] && pass "2 processes merged" || fail "processes"
# The text table shows the same sums (--exact prints bytes as integers).
want="$(sum2 "sum(c['calls'] for c in r['calls'] if $C)") $(sum2 "sum(c['bytes'] for c in r['calls'] if $C)")"
got=$(awk '/^==== program alloc_helper/ { p = 1 } p && $1 == "malloc" { print $3, $4; exit }' "$PST_TMP/out")
[ "$got" = "$want" ] && pass "text table: malloc $got" || fail "text table: malloc '$got', want '$want'"

# 4. plots: non-empty PNG files
if command -v gnuplot >/dev/null 2>&1; then
	report --plot "$PST_TMP/plots" "$A" "$B" >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "--plot: $(cat "$PST_TMP/err")"
	n=0
	for png in "$PST_TMP"/plots/*.png; do
		[ -s "$png" ] || continue
		sig=$(od -An -tx1 -N8 "$png" | tr -d ' \n')
		[ "$sig" = 89504e470d0a1a0a ] && n=$((n + 1)) || fail "not a PNG: $png ($sig)"
	done
	[ -s "$PST_TMP/plots/alloc_helper-overview.png" ] && [ -s "$PST_TMP/plots/alloc_helper-call-malloc.png" ] &&
		[ $n -ge 2 ] && pass "$n PNG plots" || fail "plots: $(ls "$PST_TMP/plots" 2>&1)"
else
	echo "SKIP: gnuplot not installed (Debian package gnuplot-nox): no plot check"
fi

# 5. call sites, when a report carries them (made here from a real report)
python3 - "$A" "$PST_TMP/sites.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
fr = lambda fn, off: {"function": fn, "offset": off, "object": "/usr/bin/app"}
r["callsites"] = [
    {"kind": "alloc", "call": "malloc", "count": 3, "bytes": 3 << 20, "nsec": 0,
     "frames": [fr("make_buffer", 0x1c), fr("main", 0x40)]},
    {"kind": "io", "call": "pread", "count": 9, "bytes": 9 << 10, "nsec": 90000,
     "frames": [fr("read_block", 0x2a), fr("main", 0x80)]},
]
json.dump(r, open(sys.argv[2], "w"))
EOF
report --json "$PST_TMP/ms.json" --plot "$PST_TMP/plots2" "$PST_TMP/sites.json" "$PST_TMP/sites.json" \
	>"$PST_TMP/out" 2>"$PST_TMP/err" || fail "call sites: $(cat "$PST_TMP/err")"
grep -q "top call sites by bytes" "$PST_TMP/out" && grep -q "#0 make_buffer+0x1c (app)" "$PST_TMP/out" &&
	pass "call sites listed with their frames" || fail "call sites: $(cat "$PST_TMP/out")"
[ "$(json_get "$PST_TMP/ms.json" "[s['count'] for s in r['total']['callsites'] if s['call'] == 'pread']")" = "[18]" ] &&
	pass "call sites merged (9 + 9)" || fail "call sites merge: $(json_get "$PST_TMP/ms.json" "r['total']['callsites']")"
if command -v gnuplot >/dev/null 2>&1; then
	[ -s "$PST_TMP/plots2/alloc_helper-callsites.png" ] && pass "call site plot" || fail "no call site plot"
fi
report "$A" >"$PST_TMP/out" 2>&1
grep -q "call sites" "$PST_TMP/out" && fail "call sites printed for a report without them" || pass "no call sites: nothing said"

# 6. a corrupt file and an invalid report: named on one line, exit 2
head -c 200 "$A" >"$PST_TMP/corrupt.json"
report "$B" "$PST_TMP/corrupt.json" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
if [ $rc = 2 ] && [ "$(wc -l <"$PST_TMP/err")" = 1 ] && grep -q "corrupt.json: not valid JSON: it ends early" "$PST_TMP/err" &&
   ! grep -q Traceback "$PST_TMP/err"; then
	pass "corrupt file: $(cat "$PST_TMP/err")"
else
	fail "corrupt file: rc=$rc $(cat "$PST_TMP/err")"
fi
python3 -c 'import json,sys
r = json.load(open(sys.argv[1])); r["calls"][0]["calls"] += 1
json.dump(r, open(sys.argv[2], "w"))' "$A" "$PST_TMP/invalid.json"
report "$PST_TMP/invalid.json" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$PST_TMP/err")" = 1 ] && grep -q "invalid.json: not a valid poolshim report" "$PST_TMP/err" &&
	pass "invalid report: $(cat "$PST_TMP/err")" || fail "invalid report: rc=$rc $(cat "$PST_TMP/err")"
report "$PST_TMP/missing.json" >/dev/null 2>"$PST_TMP/err"
rc=$?
[ $rc = 2 ] && grep -q "missing.json: cannot read" "$PST_TMP/err" && pass "missing file" || fail "missing file: rc=$rc $(cat "$PST_TMP/err")"

# 7. placement: a run with jemalloc's placement merged with a default one
# (its library: libpoolshim.so has no jemalloc, and would place to the page)
# shellcheck disable=SC2034 # read by shim_with (tests/lib.sh)
pst_lib="${SHIM%/*}/libpoolshim-jemalloc.so"
shim_with POOLSHIM_POOL_ALLOCATOR=jemalloc "POOLSHIM_STATS=$PST_TMP/je.json" -- "$H" --count 20 --size 1048576 \
	>/dev/null || fail "helper run (jemalloc)"
python3 -c 'import json,sys
r = json.load(open(sys.argv[1])); del r["pool"]["allocator"]
json.dump(r, open(sys.argv[2], "w"))' "$A" "$PST_TMP/older.json"
report --json "$PST_TMP/mp.json" "$A" "$PST_TMP/je.json" "$PST_TMP/older.json" >"$PST_TMP/out" 2>"$PST_TMP/err" ||
	fail "merge (placement): $(cat "$PST_TMP/err")"
[ "$(grep -c "^pool     mode [a-z0-9]* (requested auto); placement pages; " "$PST_TMP/out")" = 1 ] &&
	[ "$(grep -c "^pool     mode [a-z0-9]* (requested auto); placement jemalloc; " "$PST_TMP/out")" = 1 ] &&
	[ "$(grep -c "^pool     mode [a-z0-9]* (requested auto); placement unknown; " "$PST_TMP/out")" = 1 ] &&
	grep -q "^pool     mode .*; placement pages:1 jemalloc:1 unknown:1; " "$PST_TMP/out" &&
	pass "text: placement per process, tallied for the program" ||
	fail "placement in the merged text: $(grep '^pool     mode' "$PST_TMP/out")"
got=$(json_get "$PST_TMP/mp.json" "sorted(r['total']['pool']['allocators'].items())")
[ "$got" = "[('jemalloc', 1), ('pages', 1), ('unknown', 1)]" ] && pass "merged --json: allocators $got" ||
	fail "merged --json allocators: $got"
report --diff "$A" "$PST_TMP/je.json" >"$PST_TMP/diff" 2>"$PST_TMP/err" || fail "--diff: $(cat "$PST_TMP/err")"
grep -q "^pool placement: A pages; B jemalloc$" "$PST_TMP/diff" &&
	grep -q "^A and B placed their pooled blocks differently (POOLSHIM_POOL_ALLOCATOR)" "$PST_TMP/diff" &&
	pass "--diff names both placements" || fail "--diff placement: $(cat "$PST_TMP/diff")"
report --diff "$A" "$B" >"$PST_TMP/diff" 2>"$PST_TMP/err" || fail "--diff: $(cat "$PST_TMP/err")"
grep -q "^pool placement: A pages; B pages$" "$PST_TMP/diff" && ! grep -q "placed their pooled blocks differently" "$PST_TMP/diff" &&
	pass "--diff, the same placement: named, no note" || fail "--diff same placement: $(cat "$PST_TMP/diff")"

finish
