#!/bin/sh
# SPDX-License-Identifier: MIT
# Kernels before 6.3 (Debian 12 has 6.1) cannot reach a ring by registered
# index in io_uring_register(2), so each ring keeps its descriptor;
# POOLSHIM_URING_TEST=keepfd makes the test build of the shim behave so on
# any kernel.  The program closes every ring descriptor and dup2s its own
# file onto those numbers (a close-all loop, then a reuse); the ring's
# thread then exits, or forks.  The shim must close nothing of the
# program's, and its descriptors must sit high (F_DUPFD_CLOEXEC), not at
# the number the program's next open() gets.
. "$PS_TOP_SRCDIR/tests/preload/io_uring_lib.sh"
hook_case keepfd POOLSHIM_URING_TEST=keepfd POOLSHIM_URING_CHUNK=256K -- keepfd
grep -q 'descriptor(s): [0-9]' "$PST_TMP/keepfd.out" ||
	fail "keepfd: no ring descriptor was kept, the old-kernel path was not exercised: $(cat "$PST_TMP/keepfd.out")"
# The normal path on this kernel, for comparison (no descriptor where >= 6.3).
ucase default POOLSHIM_URING_CHUNK=256K -- keepfd
finish
