#!/bin/sh
# SPDX-License-Identifier: MIT
# The report's per-call, per-kind counts (tests/preload/io_kinds makes each
# (call, kind) pair a distinct number of times), including descriptor
# numbers that changed kind: closed and reused, dup2'd over, O_DIRECT set
# and cleared with fcntl.  Then each way of making a descriptor, one run
# each (io_kinds WAY DIR makes 3 writev calls on it): the kind the shim
# learnt from the making call, or probed for a descriptor of unknown origin.
. "$PS_TOP_SRCDIR/tests/lib.sh"
J="$PST_TMP/kinds.json"
shim POOLSHIM_STATS="$J" -- "$PRELOAD_BIN/io_kinds" >"$PST_TMP/out" 2>&1
case $? in
0) ;;
77) skip "$(cat "$PST_TMP/out")" ;;
*) fail "io_kinds: $(cat "$PST_TMP/out")"; finish ;;
esac
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$J" && pass "schema" || fail "schema"
n() { json_get "$J" "sum(c['calls'] for c in r['calls'] if c['call'] == '$1' and c['kind'] == '$2')" 2>&1; }
expect() {  # expect CALL KIND COUNT [why]
	v=$(n "$1" "$2")
	[ "$v" = "$3" ] && pass "$1 on $2: $3${4:+ ($4)}" || fail "$1 on $2: $v, want $3${4:+ ($4)}"
}
expect read pipe 3
expect read socket 4
expect read file 5
expect read direct 6
expect read other 7
expect pwrite direct 1
expect pread pipe 8 "a closed O_DIRECT file's number reused by a pipe"
expect pread direct 0 "nothing counted under the old kind"
v=$(json_get "$J" "sum(c['errnos'].get('ESPIPE', 0) for c in r['calls'] if c['call'] == 'pread')" 2>&1)
[ "$v" = 8 ] && pass "8 ESPIPE named" || fail "ESPIPE named $v times, want 8"
expect readv file 1
expect readv socket 9 "a socket dup2'd over a file"
expect preadv direct 10 "O_DIRECT set with fcntl"
expect preadv file 11 "O_DIRECT cleared again"
v=$(json_get "$J" "sum(c['calls'] for c in r['calls'] if c['call'] == 'sendfile')" 2>&1)
[ "$v" = 2 ] && pass "sendfile counted" || fail "sendfile: $v, want 2"
v=$(json_get "$J" "sum(c['calls'] for c in r['calls'] if c['call'] == 'splice')" 2>&1)
[ "$v" = 3 ] && pass "splice counted" || fail "splice: $v, want 3"
expect recv socket 5 "EAGAIN"
v=$(json_get "$J" "[(c['errors'], c['eagain'], c['errnos'].get('EAGAIN')) for c in r['calls'] if c['call'] == 'recv']" 2>&1)
[ "$v" = "[(5, 5, 5)]" ] && pass "recv: 5 errors, 5 EAGAIN, named" || fail "recv errors/eagain/errnos: $v"
# sizes: log2 buckets of the bytes asked for
v=$(json_get "$J" "[c['size_hist'] for c in r['calls'] if c['call'] == 'read' and c['kind'] == 'direct']" 2>&1)
[ "$v" = "[[[1048576, 6]]]" ] && pass "read on direct: 6 in the 1 MiB bucket" || fail "read on direct size_hist: $v"
v=$(json_get "$J" "[c['bytes'] for c in r['calls'] if c['call'] == 'read' and c['kind'] == 'direct']" 2>&1)
[ "$v" = "[6291456]" ] && pass "read on direct: 6 MiB" || fail "read on direct bytes: $v"
# timing on by default (sampled: "timed" calls of each row make up lat_hist
# and nsec), off with POOLSHIM_TIMING=0
v=$(json_get "$J" "[c['call'] + '/' + c['kind'] for c in r['calls'] if c['kind'] != 'none' and not (sum(n for _, n in c['lat_hist']) == c.get('timed', c['calls']) and (c['nsec'] > 0) == (sum(n for _, n in c['lat_hist']) > 0))]" 2>&1)
[ "$v" = "[]" ] && pass "latency histograms add up to the timed calls" || fail "lat_hist/timed/nsec disagree: $v"
v=$(json_get "$J" "sum(c.get('timed', c['calls']) for c in r['calls'] if c['kind'] != 'none') > 0" 2>&1)
[ "$v" = True ] && pass "I/O calls timed" || fail "no I/O call timed"
shim POOLSHIM_TIMING=0 POOLSHIM_STATS="$PST_TMP/notime.json" -- "$PRELOAD_BIN/io_kinds" >"$PST_TMP/out" 2>&1 || fail "io_kinds (TIMING=0): $(cat "$PST_TMP/out")"
v=$(json_get "$PST_TMP/notime.json" "all(not c['lat_hist'] and c['nsec'] == 0 for c in r['calls'] if c['kind'] != 'none')" 2>&1)
[ "$v" = True ] && pass "POOLSHIM_TIMING=0: no latency" || fail "POOLSHIM_TIMING=0: latencies still recorded: $v"
v=$(json_get "$PST_TMP/notime.json" "sum(c['calls'] for c in r['calls'] if c['call'] == 'read')" 2>&1)
[ "$v" = 25 ] && pass "POOLSHIM_TIMING=0: still counted" || fail "POOLSHIM_TIMING=0: read calls $v, want 25"

# way, the kind its descriptor must be counted under
ways="socket socket
accept socket
accept4 socket
socketpair socket
pipe pipe
pipe2 pipe
open file
open-direct direct
open-dev other
openat file
openat-direct direct
creat file
dup socket
dup2-over-socket file
dup3 pipe
f-dupfd pipe
f-dupfd-cloexec socket
setfl-direct-on direct
setfl-direct-off file
setfl-pipe pipe
fifo-setfl-direct pipe
fifo-setfl-direct-nouring pipe
inherited socket
scm-rights pipe
scm-rights-mmsg pipe
reuse-eventfd other
reuse-memfd file"
echo "$ways" | while read -r way kind; do
	d="$PST_TMP/$way"
	mkdir -p "$d"
	# A -nouring way is the same way with io_uring off: its eligibility
	# check must not be what corrects a wrong kind.
	case $way in
	*-nouring) u=off; w=${way%-nouring} ;;
	*) u=auto; w=$way ;;
	esac
	shim POOLSHIM_URING=$u POOLSHIM_STATS="$d/r.json" -- "$PRELOAD_BIN/io_kinds" "$w" "$d" >"$d/out" 2>&1
	echo "$way $kind $?"
done >"$PST_TMP/ways"
# One interpreter for every report: each writev row must be the expected kind.
python3 - "$PST_TMP" >"$PST_TMP/verdicts" <<'EOF_PY'
import json, sys
tmp = sys.argv[1]
for line in open(f"{tmp}/ways"):
    way, kind, rc = line.split()
    out = open(f"{tmp}/{way}/out").read().strip()
    if rc == "77":
        print(f"skip: {way}: {out}")
        continue
    if rc != "0":
        print(f"FAIL: {way}: exit {rc}: {out}")
        continue
    r = json.load(open(f"{tmp}/{way}/r.json"))
    got = sorted((c["kind"], c["calls"]) for c in r["calls"] if c["call"] == "writev")
    want = [(kind, 3)]
    print(f"ok: {way}: {kind}" if got == want else f"FAIL: {way}: writev counted {got}, want {want}")
EOF_PY
cat "$PST_TMP/verdicts"
grep -q '^FAIL' "$PST_TMP/verdicts" && pst_fail=1
grep -q '^ok' "$PST_TMP/verdicts" || fail "no way of making a descriptor was checked"
finish
