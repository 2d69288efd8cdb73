#!/bin/sh
# SPDX-License-Identifier: MIT
# The report's "saved" line and JSON object (issue 37): what the pool
# saved, from its counts.  A loop of 1 MiB buffers, each freed before the
# next, is served from memory the pool already held but for the first, and
# glibc's estimate spans none (its dynamic threshold) to every one (its
# static 128 KiB threshold) as mmap+munmap, 256 faults each.  32 MiB
# buffers are mapped by glibc whatever its threshold: both figures agree.
# Buffers all live at once each take the pool past its peak.  A record
# left by SIGKILL, rendered by `poolshim collect`, says the same, and
# `poolshim report` sums it over processes.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/advice_helper"
SCHEMA="$PS_TOP_SRCDIR/tests/report_schema.py"

shim -- "$H" loop 50 1048576 >/dev/null 2>"$PST_TMP/loop.txt" || fail "helper (loop)"
want="saved    50 pooled allocations: 49 on memory the pool held, 1 past its peak; it took"
want2="glibc would have needed (estimate) 0-50 mmap+munmap pairs and 0-12800 page faults"
line=$(grep '^saved ' "$PST_TMP/loop.txt")
case $line in
"$want"*"$want2") pass "text: reused and fresh, glibc's estimate as a range" ;;
*) fail "saved line: '$line'" ;;
esac

shim "POOLSHIM_STATS=$PST_TMP/big.json" -- "$H" loop 4 33554432 >/dev/null || fail "helper (big)"
python3 "$SCHEMA" "$PST_TMP/big.json" && pass "schema (big)" || fail "schema (big)"
got=$(json_get "$PST_TMP/big.json" "[r['saved'][k] for k in ('allocations', 'reused', 'fresh', \
'glibc_mmaps_min', 'glibc_mmaps_max', 'glibc_faults_min', 'glibc_faults_max')] + \
[r['saved']['taken'] == r['pool']['backed'] > 0, r['saved']['pages'] > 0]")
[ "$got" = "[4, 3, 1, 4, 4, 32768, 32768, True, True]" ] &&
	pass "JSON: 32 MiB buffers are glibc mmaps at either threshold" || fail "saved (big): $got"

shim "POOLSHIM_STATS=$PST_TMP/live.json" -- "$H" alloc 20 1048576 >/dev/null || fail "helper (alloc)"
got=$(json_get "$PST_TMP/live.json" "[r['saved'][k] for k in ('allocations', 'reused', 'fresh')]")
[ "$got" = "[20, 0, 20]" ] && pass "buffers live at once are all fresh" || fail "saved (alloc): $got"

# `poolshim report` says it, and sums it over the reports it merges.
python3 "$PS_TOP_SRCDIR/scripts/poolshim-report.py" "$PST_TMP/big.json" "$PST_TMP/live.json" \
	>"$PST_TMP/merged" 2>&1
grep -q "^saved    24 pooled allocations: 3 on memory the pool held, 21 past its peak; .* (sum over processes)\$" \
	"$PST_TMP/merged" && pass "poolshim report sums it" ||
	fail "merged saved line: $(grep '^saved' "$PST_TMP/merged") $(head -3 "$PST_TMP/merged")"

# A record left behind: collect renders the same line from the counters.
L="$PST_TMP/rec"
mkdir "$L"
(env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=saved LD_PRELOAD="$SHIM" "$H" loop 50 1048576 kill) \
	>/dev/null 2>&1
timeout 120 "$PS_TOP_BUILDDIR/tools/poolshim-collect" --live-dir "$L" >"$PST_TMP/coll" 2>&1
line=$(grep '^saved ' "$PST_TMP/coll")
case $line in
"$want"*"$want2") pass "poolshim collect renders it from a record" ;;
*) fail "collect's saved line: '$line' ($(head -3 "$PST_TMP/coll"))" ;;
esac
finish
