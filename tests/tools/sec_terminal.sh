#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45, S4: what a record says reaches a terminal only made safe.  A
# record whose program name holds an OSC title sequence (ESC ... BEL), a
# UTF-8 encoded C1 CSI (\xc2\x9b, obeyed as ESC [ by some terminals), DEL
# and malformed UTF-8 (\xff, a lone continuation byte, an overlong '/')
# is shown by `poolshim stat`, --prometheus, and collected by `poolshim
# collect` (its report printed, the line about it): none of those bytes
# comes out, each becomes '?', and a well-formed non-ASCII name (é) is
# kept.  The record is a copy of a killed dd's, under a pid above any
# pid_max, in the test's own live directory.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
CRAFT="$PS_TOP_SRCDIR/tests/tools/sec_craft.py"
pst_killed_record term || finish
fake=$(( $(cat /proc/sys/kernel/pid_max) + 1000 ))
# "ev" ESC ]0;pwned BEL, C1 CSI "31m", DEL, \xff, \x80, overlong '/' (c0 af), "é" (c3 a9)
name=6576 name="${name}1b5d303b70776e656407 c29b33316d 7f ff 80 c0af c3a9"
python3 "$CRAFT" "$PST_TMP/offsets" "$PST_TMP/good" "$L/poolshim-$fake-$ns.stats" "$pid" "$fake" \
	"program:x:$(echo "$name" | tr -d ' ')" || { fail "crafting"; finish; }

# bad FILE: whether FILE holds any of the bytes that must not come out.
bad() {
	python3 - "$1" <<'PY'
import sys
b = open(sys.argv[1], 'rb').read()
hits = [s for s in (b'\x1b', b'\x07', b'\xc2\x9b', b'\x7f', b'\xff', b'\xc0\xaf') if s in b]
hits += [b'lone \\x80'] if any(b[i] == 0x80 and (i == 0 or b[i - 1] < 0xc2) for i in range(len(b))) else []
print(' '.join(repr(h) for h in hits))
sys.exit(1 if hits else 0)
PY
}

timeout 20 "$STAT" --live-dir "$L" "$fake" >"$PST_TMP/stat" 2>"$PST_TMP/stat.err"
grep -aq "pid $fake (ev" "$PST_TMP/stat" && pass "stat shows the record" ||
	fail "stat did not show it: $(head -3 "$PST_TMP/stat.err")"
w=$(bad "$PST_TMP/stat") && pass "stat printed none of the control bytes" || fail "stat printed $w"
grep -aq "pid $fake (ev?]0;pwned???31m?????é)" "$PST_TMP/stat" && grep -aq "é" "$PST_TMP/stat" &&
	pass "each byte became '?', é kept" || fail "not as expected: $(grep -a "pid $fake" "$PST_TMP/stat")"
timeout 20 "$STAT" --live-dir "$L" --json "$fake" >"$PST_TMP/json" 2>&1
w=$(bad "$PST_TMP/json") && pass "stat --json printed none" || fail "stat --json printed $w"
timeout 20 "$STAT" --live-dir "$L" --prometheus "$fake" >"$PST_TMP/prom" 2>&1
w=$(bad "$PST_TMP/prom") && pass "stat --prometheus printed none" || fail "stat --prometheus printed $w"

cp "$L/poolshim-$fake-$ns.stats" "$PST_TMP/copy"
timeout 20 "$COLLECT" --live-dir "$L" --keep "$fake" >"$PST_TMP/col" 2>"$PST_TMP/col.err"
grep -aq "==== poolshim report: pid $fake" "$PST_TMP/col" && pass "collect printed the report" ||
	fail "no report: $(head -3 "$PST_TMP/col.err")"
w=$(bad "$PST_TMP/col") && pass "collect's report has none" || fail "collect's report has $w"
mkdir "$PST_TMP/into"
timeout 20 "$COLLECT" --live-dir "$L" --into "$PST_TMP/into" "$fake" >/dev/null 2>"$PST_TMP/col2.err"
grep -aq "pid $fake (ev.*report written" "$PST_TMP/col2.err" && pass "collect --into said where" ||
	fail "no line: $(cat "$PST_TMP/col2.err")"
w=$(bad "$PST_TMP/col2.err") && pass "collect's line has none" || fail "collect's line has $w"
finish
