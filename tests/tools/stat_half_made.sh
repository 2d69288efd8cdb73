#!/bin/sh
# SPDX-License-Identifier: MIT
# A live file is never seen half made.  The shim makes it mid-run, in
# whichever thread works first; `poolshim stat -i PID` started before
# waits for it and must not find the file between its creation and its
# header being written (CI caught `stat -i` reporting "not a live
# statistics file of this version" in that window).  strace stretches the
# window: the file's fallocate returns 1.5 s late.  During it the file may
# exist only under its hidden name, which the scan ignores.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
NS=$(stat -L -c %i /proc/self/ns/pid)
D="$PST_TMP/live"
mkdir -p "$D"
command -v strace >/dev/null 2>&1 || skip "strace not installed"
strace -o /dev/null -e inject=fallocate:delay_exit=1000 /bin/true 2>/dev/null ||
	skip "strace cannot trace or inject delays here"

# One thread, 10 writes, 1.2 s asleep, 10 more: the file is made on the
# first of those, with its fallocate held back 1.5 s.
strace -f -qq -o /dev/null -e trace=fallocate -e inject=fallocate:delay_exit=1500000 \
	-E POOLSHIM_STATS=off -E POOLSHIM_LIVE_DIR="$D" -E LD_PRELOAD="$SHIM" \
	"$PRELOAD_BIN/live_late" 1 10 10 >"$PST_TMP/out" 2>&1 &
tracer=$!
at_exit "kill -KILL $tracer 2>/dev/null"
pid=
for _ in $(seq 50); do pid=$(pgrep -P "$tracer" live_late) && break; sleep 0.05; done
[ -n "$pid" ] || { fail "helper did not start under strace"; finish; }
at_exit "kill -KILL $pid 2>/dev/null"

F="$D/poolshim-$pid-$NS.stats"
hidden=0 early=0 bad=0 good=0
for _ in $(seq 80); do
	# .poolshim-PID-NS.TAG.stats.new: TAG is unpredictable (live.h).
	ls -A "$D" | grep -q "^\.poolshim-$pid-$NS\.[0-9a-f]\{16\}\.stats\.new\$" && hidden=$((hidden + 1))
	"$STAT" --live-dir "$D" "$pid" >"$PST_TMP/s" 2>&1
	grep -q 'not a live statistics file' "$PST_TMP/s" && { bad=$((bad + 1)); cp "$PST_TMP/s" "$PST_TMP/bad"; }
	grep -q "pid $pid (live_late)" "$PST_TMP/s" && good=$((good + 1))
	grep -q '^stopping' "$PST_TMP/out" && break
	sleep 0.05
done
[ "$hidden" -gt 0 ] && pass "the file was being made under its hidden name ($hidden looks)" ||
	fail "never saw the file being made (hidden name absent; strace delay not applied?)"
[ "$bad" -eq 0 ] && pass "stat never read a half-made file" ||
	fail "stat read a half-made file $bad times: $(head -3 "$PST_TMP/bad")"
[ "$good" -gt 0 ] && [ -f "$F" ] && pass "stat read the file once it was in place" ||
	fail "stat never read the finished file (good $good): $(head -3 "$PST_TMP/s")"
[ -z "$(ls -A "$D" | grep '^\.')" ] && pass "no hidden file left behind" ||
	fail "hidden files left: $(ls -A "$D")"
kill -CONT "$pid" 2>/dev/null
wait "$tracer"
rc=$?
[ "$rc" -eq 0 ] && pass "helper exits 0" || fail "helper exit $rc: $(tail -3 "$PST_TMP/out")"
finish
