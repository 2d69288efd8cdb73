#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45: the `poolshim` wrapper with pid namespaces and daemons.
#   6. `poolshim unshare -fp --mount-proc sh -c ...`: every process's
#      report is delivered (those that exit, as the library alone prints
#      them; one SIGKILL ended inside the namespace, by the wrapper's
#      helper once the namespace has ended) and no record is left;
#      `poolshim collect` renders a record of an ended namespace (before:
#      "nothing to collect").  A daemon that outlives the program writes
#      its report when it ends, and leaves no record.
#   7. the wrapper as PID 1 of a namespace (`unshare -fp poolshim prog`):
#      the program is PID 1, orphans come to it, and its death by
#      SIGSEGV is the namespace's, as without the wrapper (before: the
#      wrapper was PID 1, orphans never reached the program, and the
#      death became exit 139).
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
H="$PS_TOP_BUILDDIR/tests/tools/run_helper"
C="$PS_TOP_BUILDDIR/tools/poolshim-collect"
for p in "$PS" "$H" "$C" "$SHIM"; do
	[ -x "$p" ] || [ -f "$p" ] || { echo "ERROR: $p not built"; exit 99; }
done
command -v python3 >/dev/null || skip "python3 is needed"
command -v unshare >/dev/null || skip "unshare is needed"
export POOLSHIM_LIBRARY="$SHIM"
unset POOLSHIM_STATS POOLSHIM_STATS_FORMAT LD_PRELOAD POOLSHIM_RUN
L="$PST_TMP/live"
mkdir "$L"
export POOLSHIM_LIVE_DIR="$L"
# A pid namespace: as root, or in a user namespace of one's own.
US="unshare -fp --mount-proc"
$US true 2>/dev/null || US="unshare -Urfp --mount-proc"
$US true 2>/dev/null || skip "no pid namespace can be made here"

# titles FILE: the programs whose reports FILE holds, sorted, one line
# (not sleep: how many the wait loop runs varies; not unshare, which runs
# under the shim only under the wrapper, and has a report only when it
# did something).
titles() {
	sed -n 's/^==== poolshim report: pid [0-9]* (\(.*\)) ====$/\1/p' "$1" | grep -vx -e sleep -e unshare |
		sort | tr '\n' ' '
}

# 6. Work that exits (head, cat, sh) and a worker killed inside the namespace.
script="head -c 300000 /dev/zero | cat >/dev/null
'$H' work 5 '$PST_TMP/ready' & while [ ! -e '$PST_TMP/ready' ]; do sleep 0.05; done
kill -KILL \$!; wait"
$US env LD_PRELOAD="$SHIM" sh -c "$script" 2>"$PST_TMP/alone.err"
alone=$(titles "$PST_TMP/alone.err")
rm -f "$PST_TMP/ready" "$L"/*
"$PS" $US sh -c "$script" 2>"$PST_TMP/ns.err"
rc=$?
n=0
while [ -n "$(ls -A "$L")" ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
shim=$(titles "$PST_TMP/ns.err")
want=$(printf '%s\n' $alone run_helper | sort | tr '\n' ' ')
[ $rc = 0 ] && [ "$shim" = "$want" ] && [ -z "$(ls -A "$L")" ] &&
	pass "6. poolshim $US: the library alone's reports ($alone), the killed worker's, no record left" ||
	fail "6. poolshim $US: exit $rc, reports '$shim' (want '$want'), records left: $(ls -A "$L") $(grep -v '^[a-z=+ -]' "$PST_TMP/ns.err" | head -5)"

# The same killed worker with the library alone: its record, of a
# namespace that has ended, is rendered by `poolshim collect`.
rm -f "$PST_TMP/ready" "$L"/*
$US env LD_PRELOAD="$SHIM" POOLSHIM_RUN=nsrun sh -c "$script" 2>/dev/null
"$C" --run nsrun >"$PST_TMP/collect.out" 2>&1
grep -q '^==== poolshim report: pid [0-9]* (run_helper) ====$' "$PST_TMP/collect.out" && [ -z "$(ls -A "$L")" ] &&
	pass "6. a record of a pid namespace that has ended: collect renders it" ||
	fail "6. a record of an ended pid namespace: collect said: $(head -3 "$PST_TMP/collect.out"); left: $(ls -A "$L")"

# A daemon: it outlives the program (and the wrapper's helper), then ends.
rm -f "$L"/*
"$PS" sh -c "setsid sh -c 'sleep 0.5; head -c 300000 /dev/zero | cat >/dev/null' &" 2>"$PST_TMP/daemon.err"
n=0
until grep -q '(cat) ====$' "$PST_TMP/daemon.err" && [ -z "$(ls -A "$L")" ] || [ $n -ge 50 ]; do
	sleep 0.1
	n=$((n + 1))
done
grep -q '(head) ====$' "$PST_TMP/daemon.err" && grep -q '(cat) ====$' "$PST_TMP/daemon.err" &&
	[ -z "$(ls -A "$L")" ] &&
	pass "6. a daemon that outlives the program: its reports written when it ends, no record left" ||
	fail "6. a daemon: reports '$(titles "$PST_TMP/daemon.err")', records left: $(ls -A "$L")"

# 7. PID 1: orphans and a death by SIGSEGV, plainly and under the wrapper.
cat >"$PST_TMP/pid1.py" <<'PY'
import ctypes, os, time
c = os.fork()
if c == 0:
    if os.fork() == 0:
        time.sleep(0.2)
        os._exit(0)
    os._exit(0)
os.waitpid(c, 0)
time.sleep(0.6)
try:
    print("orphan reaped by pid 1" if os.waitpid(-1, os.WNOHANG)[0] > 0 else "orphan still running")
except ChildProcessError:
    print("no orphan came to pid 1")
print("the program is pid", os.getpid(), flush=True)
ctypes.string_at(0)
PY
run_pid1() {
	python3 -c '
import subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
print(p.stdout.decode().strip().replace("\n", "; "), "| status", p.returncode)' "$@"
}
plain=$(run_pid1 $US python3 "$PST_TMP/pid1.py")
shim=$(run_pid1 $US "$PS" python3 "$PST_TMP/pid1.py")
[ -n "$plain" ] && [ "$plain" = "$shim" ] &&
	pass "7. PID 1 of a namespace: as without the wrapper: $plain" ||
	fail "7. PID 1 of a namespace: without the wrapper '$plain'; under it '$shim'"
finish
