#!/bin/sh
# SPDX-License-Identifier: MIT
# A report that cannot be written, in a process whose stderr is gone (an
# nginx worker: fd 2 is the error log nginx put there, which the shim must
# not write into), is still said: in the system log, one datagram to
# /dev/log.  It used to be said nowhere.  Run in a mount namespace whose
# /dev holds our own /dev/log listener (and /dev/null), so the machine's
# syslog sees nothing of it.
. "$PS_TOP_SRCDIR/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a mount namespace with our own /dev/log)"
command -v unshare >/dev/null 2>&1 || skip "unshare not installed"
unshare -m true 2>/dev/null || skip "cannot make a mount namespace here"
T=$PST_TMP
mkdir "$T/dev" "$T/realdev"
pst_log_listener "$T" || finish

unshare -m sh -c '
	set -e
	mount --make-rprivate /
	mount --bind /dev "$1/realdev"
	mount -t tmpfs tmpfs /dev
	touch /dev/null /dev/log
	mount --bind "$1/realdev/null" /dev/null
	mount --bind "$1/dev/log" /dev/log
	# The program puts a file at fd 2 itself, then exits: its report path cannot be written.
	env POOLSHIM_LIVE=off POOLSHIM_STATS=/proc/no-such-dir/r.json LD_PRELOAD="$2" \
		sh -c "exec 2>\"$1/err2\"; :"
' sh "$T" "$SHIM" 2>"$T/ns.err" || skip "mount namespace set-up refused: $(cat "$T/ns.err")"
for _ in $(seq 20); do [ -s "$T/log.txt" ] && break; sleep 0.05; done
touch "$T/log.txt"
grep -q "^<28>poolshim\[[0-9]*\] sh: cannot write the report to /proc/no-such-dir/r.json: ENOENT" "$T/log.txt" &&
	pass "a report that cannot be written, with no stderr, is said in the system log" ||
	fail "system log: '$(cat "$T/log.txt")'"
[ ! -s "$T/err2" ] && pass "nothing written into the file the program put at fd 2" ||
	fail "the program's fd-2 file got: $(cat "$T/err2")"
finish
