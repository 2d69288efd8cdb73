#!/bin/sh
# SPDX-License-Identifier: MIT
# A short program pays (almost) nothing for the shim's pool: one 128 KiB
# buffer, written and freed, costs a bounded number of page faults more than
# without the shim, and more than the same program with a 1000-byte buffer
# under the shim.  4 KiB pages (POOLSHIM_HUGEPAGES=none) make the count
# exact: a 2 MiB slab prefaulted for the buffer alone is 512 faults.  The
# report and live file are off: their cost is not the pool's.
# Measured on a 2-core VM (min of 5 runs): without the shim 73; under the
# shim 298 (a 1000-byte buffer: 231; POOLSHIM=0: 182, the cost of loading
# the library and its dependencies); before the pool was lazy: 765.
# Since jemalloc initialises with the pool arena (issue 26), a program that
# never pools pays 134 (59 over no shim, 158 before), and the first pooled
# buffer carries jemalloc's set-up: 161 faults over the 1000-byte program.
. "$PS_TOP_SRCDIR/tests/lib.sh"
F="$PRELOAD_BIN/alloc_faults"
MAX_EXTRA=320      # over no shim: loading ~110, start ~40, the buffer ~70
MAX_POOLED=200     # the first pooled buffer (and jemalloc's set-up) over a program that pools nothing
MAX_SMALL=100      # a program that never pools, over no shim

m() {  # m LIB VAR=VAL... -- PROG ARGS: fewest faults of 5 runs
	lib=$1; shift
	vars=
	while [ "$1" != -- ]; do vars="$vars $1"; shift; done
	shift
	# shellcheck disable=SC2086
	env $vars "$F" measure 5 "$lib" -- "$@" || fail "measure $*"
}
for mode in none auto; do
	v="POOLSHIM_HUGEPAGES=$mode POOLSHIM_STATS=off POOLSHIM_LIVE=0"
	# shellcheck disable=SC2086
	plain=$(m - -- "$F" buf 131072)
	# shellcheck disable=SC2086
	big=$(m "$SHIM" $v -- "$F" buf 131072)
	# shellcheck disable=SC2086
	small=$(m "$SHIM" $v -- "$F" buf 1000)
	echo "HUGEPAGES=$mode: no shim $plain, shim $big (1000-byte buffer: $small)"
	[ $((big - plain)) -le $MAX_EXTRA ] &&
		pass "$mode: one 128 KiB buffer: $((big - plain)) faults over no shim (<= $MAX_EXTRA)" ||
		fail "$mode: one 128 KiB buffer: $((big - plain)) faults over no shim (> $MAX_EXTRA)"
	[ $((small - plain)) -le $MAX_SMALL ] &&
		pass "$mode: a 1000-byte buffer: $((small - plain)) faults over no shim (<= $MAX_SMALL)" ||
		fail "$mode: a 1000-byte buffer: $((small - plain)) faults over no shim (> $MAX_SMALL)"
	[ $((big - small)) -le $MAX_POOLED ] &&
		pass "$mode: the pooled buffer costs $((big - small)) faults (<= $MAX_POOLED)" ||
		fail "$mode: the pooled buffer costs $((big - small)) faults (> $MAX_POOLED)"
done
finish
