#!/bin/sh
# SPDX-License-Identifier: MIT
# A length that runs past the end of a pooled buffer by wrapping the
# address arithmetic (buffer offset + length overflows 64 bits) must get
# what the system call gives (EFAULT), from pread, pwrite and preadv, as
# without the shim.  Before the fix the bounds check wrapped and the shim
# returned 0.
. "$PS_TOP_SRCDIR/tests/preload/io_uring_lib.sh"
ucase bounds -- bounds
# Without the shim: the same lines (the program compares with syscall(2) itself).
POOLSHIM=off "$P" bounds >"$PST_TMP/off.out" 2>&1 || fail "POOLSHIM=off: $(cat "$PST_TMP/off.out")"
grep '^bounds: pread' "$PST_TMP/bounds.out" >"$PST_TMP/a"
grep '^bounds: pread' "$PST_TMP/off.out" >"$PST_TMP/b"
cmp -s "$PST_TMP/a" "$PST_TMP/b" && pass "same results as without the shim" ||
	fail "results differ from a run without the shim: $(diff "$PST_TMP/b" "$PST_TMP/a" | tr '\n' ' ')"
finish
