#!/bin/sh
# SPDX-License-Identifier: MIT
# io_uring unavailable: the O_DIRECT integrity program (tests/preload/io_direct)
# must still be right, with the failure reported and counted:
#  a) a seccomp filter failing io_uring_setup with EPERM, then with ENOSYS;
#  b) as root, kernel.io_uring_disabled=2 (restored on every exit path);
#  c) RLIMIT_MEMLOCK of 64 KiB, CAP_IPC_LOCK dropped: the shim registers
#     nothing, so its io_uring path works as well there.
# The shim is preloaded into the program only, after the sandbox is set up.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_direct"
SB="$PRELOAD_BIN/io_sandbox"


# run NAME [sandbox options] : io_direct in the sandbox, report in NAME.json
run() {
	name=$1; shift
	"$SB" "$@" -- env CK_FORK=no PST_IO_SCALE=0.2 POOLSHIM_VERBOSE=1 \
		POOLSHIM_STATS="$PST_TMP/$name.json" LD_PRELOAD="$SHIM" "$P" \
		>"$PST_TMP/$name.out" 2>"$PST_TMP/$name.err"
	rc=$?
	case $rc in
	0) pass "$name: data correct" ;;
	77) echo "$name: skipped: $(cat "$PST_TMP/$name.out" "$PST_TMP/$name.err")"; return 77 ;;
	*) fail "$name: io_direct failed ($rc): $(tail -5 "$PST_TMP/$name.out") $(tail -3 "$PST_TMP/$name.err")"; return 1 ;;
	esac
	[ -s "$PST_TMP/$name.json" ] || { fail "$name: no report"; return 1; }
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/$name.json" || fail "$name: schema"
}
get() { json_get "$PST_TMP/$1.json" "$2" 2>&1; }
check() {  # check NAME EXPR MESSAGE
	v=$(get "$1" "$2")
	[ "$v" = True ] && pass "$1: $3" || fail "$1: $3 ($2 -> $v; uring: $(get "$1" "r.get('uring')"))"
}
# The common verdict for a run where io_uring could not be set up.
unavailable() {
	check "$1" "r['uring']['state'] == 'unavailable' and bool(r['uring']['reason'])" "state unavailable, with a reason"
	check "$1" "r['uring']['fallbacks']['setup'] > 0" "setup fallbacks counted"
	check "$1" "r['uring']['sqes'] == 0 and r['uring']['rings'] == 0" "no SQE, no ring"
	check "$1" "any(c['call'] == 'pread' and c['kind'] == 'direct' and c['calls'] > 0 for c in r['calls'])" "preads counted"
	n=$(grep -Eic "io_uring.*(EPERM|ENOSYS|not permitted|not implemented|disabled|unavailable|fall)" "$PST_TMP/$1.err")
	[ "$n" = 1 ] && pass "$1: reported once in verbose mode" ||
		fail "$1: $n verbose lines about io_uring failing: $(grep -i io_uring "$PST_TMP/$1.err" | head -5)"
}

[ -x "$SB" ] || fail "no $SB"

# a) seccomp
for e in EPERM ENOSYS; do
	run "seccomp-$e" --seccomp "$e" && unavailable "seccomp-$e"
done

# b) kernel.io_uring_disabled=2, as root
SYSCTL=/proc/sys/kernel/io_uring_disabled
if [ "$(id -u)" != 0 ] || [ ! -w "$SYSCTL" ]; then
	echo "not root or no $SYSCTL: sysctl case skipped"
else
	# system-wide: not while a parallel test needs io_uring working
	uring_lock -x
	old=$(cat "$SYSCTL")
	at_exit "echo $old > $SYSCTL"
	if echo 2 > "$SYSCTL"; then
		run sysctl && unavailable sysctl
		echo "$old" > "$SYSCTL"
	else
		echo "cannot write $SYSCTL: sysctl case skipped"
	fi
	[ "$(cat "$SYSCTL")" = "$old" ] && pass "io_uring_disabled restored to $old" || fail "io_uring_disabled not restored"
	exec 9<&- 2>/dev/null
fi

# c) RLIMIT_MEMLOCK of 64 KiB: the pool is never registered (nothing
# pinned, so nothing taken from the program's or its user's limit), and
# O_DIRECT I/O still goes through the rings.
if ! probe=$("$SB" --probe); then
	echo "$probe: memlock case skipped"
elif run memlock --memlock 65536 --drop-ipc-lock; then
	check memlock "r['uring']['state'] == 'ok' and r['uring']['sqes'] > 0" "io_uring used under a 64 KiB RLIMIT_MEMLOCK"
	check memlock "r['uring']['fallbacks']['register'] == 0 and r['uring']['fixed'] == 0" "nothing registered, no register fallback"
fi
finish
