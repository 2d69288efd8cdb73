#!/bin/sh
# SPDX-License-Identifier: MIT
# The shim takes no signal of its own (issue 34): each case runs without
# the shim and under it, by default and with a live record being made,
# and must see the same.
# - SigBlk/SigIgn/SigCgt of the program and of a program it execs;
# - a process blocked in vfork() while its child blocks opening a FIFO dies
#   at once on SIGTERM (the kernel breaks killable waits only for signals
#   that are fatal, which a stand-in handler is not);
# - SIGTERM followed 30 us later by SIGINT, or by SIGUSR1 with a handler:
#   the process dies by TERM every time, and no handler runs;
# - errno set by a one-shot handler (SA_RESETHAND, sysv_signal) is what the
#   program sees after it returns.
. "$PS_TOP_SRCDIR/tests/lib.sh"
S="$PRELOAD_BIN/sig_invisible"
LIVE="$PST_TMP/live"
mkdir -p "$LIVE"

# Each "how": the settings a shimmed run gets (none: no shim at all).  env
# execs the program, so a background run's $! is the program itself.
hows="none default record stats-off"
how_vars() {
	case $1 in
	none) echo "PST_HOW=none" ;;
	default) echo "POOLSHIM_LIVE_DIR=$LIVE LD_PRELOAD=$SHIM" ;;
	# Under the wrapper's mark a record is made on the first counted call.
	record) echo "POOLSHIM_LIVE_DIR=$LIVE POOLSHIM_RUN=sigtest LD_PRELOAD=$SHIM" ;;
	stats-off) echo "POOLSHIM_LIVE_DIR=$LIVE POOLSHIM_STATS=off LD_PRELOAD=$SHIM" ;;
	esac
}
# shellcheck disable=SC2046
run_how() { how=$1; shift; env $(how_vars $how) "$@"; }

# 1. Signal masks of the program and of what it execs.
for how in $hows; do
	run_how $how "$S" status >"$PST_TMP/status.$how" 2>/dev/null
done
for how in default record stats-off; do
	cmp -s "$PST_TMP/status.none" "$PST_TMP/status.$how" &&
		pass "SigBlk/SigIgn/SigCgt of the program and its exec as without the shim ($how)" ||
		fail "signal masks differ ($how): $(diff "$PST_TMP/status.none" "$PST_TMP/status.$how" | tr '\n' ' ')"
done
grep -q '^self SigCgt' "$PST_TMP/status.none" && grep -q '^SigCgt' "$PST_TMP/status.none" ||
	fail "status printed no masks: $(cat "$PST_TMP/status.none")"

# 2. SIGTERM to a process waiting in vfork() for a child blocked on a FIFO.
for how in $hows; do
	f="$PST_TMP/fifo.$how"
	mkfifo "$f"
	# shellcheck disable=SC2046
	env $(how_vars $how) "$S" vfork-fifo "$f" >"$PST_TMP/vf.$how" 2>&1 &
	pid=$!
	i=0
	while ! grep -q ready "$PST_TMP/vf.$how" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	sleep 0.2
	kill -TERM $pid
	# Dead within 3 s, or it hangs in the vfork wait (the FIFO's opener keeps it there).
	i=0
	while kill -0 $pid 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
	if kill -0 $pid 2>/dev/null; then
		fail "vfork-fifo ($how): still alive 3 s after SIGTERM"
		# Let the child go, so that the parent ends.
		: >"$f" &
		sleep 0.2
	else
		pass "vfork-fifo ($how): died on SIGTERM while waiting in vfork"
	fi
	wait $pid 2>/dev/null
	echo "rc=$?" >>"$PST_TMP/vf.$how"
	# The orphaned child still blocks on the FIFO: let it go.
	( : >"$f" ) 2>/dev/null &
	sleep 0.1
	kill $! 2>/dev/null
done
grep -q 'rc=143' "$PST_TMP/vf.none" || fail "vfork-fifo without the shim: $(cat "$PST_TMP/vf.none")"

# 3. TERM then INT, TERM then USR1: always TERM, no handler.
for sig2 in INT USR1; do
	for how in none default record; do
		# shellcheck disable=SC2046
		"$S" race $sig2 20 env $(how_vars $how) "$S" wait-usr1 >"$PST_TMP/race.$sig2.$how" 2>/dev/null
		n=$(grep -c '^signal 15$' "$PST_TMP/race.$sig2.$how")
		[ "$n" = 20 ] && pass "TERM then $sig2 ($how): 20 of 20 ended by TERM, no handler ran" ||
			fail "TERM then $sig2 ($how): $(sort "$PST_TMP/race.$sig2.$how" | uniq -c | tr '\n' ';')"
	done
done

# 4. errno after one-shot handlers.
for how in $hows; do
	run_how $how "$S" errno-oneshot >"$PST_TMP/errno.$how" 2>/dev/null
done
grep -q '^handled=1 errno=34$' "$PST_TMP/errno.none" ||
	fail "errno-oneshot without the shim: $(cat "$PST_TMP/errno.none")"
for how in default record stats-off; do
	cmp -s "$PST_TMP/errno.none" "$PST_TMP/errno.$how" &&
		pass "errno after one-shot handlers as without the shim ($how)" ||
		fail "errno after one-shot handlers ($how): $(tr '\n' ' ' <"$PST_TMP/errno.$how"), without: $(tr '\n' ' ' <"$PST_TMP/errno.none")"
done
finish
