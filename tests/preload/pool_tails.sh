#!/bin/sh
# SPDX-License-Identifier: MIT
# Freed blocks' unwritten tails (POOLSHIM_POOL_TAILS, issue 44), through
# the report: 300 buffers of 8 MiB, 4 alive at once, each freed to the
# placement (no CPU cache), the data checked before each free.
# - 64 KiB of each written: auto gives the tails back (nearly every free
#   counted in pool.tails), keep gives none back;
# - every byte written: auto gives none back and the loop takes no page
#   fault per buffer (4 KiB pages, so faults can be counted: giving tails
#   back would cost 2048 a buffer), trim gives every tail back and the
#   data survive it.
# - with the CPUs' caches on (the default), 8 MiB buffers (too large for
#   them) with 4 KiB written: freed 100 us apart, nearly every tail goes
#   back; freed as fast as the loop runs, the first two windows' (126
#   measured quiet; a window a preemption slowed gives its next 64 back,
#   so the bound is a third), the pace: a system call per free costs there.
# Each report passes the schema; the text report's pool line says it.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/alloc_helper"

run() {
	name=$1 fill=$2
	shift 2
	shim "POOLSHIM_STATS=$PST_TMP/$name.json" POOLSHIM_POOL_CACHE=0 POOLSHIM_HUGEPAGES=none "$@" -- \
		"$H" --count 300 --live 4 --size 8388608 --fill "$fill" >/dev/null 2>"$PST_TMP/$name.err" ||
		fail "$name: helper failed: $(cat "$PST_TMP/$name.err")"
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/$name.json" || fail "$name: schema"
	tails=$(json_get "$PST_TMP/$name.json" "r['pool'].get('tails')")
	frees=$(json_get "$PST_TMP/$name.json" "r['pool']['frees']")
	minflt=$(json_get "$PST_TMP/$name.json" "r['process']['minflt']")
}

# Two of the first blocks (fresh pages) freed with their tails unwritten start it.
run partial 65536
[ "$frees" -ge 300 ] && [ "$tails" -ge 290 ] &&
	pass "64 KiB of 8 MiB written: $tails of $frees frees gave their tail back" ||
	fail "64 KiB of 8 MiB written: tails $tails of $frees frees (want 290 or more)"

run partial-keep 65536 POOLSHIM_POOL_TAILS=keep
[ "$tails" = 0 ] && pass "keep: no tail given back" || fail "keep: tails $tails"

run full 8388608
[ "$tails" = 0 ] && [ "$minflt" -lt 40000 ] &&
	pass "every byte written: no tail given back, $minflt page faults in all" ||
	fail "every byte written: tails $tails, $minflt page faults (want 0, under 40000)"

run full-trim 8388608 POOLSHIM_POOL_TAILS=trim
[ "$tails" -ge 290 ] && [ "$minflt" -gt 300000 ] &&
	pass "trim: $tails tails given back, the data intact, $minflt faults" ||
	fail "trim: tails $tails, $minflt faults (want 290 or more, and the faults of giving them back)"

run small 65536 POOLSHIM_POOL_TAILS=trim POOLSHIM_POOL_TAIL_KEEP=8M
[ "$tails" = 0 ] && pass "keep 8M: blocks under twice it keep their tail" ||
	fail "keep 8M: tails $tails"

# The pace, with the caches on.
pace() {
	name=$1
	shift
	shim "POOLSHIM_STATS=$PST_TMP/$name.json" POOLSHIM_HUGEPAGES=none -- "$H" --count 3000 --live 4 \
		--size 8388608 --fill 4096 "$@" >/dev/null 2>"$PST_TMP/$name.err" ||
		fail "$name: helper failed: $(cat "$PST_TMP/$name.err")"
	tails=$(json_get "$PST_TMP/$name.json" "r['pool'].get('tails')")
}
pace slow --gap-us 100
[ "$tails" -ge 2900 ] && pass "freed 100 us apart: $tails of 3000 tails given back" ||
	fail "freed 100 us apart: $tails tails given back (want 2900 or more)"
pace fast
[ "$tails" -le 1000 ] && pass "freed as fast as the loop runs: $tails tails given back" ||
	fail "freed as fast as the loop runs: $tails tails given back (want 1000 at most)"

shim POOLSHIM_STATS=stderr POOLSHIM_POOL_CACHE=0 -- "$H" --count 40 --live 4 --size 8388608 --fill 4096 \
	>/dev/null 2>"$PST_TMP/text" || fail "text run failed"
grep -q "^pool .* allocations served (.*; [0-9]* gave back their block's unwritten tail)" "$PST_TMP/text" &&
	pass "text: $(grep -o "[0-9]* gave back their block's unwritten tail" "$PST_TMP/text")" ||
	fail "text report's pool line: $(grep '^pool .*allocations served' "$PST_TMP/text")"
finish
