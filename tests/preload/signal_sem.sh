#!/bin/sh
# SPDX-License-Identifier: MIT
# POOLSHIM_DUMP_SIGNAL must not change the program's signal semantics: each
# scenario of signal_sem runs without the shim and under it (the dump on
# that very signal), and what the program sees and its exit status must be
# identical: EINTR without SA_RESTART and a restarted read with it, sa_mask
# and SA_NODEFER inside the handler, SA_RESETHAND (one delivery, then the
# default), the flags sigaction() reports, SIG_IGN kept across exec and by
# the kernel for SIGCHLD.  Signals whose default does not end the program
# are refused with one line naming the variable, and change nothing.
. "$PS_TOP_SRCDIR/tests/lib.sh"
S="$PRELOAD_BIN/signal_sem"

# same NAME SIG ARGS...: the scenario without and with the shim; stdout and
# exit status must match.  The shim run's stderr is left in $PST_TMP/NAME.err.
same() {
	name=$1 sig=$2
	shift 2
	timeout 20 "$S" "$@" >"$PST_TMP/$name.plain" 2>&1
	rc0=$?
	timeout 20 env POOLSHIM_LIVE_DIR="$PST_TMP" POOLSHIM_DUMP_SIGNAL="$sig" POOLSHIM_STATS="$PST_TMP/$name.json" \
		SEM_PROBE="$PST_TMP/$name.json" LD_PRELOAD="$SHIM" "$S" "$@" \
		>"$PST_TMP/$name.shim" 2>"$PST_TMP/$name.err"
	rc1=$?
	if [ $rc0 = $rc1 ] && cmp -s "$PST_TMP/$name.plain" "$PST_TMP/$name.shim"; then
		pass "$name: as without the shim (status $rc1): $(head -n 1 "$PST_TMP/$name.shim")"
	else
		fail "$name: without the shim (status $rc0):"
		sed 's/^/    /' "$PST_TMP/$name.plain"
		echo "  under the shim, POOLSHIM_DUMP_SIGNAL=$sig (status $rc1):"
		sed 's/^/    /' "$PST_TMP/$name.shim" "$PST_TMP/$name.err"
	fi
}

# 1. a handler without SA_RESTART interrupts a blocking read; with it, restarts
same read-norestart USR2 read USR2 norestart
grep -q '^read=-1 errno=EINTR handled=1$' "$PST_TMP/read-norestart.plain" ||
	fail "read-norestart: the kernel gave $(cat "$PST_TMP/read-norestart.plain")"
grep -q '^probe=1$' "$PST_TMP/read-norestart.err" &&
	pass "read-norestart: the dump was written before the program's handler ran" ||
	fail "read-norestart: no dump on USR2: $(cat "$PST_TMP/read-norestart.err")"
same read-restart USR2 read USR2 restart
same read-norestart-alrm ALRM read ALRM norestart

# 2. the handler runs with the program's sa_mask; SA_NODEFER
same mask USR2 mask USR2
same mask-nodefer USR2 mask USR2 nodefer
same mask-term TERM mask TERM

# 3. SA_RESETHAND: one delivery, then the default (TERM ends the program,
# reported as SIG_DFL in between); the dump still happens
same resethand TERM resethand TERM
[ -s "$PST_TMP/resethand.json" ] && pass "resethand: report written" || fail "resethand: no report"

# 4. what sigaction() and signal() report is what the kernel would report
same flags-usr2 USR2 flags USR2
same flags-hup HUP flags HUP
same family USR2 family USR2

# 5. SIG_IGN survives exec, set by the program or inherited (nohup, trap '')
same ign-exec HUP ign-exec HUP
same ign-exec-usr2 USR2 ign-exec USR2
same ign-raise USR2 ign-raise USR2
grep -q '^probe=0$' "$PST_TMP/ign-raise.err" && pass "ign-raise: no dump while the program ignores the signal" ||
	fail "ign-raise: dumped while ignored: $(cat "$PST_TMP/ign-raise.err")"
(trap '' USR2; same ign-inherited USR2 report USR2; finish) || pst_fail=1
grep -q '^started with: IGN' "$PST_TMP/ign-inherited.plain" || fail "trap '' did not ignore USR2"
(trap '' HUP; same ign-inherited-exec HUP ign-exec HUP; finish) || pst_fail=1

# 6. signals whose default is not to end the program are refused: one line
# at start naming the variable, the value and what is accepted; the dump is
# off and nothing changes
for sig in CHLD WINCH CONT URG TSTP TTIN TTOU STOP KILL 33 99 bogus; do
	case $sig in
	STOP | KILL | 33 | 99 | bogus) num=USR1 ;;
	*) num=$sig ;;
	esac
	same "refuse-$sig" "$sig" flags "$num"
	n=$(grep -c "POOLSHIM_DUMP_SIGNAL='$sig'.*accepted" "$PST_TMP/refuse-$sig.err")
	[ "$n" = 1 ] && [ "$(wc -l <"$PST_TMP/refuse-$sig.err")" = 1 ] &&
		pass "refuse-$sig: $(cat "$PST_TMP/refuse-$sig.err")" ||
		fail "refuse-$sig: want one line naming POOLSHIM_DUMP_SIGNAL='$sig', got: $(cat "$PST_TMP/refuse-$sig.err")"
done
same reap-chld CHLD reap CHLD
grep -q '^waitpid=ECHILD$' "$PST_TMP/reap-chld.plain" || fail "reap-chld: the kernel gave $(cat "$PST_TMP/reap-chld.plain")"
finish
