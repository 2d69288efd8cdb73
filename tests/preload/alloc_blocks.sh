#!/bin/sh
# SPDX-License-Identifier: MIT
# The page-exact placement through the shim (tests/preload/alloc_blocks.c):
# a pointer inside a pooled block, freed or reallocated, ends the program
# with SIGABRT and a message that names the call and the pointer (ps_log
# has no %p: the message used to print "%p").
. "$PS_TOP_SRCDIR/tests/lib.sh"
B="$PRELOAD_BIN/alloc_blocks"
V="POOLSHIM_HUGEPAGES=none POOLSHIM_STATS=off POOLSHIM_LIVE=0 POOLSHIM_POOL_ALLOCATOR=pages"

for call in free realloc; do
	out=$(shim $V -- "$B" bad$call 2>"$PST_TMP/err")
	rc=$?
	ptr=$(echo "$out" | head -n 1)
	if [ $rc = 134 ] && grep -q "$call(): invalid pointer $ptr" "$PST_TMP/err"; then
		pass "bad $call: SIGABRT, and the message names $ptr"
	else
		fail "bad $call: exit $rc, pointer $ptr, stderr: $(cat "$PST_TMP/err")"
	fi
done

finish
