#!/bin/sh
# SPDX-License-Identifier: MIT
# In an 800 MiB memory cgroup, 16 buffers of 32 MiB written then freed
# (tests/preload/footprint) run to the end under the shim as without it,
# and the report names the limit it found.  Before the pool backed only
# what was asked for, the shim's 979 MiB got the program OOM-killed (137).
# cgroup v2 where this process's cgroup can have a child with the memory
# controller, else cgroup v1's memory hierarchy; skipped (77) without
# either (no root, no delegation).  Then, in 160 MiB, the pool gives its
# free memory back as the usage nears the limit (footprint pressure).
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/footprint"
LIMIT=$((800 * 1024 * 1024))

memory_cgroup pst_fp "$LIMIT"
cg=$PST_CG

# run VARS...: the program ($MODE) inside the cgroup; its exit status
MODE="big 16 32"
run() {
	env "$@" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$1" $2' "$cg" "$F" "$MODE" \
		>"$PST_TMP/out" 2>"$PST_TMP/err"
}
run -u LD_PRELOAD
rc=$?
[ $rc = 0 ] || skip "the program alone exits $rc in the cgroup: $(cat "$PST_TMP/err")"
run LD_PRELOAD="$SHIM" POOLSHIM_STATS="$PST_TMP/r.json" POOLSHIM_LIVE=0
rc=$?
[ $rc = 0 ] && pass "under the shim in 800 MiB: exit 0 ($(cat "$PST_TMP/out"))" ||
	fail "under the shim in 800 MiB: exit $rc (137: OOM-killed)"
if [ -s "$PST_TMP/r.json" ]; then
	found=$(json_get "$PST_TMP/r.json" "r['pool']['cgroup_limit']")
	[ "$found" = "$LIMIT" ] && pass "the report names the cgroup's limit ($found)" ||
		fail "the report's cgroup_limit is $found, not $LIMIT"
else
	fail "no report"
fi

# Following the usage near the limit (issue 35): in 160 MiB, 24 buffers of
# 4 MiB with every third freed (32 MiB the pool keeps: less than in use),
# then 4 of 16 MiB.  Without the shim the peak is 132 MiB.  Before, the
# pool kept its free 32 MiB and the program was OOM-killed (137), THP or
# not; now it gives its free memory back as the usage nears the limit, and
# at its cap (seven eighths of the limit, counted resident) before it would
# leave a request to glibc's heap: peak 134 MiB, no fallback.
LIMIT=$((160 * 1024 * 1024))
if [ -f "$cg/memory.max" ]; then
	echo "$LIMIT" >"$cg/memory.max"
else
	echo "$LIMIT" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null
	echo "$LIMIT" >"$cg/memory.limit_in_bytes"
	echo "$LIMIT" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null
fi
MODE=pressure
run -u LD_PRELOAD
rc=$?
if [ $rc != 0 ]; then
	echo "the pressure program alone exits $rc in 160 MiB: not checked"
else
	for hp in auto none; do
		run LD_PRELOAD="$SHIM" POOLSHIM_STATS=off POOLSHIM_LIVE=0 POOLSHIM_HUGEPAGES=$hp
		rc=$?
		[ $rc = 0 ] && pass "$hp: near the 160 MiB limit, the pool gave back first: exit 0 ($(cat "$PST_TMP/out"))" ||
			fail "$hp: near the 160 MiB limit: exit $rc (137: OOM-killed)"
	done
fi
finish
