#!/bin/sh
# SPDX-License-Identifier: MIT
# The report's per-call, per-kind counts (tests/preload/io_kinds makes each
# (call, kind) pair a distinct number of times), including descriptor
# numbers that changed kind: closed and reused, dup2'd over, O_DIRECT set
# and cleared with fcntl.
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
finish
