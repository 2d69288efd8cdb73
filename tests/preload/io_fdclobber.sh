#!/bin/sh
# SPDX-License-Identifier: MIT
# The program closes and dup2s over the shim's descriptors (ring, saved
# stderr) and calls close_range in a child: tests/preload/io_fdclobber.
# The shim must keep the program's data correct, never close or write a
# descriptor number the program owns, and write no report into a file the
# program put at the number of its saved stderr copy.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_fdclobber"

"$P" "$PST_TMP/plain.data" >"$PST_TMP/plain.out" 2>&1
rc=$?
[ $rc = 77 ] && skip "$(cat "$PST_TMP/plain.out")"
[ $rc = 0 ] || { fail "without the shim: exit $rc: $(cat "$PST_TMP/plain.out")"; finish; }
plain_low=$(sed -n 's/^lowest-free //p' "$PST_TMP/plain.out")

# Report to stderr (the shim keeps a copy of fd 2, which the program replaces).
shim -- "$P" "$PST_TMP/err.data" >"$PST_TMP/err.out" 2>"$PST_TMP/err.err"
rc=$?
if [ $rc = 0 ] && grep -q '^fdclobber ok' "$PST_TMP/err.out"; then
	pass "report to stderr: data intact, the program's descriptors untouched"
else
	fail "report to stderr: exit $rc: $(cat "$PST_TMP/err.out" "$PST_TMP/err.err")"
fi
printf 'program data\n' >"$PST_TMP/want"
cmp -s "$PST_TMP/want" "$PST_TMP/err.data" &&
	pass "no report written into the file the program put over the shim's stderr copy" ||
	fail "the program's file holds: $(head -c 300 "$PST_TMP/err.data")"

# Report to a file, to look at the io_uring counters.
J="$PST_TMP/r.json"
shim POOLSHIM_STATS="$J" -- "$P" "$PST_TMP/json.data" >"$PST_TMP/json.out" 2>&1
rc=$?
[ $rc = 0 ] || fail "report to a file: exit $rc: $(cat "$PST_TMP/json.out")"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$J" && pass "schema" || fail "schema"
state=$(json_get "$J" "r['uring']['state']")
sqes=$(json_get "$J" "r['uring']['sqes']")
low=$(sed -n 's/^lowest-free //p' "$PST_TMP/json.out")
[ "$low" = "$plain_low" ] && pass "next descriptor number $low, as without the shim" ||
	fail "next descriptor number $low under the shim, $plain_low without"
if [ "$state" != ok ] || [ "$sqes" = 0 ]; then
	echo "note: io_uring not used here (state $state): ring descriptors not exercised"
	finish
fi
pass "io_uring used ($sqes SQEs) while descriptors were clobbered"
# Registered-index io_uring_register(2) arrived in Linux 6.3.
kv=$(uname -r | sed 's/^\([0-9]*\)\.\([0-9]*\).*/\1 \2/')
set -- $kv
if [ "$1" -gt 6 ] || { [ "$1" = 6 ] && [ "$2" -ge 3 ]; }; then
	f=$(sed -n 's/^foreign //p' "$PST_TMP/json.out")
	[ "$f" = 0 ] && pass "the shim's rings hold no descriptor (Linux $(uname -r))" ||
		fail "$f descriptor(s) open that the program did not open, want 0 (report to a file)"
	f=$(sed -n 's/^foreign //p' "$PST_TMP/err.out")
	[ "$f" = 0 ] && pass "report to stderr: no descriptor of the shim's either" ||
		fail "$f descriptor(s) open that the program did not open, want 0 (report to stderr)"
else
	echo "note: Linux $(uname -r) < 6.3: rings keep their descriptor"
fi
finish
