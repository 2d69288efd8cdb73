#!/bin/sh
# SPDX-License-Identifier: MIT
# Call sites: with POOLSHIM_BACKTRACE the report names the functions that
# allocate the pooled buffers and do the large I/O, with the right totals;
# sampling bounds the number of captures; off by default.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/callsite_helper"
R="$PST_TMP/sites.json"

shim POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1 "POOLSHIM_STATS=$R" -- "$H" >/dev/null || fail "helper failed"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$R" || fail "schema"
site() {  # site FUNCTION FIELD: FIELD of the site whose first frame is FUNCTION
	json_get "$R" "[s['$2'] for s in r['callsites'] if s['frames'] and s['frames'][0]['function'] == '$1'][0]"
}
[ "$(site site_big_buffers bytes)" = $((10 * 4194304)) ] && [ "$(site site_big_buffers count)" = 10 ] &&
	pass "site_big_buffers: 10 allocations, 40 MiB" || fail "big: $(site site_big_buffers bytes) $(site site_big_buffers count)"
[ "$(site site_small_buffers bytes)" = $((40 * 262144)) ] && pass "site_small_buffers: 10 MiB" || fail "small: $(site site_small_buffers bytes)"
[ "$(site site_read_file bytes)" = $((30 * 131072)) ] && [ "$(site site_read_file kind)" = io ] &&
	pass "site_read_file: 30 x 128K of I/O" || fail "read site: $(site site_read_file bytes)"
[ "$(site site_write_file call)" = pwrite ] && pass "site_write_file: pwrite" || fail "write site"
[ "$(json_get "$R" "[f for s in r['callsites'] for f in s['frames'] if f['object'] == 'libpoolshim.so']")" = "[]" ] &&
	pass "stacks start in the program, no shim frames" || fail "frames: $(json_get "$R" "[s['frames'][0] for s in r['callsites']]")"
[ "$(json_get "$R" "any(f['function'] == 'main' for s in r['callsites'] for f in s['frames'])")" = True ] &&
	pass "frames reach main" || fail "no main frame"
# libc's frames are named from .dynsym, whose names carry a version.
[ "$(json_get "$R" "any(f['function'] == '__libc_start_main' for s in r['callsites'] for f in s['frames'])")" = True ] &&
	[ "$(json_get "$R" "[f['function'] for s in r['callsites'] for f in s['frames'] if '@' in (f['function'] or '')]")" = "[]" ] &&
	pass "libc frames named without symbol versions" ||
	fail "versioned names: $(json_get "$R" "sorted({f['function'] for s in r['callsites'] for f in s['frames'] if f['object'].startswith('libc')} - {None})")"

# the text report lists them by bytes, biggest first
shim POOLSHIM_BACKTRACE=4 POOLSHIM_BACKTRACE_SAMPLE=1 -- "$H" >/dev/null 2>"$PST_TMP/text"
sed -n '/call sites by bytes/,/call sites by count/p' "$PST_TMP/text" | grep -m1 '#0' | grep -q site_big_buffers &&
	pass "text: biggest site first" || fail "text: $(grep -A3 'call sites by bytes' "$PST_TMP/text")"

# sampling by bytes (the default mean, 512 KiB): each capture stands for
# 1/p calls, so the sites' estimated calls add up to about the 2000 made
# (50 allocations, 50 I/O per round, 20 rounds); 25% is over 4 sigma.
shim POOLSHIM_BACKTRACE=8 "POOLSHIM_STATS=$R" -- "$H" 20 >/dev/null
n=$(json_get "$R" "sum(s['count'] for s in r['callsites'])")
[ "$n" -ge 1500 ] && [ "$n" -le 2500 ] && pass "sampled: $n calls estimated of 2000" ||
	fail "sampling: $n calls estimated of 2000"

# off by default
shim "POOLSHIM_STATS=$R" -- "$H" >/dev/null
[ "$(json_get "$R" "'callsites' in r")" = False ] && pass "no call sites by default" || fail "call sites without POOLSHIM_BACKTRACE"
finish
