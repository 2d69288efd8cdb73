#!/bin/sh
# SPDX-License-Identifier: MIT
# Every I/O test program run without the shim must pass: their
# expectations are the kernel's and glibc's, not the shim's.  (A test
# that fails here is wrong, not the shim.)
. "$PS_TOP_SRCDIR/tests/lib.sh"
skipped=0
for p in io_direct io_fork io_signals io_sockets io_errno io_kinds; do
	env -u LD_PRELOAD PST_IO_SCALE=0.25 "$PRELOAD_BIN/$p" >"$PST_TMP/$p.out" 2>&1
	case $? in
	0) pass "$p without the shim" ;;
	77) skipped=$((skipped + 1)); echo "$p skipped" ;;
	*) fail "$p without the shim: $(tail -5 "$PST_TMP/$p.out")" ;;
	esac
done
"$PRELOAD_BIN/io_fortify" ok >"$PST_TMP/f.out" 2>&1 && pass "io_fortify ok without the shim" || fail "io_fortify: $(cat "$PST_TMP/f.out")"
finish
