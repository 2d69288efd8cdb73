#!/bin/sh
# SPDX-License-Identifier: MIT
# fork() from one thread while others take the pool lock near the cap
# (tests/preload/fork_pool.c): no child may inherit the lock held.  The
# test build's PS_TEST_POOL_DELAY_US holds the lock for 1 ms per slab
# request, so that without the pool's fork handlers most forks land inside
# it.  The whole run is under a timeout: a deadlock in the parent (fork
# handlers in the wrong order) fails too.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/fork_pool"
need_test_hooks
out=$(shim_test POOLSHIM_POOL_SIZE=8M POOLSHIM_HUGEPAGES=none POOLSHIM_STATS=off POOLSHIM_LIVE=0 \
	PS_TEST_POOL_DELAY_US=1000 -- timeout 60 "$P" 40 3 2>&1)
rc=$?
case $rc in
0) pass "$out" ;;
124) fail "the parent hung (timeout): $out" ;;
*) fail "exit $rc: $out" ;;
esac
finish
