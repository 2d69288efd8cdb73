#!/bin/sh
# SPDX-License-Identifier: MIT
# Records are untrusted input (issue 45): a short run of the reader fuzz
# (tests/tools/fuzz_records.py) on a killed dd's record, through
# `poolshim stat`, `stat --prometheus`, `collect --into` and `collect`, as
# root with the records nobody's.  A crash, a hang past 20 s or, in the
# sanitizer build (--enable-sanitizers instruments the tools; .ci/run's
# second leg runs this test, with ten times the records), any ASan or
# UBSan report fails it.  PS_FUZZ_COUNT sets the number of records.
. "$PS_TOP_SRCDIR/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (the records are made nobody's)"
count=${PS_FUZZ_COUNT:-150}
[ -z "${PS_SANITIZERS:-}" ] || count=${PS_FUZZ_COUNT:-1500}
pst_killed_record fuzz || finish
python3 "$PS_TOP_SRCDIR/tests/tools/fuzz_records.py" --tools "$PS_TOP_BUILDDIR/tools" \
	--offsets "$PST_TMP/offsets" --seeds "$PST_TMP/good" --count "$count" \
	--keep-crashes "$PS_TOP_BUILDDIR/tests/tools/fuzz-crashes" >"$PST_TMP/out" 2>&1
rc=$?
tail -n 3 "$PST_TMP/out"
[ $rc = 0 ] && pass "$count mutated records: no finding" ||
	fail "fuzz findings (records kept in tests/tools/fuzz-crashes): $(grep -v '^[0-9]* records' "$PST_TMP/out" | head -20)"
finish
