#!/bin/sh
# SPDX-License-Identifier: MIT
# Aligned requests reuse freed blocks (issue 44): 1000 times
# posix_memalign(&p, ALIGN, 200000), every byte written, freed.  The peak
# RSS stays within 4 MiB of the same program without the shim, at 8 KiB,
# 64 KiB and 2 MiB alignment, with both placements.  Before (dc7ac00), on
# the 2-core VM: 2 MiB alignment 2.0 GB against glibc's 1.3 MB (each
# request took a slab of its own, the freed ones never fit), 8 KiB 203 MB,
# 64 KiB 258 MB.
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/pool_fit"
SLACK_KIB=$((4 * 1024))
JE="$PS_TOP_BUILDDIR/.libs/libpoolshim-jemalloc.so"

field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

for align in 8192 65536 2097152; do
	plain=$(env -u LD_PRELOAD "$F" aligned $align 1000 200000) || { fail "no shim: $plain"; continue; }
	p_peak=$(field "$plain" peak)
	for placement in pages jemalloc; do
		lib=$SHIM
		if [ $placement = jemalloc ]; then
			[ -e "$JE" ] || { echo "no $JE: the jemalloc placement is not checked"; continue; }
			lib=$JE
		fi
		for mode in auto none; do
			out=$(env POOLSHIM_HUGEPAGES=$mode POOLSHIM_POOL_ALLOCATOR=$placement \
				POOLSHIM_STATS=off POOLSHIM_LIVE=0 LD_PRELOAD="$lib" \
				"$F" aligned $align 1000 200000) || { fail "$placement $mode $align: $out"; continue; }
			peak=$(field "$out" peak)
			what="align $align, $placement, hugepages $mode: peak $peak KiB, no shim $p_peak KiB"
			[ "$peak" -le $((p_peak + SLACK_KIB)) ] &&
				pass "$what (<= +4 MiB)" || fail "$what (> +4 MiB)"
		done
	done
done
finish
