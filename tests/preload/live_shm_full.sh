#!/bin/sh
# SPDX-License-Identifier: MIT
# A full /dev/shm must not kill the program: the live file's pages are
# reserved before they are written, and threads without room count in
# private memory.  In a private mount namespace /dev/shm is a 256 KiB tmpfs
# (room for the header and one counter block); 32 threads do counted I/O.
# The program exits 0, its exit report has every write, and it printed
# nothing unless POOLSHIM_VERBOSE asked (then one line).
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/live_threads"

[ "$(id -u)" = 0 ] || skip "needs root for a private /dev/shm"
unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs /dev/shm' 2>/dev/null ||
	skip "no private mount namespace (unshare -m) or tmpfs mount here"

run_full() {  # run_full TAG VAR=VAL...: the helper under the shim in a full /dev/shm
	tag=$1; shift
	# shellcheck disable=SC2016
	unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs /dev/shm || exit 99
		exec env "$@"' sh "$@" POOLSHIM_STATS_FORMAT=json \
		"POOLSHIM_STATS=$PST_TMP/$tag.json" LD_PRELOAD="$SHIM" "$H" 32 100 \
		>"$PST_TMP/$tag.out" 2>"$PST_TMP/$tag.err"
}

run_full quiet POOLSHIM_VERBOSE=0
rc=$?
[ $rc = 0 ] && pass "32 threads in a full /dev/shm: exit status 0" ||
	fail "exit status $rc in a full /dev/shm (135 is SIGBUS) $(cat "$PST_TMP/quiet.err")"
n=$(json_get "$PST_TMP/quiet.json" "sum(c['calls'] for c in r['calls'] if c['call']=='write')" 2>/dev/null)
[ "$n" = 3200 ] && pass "exit report counts all 3200 writes" || fail "exit report has $n writes, want 3200"
[ ! -s "$PST_TMP/quiet.err" ] && [ ! -s "$PST_TMP/quiet.out" ] &&
	pass "nothing printed without POOLSHIM_VERBOSE" || fail "output: $(cat "$PST_TMP/quiet.err")"

run_full verbose POOLSHIM_VERBOSE=1
rc=$?
[ $rc = 0 ] || fail "verbose: exit status $rc"
lines=$(grep -c 'count in private memory' "$PST_TMP/verbose.err")
[ "$lines" = 1 ] && pass "verbose mode says so once" ||
	fail "verbose: $lines lines about private counting: $(cat "$PST_TMP/verbose.err")"
finish
