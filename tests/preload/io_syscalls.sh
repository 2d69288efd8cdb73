#!/bin/sh
# SPDX-License-Identifier: MIT
# The pass-through path adds no system call.  tests/preload/io_syscalls
# runs each loop (open + pread + close, pipe, socketpair, accept, dup, and
# /dev/null I/O) N and 2N times under strace, with and without the shim; the
# difference over N is the system calls of one iteration, and it must be the
# same under the shim.  Start-up and exit cancel out in the difference.
# The O_DIRECT io_uring path's calls are shown, not checked.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_syscalls"
command -v strace >/dev/null 2>&1 || skip "strace not installed"
strace -f -qq -o /dev/null true >/dev/null 2>&1 || skip "strace cannot trace here (ptrace refused)"
N=${PST_SYSCALLS_N:-200}

# Live files go to a directory of this test's own: a stale file in
# /dev/shm whose pid a run happens to reuse costs that run's start-up four
# more calls (lstat, geteuid, unlink, openat), which would not cancel out.
mkdir -p "$PST_TMP/live"

# syscalls MODE ITER [PRELOAD]: "name count" lines for one run, sorted.
syscalls() {
	# shellcheck disable=SC2086
	strace -f -qq -o "$PST_TMP/trace" ${3:+-E LD_PRELOAD=$3} -E POOLSHIM_STATS=off \
		-E POOLSHIM_LIVE_DIR="$PST_TMP/live" ${SHIM_ENV:-} \
		"$P" "$1" "$2" "$PST_TMP" >"$PST_TMP/out" 2>&1
	case $? in
	0) ;;
	77) echo "run-skipped"; return ;;
	*) echo "run-failed $(head -c 300 "$PST_TMP/out")"; return ;;
	esac
	# A line per call: "PID name(args) = result"; skip signals and exits.
	sed -n 's/^[0-9]* *\([a-z_0-9]*\)(.*/\1/p' "$PST_TMP/trace" | sort | uniq -c |
		awk '{ print $2, $1 }'
}

# per_iteration MODE [PRELOAD]: "name count" per iteration, changed names only.
per_iteration() {
	syscalls "$1" "$N" ${2:+"$2"} >"$PST_TMP/a"
	syscalls "$1" $((2 * N)) ${2:+"$2"} >"$PST_TMP/b"
	if grep -q '^run-' "$PST_TMP/a" "$PST_TMP/b"; then
		cat "$PST_TMP/a" "$PST_TMP/b" | grep '^run-' | head -1
		return
	fi
	join -a1 -a2 -e 0 -o 0,1.2,2.2 "$PST_TMP/a" "$PST_TMP/b" |
		awk -v n="$N" '$3 != $2 { d = ($3 - $2) / n; print $1, d; t += d }
			END { print "total", t + 0 }'
}

# same NAME PLAIN SHIMMED: the per-iteration counts must be identical.
same() {
	pt=$(echo "$2" | sed -n 's/^total //p')
	st=$(echo "$3" | sed -n 's/^total //p')
	if [ -n "$pt" ] && [ "$2" = "$3" ]; then
		pass "$1: $pt system calls per iteration, as without the shim"
	else
		fail "$1: ${st:-?} system calls per iteration under the shim, ${pt:-?} without"
		echo "   without: $(echo "$2" | tr '\n' ' ')"
		echo "   shim:    $(echo "$3" | tr '\n' ' ')"
	fi
}

for mode in file pipe sock accept dup null high fortified-file; do
	P="$PRELOAD_BIN/io_syscalls"
	m=$mode
	if [ $mode = fortified-file ]; then
		P="$PRELOAD_BIN/io_syscalls_fortify"   # open() is __open_2 there
		m=file
	fi
	plain=$(per_iteration $m)
	if [ "$plain" = run-skipped ]; then
		echo "note: $mode: skipped (RLIMIT_NOFILE cannot reach 70002 here)"
		continue
	fi
	same "$mode" "$plain" "$(per_iteration $m "$SHIM")"
done
# With io_uring off, O_DIRECT calls on pooled buffers are pass-through too:
# no F_GETFL, no process_vm_readv copy of an iovec array.
for mode in direct directv; do
	plain=$(per_iteration $mode)
	[ "$plain" = run-skipped ] && { echo "note: $mode: no O_DIRECT here"; continue; }
	same "$mode, POOLSHIM_URING=off" "$plain" \
		"$(SHIM_ENV="-E POOLSHIM_URING=off" per_iteration $mode "$SHIM")"
done
# The io_uring path is the shim doing its job: other calls, shown only.
P="$PRELOAD_BIN/io_syscalls"
plain=$(per_iteration direct)
shimmed=$(per_iteration direct "$SHIM")
echo "note: O_DIRECT pread 1 MiB per iteration, without: $(echo "$plain" | tr '\n' ' ')"
echo "note:                                  with shim: $(echo "$shimmed" | tr '\n' ' ')"
finish
