#!/bin/sh
# SPDX-License-Identifier: MIT
# pread is async-signal-safe: a SIGALRM handler does O_DIRECT preads on a
# pooled buffer every 2 ms while the thread it interrupts does 4 MiB ones
# (split into chunks) through its ring.  Every read of both must be right,
# and the handler's reads must have gone the plain way, counted as
# "nested" fallbacks.  Before the fix the handler submitted to and reaped
# from the busy ring: every read returned wrong bytes, or the program hung.
. "$PS_TOP_SRCDIR/tests/preload/io_uring_lib.sh"
ucase nested POOLSHIM_URING_CHUNK=1M -- nested
ucase nested-depth1 POOLSHIM_URING_CHUNK=256K POOLSHIM_URING_DEPTH=1 -- nested
# The control: the same program without io_uring.
ucase uring-off POOLSHIM_URING=off -- nested
finish
