#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45: the records a process removes for its user (record_sweep.sh)
# hold reports nobody delivered; that is said, once per look, in the system
# log: how many, and their pids.  A record whose report was not wanted
# (POOLSHIM_STATS=off) goes without a word.  Run in a mount namespace whose
# /dev holds our own /dev/log listener (as report_syslog.sh does).
. "$PS_TOP_SRCDIR/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a mount namespace with our own /dev/log)"
command -v unshare >/dev/null 2>&1 || skip "unshare not installed"
unshare -m true 2>/dev/null || skip "cannot make a mount namespace here"
T=$PST_TMP
mkdir "$T/dev" "$T/realdev" "$T/live"
pst_log_listener "$T" || finish

unshare -m sh -c '
	set -e
	T=$1 SO=$2
	mount --make-rprivate /
	mount --bind /dev "$1/realdev"
	mount -t tmpfs tmpfs /dev
	touch /dev/null /dev/log /dev/zero
	mount --bind "$1/realdev/null" /dev/null
	mount --bind "$1/realdev/zero" /dev/zero
	mount --bind "$1/dev/log" /dev/log
	set +e
	L="$T/live"
	mkfifo "$T/fifo"
	exec 3<>"$T/fifo"
	# dd bs=1M makes its record at once, then blocks in read.
	start() {
		env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RECORD_TTL=1 "$@" LD_PRELOAD="$SO" \
			dd bs=1M of=/dev/null <"$T/fifo" 2>/dev/null &
		pid=$!
	}
	records() { ls "$L" | grep -c "^poolshim-"; }
	pids=
	for _ in 1 2 3; do start; pids="$pids $pid"; done
	start POOLSHIM_STATS=off
	off=$pid
	for _ in $(seq 200); do [ "$(records)" -ge 4 ] && break; sleep 0.05; done
	kill -KILL $pids $off
	wait $pids $off 2>/dev/null
	echo "killed:$pids"
	echo "off: $off"
	echo "before: $(records)"
	sleep 2.2
	start
	for _ in $(seq 200); do [ "$(records)" -le 1 ] && break; sleep 0.05; done
	echo "after: $(records)"
	kill -KILL $pid
	wait $pid 2>/dev/null
	exit 0
' sh "$T" "$SHIM" >"$T/ns.out" 2>"$T/ns.err" || skip "mount namespace set-up refused: $(cat "$T/ns.err")"
for _ in $(seq 40); do [ -s "$T/log.txt" ] && break; sleep 0.05; done
touch "$T/log.txt"
killed=$(sed -n 's/^killed://p' "$T/ns.out")
off=$(sed -n 's/^off: //p' "$T/ns.out")
grep -q '^before: 4$' "$T/ns.out" && grep -q '^after: 1$' "$T/ns.out" &&
	pass "the four killed processes' records are removed" || fail "records: $(cat "$T/ns.out" "$T/ns.err")"
[ "$(wc -l <"$T/log.txt")" = 1 ] && pass "one line in the system log" ||
	fail "system log: '$(cat "$T/log.txt")'"
grep -q "^<28>poolshim\[[0-9]*\] dd: removed the live records of 3 ended processes of uid 0, unchanged for POOLSHIM_RECORD_TTL=1 s, their reports not delivered (pids" "$T/log.txt" &&
	pass "it says three reports were not delivered" || fail "system log: '$(cat "$T/log.txt")'"
for p in $killed; do
	grep -q " $p[ )]" "$T/log.txt" || fail "pid $p not named: $(cat "$T/log.txt")"
done
grep -q " $off[ )]" "$T/log.txt" && fail "the record with POOLSHIM_STATS=off is named: $(cat "$T/log.txt")" ||
	pass "the record with no report wanted is not named"
finish
