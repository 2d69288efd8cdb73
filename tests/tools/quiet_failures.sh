#!/bin/sh
# SPDX-License-Identifier: MIT
# Failures the user must hear of, in one line each, without verbose mode:
# - a POOLSHIM_LIVE_DIR that exists but cannot be written (it used to be
#   said only with POOLSHIM_VERBOSE; poolshim(7) promises one line);
# - a malformed POOLSHIM_PROGRAMS that names nobody (a typo like "ngin*"
#   shimmed nothing and said nothing).
# And `poolshim report --json` counts processes per threshold, as it does
# per pool mode (thresholds was a bare list of values).
. "$PS_TOP_SRCDIR/tests/lib.sh"
unset POOLSHIM_LIVE_DIR

# An existing directory this user cannot write.
ro="$PST_TMP/ro"
mkdir "$ro"
chmod 555 "$ro"
as_user=
if [ "$(id -u)" = 0 ]; then
	command -v setpriv >/dev/null 2>&1 || skip "root without setpriv: cannot make a directory unwritable"
	chmod 755 "$PST_TMP"
	as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
fi
$as_user env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$ro" LD_PRELOAD="$SHIM" cat /dev/null 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && [ "$(wc -l <"$PST_TMP/err")" = 1 ] &&
	grep -q "^poolshim\[[0-9]*\] cat: POOLSHIM_LIVE_DIR=$ro: EACCES; running without a live statistics file\$" "$PST_TMP/err" &&
	pass "an unwritable POOLSHIM_LIVE_DIR is said in one line" ||
	fail "unwritable live directory: rc=$rc, stderr '$(cat "$PST_TMP/err")'"

# A pattern that names nobody.
shim POOLSHIM_PROGRAMS='ngin*' -- cat /dev/null 2>"$PST_TMP/err"
[ "$(wc -l <"$PST_TMP/err")" = 1 ] &&
	grep -q "^poolshim\[[0-9]*\] cat: POOLSHIM_PROGRAMS='ngin\*' has a character that is not part of a program name; poolshim leaves this and every other program alone" "$PST_TMP/err" &&
	pass "a malformed POOLSHIM_PROGRAMS is said where it names nobody" ||
	fail "POOLSHIM_PROGRAMS='ngin*': stderr '$(cat "$PST_TMP/err")'"

# report --json: thresholds like modes, {value: processes}.
shim POOLSHIM_STATS="$PST_TMP/a.json" -- cat /dev/null
shim POOLSHIM_STATS="$PST_TMP/b.json" POOLSHIM_POOL_MIN=128K -- cat /dev/null
shim POOLSHIM_STATS="$PST_TMP/c.json" POOLSHIM_POOL_MIN=128K -- cat /dev/null
python3 "$PS_TOP_SRCDIR/scripts/poolshim-report.py" --json "$PST_TMP/m.json" \
	"$PST_TMP/a.json" "$PST_TMP/b.json" "$PST_TMP/c.json" >/dev/null 2>"$PST_TMP/err"
t=$(json_get "$PST_TMP/m.json" 'r["total"]["pool"]["thresholds"]' 2>&1)
[ "$t" = "{'65536': 1, '131072': 2}" ] && pass "report --json: thresholds counts processes per value" ||
	fail "report --json thresholds: $t $(cat "$PST_TMP/err")"
finish
