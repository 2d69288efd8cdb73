#!/bin/sh
# SPDX-License-Identifier: MIT
# malloc_trim(0) as a program's first act returns what it returns without
# the shim, with the report on and off (issue 35: a thread-exit
# registration at start allocated from glibc's heap, and it returned 1).
. "$PS_TOP_SRCDIR/tests/lib.sh"
T="$PRELOAD_BIN/trim_start"
want=$("$T")
for v in POOLSHIM_STATS=stderr POOLSHIM_STATS=off POOLSHIM_RUN=trimtest; do
	got=$(shim "$v" -- "$T" 2>/dev/null)
	[ "$got" = "$want" ] && pass "malloc_trim(0) at start: $got, as without the shim ($v)" ||
		fail "malloc_trim(0) at start: $got under the shim ($v), $want without"
done
finish
