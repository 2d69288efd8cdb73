#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45, case 5: records do not pile up while a run goes on.  A shell
# under the wrapper runs 100 short programs, each of which keeps its
# report in its record (dd closes its stderr before it exits, so its
# report cannot be written by itself, with or without the wrapper), each
# followed by a `sleep 0.01` that writes its own: the wrapper's helper
# delivers each kept report and removes its record within its sweep
# (20 ms after a process of the run kept one, else 100 ms, plus what
# rendering takes when it gets the CPU), so the live directory never holds more than a few
# records at once (3 or 4 at load 8 to 9, 27 to 44 when the machine's
# other jobs starve the helper of CPU for a while: the check allows 50, a
# half; before issue 45 all of them stayed until the shell ended, 201),
# every report reaches the wrapper's stderr, and none is left once the run
# has ended.
# In a systemd unit's run, processes that end cleanly leave no record.
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
for p in "$PS" "$SHIM"; do
	[ -x "$p" ] || [ -f "$p" ] || { echo "ERROR: $p not built"; exit 99; }
done
command -v python3 >/dev/null || skip "python3 is needed"
export POOLSHIM_LIBRARY="$SHIM"
unset POOLSHIM_STATS POOLSHIM_STATS_FORMAT LD_PRELOAD POOLSHIM_RUN
L="$PST_TMP/live"
mkdir "$L"
export POOLSHIM_LIVE_DIR="$L"

# The run, with the live directory counted every 10 ms while it goes on.
python3 - "$PS" "$L" "$PST_TMP/err" >"$PST_TMP/most" <<'PY'
import os, subprocess, sys, time
ps, live, err = sys.argv[1:4]
loop = "for i in $(seq 100); do dd if=/dev/zero of=/dev/null bs=64k count=2 2>/dev/null; sleep 0.01; done"
p = subprocess.Popen([ps, "sh", "-c", loop], stderr=open(err, "w"))
most = 0
while p.poll() is None:
    most = max(most, len(os.listdir(live)))
    time.sleep(0.01)
print(most)
PY
most=$(cat "$PST_TMP/most")
[ "$most" -le 50 ] && pass "100 dd and 100 sleep under the wrapper: at most $most records at once" ||
	fail "100 dd and 100 sleep under the wrapper: $most records at once"
# Once the run has ended: every dd's report on the wrapper's stderr, no record left.
n=0
while [ -n "$(ls -A "$L")" ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
dd=$(grep -c '^==== poolshim report: pid [0-9]* (dd) ====$' "$PST_TMP/err")
[ "$dd" = 100 ] && [ -z "$(ls -A "$L")" ] &&
	pass "every dd's report delivered, no record left" ||
	fail "$dd dd reports of 100; left: $(ls -A "$L" | wc -l) records"

# A systemd unit's run (POOLSHIM_RUN=its name, as the drop-in sets it):
# processes that end cleanly write their own reports and leave no record
# (before, each kept its report in its record until the unit stopped and
# ExecStopPost= collected: 100 here).
rm -f "$L"/*
env LD_PRELOAD="$SHIM" POOLSHIM_RUN=unit sh -c 'for i in $(seq 50); do head -c 300000 /dev/zero | cat >/dev/null; done' \
	2>"$PST_TMP/unit.err"
n=$(grep -c '^==== poolshim report: pid [0-9]* (cat) ====$' "$PST_TMP/unit.err")
[ "$n" = 50 ] && [ -z "$(ls -A "$L")" ] &&
	pass "a unit's run: 50 cat write their own reports, no record left" ||
	fail "a unit's run: $n cat reports of 50, $(ls -A "$L" | wc -l) records left"
finish
