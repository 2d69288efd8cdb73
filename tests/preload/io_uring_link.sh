#!/bin/sh
# SPDX-License-Identifier: MIT
# An O_DIRECT write whose second chunk fails must leave the file as a
# plain pwrite would: the call returns the prefix, and nothing past it
# lands.  pwrite goes through io_uring as one SQE; pwritev as one SQE per
# segment, linked, which is what the vectored runs check.  On a full 8 MiB tmpfs (a private mount namespace; tmpfs takes
# O_DIRECT from Linux 6.6) a 4-chunk write over a file whose second chunk
# is a hole: chunks 1, 3 and 4 overwrite blocks already there, chunk 2
# needs new ones and gets ENOSPC (or only part of them, with 128 KiB
# spare).  The result and the file's blocks must match a run without the
# shim; before the fix chunks 3 and 4 landed anyway.
. "$PS_TOP_SRCDIR/tests/preload/io_uring_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to mount a small tmpfs"
command -v unshare >/dev/null || skip "no unshare(1)"
unshare -m true 2>/dev/null || skip "cannot make a mount namespace here"

# run_fs NAME SPARE VAR=VAL ...: the link mode on a fresh tmpfs
run_fs() {
	name=$1; spare=$2; shift 2
	M="$PST_TMP/mnt-$name"
	mkdir -p "$M"
	timeout -s KILL 30 unshare -m sh -c \
		'mount -t tmpfs -o size=8m,mode=0700 pstlink "$1" || exit 78; m=$1; shift; exec env PST_IO_DIR="$m" "$@"' \
		sh "$M" POOLSHIM_URING_CHUNK=256K POOLSHIM_LIVE=0 POOLSHIM_STATS=off "$@" \
		"$P" link "$spare" >"$PST_TMP/$name.out" 2>&1
	rc=$?
	case $rc in
	0) ;;
	77) skip "O_DIRECT on tmpfs needs Linux 6.6: $(cat "$PST_TMP/$name.out")" ;;
	78) skip "cannot mount a tmpfs here: $(cat "$PST_TMP/$name.out")" ;;
	*) fail "$name: exit $rc: $(cat "$PST_TMP/$name.out")" ;;
	esac
	sed -n 's/^link: \(ret \)/\1/p' "$PST_TMP/$name.out"
}

for vec in 0 1; do
	for spare in 0 131072; do
		v=${vec#0}
		call=pwrite; [ "$vec" = 1 ] && call=pwritev
		want=$(run_fs "plain-$spare-$vec" $spare POOLSHIM=off ${v:+PST_LINK_VEC=1})
		got=$(run_fs "shim-$spare-$vec" $spare LD_PRELOAD="$SHIM" ${v:+PST_LINK_VEC=1})
		echo "$call, spare $spare, without the shim: $want"
		echo "$call, spare $spare, under the shim:   $got"
		[ -n "$want" ] && [ "$got" = "$want" ] &&
			pass "$call, spare $spare: the same return, size and blocks as without the shim" ||
			fail "$call, spare $spare: under the shim '$got', without it '$want'"
	done
done
finish
