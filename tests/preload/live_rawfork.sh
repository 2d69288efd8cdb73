#!/bin/sh
# SPDX-License-Identifier: MIT
# A child forked with syscall(SYS_fork) or _Fork(), which run no atfork handler, must
# not write into its parent's live file nor remove it: the child's thread
# does 1000 writes and the child ends with exit(); the parent's file is
# still there and `poolshim stat` shows the parent's own 7 writes only.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"

for how in syscall _Fork; do
	env POOLSHIM_STATS=off LD_PRELOAD="$SHIM" "$PRELOAD_BIN/live_rawfork" 7 1000 "$how" >"$PST_TMP/out" 2>&1 &
	pid=$!
	at_exit "kill -KILL $pid 2>/dev/null; rm -f /dev/shm/poolshim-$pid.stats /dev/shm/poolshim-$pid-*.stats"
	state=
	for _ in $(seq 100); do
		state=$(sed 's/.*) \(.\).*/\1/' "/proc/$pid/stat" 2>/dev/null)
		[ "$state" = T ] || [ ! -e "/proc/$pid" ] && break
		sleep 0.1
	done
	if [ "$state" != T ]; then
		wait "$pid"
		rc=$?
		[ $rc = 77 ] && { echo "SKIP: $how: no _Fork in this libc"; continue; }
		fail "$how: helper did not stop (status $rc): $(cat "$PST_TMP/out")"
		continue
	fi
	grep -q "child done" "$PST_TMP/out" || fail "$how: no child done: $(cat "$PST_TMP/out")"
	ls /dev/shm | grep -Eq "^poolshim-$pid(-[0-9]+)?\.stats\$" &&
		pass "$how: parent's live file still there after the child's exit()" ||
		fail "$how: the child removed the parent's live file"
	"$STAT" --json --keep "$pid" >"$PST_TMP/stat.json" 2>"$PST_TMP/stat.err"
	n=$(json_get "$PST_TMP/stat.json" "sum(c['calls'] for c in r['calls'] if c['call']=='write')" 2>/dev/null)
	[ "$n" = 7 ] && pass "$how: parent's live counts hold its 7 writes only" ||
		fail "$how: parent's live file counts $n writes, want 7 (1007: the child's are in it) $(cat "$PST_TMP/stat.err")"
	kill -CONT "$pid"
	wait "$pid"
	rc=$?
	[ $rc = 0 ] && pass "$how: parent exits 0" || fail "$how: parent exit status $rc"
done
finish
