#!/bin/sh
# SPDX-License-Identifier: MIT
# The page placement's arenas (POOLSHIM_POOL_ARENAS, issue 44): a threaded
# program gives the same output without the shim, with one arena (one lock
# for every thread, as before arenas), with 8 and with 64, and with 8 in a
# pool that fills (the cap bounds the pool, not each arena): xz -T4, whose
# threads allocate their encoders' buffers (pooled) and free them on other
# threads, then the output decompressed.  Each run under the shim writes
# nothing on stderr and its report names the setting (a shim that does not
# read the variable says it ignored an unknown one); a value out of range
# is refused with a message, and the program's output is the same.
. "$PS_TOP_SRCDIR/tests/lib.sh"
command -v xz >/dev/null || skip "no xz"
seq 1 4000000 | head -c 24000000 >"$PST_TMP/in"
env -u LD_PRELOAD xz -T4 -3 -c "$PST_TMP/in" >"$PST_TMP/plain.xz" || fail "xz without the shim"
want=$(cksum <"$PST_TMP/plain.xz")

# run NAME VARS...: xz under the shim with VARS; its output's cksum in $got, its report in $j.
run() {
	name=$1
	shift
	j="$PST_TMP/$name.json"
	env "$@" LD_PRELOAD="$SHIM" POOLSHIM_STATS="$j" POOLSHIM_STATS_FORMAT=json \
		xz -T4 -3 -c "$PST_TMP/in" >"$PST_TMP/$name.xz" 2>"$PST_TMP/$name.err"
	rc=$?
	got=$(cksum <"$PST_TMP/$name.xz")
	[ $rc = 0 ] && [ "$got" = "$want" ] &&
		pass "$name: the same output as without the shim" ||
		fail "$name: exit $rc, output $got, without the shim $want"
	env -u LD_PRELOAD xz -dc "$PST_TMP/$name.xz" | cmp -s - "$PST_TMP/in" ||
		fail "$name: the output does not decompress to the input"
}

for k in 1 8 64; do
	run "arenas$k" POOLSHIM_POOL_ARENAS=$k
	[ -s "$PST_TMP/arenas$k.err" ] && fail "arenas$k: stderr: $(head -c 500 "$PST_TMP/arenas$k.err")"
	seen=$(json_get "$j" "r['config']['POOLSHIM_POOL_ARENAS']" 2>/dev/null)
	served=$(json_get "$j" "r['pool']['allocations']")
	[ "$seen" = "$k" ] && [ "$served" -gt 0 ] &&
		pass "arenas$k: the report says POOLSHIM_POOL_ARENAS=$seen; $served pooled allocations" ||
		fail "arenas$k: the report says POOLSHIM_POOL_ARENAS=${seen:-nothing}, $served pooled allocations"
done

# An 8 MiB pool: the arenas fill it together, the rest goes to glibc's heap.
run capped POOLSHIM_POOL_ARENAS=8 POOLSHIM_POOL_SIZE=8M
[ -s "$PST_TMP/capped.err" ] && fail "capped: stderr: $(head -c 500 "$PST_TMP/capped.err")"
full=$(json_get "$j" "r['pool']['fallbacks']['pool_full']")
[ "$full" -gt 0 ] && pass "capped: $full requests past the 8 MiB cap went to glibc's heap" ||
	fail "capped: no pool_full fallback in an 8 MiB pool (want some)"

run badvalue POOLSHIM_POOL_ARENAS=65
grep -q "POOLSHIM_POOL_ARENAS='65' is out of range" "$PST_TMP/badvalue.err" &&
	pass "POOLSHIM_POOL_ARENAS=65 is refused with a message" ||
	fail "POOLSHIM_POOL_ARENAS=65: stderr $(head -c 500 "$PST_TMP/badvalue.err")"
finish
