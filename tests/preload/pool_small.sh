#!/bin/sh
# SPDX-License-Identifier: MIT
# A small threshold takes no slab count (issue 44): with
# POOLSHIM_POOL_MIN=4K, 70000 blocks of 4 KiB, all kept live (so the top of
# the pool is always a live block), are all pooled, with no fallback.
# Before (dc7ac00) each took a slab of its own, and past 65535 slabs the
# rest fell back to glibc's heap counted as no_address_space, which was not
# the reason.  Under a 64 MiB cap the fallbacks are pool_full, and nothing
# else.  A realloc past the largest slab falls back as too_large (with the
# jemalloc placement it was counted pool_full).  With both placements.
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/pool_fit"
JE="$PS_TOP_BUILDDIR/.libs/libpoolshim-jemalloc.so"
N=70000

# check NAME JSON WANT [N]: WANT is "none" (all N pooled) or the one reason of the fallbacks
check() {
	python3 - "$2" "$3" "${4:-$N}" <<'PY' && pass "$1" || fail "$1"
import json, sys
pool = json.load(open(sys.argv[1]))["pool"]
want, n = sys.argv[2], int(sys.argv[3])
fb = pool["fallbacks"]
print("  allocations %d, slabs %d, fallbacks %s" % (pool["allocations"], pool["slabs"], fb))
others = {k: v for k, v in fb.items() if k != want and v}
if others:
    sys.exit("fallbacks under another reason: %s" % others)
if want == "none":
    sys.exit(0 if pool["allocations"] >= n else "only %d of %d pooled" % (pool["allocations"], n))
sys.exit(0 if fb[want] > 0 and pool["allocations"] + fb[want] >= n else "no %s fallback" % want)
PY
}

for placement in pages jemalloc; do
	lib=$SHIM
	if [ $placement = jemalloc ]; then
		[ -e "$JE" ] || { echo "no $JE: the jemalloc placement is not checked"; continue; }
		lib=$JE
	fi
	out=$(env POOLSHIM_POOL_MIN=4K POOLSHIM_POOL_ALLOCATOR=$placement POOLSHIM_LIVE=0 \
		POOLSHIM_STATS="$PST_TMP/all.json" LD_PRELOAD="$lib" "$F" small $N 4096) ||
		fail "$placement: $out"
	check "$placement: $N blocks of 4 KiB at POOLSHIM_POOL_MIN=4K, all pooled" "$PST_TMP/all.json" none
	out=$(env POOLSHIM_POOL_MIN=4K POOLSHIM_POOL_SIZE=64M POOLSHIM_POOL_ALLOCATOR=$placement \
		POOLSHIM_LIVE=0 POOLSHIM_STATS="$PST_TMP/cap.json" LD_PRELOAD="$lib" "$F" small $N 4096) ||
		fail "$placement: $out"
	check "$placement: under a 64 MiB cap the fallbacks are pool_full" "$PST_TMP/cap.json" pool_full
	out=$(env POOLSHIM_POOL_ALLOCATOR=$placement POOLSHIM_LIVE=0 POOLSHIM_STATS="$PST_TMP/grow.json" \
		LD_PRELOAD="$lib" "$F" grow) || fail "$placement: grow: $out"
	check "$placement: a realloc to 1.5 GiB falls back as too_large" "$PST_TMP/grow.json" too_large 2
done
finish
