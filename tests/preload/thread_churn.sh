#!/bin/sh
# SPDX-License-Identifier: MIT
# Thread counter blocks are reused (issue 25) and the report's thread count
# is the most threads counting at once (issue 27): 3000 short-lived
# threads, 10 at a time, cost about what they cost without the shim, with
# the report on and off, and process.threads is at most the threads alive.
# tests/preload/thread_churn.  Its threads' only counted calls are small
# mallocs, uncounted by default since issue 35: the runs count them
# (POOLSHIM_COUNT_SMALL=on), so that every thread claims a counter block.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/thread_churn"
N=3000

# peak_kb [VAR=VAL...] N: the churn's peak RSS (KiB) under env VAR=VAL..., its exit report included.
peak_kb() {
	env "$@" 2>/dev/null | sed -n 's/^peak_kb //p'
}

base=$(peak_kb "$P" -m $N)
few=$(peak_kb LD_PRELOAD="$SHIM" POOLSHIM_COUNT_SMALL=on POOLSHIM_STATS=stderr "$P" -m 20)
on=$(peak_kb LD_PRELOAD="$SHIM" POOLSHIM_COUNT_SMALL=on POOLSHIM_STATS=stderr "$P" -m $N)
off=$(peak_kb LD_PRELOAD="$SHIM" POOLSHIM_COUNT_SMALL=on POOLSHIM_STATS=off "$P" -m $N)
for v in "$base" "$few" "$on" "$off"; do
	[ -n "$v" ] || { fail "a churn run failed"; finish; }
done
echo "peak RSS KiB: no shim $base; shim, 20 threads $few; shim, $N threads: report on $on, off $off"
# The shim's own footprint is a few MiB whatever the threads; churn adds nothing that grows.
for v in "on:$on" "off:$off"; do
	kb=${v#*:}
	if [ "$kb" -lt $((3 * base + 8192)) ] && [ "$kb" -lt $((few + 4096)) ]; then
		pass "report ${v%%:*}: $N threads peak at $kb KiB (no shim $base, 20 threads $few)"
	else
		fail "report ${v%%:*}: $N threads peak at $kb KiB (no shim $base, 20 threads under the shim $few)"
	fi
done

# process.threads: at most the threads alive at once, at least two.
shim POOLSHIM_COUNT_SMALL=on POOLSHIM_STATS="$PST_TMP/r.json" POOLSHIM_STATS_FORMAT=json -- "$P" 600 >"$PST_TMP/out" ||
	fail "json run failed"
alive=$(sed -n 's/^alive_max //p' "$PST_TMP/out")
threads=$(json_get "$PST_TMP/r.json" 'r["process"]["threads"]')
if [ -n "$alive" ] && [ "$threads" -ge 2 ] && [ "$threads" -le "$alive" ]; then
	pass "process.threads $threads, at most $alive alive at once"
else
	fail "process.threads $threads for at most ${alive:-?} threads alive at once"
fi
finish
