#!/bin/sh
# SPDX-License-Identifier: MIT
# The `poolshim` wrapper sees its program end (issue 34; since issue 45
# the program is the wrapper's own process, exec'd in place, and a
# detached helper delivers): the caller sees the program's exit code
# (exit 3 gives 3, SIGKILL gives 137 in the shell), and the wrapper's
# stderr gets the report of the program and of a worker that SIGKILL
# ended, with their counts, within the helper's bound (a relative report
# path is the starting directory's); a SIGTERM reaches the program exactly
# once, and a signal reaches it once also when the program sends it to its
# own process group or ^C on the terminal sends it to both; the program's
# blocked, ignored and caught signals are those it has without the
# wrapper; a program that starts a daemon returns at once, and the
# daemon's record stays for `poolshim collect`.
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
H="$PS_TOP_BUILDDIR/tests/tools/run_helper"
for p in "$PS" "$H" "$SHIM"; do
	[ -x "$p" ] || [ -f "$p" ] || { echo "ERROR: $p not built"; exit 99; }
done
export POOLSHIM_LIBRARY="$SHIM"
# This test's processes only, and every record they leave is removed with $PST_TMP.
mkdir "$PST_TMP/live"
export POOLSHIM_LIVE_DIR="$PST_TMP/live"
unset POOLSHIM_STATS POOLSHIM_STATS_FORMAT LD_PRELOAD POOLSHIM_RUN

# wait_for FILE: until it exists (60 s at most: a hang detector).
wait_for() {
	n=0
	while [ ! -s "$1" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
	[ -s "$1" ]
}
# report_within ERRFILE PID CALLS: has_report, within 10 s (the helper
# writes a killed process's report within 200 ms of its end; the machine
# may be busy).
report_within() {
	n=0
	until has_report "$@"; do
		[ $n -lt 100 ] || return 1
		sleep 0.1
		n=$((n + 1))
	done
}
# has_report ERRFILE PID CALLS: a report for PID whose read and write rows
# count CALLS calls each (64 KiB each).
has_report() {
	awk -v pid="$2" -v n="$3" '
		$0 ~ "^==== poolshim report: pid " pid " " { in_r = 1; next }
		/^==== end of poolshim report/ { in_r = 0 }
		in_r && $1 == "read" && $3 == n { r = 1 }
		in_r && $1 == "write" && $3 == n { w = 1 }
		END { exit !(r && w) }' "$1"
}

# Exit codes, and a program that cannot be run.
"$PS" sh -c 'exit 3' 2>"$PST_TMP/e0"
rc=$?
[ $rc = 3 ] && pass "exit 3 gives 3" || fail "exit 3 gave $rc: $(cat "$PST_TMP/e0")"
"$PS" "$PST_TMP/no-such-program" 2>"$PST_TMP/e0"
rc=$?
[ $rc = 127 ] && grep -q 'no-such-program' "$PST_TMP/e0" && pass "a missing program: 127, named" ||
	fail "a missing program: $rc: $(cat "$PST_TMP/e0")"

# A relative report path is the directory poolshim started in (the
# wrapper, not the process, writes it).
mkdir "$PST_TMP/sub"
(cd "$PST_TMP/sub" && "$PS" POOLSHIM_STATS=rel.json dd if=/dev/zero of=/dev/null bs=64k count=5 2>"$PST_TMP/e0")
[ -s "$PST_TMP/sub/rel.json" ] && pass "a relative POOLSHIM_STATS: written in the starting directory" ||
	fail "a relative POOLSHIM_STATS: $(ls "$PST_TMP/sub") $(cat "$PST_TMP/e0")"

# The program killed by SIGKILL: the wrapper prints its report (counts as
# they were) and the shell sees 137.
"$PS" "$H" work 50 "$PST_TMP/r1" 2>"$PST_TMP/e1" &
wp=$!
if wait_for "$PST_TMP/r1"; then
	pid=$wp
	kill -KILL "$pid"
	wait $wp
	rc=$?
	[ $rc = 137 ] && pass "program killed by SIGKILL: the wrapper exits 137" ||
		fail "program killed by SIGKILL: the wrapper exits $rc"
	report_within "$PST_TMP/e1" "$pid" 50 && pass "program killed by SIGKILL: its report, 50 reads and writes, on the wrapper's stderr" ||
		fail "program killed by SIGKILL: no report with its counts: $(cat "$PST_TMP/e1")"
else
	fail "work helper never got ready: $(cat "$PST_TMP/e1")"
	kill -KILL $wp
fi

# Through a pipe the caller reads the killed program's report before end
# of file: the helper, which writes it after the program's end, holds the
# pipe until it is done ($(...) waits for it).
out=$("$PS" python3 -c 'import os; open("/dev/zero", "rb").read(65536); os.kill(os.getpid(), 9)' 2>&1)
printf '%s\n' "$out" | grep -q '^==== poolshim report: pid [0-9]* (python3) ====$' &&
	printf '%s\n' "$out" | grep -q '^==== end of poolshim report' &&
	pass "\$(poolshim prog 2>&1): a killed program's report is in it" ||
	fail "\$(poolshim prog 2>&1) of a killed program: $out"

# A worker killed by SIGKILL while the program lives on: its report too.
"$PS" "$H" worker 40 "$PST_TMP/r2" 2>"$PST_TMP/e2" &
wp=$!
if wait_for "$PST_TMP/r2"; then
	wpid=$(cat "$PST_TMP/r2")
	kill -KILL "$wpid"
	wait $wp
	rc=$?
	[ $rc = 0 ] && report_within "$PST_TMP/e2" "$wpid" 40 &&
		pass "worker killed by SIGKILL: its report (40 reads and writes) on the wrapper's stderr" ||
		fail "worker killed by SIGKILL: exit $rc, report: $(cat "$PST_TMP/e2")"
else
	fail "worker helper never got ready: $(cat "$PST_TMP/e2")"
	kill -KILL $wp
fi

# Twenty workers killed at once, and the program exits as soon as it has
# reaped them: their twenty reports are on the wrapper's stderr when the
# caller's wait returns (the program, ending, waits for the helper to
# deliver them; without that, 0 to 19 of them were there).
mkdir "$PST_TMP/many"
"$PS" sh -c 'H=$0 d=$1; pids=; for i in $(seq 20); do "$H" work 5 "$d/r$i" & pids="$pids $!"; done
	n=0; while [ "$(ls "$d" | grep -c "^r[0-9]*$")" -lt 20 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done
	kill -KILL $pids; wait; exit 0' "$H" "$PST_TMP/many" 2>"$PST_TMP/many.err"
rc=$?
n=$(grep -c '^==== poolshim report: pid [0-9]* (run_helper) ====$' "$PST_TMP/many.err")
[ $rc = 0 ] && [ "$n" = 20 ] && pass "20 workers killed, the program exits: their 20 reports there when the wait returns" ||
	fail "20 workers killed, the program exits $rc: $n reports there when the wait returns"

# SIGTERM to the wrapper reaches the program once; the program's clean
# exit after it prints its report (its own: there before the wait returns).
"$PS" "$H" countterm 30 "$PST_TMP/r3" "$PST_TMP/c3" 2>"$PST_TMP/e3" &
wp=$!
if wait_for "$PST_TMP/r3"; then
	pid=$wp
	kill -TERM $wp
	wait $wp
	rc=$?
	n=$(cat "$PST_TMP/c3" 2>/dev/null)
	[ $rc = 0 ] && [ "$n" = 1 ] && pass "TERM to the wrapper: the program gets it once" ||
		fail "TERM to the wrapper: exit $rc, the program got it '$n' times"
	has_report "$PST_TMP/e3" "$pid" 30 && pass "TERM, clean exit: the program's report on the wrapper's stderr" ||
		fail "TERM, clean exit: no report: $(cat "$PST_TMP/e3")"
else
	fail "countterm helper never got ready: $(cat "$PST_TMP/e3")"
	kill -KILL $wp
fi

# The program sends a signal to its own process group (the wrapper's, in
# a session of its own here): it is not passed on a second time.  A
# realtime signal, which queues: a second copy would always be delivered.
setsid "$PS" "$H" countrt 30 "$PST_TMP/r4" "$PST_TMP/c4" self 2>"$PST_TMP/e4" &
wp=$!
if wait_for "$PST_TMP/c4"; then
	wait $wp
	rc=$?
	n=$(cat "$PST_TMP/c4")
	[ $rc = 0 ] && [ "$n" = 1 ] && pass "the program's SIGRTMIN+1 to its own process group: it gets it once" ||
		fail "the program's SIGRTMIN+1 to its own process group: exit $rc, it got it '$n' times"
else
	fail "countterm helper (own session) never ended: $(cat "$PST_TMP/e4")"
	kill -KILL $wp
fi

# ^C on the terminal: the kernel sends SIGINT to the whole foreground
# process group, the program included, so the wrapper does not pass its
# copy on (si_code SI_KERNEL): the program's handler runs once.
python3 - "$PS" "$H" "$PST_TMP/r6" "$PST_TMP/c6" >"$PST_TMP/e6" 2>&1 <<'PY'
import os, pty, select, sys, time
ps, helper, ready, out = sys.argv[1:5]
pid, fd = pty.fork()
if pid == 0:
    os.execv(ps, [ps, helper, "countint", "10", ready, out])
def drain(t):
    r, _, _ = select.select([fd], [], [], t)
    if r:
        try:
            os.read(fd, 65536)
        except OSError:
            pass
end = time.time() + 60
while not os.path.exists(ready) and time.time() < end:
    drain(0.1)
os.write(fd, b"\x03")
while time.time() < end:
    drain(0.1)
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("status", status)
        break
else:
    os.kill(pid, 9)
    print("hung")
PY
n=$(cat "$PST_TMP/c6" 2>/dev/null)
[ "$n" = 1 ] && grep -qx 'status 0' "$PST_TMP/e6" && pass "^C on the terminal: the program gets SIGINT once" ||
	fail "^C on the terminal: the program got SIGINT '$n' times; $(cat "$PST_TMP/e6")"

# The program's signal state: blocked USR2, ignored HUP and QUIT (as a
# shell's background job or nohup leaves them), nothing caught; compared
# with the same program started the same way without the wrapper.
launch='import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGQUIT, signal.SIG_IGN)
os.execvp(sys.argv[1], sys.argv[1:])'
python3 -c "$launch" grep -E '^Sig(Blk|Ign|Cgt)' /proc/self/status >"$PST_TMP/sig.plain" 2>/dev/null
python3 -c "$launch" "$PS" POOLSHIM_STATS=off grep -E '^Sig(Blk|Ign|Cgt)' /proc/self/status \
	>"$PST_TMP/sig.shim" 2>/dev/null
python3 -c "$launch" "$PS" POOLSHIM_STATS=off sh -c 'exec grep -E "^Sig(Blk|Ign|Cgt)" /proc/self/status' \
	>"$PST_TMP/sig.exec" 2>/dev/null
if [ "$(wc -l <"$PST_TMP/sig.plain")" = 3 ] && cmp -s "$PST_TMP/sig.plain" "$PST_TMP/sig.shim" &&
	cmp -s "$PST_TMP/sig.plain" "$PST_TMP/sig.exec"; then
	pass "SigBlk/SigIgn/SigCgt under the wrapper, and after an exec, as without it: $(tr '\n\t' '  ' <"$PST_TMP/sig.plain")"
else
	fail "signal state: without: $(cat "$PST_TMP/sig.plain") / under the wrapper: $(cat "$PST_TMP/sig.shim") / after exec: $(cat "$PST_TMP/sig.exec")"
fi

# A program that starts a daemon and returns: the wrapper returns with it
# (within the hang detector's 60 s, not the daemon's life), and the
# daemon's record stays in the live directory for `poolshim collect`.
timeout 60 "$PS" "$H" daemon 20 "$PST_TMP/r5" >/dev/null 2>"$PST_TMP/e5"
rc=$?
if [ $rc = 0 ] && wait_for "$PST_TMP/r5"; then
	dpid=$(cat "$PST_TMP/r5")
	at_exit "kill -KILL $dpid 2>/dev/null"
	ls "$PST_TMP/live" | grep -q "^poolshim-$dpid-[0-9]*\.stats\$" && kill -0 "$dpid" &&
		pass "daemonizing program: the wrapper returned, the daemon's record is left" ||
		fail "daemonizing program: no record for the daemon $dpid: $(ls "$PST_TMP/live")"
	kill -KILL "$dpid"
else
	fail "daemonizing program: the wrapper exits $rc: $(cat "$PST_TMP/e5")"
fi
finish
