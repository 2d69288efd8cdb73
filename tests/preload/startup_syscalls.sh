#!/bin/sh
# SPDX-License-Identifier: MIT
# What start-up costs a process that never asks for a large buffer, in
# system calls after its exec (strace): /bin/true with and without the
# shim.  The private jemalloc initialises with the pool arena, on the
# first pooled request (issue 26): before, every process paid its set-up
# (the overcommit and THP probes, 2+2+4 MiB of MAP_NORESERVE
# reservations, some 16 calls).  Budgets, in calls added: the default
# settings 90 (83 now, 99 before), nothing reading the counters
# (POOLSHIM_STATS=off, POOLSHIM_LIVE=off) 55 (48 now, 64 before).  What
# remains is loading libpoolshim.so and the libraries it needs (liburing,
# libm, libgcc_s: some 8 calls each), the live file and the exit report;
# issue 26's targets (10 more, 2 outside POOLSHIM_PROGRAMS) need those
# gone too.
. "$PS_TOP_SRCDIR/tests/lib.sh"
command -v strace >/dev/null 2>&1 || skip "strace not installed"
TRUE=$(command -v true)
[ -x /bin/true ] && TRUE=/bin/true
strace -o /dev/null "$TRUE" 2>/dev/null || skip "strace cannot trace here"

# count [VAR=VALUE...]: system calls of $TRUE after its exec; its trace in $PST_TMP/trace.
count() {
	env "$@" strace -o "$PST_TMP/raw" "$TRUE" >/dev/null 2>&1 || { echo failed; return; }
	awk -v t="$TRUE" 'f && !/^\+\+\+|exited with/ { print } index($0, "execve(\"" t "\"") == 1 { f = 1 }' \
		"$PST_TMP/raw" >"$PST_TMP/trace"
	wc -l <"$PST_TMP/trace"
}

none=$(count)
for spec in "default:90:POOLSHIM_STATS=stderr" "quiet:55:POOLSHIM_STATS=off:POOLSHIM_LIVE=off"; do
	name=${spec%%:*} rest=${spec#*:}
	budget=${rest%%:*} vars=$(echo "${rest#*:}" | tr ':' ' ')
	# shellcheck disable=SC2086
	n=$(count LD_PRELOAD="$SHIM" $vars)
	if [ "$n" = failed ] || [ "$none" = failed ]; then
		fail "$name: strace run failed"
		continue
	fi
	added=$((n - none))
	if [ "$added" -le "$budget" ]; then
		pass "$name: $n system calls after exec, $none without the shim: $added added (budget $budget)"
	else
		fail "$name: $n system calls after exec, $none without the shim: $added added, over the budget of $budget"
	fi
	# jemalloc's set-up is the pool's: not in a process that never pools.
	if grep -q 'overcommit_memory\|transparent_hugepage/enabled\|MAP_NORESERVE' "$PST_TMP/trace"; then
		fail "$name: jemalloc initialised in a process that never pooled:"
		grep 'overcommit_memory\|transparent_hugepage/enabled\|MAP_NORESERVE' "$PST_TMP/trace"
	else
		pass "$name: no jemalloc set-up"
	fi
done
finish
