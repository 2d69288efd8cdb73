#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim collect` on damaged and hostile records: each is refused in one
# line naming it and kept, the good one next to them is still collected,
# and the exit status is 3; nothing crashes or hangs (the same run under
# valgrind, when it is there, finds no error).  The records are copies of
# the record of a dd killed with SIGKILL, patched at the header's fields
# (their offsets from tests/tools/live_offsets), under pids above any
# pid_max, in the test's own live directory.
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
pst_killed_record damaged || finish

base=$(( $(cat /proc/sys/kernel/pid_max) + 1000 ))
# mk K PATCHES...: a copy under pid base+K with each FIELD:FORMAT:VALUE
# written in (FORMAT: a struct format, s a string, S a string filling the
# field without its NUL, trunc a length to cut the file to).
mk() {
	python3 - "$PST_TMP/offsets" "$PST_TMP/good" "$L/poolshim-$((base + $1))-$ns.stats" \
		"$pid" $((base + $1)) "$@" <<'PY' || fail "crafting record $1"
import struct, sys
offs = {}
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) == 3:
        offs[w[0]] = (int(w[1]), int(w[2]))
b = bytearray(open(sys.argv[2], 'rb').read())
real, fake = int(sys.argv[4]), int(sys.argv[5])
o = offs['pid'][0]
assert b[:6] == b'PSLIVE' and struct.unpack_from('<i', b, o)[0] == real, 'header layout moved'
struct.pack_into('<i', b, o, fake)
for p in sys.argv[7:]:
    field, fmt, val = p.split(':', 2)
    off, size = offs.get(field, (0, 0))
    if fmt == 'trunc':
        del b[int(val):]
    elif fmt == 's':
        b[off:off + len(val) + 1] = val.encode() + b'\0'
    elif fmt == 'S':
        b[off:off + size] = (val.encode() * size)[:size]
    else:
        struct.pack_into('<' + fmt, b, off, int(val, 0))
open(sys.argv[3], 'wb').write(b)
PY
}
mk 0                                      # a faithful copy: collected
mk 1 x:trunc:5000                         # cut short inside its header
mk 2 report:i:77                          # report state out of range
mk 3 stats:S:A                            # destination without its NUL
mk 4 config:s:"POOLSHIM=maybe"            # a configuration the shim would not write
mk 5 stats:s:/etc/passwd                  # a destination its configuration does not say
mk 6 report:i:2 blob_off:Q:0x7fffffff0000 blob_len:Q:100   # a kept report outside the file
mk 7 report:i:2 blob_off:Q:8192 blob_len:Q:0xffffffffffffff00   # ... of a length that wraps
mk 8 end:i:1 flags:I:1 exit_status:i:-5   # an exit status no process has
mk 9 run:s:"a b"                          # a run id the shim would not take
mk 10 end:i:2 exit_status:i:1000          # a signal that does not exist
mk 11 flags:I:0x80                        # an unknown flag
mkfifo "$L/poolshim-$((base + 12))-$ns.stats"   # a FIFO in place of a file
bad="1 2 3 4 5 6 7 8 9 10 11 12"

if command -v valgrind >/dev/null; then
	timeout 300 valgrind -q --error-exitcode=99 "$COLLECT" --live-dir "$L" --keep \
		>"$PST_TMP/vout" 2>"$PST_TMP/verr"
	rc=$?
	[ $rc = 3 ] && pass "under valgrind: no error, exit status 3" ||
		fail "under valgrind: status $rc: $(grep -v 'poolshim collect' "$PST_TMP/verr" | head -20)"
fi

timeout 60 "$COLLECT" --live-dir "$L" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
cat "$PST_TMP/err"
[ $rc = 3 ] && pass "exit status 3: some collected, some refused" ||
	fail "exit status $rc, want 3 (124: hung; 134/139: crashed)"
grep -q "==== poolshim report: pid $((base + 0)) (dd) ====" "$PST_TMP/out" &&
	pass "the faithful copy is collected" || fail "faithful copy not collected: $(head -3 "$PST_TMP/out")"
[ ! -e "$L/poolshim-$base-$ns.stats" ] && pass "and its record removed" || fail "faithful record kept"
for k in $bad; do
	f="$L/poolshim-$((base + k))-$ns.stats"
	n=$(grep -c "^poolshim collect: $f: .*record kept\|^poolshim collect: $f: damaged record: .*refused and kept" "$PST_TMP/err")
	[ "$n" = 1 ] && pass "record $k refused in one line" || fail "record $k: $n lines"
	grep -q "pid $((base + k)) " "$PST_TMP/out" && fail "record $k rendered"
	[ -e "$f" ] && pass "record $k kept" || fail "record $k removed"
done
[ "$(wc -l <"$PST_TMP/err")" = "$(echo $bad | wc -w)" ] && pass "one line per refusal, no other" ||
	fail "$(wc -l <"$PST_TMP/err") lines on stderr"
[ -e /etc/passwd ] && [ "$(stat -c %s /etc/passwd)" -gt 0 ] || fail "/etc/passwd damaged"
finish
