#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45: another user cannot take a record's name first.  User 4242
# puts files at the names the next process's record would have had, the
# plain poolshim-PID-NS.stats and the hidden .poolshim-PID-NS.stats.new of
# earlier builds; nobody's dd then gets that pid (set with ns_last_pid)
# and still has a record: made under an unpredictable hidden name,
# renamed to a tagged name (poolshim-PID-NS.TAG.stats) as the plain one
# is another user's.  Root's `poolshim stat PID` finds it (not 4242's
# file), `poolshim collect PID` renders it once dd is killed, and 4242's
# files are left as they were.  (Root's own processes may replace
# another user's file in the sticky directory, and do.)  Needs root,
# setpriv and a writable ns_last_pid.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
[ "$(id -u)" = 0 ] || skip "not root"
command -v setpriv >/dev/null || skip "no setpriv"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody true 2>/dev/null || skip "setpriv cannot become nobody here"
as_nobody true <"$SHIM" || skip "nobody cannot read $SHIM"
as_4242() { setpriv --reuid=4242 --regid=4242 --clear-groups "$@"; }
[ -w /proc/sys/kernel/ns_last_pid ] || skip "ns_last_pid not writable"
chmod 0755 "$PST_TMP"
L="$PST_TMP/live"
mkdir -m 1777 "$L"
NS=$(stat -L -c %i /proc/self/ns/pid)
max=$(cat /proc/sys/kernel/pid_max)

# Several tries: another process may take the pid between the write and the fork.
pid=
for try in 1 2 3 4 5 6 7 8 9 10; do
	x=$(( max / 2 + $$ % (max / 4) + try * 97 ))
	[ -e /proc/$x ] && continue
	as_4242 sh -c "echo forged >'$L/poolshim-$x-$NS.stats'; : >'$L/.poolshim-$x-$NS.stats.new'"
	echo $((x - 1)) >/proc/sys/kernel/ns_last_pid
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=names LD_PRELOAD="$SHIM" dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
	pid=$!
	[ "$pid" = "$x" ] && break
	kill -KILL "$pid"; wait "$pid" 2>/dev/null
	rm -f "$L"/* "$L"/.poolshim-*
	pid=
done
[ -n "$pid" ] || skip "could not get the pid wanted (a busy machine)"
at_exit "kill -KILL $pid 2>/dev/null"
for _ in $(seq 50); do
	ls "$L"/poolshim-"$pid"-"$NS".*.stats >/dev/null 2>&1 && break
	sleep 0.1
done
ls -la "$L"
rec=$(ls "$L"/poolshim-"$pid"-"$NS".*.stats 2>/dev/null | head -n 1)
[ -n "$rec" ] && [ "$(stat -c %u "$rec")" = 65534 ] &&
	pass "dd has a record of its own: ${rec##*/}" || fail "dd has no record"
timeout 20 "$STAT" --live-dir "$L" "$pid" >"$PST_TMP/out" 2>"$PST_TMP/err"
grep -q "pid $pid (dd)" "$PST_TMP/out" && pass "stat PID finds it" ||
	fail "stat PID: $(cat "$PST_TMP/err")"
kill -KILL "$pid"; wait "$pid" 2>/dev/null
timeout 20 "$COLLECT" --live-dir "$L" "$pid" >"$PST_TMP/cout" 2>"$PST_TMP/cerr"
grep -q "==== poolshim report: pid $pid (dd)" "$PST_TMP/cout" && pass "collect PID renders it" ||
	fail "collect PID: $(cat "$PST_TMP/cerr")"
[ "$(cat "$L/poolshim-$pid-$NS.stats")" = forged ] && [ -e "$L/.poolshim-$pid-$NS.stats.new" ] &&
	pass "4242's files left as they were" || fail "4242's files changed"
finish
