#!/bin/sh
# SPDX-License-Identifier: MIT
# RLIMIT_AS low enough that allocations fail (tests/preload/alloc_rlimit):
# set before start (ulimit -v) and lowered at run time, under the shim's
# default and 4k pools.  Allocations fail with ENOMEM from the right calls,
# never a crash; the report still comes out and says what happened.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/alloc_rlimit"
run() {  # run NAME ULIMIT_KIB ARG VARS...
	name=$1 lim=$2 arg=$3
	shift 3
	j="$PST_TMP/$name.json"
	env "$@" POOLSHIM_STATS="$j" LD_PRELOAD="$SHIM" \
		sh -c "${lim:+ulimit -v $lim; }exec \"\$0\" $arg" "$P" >"$PST_TMP/out" 2>"$PST_TMP/err"
	rc=$?
	[ $rc = 77 ] && skip "$(cat "$PST_TMP/err")"
	if [ $rc = 0 ] && grep -q '^rlimit ok' "$PST_TMP/out"; then
		pass "$name: $(grep -c '^round' "$PST_TMP/out") rounds to the limit, $(sed -n 's/^rlimit ok //p' "$PST_TMP/out") failed calls, all ENOMEM"
	else
		fail "$name: exit $rc: $(tail -3 "$PST_TMP/err")"
		return
	fi
	if python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$j"; then
		pass "$name: report written (pool $(json_get "$j" "r['pool']['mode']"), fallbacks $(json_get "$j" "r['pool']['fallbacks']"))"
	else
		fail "$name: no valid report"
	fi
}
# Without the shim first: the program's expectations are the kernel's and glibc's.
env -u LD_PRELOAD sh -c 'ulimit -v 400000; exec "$0"' "$P" >"$PST_TMP/out" 2>"$PST_TMP/err" &&
	pass "without the shim" || fail "without the shim: $(tail -3 "$PST_TMP/err")"
run start-limit 400000 "" POOLSHIM_POOL_SIZE=4G
# Under the limit the reservation grows as slabs need it (pool.c), never ahead.
mode=$(json_get "$PST_TMP/start-limit.json" "r['pool']['mode']")
reserve=$(json_get "$PST_TMP/start-limit.json" "r['pool']['reserve'] >> 20")
[ "$mode" != unavailable ] && [ "$reserve" -gt 0 ] && [ "$reserve" -lt 400 ] &&
	pass "start-limit: pool usable under ulimit -v (reserve $reserve MiB, mode $mode)" ||
	fail "start-limit: pool $mode, reserve $reserve MiB under a 390 MiB limit"
run start-limit-small-pool 400000 "" POOLSHIM_POOL_SIZE=64M
run runtime-limit "" runtime
run runtime-limit-4k "" runtime POOLSHIM_HUGEPAGES=none
finish
