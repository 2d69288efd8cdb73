#!/bin/sh
# SPDX-License-Identifier: MIT
# The I/O doors' look at the clock may purge (issue 44's decay in time),
# and a door may run in a signal handler that interrupted the pool's own
# calls: there it must not wait for a lock its own thread holds.  Pooled
# mallocs and frees run for 2 s with a decay window of 1 ms while SIGALRM,
# every 100 us, write()s from its handler; the program ends, with the pool
# purging now and then.  With the page placement and the jemalloc one,
# counted doors (every call looks) and quiet ones.  Checked: with the
# poll's purge waiting for the locks as a pooled call's does (blocks.c's
# lock taken plainly, no in_je test), every run hangs here.
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/pool_fit"
JE="$PS_TOP_BUILDDIR/.libs/libpoolshim-jemalloc.so"

run() {  # run NAME LIB VAR=VAL...
	name=$1 lib=$2
	shift 2
	out=$(timeout 60 env POOLSHIM_POOL_DECAY_MS=1 POOLSHIM_LIVE=0 "$@" LD_PRELOAD="$lib" \
		"$F" signals 2000)
	rc=$?
	if [ $rc = 0 ] && [ "${out#signals ok }" -gt 0 ] 2>/dev/null; then
		pass "$name: $out"
	elif [ $rc = 124 ]; then
		fail "$name: still running after 60 s (a purge waiting in a signal handler?)"
	else
		fail "$name: exit $rc: $out"
	fi
}
run "pages, counted doors" "$SHIM" POOLSHIM_STATS=/dev/null POOLSHIM_TIMING_SAMPLE=1
run "pages, quiet doors" "$SHIM" POOLSHIM_STATS=off
if [ -e "$JE" ]; then
	run "jemalloc, counted doors" "$JE" POOLSHIM_POOL_ALLOCATOR=jemalloc \
		POOLSHIM_STATS=/dev/null POOLSHIM_TIMING_SAMPLE=1
	run "jemalloc, quiet doors" "$JE" POOLSHIM_POOL_ALLOCATOR=jemalloc POOLSHIM_STATS=off
fi
finish
