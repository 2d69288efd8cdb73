#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45, S1: naming another user's call sites cannot hang root's
# collect or stat, nor run libdw with root's privileges.  nobody runs
# callsite_helper with POOLSHIM_BACKTRACE and POOLSHIM_DEBUGINFO_PATH=a
# directory of nobody's, where a FIFO sits at .build-id/xx/rest.debug for
# every object the helper has mapped; it ends by SIGKILL, leaving its
# record.  As root: `poolshim stat`, `collect --into` and `collect` end
# (before, each blocked in open() for ever), with the report; and strace
# shows the debug files looked up only by a child that had become nobody
# (setresuid(65534, 65534, 65534) before it; setfsuid alone before).
# Needs root and setpriv (else skipped); the strace part needs strace.
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
H="$PRELOAD_BIN/callsite_helper"
[ "$(id -u)" = 0 ] || skip "not root"
command -v setpriv >/dev/null || skip "no setpriv"
command -v readelf >/dev/null || skip "no readelf"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody true 2>/dev/null || skip "setpriv cannot become nobody here"
as_nobody true <"$SHIM" || skip "nobody cannot read $SHIM"
chmod 0755 "$PST_TMP"
L="$PST_TMP/live"
D="$PST_TMP/dbg"
mkdir -m 1777 "$L"
mkdir "$D"
chown 65534 "$D"

for obj in "$H" "$SHIM" $(ldd "$H" | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\).*/\1/p'); do
	id=$(readelf -n "$obj" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -n 1)
	[ -n "$id" ] || continue
	rest=${id#??}
	as_nobody mkdir -p "$D/.build-id/${id%"$rest"}"
	as_nobody mkfifo "$D/.build-id/${id%"$rest"}/$rest.debug" 2>/dev/null
done
[ -n "$(find "$D" -type p)" ] || { fail "no FIFO made"; finish; }

as_nobody env LD_PRELOAD="$SHIM" POOLSHIM_LIVE_DIR="$L" POOLSHIM_BACKTRACE=8 \
	POOLSHIM_BACKTRACE_SAMPLE=1 POOLSHIM_DEBUGINFO_PATH="$D" "$H" 1 kill >/dev/null 2>&1
rc=$?
[ $rc = 137 ] || fail "the helper ended with $rc, not by SIGKILL"
rec=$(ls "$L"/poolshim-*.stats 2>/dev/null | head -n 1)
[ -n "$rec" ] || { fail "no record left"; finish; }
kpid=${rec#"$L"/poolshim-}
kpid=${kpid%%-*}

timeout 30 "$STAT" --live-dir "$L" "$kpid" >"$PST_TMP/stat" 2>"$PST_TMP/stat.err"
rc=$?
[ $rc = 0 ] && grep -q 'call sites by bytes' "$PST_TMP/stat" &&
	pass "stat ends, with the call sites" || fail "stat: exit $rc (124: hung) $(head -3 "$PST_TMP/stat.err")"
mkdir "$PST_TMP/into"
timeout 30 "$COLLECT" --live-dir "$L" --keep --into "$PST_TMP/into" >/dev/null 2>"$PST_TMP/into.err"
rc=$?
[ $rc = 0 ] && [ -n "$(ls "$PST_TMP/into")" ] && pass "collect --into ends, report written" ||
	fail "collect --into: exit $rc (124: hung) $(cat "$PST_TMP/into.err")"

if command -v strace >/dev/null 2>&1; then
	strace -f -qq -e trace=setresuid,setfsuid,openat -o "$PST_TMP/trace" \
		timeout 30 "$STAT" --live-dir "$L" "$kpid" >/dev/null 2>&1
	# Every process that looked under $D: it became nobody first.
	lookers=$(grep "openat(.*\"$D/" "$PST_TMP/trace" | awk '{print $1}' | sort -u)
	[ -n "$lookers" ] || fail "no lookup under $D seen"
	ok=1
	for p in $lookers; do
		grep -Eq "^$p +setresuid\(65534, 65534, 65534\) += 0" "$PST_TMP/trace" || ok=0
	done
	[ $ok = 1 ] && [ -n "$lookers" ] &&
		pass "debug files looked up only by a process that had become nobody" ||
		fail "looked up by $lookers: $(grep -E 'setresuid|setfsuid' "$PST_TMP/trace" | head -3)"
fi

timeout 30 "$COLLECT" --live-dir "$L" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && grep -q "==== poolshim report: pid $kpid" "$PST_TMP/out" &&
	pass "collect ends, report printed, record removed" ||
	fail "collect: exit $rc (124: hung) $(cat "$PST_TMP/err")"
finish
