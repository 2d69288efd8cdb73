#!/bin/sh
# SPDX-License-Identifier: MIT
# What the exit report of a short process, and a fork child, cost in page
# faults (issue 26).
# A process that counted a few calls wrote a few rows of its 171 KiB
# counter block; the report must not read the others (each untouched page
# read maps the zero page with a fault of its own, ~10 us on this VM), nor
# every row of the sum it renders.  /bin/true with the report on against
# the same with nothing reading the counters: the minor faults (wait4's
# rusage, median of 7) may differ by at most 40 (about 12 now; ~90 when
# both blocks were read whole).  The report learns which pages were
# written from /proc/self/pagemap; without /proc it reads them all.
# A fork child zeroes its copy of the counters (its parent's work is not
# its own) by giving the pages back, not by writing them: 100 children of
# tests/preload/fork_cost, each counting one call and calling _exit, may
# fault at most 30 pages each more than without the shim (about 19 now;
# 56 when the child wrote zeros over its 171 KiB block).  A parent with a
# live file (it took a pooled buffer): the child moves off the file keeping
# only the header and each block's bookkeeping, at most 40 faults more
# than with POOLSHIM_LIVE=off (about 15 now; 97 when it copied every block
# twice).
. "$PS_TOP_SRCDIR/tests/lib.sh"
TRUE=$(command -v true)
[ -x /bin/true ] && TRUE=/bin/true
[ -r /proc/self/pagemap ] || skip "no /proc/self/pagemap: the report reads every page (by design)"

faults() {  # faults VAR=VALUE...: median minor faults of 7 runs of $TRUE under the shim
	python3 -c '
import os, sys
env = dict(os.environ, LD_PRELOAD=sys.argv[2])
env.update(a.split("=", 1) for a in sys.argv[3:])
null = os.open("/dev/null", os.O_WRONLY)
v = []
for _ in range(7):
    # posix_spawn (vfork): the child makes no copy-on-write faults before its exec.
    pid = os.posix_spawn(sys.argv[1], [sys.argv[1]], env, file_actions=[
        (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
    _, status, ru = os.wait4(pid, 0)
    if status != 0:
        sys.exit(1)
    v.append(ru.ru_minflt)
print(sorted(v)[3])' "$TRUE" "$SHIM" "$@"
}

quiet=$(faults POOLSHIM_STATS=off POOLSHIM_LIVE=off) || { fail "runs failed"; finish; }
report=$(faults POOLSHIM_STATS=stderr POOLSHIM_LIVE=off) || { fail "runs failed"; finish; }
json=$(faults POOLSHIM_STATS=stderr POOLSHIM_STATS_FORMAT=json POOLSHIM_LIVE=off) ||
	{ fail "runs failed"; finish; }
echo "# /bin/true minor faults: $quiet with nothing reading, $report with the text report, $json with JSON"
[ $((report - quiet)) -le 40 ] && pass "the text report adds $((report - quiet)) faults (budget 40)" ||
	fail "the text report adds $((report - quiet)) faults (budget 40): it reads pages it never wrote"
[ $((json - quiet)) -le 40 ] && pass "the JSON report adds $((json - quiet)) faults (budget 40)" ||
	fail "the JSON report adds $((json - quiet)) faults (budget 40)"

fork_faults() {  # fork_faults VAR=VALUE...: minor faults per child of fork_cost
	env "$@" "$PRELOAD_BIN/fork_cost" 100 2>/dev/null
}
plain=$(fork_faults X=1) && shim=$(fork_faults LD_PRELOAD="$SHIM" POOLSHIM_LIVE=off) ||
	{ fail "fork_cost runs failed"; finish; }
echo "# fork child minor faults: $plain without the shim, $shim with it"
[ $((shim - plain)) -le 30 ] && pass "a fork child faults $((shim - plain)) pages more (budget 30)" ||
	fail "a fork child faults $((shim - plain)) pages more (budget 30): its counters are written, not given back"
live=$(env LD_PRELOAD="$SHIM" POOLSHIM_STATS=off "$PRELOAD_BIN/fork_cost" 100 pool) &&
	nolive=$(env LD_PRELOAD="$SHIM" POOLSHIM_STATS=off POOLSHIM_LIVE=off "$PRELOAD_BIN/fork_cost" 100 pool) ||
	{ fail "fork_cost pool runs failed"; finish; }
echo "# fork child of a parent with a pool: $live faults with its live file, $nolive without"
[ $((live - nolive)) -le 40 ] && pass "leaving the parent's live file costs a child $((live - nolive)) faults (budget 40)" ||
	fail "leaving the parent's live file costs a child $((live - nolive)) faults (budget 40): blocks copied whole"
finish
