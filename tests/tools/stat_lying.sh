#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim stat` on live files whose header lies.  Anyone can put a file
# in /dev/shm, so stat must not crash on one: block stride 0, a block count
# whose size overflows, a file shorter than its header claims, a program
# name without its NUL, a state out of range, a FIFO in place of a file.
# Each is refused with a message naming it, the real file next to them is
# still shown, and the exit status is 3 (some shown, some refused).
# The crafted files are copies of the file of a helper killed with SIGKILL,
# patched at the header's offsets (checked against the copy first); they
# have pids no process has, and are read by pid (never by scanning /dev/shm,
# which other tests share) with --keep.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
H="$PS_TOP_BUILDDIR/tests/preload/signal_helper"

env POOLSHIM_STATS=off LD_PRELOAD="$SHIM" "$H" --signals 1000000 >"$PST_TMP/h.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q '^ready' "$PST_TMP/h.out" && break; sleep 0.1; done
sleep 0.3
kill -KILL "$pid"; wait "$pid" 2>/dev/null
src=$(ls /dev/shm/poolshim-"$pid".stats /dev/shm/poolshim-"$pid"-*.stats 2>/dev/null | head -n 1)
[ -n "$src" ] || { fail "no live file of the helper"; finish; }
suffix=${src#/dev/shm/poolshim-$pid}      # .stats, or -NS.stats
cp "$src" "$PST_TMP/good"
rm -f "$src"

# Fake pids above any pid_max; mkfile PID PATCHES...: a copy with pid PID
# and each OFFSET:FORMAT:VALUE (struct format) written in.
base=$(( $(cat /proc/sys/kernel/pid_max) + 1000 ))
made=
mkfile() {
	f="/dev/shm/poolshim-$1$suffix"
	made="$made $f"
	python3 - "$PST_TMP/good" "$f" "$pid" "$@" <<'PY' || fail "crafting $f"
import struct, sys
src, dst, real, fake = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(src, 'rb').read())
assert b[:6] == b'PSLIVE' and struct.unpack_from('<i', b, 36)[0] == real, 'header layout moved'
struct.pack_into('<i', b, 36, fake)
for p in sys.argv[5:]:
    off, fmt, val = p.split(':', 2)
    if fmt == 'trunc':
        del b[int(val):]
    elif fmt == 's':
        b[int(off):int(off) + len(val)] = val.encode()
    else:
        struct.pack_into('<' + fmt, b, int(off), int(val, 0))
open(dst, 'wb').write(b)
PY
}
at_exit 'rm -f $made'
mkfile $((base + 0))                                  # a faithful copy: shown
mkfile $((base + 1)) 24:Q:0 0:trunc:12288               # block stride 0, a file of one page past the header
mkfile $((base + 2)) 12:I:0x10000 24:Q:0x1000000000000 32:I:0x10000  # 2^16 x 2^48 wraps to 0
mkfile $((base + 3)) 0:trunc:20000                    # shorter than its blocks: shown with those it holds
mkfile $((base + 4)) 48:s:"$(printf 'A%.0s' $(seq 64))"   # name without NUL
mkfile $((base + 5)) 144:i:77                         # requested hugepage mode out of range
fifo="/dev/shm/poolshim-$((base + 6))$suffix"
mkfifo "$fifo"; made="$made $fifo"

timeout 20 "$STAT" --keep $((base + 0)) $((base + 1)) $((base + 2)) $((base + 3)) \
	$((base + 4)) $((base + 5)) $((base + 6)) >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
cat "$PST_TMP/err"
[ $rc = 3 ] && pass "exit status 3: some shown, some refused" ||
	fail "exit status $rc, want 3 (124: hung; 135/139: crashed)"
grep -q "pid $((base + 0)) (signal_helper)" "$PST_TMP/out" &&
	grep -Eq "^malloc +- +[1-9]" "$PST_TMP/out" && pass "the faithful copy is shown" ||
	fail "faithful copy not shown: $(head -5 "$PST_TMP/out")"
# A record grows a block at a time: one cut short is read as far as it goes.
grep -q "pid $((base + 3)) " "$PST_TMP/out" && pass "a file shorter than its blocks is read as far as it goes" ||
	fail "file 3 (shorter than its blocks) not shown: $(grep "$((base + 3))" "$PST_TMP/err")"
for k in 1 2 5 6; do
	grep -q "poolshim-$((base + k))[-.].*skipped" "$PST_TMP/err" &&
		pass "lying file $k refused with a message" || fail "no message for lying file $k"
	grep -q "pid $((base + k)) " "$PST_TMP/out" && fail "lying file $k shown"
done
if grep -q "pid $((base + 4)) " "$PST_TMP/out"; then
	grep -q "pid $((base + 4)) ($(printf 'A%.0s' $(seq 63))):" "$PST_TMP/out" &&
		pass "name without NUL cut at its room" || fail "name without NUL: $(grep "pid $((base + 4))" "$PST_TMP/out")"
else
	grep -q "poolshim-$((base + 4))[-.].*skipped" "$PST_TMP/err" && pass "name without NUL refused" ||
		fail "name without NUL neither shown nor refused"
fi
for f in $made; do [ -e "$f" ] || fail "--keep removed $f"; done

# Another user's file, readable to all (a planted one): not read unless asked.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
	setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
	mkfile $((base + 7))
	chmod 0644 "/dev/shm/poolshim-$((base + 7))$suffix"
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$STAT" --keep "$@"; }
	as_nobody $((base + 7)) >"$PST_TMP/o1" 2>"$PST_TMP/e1"
	rc=$?
	[ $rc = 1 ] && grep -q "belongs to user 0; --all-users reads it" "$PST_TMP/e1" &&
		! grep -q "pid $((base + 7)) " "$PST_TMP/o1" &&
		pass "another user's file is not read (status 1, says why)" ||
		fail "another user's file: status $rc $(cat "$PST_TMP/e1") $(head -2 "$PST_TMP/o1")"
	as_nobody --all-users $((base + 7)) >"$PST_TMP/o2" 2>"$PST_TMP/e2"
	rc=$?
	[ $rc = 0 ] && grep -q "pid $((base + 7)) (signal_helper)" "$PST_TMP/o2" &&
		pass "--all-users reads it" || fail "--all-users: status $rc $(cat "$PST_TMP/e2")"
else
	echo "(not root or no setpriv: the other-user check is not run)"
fi
finish
