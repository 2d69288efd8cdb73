#!/bin/sh
# SPDX-License-Identifier: MIT
# io_uring_enter(2) may take fewer SQEs than were queued (out of memory for
# requests, an SQE it rejects).  The test build's POOLSHIM_URING_TEST makes
# it do so: with short_submit the kernel takes one SQE of each wave at first
# and the rest when asked again; with stuck_submit it takes one and then
# none.  Calls of 8 chunks must finish with the right data either way
# (before the fix the reap loop waited for completions that could never
# come: a hang).
. "$PS_TOP_SRCDIR/tests/preload/io_uring_lib.sh"
hook_case short POOLSHIM_URING_TEST=short_submit POOLSHIM_URING_CHUNK=256K -- submit
grep -q 'fallbacks: setup 0 error 0' "$PST_TMP/short.out" ||
	fail "short: calls left the ring: $(grep SQEs "$PST_TMP/short.out")"
hook_case stuck POOLSHIM_URING_TEST=stuck_submit POOLSHIM_URING_CHUNK=256K -- submit
grep -q 'fallbacks: setup [0-9]* error [1-9]' "$PST_TMP/stuck.out" ||
	fail "stuck: the unsubmitted chunks were not counted as a fallback: $(grep SQEs "$PST_TMP/stuck.out")"
ucase plain POOLSHIM_URING_CHUNK=256K -- submit
finish
