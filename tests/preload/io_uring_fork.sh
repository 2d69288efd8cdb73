#!/bin/sh
# SPDX-License-Identifier: MIT
# Children made by _Fork() and by a raw clone() syscall run no atfork
# handler: they inherit the forking thread's ring, whose memory is shared
# with the parent.  Each child does O_DIRECT writes and reads next to its
# parent; both must see their own data, the child must get a ring of its
# own (no fallback), and the parent's ring must keep working.  Again with
# the rings keeping their descriptors (the test build's keepfd).
. "$PS_TOP_SRCDIR/tests/preload/io_uring_lib.sh"
ucase fork POOLSHIM_URING_CHUNK=256K -- fork
hook_case fork-keepfd POOLSHIM_URING_TEST=keepfd POOLSHIM_URING_CHUNK=256K -- fork
finish
