#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45: the `poolshim` wrapper is a plain exec to whoever started it.
# Each scenario runs the program plainly and under the wrapper and the two
# must agree (wrapper_plain.py runs the caller's side):
#   1. a caller that ignores SIGCHLD gets the exit code at once;
#   2. STOP then CONT sent to the program's pid: the caller's wait returns
#      when the program ends;
#   3. a signal sent to each process of the job (as systemd's KillMode=
#      control-group does), or to its process group, arrives once;
#   4. PR_SET_PDEATHSIG set by a supervisor that then ends: the program
#      is killed;
#   8. a core dump: the caller's wait status has the core flag;
#   9. job control aimed at the process the caller started: ^Z stops the
#      job by SIGTSTP, kill -STOP stops the program, kill -KILL ends it.
# Before issue 45 (the wrapper the program's parent) every one differs:
# 1 hangs, 2 hangs with the wrapper stopped, 3 gives 2, 4 leaves the
# program running, 8 loses the core flag, 9 says SIGSTOP, leaves the
# program running and orphans it.
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
H="$PS_TOP_BUILDDIR/tests/tools/run_helper"
PY="$PS_TOP_SRCDIR/tests/tools/wrapper_plain.py"
for p in "$PS" "$H" "$SHIM"; do
	[ -x "$p" ] || [ -f "$p" ] || { echo "ERROR: $p not built"; exit 99; }
done
command -v python3 >/dev/null || skip "python3 is needed"
export POOLSHIM_LIBRARY="$SHIM"
unset POOLSHIM_STATS POOLSHIM_STATS_FORMAT LD_PRELOAD POOLSHIM_RUN

# same CASE: wrapper_plain.py's line for CASE, plain and under the wrapper.
same() {
	mkdir -p "$PST_TMP/$1.plain" "$PST_TMP/$1.shim"
	plain=$(python3 "$PY" "$1" "$PST_TMP/$1.plain" "$H" 2>&1)
	shim=$(python3 "$PY" "$1" "$PST_TMP/$1.shim" "$H" "$PS" 2>"$PST_TMP/$1.err")
	if [ -n "$plain" ] && [ "$plain" = "$shim" ]; then
		pass "$2: as without the wrapper: $plain"
	else
		fail "$2: without the wrapper: '$plain'; under it: '$shim' $(tail -3 "$PST_TMP/$1.err")"
	fi
}

# 1. SIGCHLD ignored by the caller (bash's trap '' CHLD is inherited).
for how in plain shim; do
	pre=
	[ $how = shim ] && pre="'$PS'"
	start=$(date +%s)
	timeout 5 bash -c "trap '' CHLD; $pre sh -c 'exit 5'" 2>/dev/null
	echo "rc $? in $(( $(date +%s) - start )) s" >"$PST_TMP/chld.$how"
done
p=$(cat "$PST_TMP/chld.plain") s=$(cat "$PST_TMP/chld.shim")
case "$p|$s" in
"rc 5 in "[012]" s|rc 5 in "[012]" s")
	pass "1. SIGCHLD ignored by the caller: exit 5 at once, as without the wrapper" ;;
*) fail "1. SIGCHLD ignored by the caller: without the wrapper $p, under it $s" ;;
esac

same stopcont "2. STOP then CONT to the program's pid"
same twice "3. SIGRTMIN+1 to each process of the job, and to its process group: arrivals"
same pdeathsig "4. PR_SET_PDEATHSIG(SIGKILL) of a supervisor that ends"
same core "8. a program that dumps core (SIGQUIT): the caller's wait status"
same jobctl "9. ^Z, kill -STOP and kill -KILL aimed at the process the caller started"
finish
