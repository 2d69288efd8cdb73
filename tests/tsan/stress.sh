#!/bin/sh
# SPDX-License-Identifier: MIT
# ThreadSanitizer on the core (configure --enable-tsan): runs tests/tsan/stress
# and fails on any TSan report, on a wrong count or on data read back wrong.
set -u
: "${PS_TOP_BUILDDIR:?PS_TOP_BUILDDIR must be set (make check does it)}"
: "${PS_TOP_SRCDIR:?PS_TOP_SRCDIR must be set (make check does it)}"
prog=$PS_TOP_BUILDDIR/tests/tsan/stress
[ -x "$prog" ] || { echo "missing $prog: configure with --enable-tsan" >&2; exit 99; }

# The O_DIRECT file goes where O_DIRECT works (tmpfs refuses it).
dir=
for d in ${PST_IO_DIR:-} /var/tmp "${TMPDIR:-/tmp}" /tmp "$PS_TOP_BUILDDIR"; do
	[ -d "$d" ] && [ -w "$d" ] || continue
	probe=$d/ps-tsan-probe.$$
	if dd if=/dev/zero of="$probe" bs=4096 count=1 oflag=direct 2>/dev/null; then
		rm -f "$probe"
		dir=$d
		break
	fi
	rm -f "$probe"
done
if [ -z "$dir" ]; then
	echo "SKIP: no writable directory here supports O_DIRECT"
	exit 77
fi

# Reports name both stacks; 66 marks "TSan found something" apart from the
# program's own failures (1).  Suppressions: tests/tsan/suppressions (each
# entry says why it is benign).
TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 history_size=4 suppressions=$PS_TOP_SRCDIR/tests/tsan/suppressions ${TSAN_OPTIONS:-}"
export TSAN_OPTIONS
out=$(mktemp "${TMPDIR:-/tmp}/ps-tsan.XXXXXX")
trap 'rm -f "$out"' EXIT

run() {
	timeout 900 "$@" "$prog" "$dir" >"$out" 2>&1
	rc=$?
	# The live file is named by pid; a crashed run must not leave it behind.
	pid=$(sed -n 's/^stress pid \([0-9][0-9]*\)$/\1/p' "$out" | head -n 1)
	[ -n "$pid" ] && rm -f "/dev/shm/poolshim-$pid.stats" /dev/shm/poolshim-"$pid"-*.stats
	cat "$out"
}

start=$(date +%s)
run
# TSan needs its fixed shadow layout; with high ASLR entropy (newer kernels,
# vm.mmap_rnd_bits > 28) gcc 12's runtime cannot map it.  Try without ASLR.
if [ $rc -ne 0 ] && grep -q 'ThreadSanitizer: unexpected memory mapping\|FATAL: ThreadSanitizer' "$out"; then
	echo "== TSan could not map its memory; again with ASLR off (setarch -R)"
	run setarch "$(uname -m)" -R
	if [ $rc -ne 0 ] && grep -q 'FATAL: ThreadSanitizer' "$out"; then
		echo "SKIP: ThreadSanitizer cannot run on this kernel"
		exit 77
	fi
fi
echo "== $(($(date +%s) - start)) s"
case $rc in
0) exit 0 ;;
77) exit 77 ;;
66) echo "FAIL: ThreadSanitizer reported races (above)"; exit 1 ;;
124) echo "FAIL: timed out"; exit 1 ;;
*) echo "FAIL: exit status $rc"; exit 1 ;;
esac
