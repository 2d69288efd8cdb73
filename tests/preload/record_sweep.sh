#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45: with the library alone, the records of processes killed by a
# signal do not stay for ever.  100 dd (bs=1M: a pool slab, so a record at
# once) are SIGKILLed with POOLSHIM_RECORD_TTL=2; after the TTL one more
# process that makes a record removes all 100.  Not removed by a sweep:
# the record of a process still running, of another user (nobody), of
# another pid namespace, of a wrapper's or unit's run (POOLSHIM_RUN), and
# of a killed process younger than the TTL; and nothing at all with
# POOLSHIM_RECORD_TTL=0.  Each process sweeps as it makes its record.
. "$PS_TOP_SRCDIR/tests/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root (a record of user nobody, a pid namespace)"
command -v setpriv >/dev/null && id nobody >/dev/null 2>&1 || skip "needs setpriv and user nobody"
unshare -p -f --mount-proc true 2>/dev/null || skip "unshare -p -f --mount-proc not permitted here"

# A sticky directory everyone may write, as /dev/shm is.
chmod 711 "$PST_TMP"
L="$PST_TMP/live"
mkdir "$L"
chmod 1777 "$L"
F="$PST_TMP/fifo"
mkfifo "$F"
chmod 666 "$F"
# Held open for writing: each dd blocks in read() with its record made.
exec 3<>"$F"
TTL=2

records() { ls "$L" | grep -c '^poolshim-.*\.stats$'; }
# Start dd under the shim with more VAR=VALUE (and a command before env in $pre); its pid in $pid.
start() {
	$pre env POOLSHIM_LIVE_DIR="$L" POOLSHIM_STATS=off POOLSHIM_RECORD_TTL=$TTL "$@" \
		LD_PRELOAD="$SHIM" dd bs=1M of=/dev/null <"$F" 2>/dev/null &
	pid=$!
}
# Wait until there are $1 records.
await() {
	for _ in $(seq 200); do
		[ "$(records)" -ge "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

pre=
pids=
for _ in $(seq 100); do
	start
	pids="$pids $pid"
done
start
live=$pid
pre="setpriv --reuid=nobody --regid=nogroup --clear-groups"
start
other_user=$pid
pre="unshare -p -f --kill-child --mount-proc"
start
other_ns=$pid
pre=
start POOLSHIM_RUN=somerun
in_run=$pid
await 104 || fail "records: $(records) of 104 made"
# shellcheck disable=SC2086
kill -KILL $pids $other_user $other_ns $in_run
wait $pids $other_user $other_ns $in_run 2>/dev/null
n=$(records)
[ "$n" -ge 104 ] && pass "the killed processes left their records ($n)" || fail "only $n records"
others=$(ls -l "$L" | awk '$3 == "nobody" && /poolshim-/' | wc -l)
[ "$others" = 1 ] || fail "nobody's record: $others"
ns_mine=$(stat -L -c %i /proc/self/ns/pid)
foreign=$(ls "$L" | grep '^poolshim-' | grep -vc -- "-$ns_mine\.")
[ "$foreign" = 1 ] || fail "records of another namespace: $foreign"

sleep $((TTL + 1))
# One more process makes a record (and sweeps), and is killed too.
start
young=$pid
await 1 || true
for _ in $(seq 100); do
	[ "$(records)" -le 6 ] && break
	sleep 0.05
done
kill -KILL $young
wait $young 2>/dev/null
left=0
for p in $pids; do
	ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 && left=$((left + 1))
done
[ "$left" = 0 ] && pass "none of the 100 killed processes' records is left after the TTL" ||
	fail "$left of the 100 records left after the TTL: $(date +%s.%N; stat -c '%n %Y %Z %U' "$L"/poolshim-*)"

# The next record sweeps too: the killed young one stays.  This sweeper's
# TTL is a minute: on a loaded machine (load 20) the young record had
# passed 2 s before the sweeper made its record, and went, rightly.
TTL=60
start
TTL=2
sweeper=$pid
await 6 || fail "the sweeper's record: $(ls "$L")"
sleep 0.3
kept() { ls "$L"/poolshim-"$1"-*.stats >/dev/null 2>&1; }
kept "$live" && pass "a running process's record stays" || fail "a running process's record was removed"
[ "$(ls -l "$L" | awk '$3 == "nobody" && /poolshim-/' | wc -l)" = 1 ] &&
	pass "another user's record stays" || fail "nobody's record was removed"
[ "$(ls "$L" | grep '^poolshim-' | grep -vc -- "-$ns_mine\.")" = 1 ] &&
	pass "another pid namespace's record stays" || fail "another namespace's record was removed"
kept "$in_run" && pass "a run's record stays for its collector" || fail "a run's record was removed"
kept "$young" && pass "a record younger than the TTL stays" || fail "a young record was removed"
[ -z "$(ls -A "$L" | grep -v '^poolshim-')" ] && pass "nothing else in the directory" ||
	fail "other files: $(ls -A "$L")"
kill -KILL $sweeper $live
wait $sweeper $live 2>/dev/null

# A process counting until it is killed: its file last changed long ago, but
# the record's usage time (stamped by the counting path) is its end: it stays.
env POOLSHIM_LIVE_DIR="$L" POOLSHIM_STATS=off POOLSHIM_RECORD_TTL=$TTL LD_PRELOAD="$SHIM" \
	dd if=/dev/zero of=/dev/null bs=1M 2>/dev/null &
busy=$!
# The sweeper's TTL 3: the file is 4 s old, the usage time at most about 2 s
# (stamped a second apart, whole seconds compared).
sleep 4
kill -KILL $busy
wait $busy 2>/dev/null
TTL=3
start
TTL=2
for _ in $(seq 200); do kept "$pid" && break; sleep 0.05; done
kept "$pid" || fail "the sweeper after the busy one: $(ls "$L")"
sleep 0.3
kept "$busy" && pass "a record counting until its process was killed stays for the TTL" ||
	fail "the busy process's record was removed at once"
kill -KILL $pid
wait $pid 2>/dev/null

# POOLSHIM_RECORD_TTL=0: nothing is removed, however old.
sleep $((TTL + 1))
before=$(records)
TTL=0
start
await $((before + 1)) || fail "no record with TTL 0"
sleep 0.3
kill -KILL $pid
wait $pid 2>/dev/null
after=$(records)
[ "$after" = $((before + 1)) ] && pass "TTL 0 keeps every record ($after)" ||
	fail "TTL 0: $before records before, $after after"
# A pid namespace whose /proc is still its parent's (unshare -p without
# --mount-proc): /proc/PID there is another process, so no record is judged.
rm -f "$L"/poolshim-*
unshare -p -f sh -c '
	L=$1 F=$2 SO=$3
	start() {
		env POOLSHIM_LIVE_DIR="$L" POOLSHIM_STATS=off POOLSHIM_RECORD_TTL=1 \
			LD_PRELOAD="$SO" dd bs=1M of=/dev/null <"$F" 2>/dev/null &
		pid=$!
	}
	n() { ls "$L" | grep -c "^poolshim-"; }
	start
	first=$pid
	for _ in $(seq 200); do [ "$(n)" -ge 1 ] && break; sleep 0.05; done
	sleep 2.2
	start
	for _ in $(seq 200); do [ "$(n)" -ge 2 ] && break; sleep 0.05; done
	sleep 0.3
	echo "records: $(n)"
	kill -KILL $first $pid
	wait 2>/dev/null
	exit 0
' sh "$L" "$F" "$SHIM" >"$PST_TMP/proc.out" 2>&1
grep -q "^records: 2$" "$PST_TMP/proc.out" && pass "a /proc of another namespace judges nothing" ||
	fail "with a /proc of the parent namespace: $(cat "$PST_TMP/proc.out")"
exec 3>&-
finish
