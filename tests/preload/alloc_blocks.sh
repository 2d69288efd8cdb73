#!/bin/sh
# SPDX-License-Identifier: MIT
# The page-exact placement through the shim (tests/preload/alloc_blocks.c):
# - a pointer inside a pooled block, freed or reallocated, ends the program
#   with SIGABRT and a message that names the call and the pointer;
# - a block resized in place counts what it took or gave back for the purge
#   policy: a block grown by realloc and freed while more than it stays
#   live is kept, as the same block from malloc is; the tail a shrink gave
#   back is purged under POOLSHIM_POOL_RETAIN, as the same memory freed
#   whole is.  (The policy used to count the block's size at malloc only.);
# - at the pool's cap with freed memory kept, a realloc that must move
#   purges and stays in the pool, as a malloc of its size does (it used to
#   go to glibc's heap);
# - a child forked while another thread sets the pool up (its first pooled
#   request) pools its own requests: 60 runs of 40 forks each, timed by
#   chance.  Before, such a child never pooled (marked as if jemalloc were
#   half made, which the page placement never starts): about one run in
#   ten had one, so 60 runs missed it about once in 500.
. "$PS_TOP_SRCDIR/tests/lib.sh"
B="$PRELOAD_BIN/alloc_blocks"
V="POOLSHIM_HUGEPAGES=none POOLSHIM_STATS=off POOLSHIM_LIVE=0 POOLSHIM_POOL_ALLOCATOR=pages"

for how in free realloc "realloc small"; do
	call=${how% *}
	out=$(shim $V -- "$B" bad$how 2>"$PST_TMP/err")
	rc=$?
	ptr=$(echo "$out" | head -n 1)
	if [ $rc = 134 ] && grep -q "$call(): invalid pointer $ptr" "$PST_TMP/err"; then
		pass "bad $how: SIGABRT, and the message names $ptr"
	else
		fail "bad $how: exit $rc, pointer $ptr, stderr: $(cat "$PST_TMP/err")"
	fi
done

P="$V POOLSHIM_POOL_RETAIN=16M POOLSHIM_POOL_DECAY_MS=0"
fresh=$(shim $P -- "$B" freed fresh)
grown=$(shim $P -- "$B" freed grown)
if [ "$fresh" = 64 ] && [ "$grown" = 64 ]; then
	pass "a freed block under the live size stays resident, grown by realloc or not"
else
	fail "freed block resident MiB: from malloc $fresh, grown by realloc $grown (64 each)"
fi
moved=$(shim $P -- "$B" tail moved)
shrunk=$(shim $P -- "$B" tail shrunk)
if [ "$moved" = 0 ] && [ "$shrunk" = 0 ]; then
	pass "199 MiB given back by a shrink is purged, as when freed whole"
else
	fail "resident MiB of the 199 MiB given back: freed whole $moved, shrunk in place $shrunk (0 each)"
fi
C="$V POOLSHIM_POOL_SIZE=64M POOLSHIM_POOL_RETAIN=1G POOLSHIM_POOL_DECAY_MS=0"
m=$(shim $C -- "$B" cap malloc)
r=$(shim $C -- "$B" cap realloc)
if [ "$m" = 1 ] && [ "$r" = 1 ]; then
	pass "at the cap, a moving realloc purges and stays pooled, as malloc does"
else
	fail "at the cap, pooled: malloc $m, realloc $r (1 each)"
fi
n=0
bad=0
while [ $n -lt 60 ] && [ "$bad" = 0 ]; do
	bad=$(shim $V -- "$B" forks) || { fail "forks: exit $?"; break; }
	n=$((n + 1))
done
[ "$bad" = 0 ] && pass "children forked while the pool was set up pool ($n runs)" ||
	fail "run $n: $bad of 40 children forked while the pool was set up never pooled"
finish
