#!/bin/sh
# SPDX-License-Identifier: MIT
# The report's advice, metadata and configuration (schema version 3), and
# `poolshim report --csv` / `--diff`: a program of 384 KiB buffers under
# POOLSHIM_POOL_MIN=1M is told which POOLSHIM_POOL_MIN pools them (sizes
# glibc maps and unmaps; smaller ones it reuses itself, and no pool_min
# advice is given for them: advice_haproxy.sh); an O_DIRECT reader under ulimit -l 64
# without CAP_IPC_LOCK is told to raise RLIMIT_MEMLOCK; a clean run gets
# no advice at all.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/advice_helper"
REPORT="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
SCHEMA="$PS_TOP_SRCDIR/tests/report_schema.py"

# 1. 384 KiB buffers, malloc'd and freed in turn: below a 1M threshold; 256K would pool them
shim POOLSHIM_POOL_MIN=1M "POOLSHIM_STATS=$PST_TMP/small.json" -- "$H" loop 40 393216 >/dev/null || fail "helper (small)"
python3 "$SCHEMA" "$PST_TMP/small.json" && pass "schema (small)" || fail "schema (small)"
[ "$(json_get "$PST_TMP/small.json" "[(a['id'], a['variable'], a['suggested']) for a in r['advice']]")" = \
  "[('pool_min', 'POOLSHIM_POOL_MIN', '256K')]" ] && pass "POOLSHIM_POOL_MIN advice, suggested 256K" ||
	fail "pool_min advice: $(json_get "$PST_TMP/small.json" "r.get('advice')")"
shim POOLSHIM_POOL_MIN=1M -- "$H" loop 40 393216 >/dev/null 2>"$PST_TMP/small.txt"
grep -q "^advice$" "$PST_TMP/small.txt" && grep -q "POOLSHIM_POOL_MIN=256K would pool them" "$PST_TMP/small.txt" &&
	pass "text advice section" || fail "text advice: $(tail -4 "$PST_TMP/small.txt")"
# the suggestion works: with it the same program gets no advice, pools and reuses
shim POOLSHIM_POOL_MIN=256K "POOLSHIM_STATS=$PST_TMP/fixed.json" -- "$H" loop 40 393216 >/dev/null
[ "$(json_get "$PST_TMP/fixed.json" "(r['advice'], r['pool']['allocations'] >= 40, r['saved']['reused'] >= 39)")" = "([], True, True)" ] &&
	pass "the suggested value pools and reuses them" || fail "with 256K: $(json_get "$PST_TMP/fixed.json" "(r['advice'], r['saved'])")"

# 2. a clean run: large buffers, all pooled: no advice, in JSON or text
shim "POOLSHIM_STATS=$PST_TMP/clean.json" -- "$H" alloc 20 1048576 >/dev/null || fail "helper (clean)"
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
case $thp in
*"[never]"*) echo "note: THP disabled here; the clean run may advise about it" ;;
*)
	[ "$(json_get "$PST_TMP/clean.json" "r['advice']")" = "[]" ] && pass "clean run: no advice" ||
		fail "clean run advice: $(json_get "$PST_TMP/clean.json" "r['advice']")"
	shim -- "$H" alloc 20 1048576 >/dev/null 2>"$PST_TMP/clean.txt"
	grep -q "^advice" "$PST_TMP/clean.txt" && fail "clean run has an advice section" || pass "clean text: no advice section"
	;;
esac

# 2b. the pool at its cap: POOLSHIM_POOL_SIZE advice, suggested twice the cap
shim POOLSHIM_POOL_SIZE=2M "POOLSHIM_STATS=$PST_TMP/full.json" -- "$H" alloc 8 1048576 >/dev/null || fail "helper (full)"
[ "$(json_get "$PST_TMP/full.json" "[(a['variable'], a['suggested']) for a in r['advice'] if a['id'] == 'pool_full']")" = \
  "[('POOLSHIM_POOL_SIZE', '4M')]" ] && pass "pool_full advice, suggested 4M" ||
	fail "pool_full advice: $(json_get "$PST_TMP/full.json" "(r['advice'], r['pool']['fallbacks'])")"

# 2c. hugetlb asked for with none reserved: the vm.nr_hugepages advice
if [ "$(cat /proc/sys/vm/nr_hugepages 2>/dev/null)" = 0 ]; then
	shim POOLSHIM_HUGEPAGES=hugetlb "POOLSHIM_STATS=$PST_TMP/huge.json" -- "$H" alloc 4 1048576 >/dev/null || fail "helper (hugetlb)"
	[ "$(json_get "$PST_TMP/huge.json" "[(a['variable'], a['suggested'].isdigit()) for a in r['advice'] if a['id'] == 'hugetlb_none']")" = \
	  "[('vm.nr_hugepages', True)]" ] && pass "hugetlb_none advice" ||
		fail "hugetlb advice: $(json_get "$PST_TMP/huge.json" "(r['advice'], r['pool']['backed_by'])")"
fi

# 3. metadata and the full effective configuration
json_get "$PST_TMP/fixed.json" "r['version']" | grep -qx 3 && pass "schema version 3" || fail "version"
m=$(json_get "$PST_TMP/fixed.json" "(r['meta']['host'], r['meta']['kernel'], bool(r['meta']['version']))")
[ "$m" = "('$(uname -n)', '$(uname -r)', True)" ] && pass "meta host/kernel/version" || fail "meta: $m"
json_get "$PST_TMP/fixed.json" "r['meta']['start_time']" | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$' &&
	pass "start time in ISO 8601 UTC" || fail "start_time: $(json_get "$PST_TMP/fixed.json" "r['meta']")"
# The options of the shipped build: the table without its test-build entries.
want=$(sed '/^#ifdef PS_TEST_HOOKS/,/^#endif/d' "$PS_TOP_SRCDIR/shim/format/config.c" |
	sed -n 's/^	{ "\(POOLSHIM[A-Z_]*\)", OPT_.*/\1/p' | sort | tr '\n' ' ')
got=$(json_get "$PST_TMP/fixed.json" "' '.join(sorted(r['config']))")
[ -n "$want" ] && [ "$got " = "$want" ] && pass "config lists every option" || fail "config keys: got '$got' want '$want'"
[ "$(json_get "$PST_TMP/fixed.json" "r['config']['POOLSHIM_POOL_MIN'], r['config']['POOLSHIM_STATS_FORMAT']")" = "('256K', 'json')" ] &&
	pass "config values after parsing" || fail "config values: $(json_get "$PST_TMP/fixed.json" "r['config']")"
grep -q "^run      poolshim .*; host $(uname -n); kernel $(uname -r); started 20" "$PST_TMP/small.txt" &&
	grep -q "^config   POOLSHIM=on POOLSHIM_POOL=on POOLSHIM_POOL_MIN=1M" "$PST_TMP/small.txt" && pass "text metadata" ||
	fail "text metadata: $(grep -E '^(run|config)' "$PST_TMP/small.txt")"

# 4. --csv and --diff
python3 "$REPORT" --csv "$PST_TMP/small.json" "$PST_TMP/clean.json" >"$PST_TMP/csv" || fail "--csv failed"
head -1 "$PST_TMP/csv" | grep -qx "program,call,kind,calls,bytes,errors,eagain,timed,nsec,mean_ns" &&
	pass "csv header" || fail "csv header: $(head -1 "$PST_TMP/csv")"
python3 - "$PST_TMP/csv" <<'PY' && pass "csv rows" || fail "csv rows: $(cat "$PST_TMP/csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
m = [r for r in rows if r["program"] == "advice_helper" and r["call"] == "malloc" and r["kind"] == "none"]
# one row per program/call/kind: both runs merged under the program
assert len(m) == 1 and int(m[0]["calls"]) >= 60 and int(m[0]["bytes"]) >= 40 * 393216 + 20 * 1048576, m
PY
python3 "$REPORT" --diff "$PST_TMP/small.json" "$PST_TMP/clean.json" >"$PST_TMP/diff" || fail "--diff failed"
grep -Eq "^malloc +none +[0-9]+ +[0-9]+ +x0\.[0-9]+ +[0-9]+ +[0-9]+ +x[0-9.]+ " "$PST_TMP/diff" &&
	grep -q "A $PST_TMP/small.json -> B $PST_TMP/clean.json" "$PST_TMP/diff" && pass "diff: malloc row with ratios" ||
	fail "diff: $(cat "$PST_TMP/diff")"

# 5. O_DIRECT under ulimit -l 64 without CAP_IPC_LOCK: the ring still serves it
uring_lock -s
drop=
if [ "$(id -u)" = 0 ]; then
	if command -v setpriv >/dev/null; then
		drop="setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock --"
	elif command -v capsh >/dev/null; then
		drop="capsh --drop=cap_ipc_lock --"
	else
		skip "root, and neither setpriv nor capsh to drop CAP_IPC_LOCK"
	fi
fi
D=${TMPDIR:-/var/tmp}
[ -d /var/tmp ] && D=/var/tmp
F=$(mktemp "$D/pst-advice.XXXXXX") && at_exit "rm -f '$F'"
if [ -n "$drop" ]; then
	(ulimit -l 64 && $drop env "POOLSHIM_STATS=$PST_TMP/direct.json" LD_PRELOAD="$SHIM" "$H" direct "$F") >/dev/null
else
	(ulimit -l 64 && shim "POOLSHIM_STATS=$PST_TMP/direct.json" -- "$H" direct "$F") >/dev/null
fi
rc=$?
[ $rc = 77 ] && { echo "O_DIRECT not supported under $D"; finish; }
[ $rc = 0 ] || fail "direct helper rc=$rc"
if [ "$(json_get "$PST_TMP/direct.json" "r['uring']['state']")" != ok ]; then
	echo "io_uring unavailable here: $(json_get "$PST_TMP/direct.json" "r['uring']['reason']")"
	finish
fi
python3 "$SCHEMA" "$PST_TMP/direct.json" && pass "schema (direct)" || fail "schema (direct)"
# Nothing is registered: a 64 KiB limit costs the ring nothing, and no advice asks for more.
# (hugetlb_pays is left out: hugepages.sh may hold free hugetlb pages meanwhile.)
[ "$(json_get "$PST_TMP/direct.json" "(r['uring']['sqes'] > 0, r['uring']['fallbacks']['register'], [a['id'] for a in r['advice'] if a['id'] != 'hugetlb_pays'])")" = "(True, 0, [])" ] &&
	pass "O_DIRECT on the ring under a 64 KiB RLIMIT_MEMLOCK, no memlock advice" ||
	fail "memlock: uring $(json_get "$PST_TMP/direct.json" "r['uring']"); advice $(json_get "$PST_TMP/direct.json" "r['advice']")"

# 6. O_DIRECT reads not 4 KiB aligned: counted, and the alignment advice
(shim "POOLSHIM_STATS=$PST_TMP/unal.json" -- "$H" unaligned "$F") >/dev/null || fail "unaligned helper"
[ "$(json_get "$PST_TMP/unal.json" "(r['uring']['fallbacks']['unaligned'] >= 16, [a['id'] for a in r['advice'] if a['id'] != 'hugetlb_pays'])")" = "(True, ['unaligned'])" ] &&
	pass "unaligned advice" || fail "unaligned: $(json_get "$PST_TMP/unal.json" "(r['uring']['fallbacks'], r['advice'])")"
finish
