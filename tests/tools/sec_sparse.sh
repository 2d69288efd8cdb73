#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45, S2: a record costs its reader no more than what the shim
# writes.  Crafted from a killed dd's record, in the test's own live
# directory, under pids above any pid_max:
#   - 60 MB apparent, a few hundred KB stored, 128 blocks named: refused in
#     one line as sparse (the shim leaves holes only in unused block room);
#   - ten of 200 MB apparent naming 4096 blocks (accepted before, and every
#     block read: 29 s of root's stat for ten): refused as too large, all
#     ten in well under the 20 s the test allows;
#   - a faithful copy of another run: `collect --run OTHER` reads no block
#     of it (only the header: pread at offset 0), the run being filtered first.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
CRAFT="$PS_TOP_SRCDIR/tests/tools/sec_craft.py"
pst_killed_record sparse || finish
base=$(( $(cat /proc/sys/kernel/pid_max) + 1000 ))
mk() {
	k=$1; shift
	python3 "$CRAFT" "$PST_TMP/offsets" "$PST_TMP/good" "$L/poolshim-$((base + k))-$ns.stats" \
		"$pid" $((base + k)) "$@" || fail "crafting record $k"
}

mk 0 nblocks:I:128 x:size:60000000
timeout 20 "$STAT" --live-dir "$L" $((base + 0)) >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
cat "$PST_TMP/err"
[ $rc = 1 ] && grep -q "poolshim-$((base + 0))-.*skipped: sparse: " "$PST_TMP/err" &&
	[ "$(wc -l <"$PST_TMP/err")" = 1 ] && pass "a sparse record is refused in one line" ||
	fail "sparse record: exit $rc, $(head -c 300 "$PST_TMP/out")"
rm -f "$L"/poolshim-*

for k in 1 2 3 4 5 6 7 8 9 10; do
	mk $k max_blocks:I:4096 nblocks:I:4096 x:size:200000000
done
start=$(date +%s)
timeout 20 "$STAT" --live-dir "$L" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
mid=$(date +%s)
timeout 20 "$COLLECT" --live-dir "$L" >"$PST_TMP/cout" 2>"$PST_TMP/cerr"
crc=$?
end=$(date +%s)
head -2 "$PST_TMP/err" "$PST_TMP/cerr"
[ $rc = 1 ] && [ "$(grep -c 'skipped: too large' "$PST_TMP/err")" = 10 ] &&
	pass "stat: ten records naming 4096 blocks refused as too large, in $((mid - start)) s" ||
	fail "stat on the ten: exit $rc (124: past 20 s), $(grep -c 'too large' "$PST_TMP/err") refused"
[ $crc = 3 ] && [ "$(grep -c 'refused: too large' "$PST_TMP/cerr")" = 10 ] &&
	pass "collect: the ten refused, in $((end - mid)) s" ||
	fail "collect on the ten: exit $crc (124: past 20 s)"
rm -f "$L"/poolshim-*

if command -v strace >/dev/null 2>&1; then
	mk 11
	strace -f -qq -y -e trace=pread64 -o "$PST_TMP/trace" \
		"$COLLECT" --live-dir "$L" --run elsewhere >/dev/null 2>&1
	reads=$(grep -c 'pread64([0-9]*<[^>]*/poolshim-' "$PST_TMP/trace")
	blocks=$(grep 'pread64([0-9]*<[^>]*/poolshim-' "$PST_TMP/trace" | grep -vc ', 0) = ')
	[ "$reads" -ge 1 ] && [ "$blocks" = 0 ] &&
		pass "collect --run elsewhere read only the header of another run's record" ||
		fail "collect --run elsewhere: $reads reads, $blocks beyond the header"
	[ -e "$L/poolshim-$((base + 11))-$ns.stats" ] && pass "and left it" || fail "removed it"
fi
finish
