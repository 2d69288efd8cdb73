#!/bin/sh
# SPDX-License-Identifier: MIT
# O_DIRECT reads split by the device: a 16 MiB pread goes to io_uring in
# chunks of the file's block device's largest request (its queue's
# max_sectors_kb, a partition's disk), no more chunks than the ring depth
# (16) or the device's nr_requests; POOLSHIM_URING_CHUNK, when given, wins.
# Whatever the chunks, each pread returns what it returns without the shim
# (full, short across the end of the file, 0 past it), the same bytes, no
# byte written past what it returns, and the file offset unmoved.
# The file lives on a real disk (/var/tmp, or PST_FIO_DIR).
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_devchunk"
D=${PST_FIO_DIR:-/var/tmp}
F=$(mktemp "$D/pst-devchunk.XXXXXX") || skip "no file in $D"
at_exit "rm -f '$F'"
"$P" write "$F"
case $? in
0) ;;
77) skip "no O_DIRECT in $D" ;;
*) fail "io_devchunk write"; finish ;;
esac

# The split the shim should choose for 16 MiB on this file's device.
dev=$(stat -c '%Hd:%Ld' "$F")
q=/sys/dev/block/$dev/queue
[ -r "$q/max_sectors_kb" ] || q=/sys/dev/block/$dev/../queue
[ -r "$q/max_sectors_kb" ] || skip "no block queue for $D (device $dev): the configured chunk applies"
kb=$(cat "$q/max_sectors_kb")
nr=$(cat "$q/nr_requests" 2>/dev/null || echo 0)
want=$(python3 -c '
import sys
kb, nr = int(sys.argv[1]), int(sys.argv[2])
length, depth = 16 << 20, 16
chunk = max(kb << 10, 64 << 10) & ~4095
most = nr if 0 < nr < depth else depth
n = -(-length // chunk)
if n > most:
    chunk = (-(-length // most) + 4095) & ~4095
    n = -(-length // chunk)
print(n)' "$kb" "$nr")
echo "device $dev: max_sectors_kb $kb, nr_requests $nr: $want chunks per 16 MiB read"

"$P" read "$F" >"$PST_TMP/plain.out" || fail "io_devchunk read without the shim"
grep -q "first-bad=-1 touched-after=-1" "$PST_TMP/plain.out" || fail "without the shim: $(cat "$PST_TMP/plain.out")"

uring_lock -s
# run NAME VAR=VAL ...: the reads under the shim; NAME.json is its report
run() {
	name=$1; shift
	# POOLSHIM_URING=on: the chunks are the ring's (the router would send half of them plain)
	shim POOLSHIM_URING=on POOLSHIM_STATS="$PST_TMP/$name.json" "$@" -- "$P" read "$F" >"$PST_TMP/$name.out" 2>&1 ||
		{ fail "$name: io_devchunk read: $(cat "$PST_TMP/$name.out")"; return 1; }
	cmp -s "$PST_TMP/plain.out" "$PST_TMP/$name.out" &&
		pass "$name: the same results, bytes and offset as without the shim" ||
		fail "$name: $(diff "$PST_TMP/plain.out" "$PST_TMP/$name.out")"
}
# SQEs per pread: four preads of 16 MiB, each on the ring
per_read() {
	json_get "$PST_TMP/$1.json" "r['uring']['sqes'] / 4 if sum(r['uring']['fallbacks'].values()) == 0 else r['uring']"
}

run device
if [ "$(json_get "$PST_TMP/device.json" "r['uring']['state']")" != ok ]; then
	echo "io_uring unavailable: chunk checks skipped"
	finish
fi
got=$(per_read device)
[ "$got" = "$want.0" ] && pass "default: $want chunks per 16 MiB read, as the device's queue says" ||
	fail "default: $got SQEs per read, want $want"
run chunk2m POOLSHIM_URING_CHUNK=2M
got=$(per_read chunk2m)
[ "$got" = 8.0 ] && pass "POOLSHIM_URING_CHUNK=2M wins: 8 chunks" || fail "POOLSHIM_URING_CHUNK=2M: $got SQEs per read, want 8"
run shallow POOLSHIM_URING_CHUNK=256K POOLSHIM_URING_DEPTH=4
got=$(per_read shallow)
# 64 + 64 + 28 (the wave with the short chunk is the last) + 4 (all past the end) = 4 x 40
[ "$got" = 40.0 ] && pass "256K chunks, depth 4: waves of 4, none after a short chunk" ||
	fail "256K/depth 4: $got SQEs per read, want 40"
run depth2 POOLSHIM_URING_DEPTH=2
got=$(per_read depth2)
want2=$(( want < 2 ? want : 2 ))
[ "$got" = "$want2.0" ] && pass "depth 2: the device's chunks grow, $want2 per read" ||
	fail "depth 2: $got SQEs per read, want $want2"
finish
