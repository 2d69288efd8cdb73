#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45, S3: `poolshim stat` holds a bounded amount per record.  300
# copies of a killed dd's record (under pids above any pid_max, in the
# test's own live directory) against 30: stat's peak resident memory
# (GNU time's %M) grows by less than 40 KB per record as a table; as a
# Prometheus scrape (one series per program: the 300 are one series) by
# less than 16 KB (the header it keeps of each), and with --per-pid by
# less than twice the scrape's own text per record and 16 KB (the text is
# held, families being printed whole, in buffers that grow by doubling).
# Before, ~176 KB per record: every record's blocks and one struct of
# totals each, held at once.  And a scrape of the 300 under a limit of 64
# descriptors counts all 300 (one descriptor was held per record).
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
OFFSETS="$PS_TOP_BUILDDIR/tests/tools/live_offsets"
[ -x /usr/bin/time ] || skip "no GNU time"
L="$PST_TMP/live"
mkdir "$L"
"$OFFSETS" >"$PST_TMP/offsets" || { fail "no $OFFSETS"; finish; }

env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=mem LD_PRELOAD="$SHIM" \
	dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
pid=$!
for _ in $(seq 100); do ls "$L"/poolshim-"$pid"-*.stats >/dev/null 2>&1 && break; sleep 0.1; done
sleep 0.3
kill -KILL "$pid"; wait "$pid" 2>/dev/null
src=$(ls "$L"/poolshim-"$pid"-*.stats 2>/dev/null | head -n 1)
[ -n "$src" ] || { fail "no record of the dd"; finish; }
mv "$src" "$PST_TMP/good"
base=$(( $(cat /proc/sys/kernel/pid_max) + 1000 ))

# copies N: N copies of the record, pids base .. base+N-1.
copies() {
	rm -f "$L"/poolshim-*
	python3 - "$PST_TMP/offsets" "$PST_TMP/good" "$L" "$src" "$pid" "$base" "$1" <<'PY'
import os, struct, sys
offs = {l.split()[0]: int(l.split()[1]) for l in open(sys.argv[1]) if len(l.split()) == 3}
b = bytearray(open(sys.argv[2], 'rb').read())
live, src, real, base, n = sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
assert struct.unpack_from('<i', b, offs['pid'])[0] == real
ns = os.path.basename(src).split('-')[2].split('.')[0]
for i in range(n):
    struct.pack_into('<i', b, offs['pid'], base + i)
    open('%s/poolshim-%d-%s.stats' % (live, base + i, ns), 'wb').write(b)
PY
}
# peak ARGS...: stat's peak resident memory in KB.
peak() {
	/usr/bin/time -f %M -o "$PST_TMP/rss" "$STAT" --live-dir "$L" "$@" >/dev/null 2>"$PST_TMP/err"
	tail -n 1 "$PST_TMP/rss"
}
copies 30
t30=$(peak); p30=$(peak --prometheus); q30=$(peak --prometheus --per-pid)
b30=$("$STAT" --live-dir "$L" --prometheus --per-pid | wc -c)
copies 300
t300=$(peak); p300=$(peak --prometheus); q300=$(peak --prometheus --per-pid)
b300=$("$STAT" --live-dir "$L" --prometheus --per-pid | wc -c)
text=$(( (b300 - b30) / 270 / 1024 ))
echo "peak KB: table 30 $t30, 300 $t300; prometheus 30 $p30, 300 $p300;" \
	"--per-pid 30 $q30, 300 $q300 (text $text KB a record)"
[ $(( (t300 - t30) / 270 )) -lt 40 ] &&
	pass "table: $(( (t300 - t30) / 270 )) KB more per record" ||
	fail "table: $(( (t300 - t30) / 270 )) KB more per record"
[ $(( (p300 - p30) / 270 )) -lt 16 ] &&
	pass "prometheus: $(( (p300 - p30) / 270 )) KB more per record" ||
	fail "prometheus: $(( (p300 - p30) / 270 )) KB more per record"
[ $(( (q300 - q30) / 270 )) -lt $((2 * text + 16)) ] &&
	pass "prometheus --per-pid: $(( (q300 - q30) / 270 )) KB more per record, its text $text KB" ||
	fail "prometheus --per-pid: $(( (q300 - q30) / 270 )) KB more per record, its text $text KB"
(ulimit -n 64 && "$STAT" --live-dir "$L" --prometheus) >"$PST_TMP/prom" 2>"$PST_TMP/err"
grep -q '^poolshim_processes{program="dd"} 300$' "$PST_TMP/prom" &&
	pass "a scrape of 300 records with 64 descriptors counts them all" ||
	fail "with 64 descriptors: $(grep '^poolshim_processes' "$PST_TMP/prom") $(head -2 "$PST_TMP/err")"
finish
