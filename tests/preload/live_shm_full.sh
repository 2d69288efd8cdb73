#!/bin/sh
# SPDX-License-Identifier: MIT
# A full /dev/shm must not kill the program: the live file's pages are
# reserved before they are written, and threads without room count in
# private memory.  In a private mount namespace /dev/shm is a 256 KiB tmpfs
# (room for the header and one counter block); 32 threads do counted I/O.
# The program exits 0, its exit report has every write, and it printed
# nothing unless POOLSHIM_VERBOSE asked (then one line).  In a 4 MiB one
# (room for 26 blocks) the shim leaves a quarter free for other programs.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/live_threads"

[ "$(id -u)" = 0 ] || skip "needs root for a private /dev/shm"
unshare -m sh -c 'mount -t tmpfs -o size=256k tmpfs /dev/shm' 2>/dev/null ||
	skip "no private mount namespace (unshare -m) or tmpfs mount here"

run_full() {  # run_full TAG SIZE VAR=VAL... -- ARGS: the helper under the shim in a small /dev/shm
	tag=$1 size=$2; shift 2
	vars=
	while [ "$1" != -- ]; do vars="$vars $1"; shift; done
	shift
	# shellcheck disable=SC2016,SC2086
	unshare -m sh -c 'mount -t tmpfs -o size=$0 tmpfs /dev/shm || exit 99
		exec env "$@"' "$size" $vars POOLSHIM_STATS_FORMAT=json \
		"POOLSHIM_STATS=$PST_TMP/$tag.json" LD_PRELOAD="$SHIM" "$H" "$@" \
		>"$PST_TMP/$tag.out" 2>"$PST_TMP/$tag.err"
}

run_full quiet 256k POOLSHIM_VERBOSE=0 -- 32 100
rc=$?
[ $rc = 0 ] && pass "32 threads in a full /dev/shm: exit status 0" ||
	fail "exit status $rc in a full /dev/shm (135 is SIGBUS) $(cat "$PST_TMP/quiet.err")"
n=$(json_get "$PST_TMP/quiet.json" "sum(c['calls'] for c in r['calls'] if c['call']=='write')" 2>/dev/null)
[ "$n" = 3200 ] && pass "exit report counts all 3200 writes" || fail "exit report has $n writes, want 3200"
[ ! -s "$PST_TMP/quiet.err" ] && [ ! -s "$PST_TMP/quiet.out" ] &&
	pass "nothing printed without POOLSHIM_VERBOSE" || fail "output: $(cat "$PST_TMP/quiet.err")"

run_full verbose 256k POOLSHIM_VERBOSE=1 -- 32 100
rc=$?
[ $rc = 0 ] || fail "verbose: exit status $rc"
lines=$(grep -c 'count in private memory' "$PST_TMP/verbose.err")
[ "$lines" = 1 ] && pass "verbose mode says so once" ||
	fail "verbose: $lines lines about private counting: $(cat "$PST_TMP/verbose.err")"

run_full share 4m POOLSHIM_VERBOSE=0 -- 32 10 --shm-free
rc=$?
free=$(sed -n 's/^shm free \([0-9]*\)%$/\1/p' "$PST_TMP/share.out")
[ $rc = 0 ] && [ -n "$free" ] && [ "$free" -ge 25 ] &&
	pass "a quarter of /dev/shm left to others ($free% free)" ||
	fail "status $rc, /dev/shm ${free:-?}% free with 32 threads, want 25% or more"
n=$(json_get "$PST_TMP/share.json" "sum(c['calls'] for c in r['calls'] if c['call']=='write')" 2>/dev/null)
[ "$n" = 320 ] || fail "4 MiB: exit report has $n writes, want 320"
finish
