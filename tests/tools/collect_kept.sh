#!/bin/sh
# SPDX-License-Identifier: MIT
# A process whose POOLSHIM_STATS path cannot be written (its directory is
# missing) exits normally: the shim renders its report into its record
# and says so.  `poolshim collect` cannot write it there either: it says
# why in one line, keeps the record and exits 3.  With --into DIR it
# writes the process's own report there, with a line under its title
# saying how it ended (exit status 0), and removes the record.
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
L="$PST_TMP/live"
mkdir "$L" "$PST_TMP/into"

env POOLSHIM_LIVE_DIR="$L" POOLSHIM_STATS="$PST_TMP/missing/r-%p.txt" LD_PRELOAD="$SHIM" \
	dd if=/dev/zero of=/dev/null bs=4k count=5000 2>"$PST_TMP/dd.err" &
pid=$!
wait $pid
rc=$?
[ $rc = 0 ] && pass "dd exits 0" || fail "dd: status $rc"
grep -q "the report is kept in $L/poolshim-$pid-" "$PST_TMP/dd.err" && pass "the shim says it kept the report" ||
	fail "no word of the kept report: $(cat "$PST_TMP/dd.err")"
ls "$L"/poolshim-"$pid"-*.stats >/dev/null 2>&1 || fail "no record kept"

timeout 60 "$COLLECT" --live-dir "$L" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
cat "$PST_TMP/err"
[ $rc = 3 ] && pass "unwritable path: exit status 3" || fail "unwritable path: status $rc"
[ "$(grep -c "pid $pid (dd): cannot write the report to $PST_TMP/missing/r-$pid.txt" "$PST_TMP/err")" = 1 ] &&
	pass "one line says why" || fail "no line for the unwritable path"
ls "$L"/poolshim-"$pid"-*.stats >/dev/null 2>&1 && pass "the record is kept" || fail "the record went"

timeout 60 "$COLLECT" --live-dir "$L" --into "$PST_TMP/into" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
f="$PST_TMP/into/dd-$pid.txt"
[ $rc = 0 ] && [ -f "$f" ] && pass "--into writes $f" || fail "--into: status $rc, $(cat "$PST_TMP/err")"
# dd returns from main: libc's own call to exit() passes no door, so the status may be unknown.
head -n 1 "$f" | grep -q "^==== poolshim report: pid $pid (dd) ====" &&
	pass "the report the process rendered" || fail "first line: $(head -n 1 "$f")"
sed -n 2p "$f" | grep -Eq "^ended    (exit status 0|exited \(status unknown\)); report rendered by the process itself$" &&
	pass "the ended line under its title" || fail "second line: $(sed -n 2p "$f")"
grep -Eq "^read +other +5000 " "$f" && pass "with its 5000 reads" || fail "reads: $(grep '^read' "$f")"
ls "$L"/poolshim-"$pid"-*.stats >/dev/null 2>&1 && fail "the record is still there" ||
	pass "the record is removed"
finish
