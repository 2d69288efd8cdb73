#!/bin/sh
# SPDX-License-Identifier: MIT
# Decay in time whatever the program does next (issue 44): 16 buffers of
# 32 MiB written and freed (the retention keeps up to 256 MiB of them),
# then only a 200-byte malloc and a 4 KiB write every 10 ms for 2 s (and
# 256 writes at least), with a window of 400 ms.  The I/O doors look at the clock every few dozen
# calls, so what the pool kept goes back within the window and those
# calls: at the end the RSS is within 64 MiB of the same program without
# the shim.  With the counters read (the counted doors), with none read
# (the quiet doors), with timing off, and with both placements.  Before
# (dc7ac00) decay ran only at the next pooled call: 225 MB stayed.
# Then 64 buffers of 2 MiB, small enough for the CPUs' caches, which the
# poll flushes without waiting for a lock: within 16 MiB of no shim (before
# the poll flushed them, 32 MiB a CPU stayed cached for ever: 35 MiB on 1).
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/pool_fit"
SLACK_KIB=$((64 * 1024))
JE="$PS_TOP_BUILDDIR/.libs/libpoolshim-jemalloc.so"

field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

baseline() {
	plain=$(env -u LD_PRELOAD "$F" quiet $SHAPE 2000) || fail "no shim: $plain"
	p_later=$(field "$plain" later)
	echo "no shim ($SHAPE): $plain"
}
run() {  # run NAME LIB VAR=VAL...
	name=$1 lib=$2
	shift 2
	out=$(env POOLSHIM_POOL_DECAY_MS=400 POOLSHIM_STATS=/dev/null "$@" LD_PRELOAD="$lib" \
		"$F" quiet $SHAPE 2000) || { fail "$name: $out"; return; }
	free=$(field "$out" free) later=$(field "$out" later)
	what="$name: $free KiB after the frees, $later KiB 2 s later (no shim $p_later KiB)"
	[ "$later" -le $((p_later + SLACK_KIB)) ] && pass "$what" ||
		fail "$what: over +$((SLACK_KIB / 1024)) MiB"
}

SHAPE="16 32"
baseline
run "counted" "$SHIM"
run "counted, 4 KiB pages" "$SHIM" POOLSHIM_HUGEPAGES=none
run "timing off" "$SHIM" POOLSHIM_TIMING=off
run "quiet doors" "$SHIM" POOLSHIM_STATS=off POOLSHIM_LIVE=0
if [ -e "$JE" ]; then
	run "jemalloc placement" "$JE" POOLSHIM_POOL_ALLOCATOR=jemalloc
	run "jemalloc placement, quiet doors" "$JE" POOLSHIM_POOL_ALLOCATOR=jemalloc \
		POOLSHIM_STATS=off POOLSHIM_LIVE=0
fi
SHAPE="64 2" SLACK_KIB=$((16 * 1024))
baseline
run "cached: counted" "$SHIM"
run "cached: quiet doors" "$SHIM" POOLSHIM_STATS=off POOLSHIM_LIVE=0
finish
