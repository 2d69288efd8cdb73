#!/bin/sh
# SPDX-License-Identifier: MIT
# In an 800 MiB memory cgroup, 16 buffers of 32 MiB written then freed
# (tests/preload/footprint) run to the end under the shim as without it,
# and the report names the limit it found.  Before the pool backed only
# what was asked for, the shim's 979 MiB got the program OOM-killed (137).
# cgroup v2 where this process's cgroup can have a child with the memory
# controller, else cgroup v1's memory hierarchy; skipped (77) without
# either (no root, no delegation).
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/footprint"
LIMIT=$((800 * 1024 * 1024))

memory_cgroup pst_fp "$LIMIT"
cg=$PST_CG

# run VARS...: the program inside the cgroup; its exit status
run() {
	env "$@" sh -c 'echo $$ >"$0/cgroup.procs" && exec "$1" big 16 32' "$cg" "$F" \
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
finish
