#!/bin/sh
# SPDX-License-Identifier: MIT
# The CPUs' caches bypassed where frees come slowly
# (POOLSHIM_POOL_CACHE_PACE_US, issue 44), seen in the report: a program
# that frees a 256 KiB buffer every 100 us or more (each filled and checked,
# then a 100 us spin), 1500 times, has frees counted `paced` (past its CPU's
# cache, to the placement) and few requests served from the caches; with
# the pace off (0) none is paced and the caches serve nearly every request.
# Both reports pass the schema, and the text report says it too.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/alloc_helper"

run() {
	name=$1
	shift
	shim "POOLSHIM_STATS=$PST_TMP/$name.json" "$@" -- "$H" --count 1500 --size 262144 --gap-us 100 \
		>/dev/null 2>"$PST_TMP/$name.err" || fail "$name: helper failed: $(cat "$PST_TMP/$name.err")"
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/$name.json" || fail "$name: schema"
	paced=$(json_get "$PST_TMP/$name.json" "r['pool'].get('paced')")
	cached=$(json_get "$PST_TMP/$name.json" "r['pool'].get('cached')")
	served=$(json_get "$PST_TMP/$name.json" "r['pool']['allocations']")
}

# Two windows of 256 frees on a CPU decide: at least 1500 - 2 x 256 x 2 CPUs are paced.
run paced
[ "$served" -ge 1500 ] && [ "$paced" -ge 400 ] && [ "$cached" -lt 1100 ] &&
	pass "at the pace: $paced of 1500 frees went past the caches, $cached of $served requests from them" ||
	fail "at the pace: paced $paced, cached $cached of $served (want 400 or more paced, under 1100 cached)"

run unpaced POOLSHIM_POOL_CACHE_PACE_US=0
[ "$served" -ge 1500 ] && [ "$paced" = 0 ] && [ "$cached" -ge 1400 ] &&
	pass "pace off: none paced, $cached of $served requests from the caches" ||
	fail "pace off: paced $paced, cached $cached of $served (want none paced, 1400 or more cached)"

# The text report's pool line.
shim POOLSHIM_STATS=stderr -- "$H" --count 600 --size 262144 --gap-us 100 >/dev/null 2>"$PST_TMP/text" ||
	fail "text run failed"
grep -q "^pool .* allocations served (.* from the CPUs' caches.*; [0-9]* frees went past them, their CPUs slower than the pace[;)]" "$PST_TMP/text" &&
	pass "text: $(grep -o "[0-9]* frees went past them" "$PST_TMP/text")" ||
	fail "text report's pool line: $(grep '^pool .*allocations served' "$PST_TMP/text")"
finish
