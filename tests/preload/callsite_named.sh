#!/bin/sh
# SPDX-License-Identifier: MIT
# Call sites named in a program built the ordinary way (-g -O1, no
# -rdynamic): from .symtab via libdwfl; then the same binary stripped, its
# debug info split into a build-id tree found through POOLSHIM_DEBUGINFO_PATH.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/callsite_plain"
R="$PST_TMP/sites.json"
[ -e /usr/lib/x86_64-linux-gnu/libdw.so.1 ] || [ -e /lib/x86_64-linux-gnu/libdw.so.1 ] || skip "libdw.so.1 not installed"
names() {
	json_get "$R" "sorted({s['frames'][0]['function'] or '?' for s in r['callsites']})"
}
want="['main', 'site_big_buffers', 'site_read_file', 'site_small_buffers', 'site_write_file']"
shim POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1 "POOLSHIM_STATS=$R" -- "$H" >/dev/null || fail "helper failed"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$R" || fail "schema"
[ "$(names)" = "$want" ] && pass "no -rdynamic: alloc and I/O sites named" || fail "names: $(names)"

# Debian's way: split debug info by build id, strip the binary
id=$(json_get "$R" "[f['build_id'] for s in r['callsites'] for f in s['frames'] if f['object'] == 'callsite_plain'][0]")
D="$PST_TMP/debug"
mkdir -p "$D/.build-id/$(echo "$id" | cut -c1-2)"
objcopy --only-keep-debug "$H" "$D/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
objcopy --strip-all "$H" "$PST_TMP/callsite_plain"
shim POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1 "POOLSHIM_STATS=$R" -- "$PST_TMP/callsite_plain" >/dev/null || fail "stripped helper failed"
[ "$(names)" != "$want" ] && pass "stripped, no debug info: not named" || fail "stripped named without debug info?"
shim POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1 "POOLSHIM_DEBUGINFO_PATH=$D" "POOLSHIM_STATS=$R" -- "$PST_TMP/callsite_plain" >/dev/null || fail "stripped helper failed"
[ "$(names)" = "$want" ] && pass "stripped: named from the build-id debug tree" || fail "stripped names: $(names)"
[ "$(json_get "$R" "any(f['line'] for s in r['callsites'] for f in s['frames'])")" = True ] &&
	pass "file:line from DWARF" || fail "no line numbers"
finish
