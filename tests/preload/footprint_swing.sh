#!/bin/sh
# SPDX-License-Identifier: MIT
# In a 160 MiB memory cgroup, a live set of 110 MiB that swings between
# buffers of 1-3 MiB and buffers of 5-9 MiB, one buffer replaced at a time
# (tests/preload/footprint swing), runs to the end under the shim as it
# does without it, with THP and with 4 KiB pages.  Without the shim glibc
# peaks at ~133 MiB.  Before the pool arena merged free blocks across
# slabs and counted its cap against what is resident (issue 35), the shim
# was OOM-killed (137) in both page modes: the freed 1-3 MiB blocks could
# not serve a 5-9 MiB request, the pool read "full" on what it had mapped,
# and glibc's heap took the rest, two heaps' free memory under one limit.
# Skipped (77) where no memory cgroup can be made (see memory_cgroup).
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/footprint"
ROUNDS=8

memory_cgroup pst_swing $((160 * 1024 * 1024))
cg=$PST_CG

# run VARS...: footprint swing inside the cgroup; its exit status
run() {
	env "$@" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$1" swing "$2"' "$cg" "$F" "$ROUNDS" \
		>"$PST_TMP/out" 2>"$PST_TMP/err"
}
run -u LD_PRELOAD
rc=$?
[ $rc = 0 ] && pass "without the shim in 160 MiB: exit 0 ($(cat "$PST_TMP/out"))" ||
	fail "without the shim in 160 MiB: exit $rc (137: OOM-killed) $(cat "$PST_TMP/err")"
for hp in auto none; do
	run LD_PRELOAD="$SHIM" POOLSHIM_STATS=off POOLSHIM_LIVE=0 POOLSHIM_HUGEPAGES=$hp
	rc=$?
	[ $rc = 0 ] && pass "$hp: under the shim in 160 MiB: exit 0 ($(cat "$PST_TMP/out"))" ||
		fail "$hp: under the shim in 160 MiB: exit $rc (137: OOM-killed) $(cat "$PST_TMP/err")"
done
finish
