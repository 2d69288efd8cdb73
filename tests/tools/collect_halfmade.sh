#!/bin/sh
# SPDX-License-Identifier: MIT
# A process killed between creating its record (.poolshim-PID-NS.stats.new)
# and renaming it into place leaves the hidden file behind.  `poolshim
# collect` removes those a minute old, regular files only, and says so; a
# fresh one (a process making its record now), a symbolic link by that name
# (its target untouched) and, with pids named, everything stay.
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
L="$PST_TMP/live"
mkdir -m 1777 "$L"
ns=$(stat -L -c %i /proc/self/ns/pid)
old="$L/.poolshim-999991-$ns.stats.new"
old2="$L/.poolshim-999992-$ns.stats.new"
fresh="$L/.poolshim-999993-$ns.stats.new"
link="$L/.poolshim-999994-$ns.stats.new"
echo half >"$old"; echo half >"$old2"; echo half >"$fresh"
echo "precious" >"$PST_TMP/target"
ln -s "$PST_TMP/target" "$link"
touch -d '2 minutes ago' "$old" "$old2" "$PST_TMP/target"
touch -h -d '2 minutes ago' "$link"

# Naming pids: only those are looked at; nothing else is touched.
"$COLLECT" --live-dir "$L" 999999 >"$PST_TMP/out" 2>"$PST_TMP/err"
[ -e "$old" ] && [ -e "$old2" ] && pass "with pids named, the half-made records stay" ||
	fail "with pids named, removed: $(ls -A "$L")"

"$COLLECT" --live-dir "$L" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ ! -e "$old" ] && [ ! -e "$old2" ] && pass "the minute-old half-made records removed" ||
	fail "left: $(ls -A "$L")"
grep -q "removed 2 half-made records (their processes died while making them)" "$PST_TMP/err" &&
	pass "said: $(cat "$PST_TMP/err")" || fail "message: $(cat "$PST_TMP/err")"
[ $rc = 1 ] && pass "exit 1: no record to collect, as before" || fail "exit $rc"
[ -e "$fresh" ] && pass "a fresh one stays (a process may be making it)" || fail "the fresh one was removed"
[ -L "$link" ] && [ "$(cat "$PST_TMP/target")" = precious ] &&
	pass "a symbolic link by that name stays, its target untouched" ||
	fail "link: $(ls -la "$L"), target: $(cat "$PST_TMP/target" 2>&1)"
finish
