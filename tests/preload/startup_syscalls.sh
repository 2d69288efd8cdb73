#!/bin/sh
# SPDX-License-Identifier: MIT
# What start-up costs a process that does nothing (issue 26), in system
# calls after its exec (strace): /bin/true with the shim preloaded against
# the same with an empty preloaded library, which costs what the dynamic
# loader's mapping of any library does (some nine calls: open, read, stat,
# four maps, close, mprotect).  Budgets, in calls the shim adds beyond
# that (the issue's targets count from no preload at all; the note on
# issue 26 gives both):
#   outside POOLSHIM_PROGRAMS, and POOLSHIM=off          2  (1 now; 29 before)
#   nothing reading the counters (STATS=off, LIVE=off)   4  (3 now; 39 before)
#   default settings (report on stderr, live file on)   10  (8 now; 74 before
#       issue 26, 18 before issue 34: liburing, libm and libgcc_s loaded,
#       the live file made, mapped and removed, its /proc and statfs
#       probes, the io_uring canary, the signal handlers read then set,
#       glibc's heap set up for a thread-exit registration)
# What remains by default: the pid and fd 2's identity at start; at the
# end the pid, fd 2 checked again, getrusage, uname and the report's
# write.  No signal is taken, nothing is allocated or registered at start
# (the exit hook rides on the program's own atexit registrations), no
# shared library is loaded beside the shim, and no live file is made by a
# process this short.
# Counted with the default live directory, as a user runs it.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
command -v strace >/dev/null 2>&1 || skip "strace not installed"
TRUE=$(command -v true)
[ -x /bin/true ] && TRUE=/bin/true
EMPTY="$PRELOAD_BIN/.libs/libemptypreload.so"
[ -f "$EMPTY" ] || fail "no $EMPTY (make check builds it)"
strace -o /dev/null "$TRUE" 2>/dev/null || skip "strace cannot trace here"

# count [VAR=VALUE...]: system calls of $TRUE after its exec; its trace in $PST_TMP/trace.
count() {
	env "$@" strace -o "$PST_TMP/raw" "$TRUE" >/dev/null 2>&1 || { echo failed; return; }
	awk -v t="$TRUE" 'f && !/^\+\+\+|exited with/ { print } index($0, "execve(\"" t "\"") == 1 { f = 1 }' \
		"$PST_TMP/raw" >"$PST_TMP/trace"
	wc -l <"$PST_TMP/trace"
}

none=$(count)
empty=$(count LD_PRELOAD="$EMPTY")
[ "$none" != failed ] && [ "$empty" != failed ] || { fail "strace runs failed"; finish; }
echo "# /bin/true: $none system calls after exec, $empty with an empty library preloaded"
for spec in "out-of-scope:2:POOLSHIM_PROGRAMS=nothing-runs-this" "off:2:POOLSHIM=off" \
	"quiet:4:POOLSHIM_STATS=off:POOLSHIM_LIVE=off" "default:10:POOLSHIM_STATS=stderr"; do
	name=${spec%%:*} rest=${spec#*:}
	budget=${rest%%:*} vars=$(echo "${rest#*:}" | tr ':' ' ')
	# shellcheck disable=SC2086
	n=$(count LD_PRELOAD="$SHIM" $vars)
	if [ "$n" = failed ]; then
		fail "$name: strace run failed"
		continue
	fi
	added=$((n - empty))
	if [ "$added" -le "$budget" ]; then
		pass "$name: $n system calls after exec: $added beyond an empty preload (budget $budget), $((n - none)) beyond none"
	else
		fail "$name: $n system calls after exec: $added beyond an empty preload, over the budget of $budget:"
		sed 's/^/#   /' "$PST_TMP/trace" | tail -n "$added"
	fi
	if grep -E 'open.*\.so' "$PST_TMP/trace" | grep -v "$(basename "$SHIM")\|libc\.so\|ld\.so\.cache" >"$PST_TMP/libs"; then
		fail "$name: libraries loaded beside the shim: $(cat "$PST_TMP/libs")"
	else
		pass "$name: no library loaded but the shim and libc"
	fi
	# jemalloc's set-up is the pool's, the live file a working process's.
	if grep -q 'overcommit_memory\|transparent_hugepage/enabled\|MAP_NORESERVE\|poolshim-.*\.stats' "$PST_TMP/trace"; then
		fail "$name: jemalloc set up, or a live file made, in a process that did nothing:"
		grep 'overcommit_memory\|transparent_hugepage/enabled\|MAP_NORESERVE\|poolshim-.*\.stats' "$PST_TMP/trace"
	else
		pass "$name: no jemalloc set-up, no live file"
	fi
done
finish
