#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45: anyone can name any run in a record of their own
# (POOLSHIM_RUN=<unit>), so `poolshim collect --run UNIT`, which prints
# "stderr" reports into the unit's journal, prints one only from a record
# of root, of the user collecting, or of --user USER (the unit's User=).
# A dd run as nobody under the unit's run id, and one run as root, both
# killed: root's `collect --run` prints root's report and refuses nobody's
# in one line, keeping it; with --user nobody it prints it.  Needs root
# and setpriv (else skipped).
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
[ "$(id -u)" = 0 ] || skip "not root"
command -v setpriv >/dev/null || skip "no setpriv"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody true 2>/dev/null || skip "setpriv cannot become nobody here"
as_nobody true <"$SHIM" || skip "nobody cannot read $SHIM"
chmod 0755 "$PST_TMP"
L="$PST_TMP/live"
mkdir -m 1777 "$L"

# killed_dd [COMMAND...]: dd under run "unit1" (through COMMAND, which execs),
# killed once its record is there; its pid in $p.
killed_dd() {
	"$@" env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=unit1 LD_PRELOAD="$SHIM" \
		dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
	p=$!
	for _ in $(seq 100); do ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 && break; sleep 0.1; done
	sleep 0.2
	kill -KILL "$p"; wait "$p" 2>/dev/null
	ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 || fail "no record of $p"
}
killed_dd setpriv --reuid=65534 --regid=65534 --clear-groups; forged=$p
killed_dd; own=$p

timeout 20 "$COLLECT" --live-dir "$L" --run unit1 >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
cat "$PST_TMP/err"
grep -q "==== poolshim report: pid $own " "$PST_TMP/out" && pass "root's own record printed" ||
	fail "root's record not printed (exit $rc)"
grep -q "pid $forged" "$PST_TMP/out" && fail "nobody's record printed into the run's output" ||
	pass "nobody's record not printed"
[ "$(grep -c "pid $forged (dd): .*user 65534, not the run's: not printed; record kept" "$PST_TMP/err")" = 1 ] &&
	pass "refused in one line" || fail "no line about nobody's record"
[ $rc = 3 ] && pass "exit status 3" || fail "exit status $rc, want 3"
ls "$L"/poolshim-"$forged"-*.stats >/dev/null 2>&1 && pass "its record kept" || fail "its record removed"

timeout 20 "$COLLECT" --live-dir "$L" --run unit1 --user nobody >"$PST_TMP/out2" 2>"$PST_TMP/err2"
rc=$?
grep -q "==== poolshim report: pid $forged " "$PST_TMP/out2" && [ $rc = 0 ] &&
	pass "--user nobody: printed" || fail "--user nobody: exit $rc, $(cat "$PST_TMP/err2")"
finish
