#!/bin/sh
# SPDX-License-Identifier: MIT
# Call sites are sampled by bytes: with the default sample a program that
# alternates malloc(4 MiB) from one function and malloc(256 KiB) from
# another, 400 times each (host_helper sites), gets both sites, and each
# site's calls and bytes are estimates of what the program did (a fixed
# one-in-64 gap used to land on the same site every time and miss the
# big one).  25% is over 4 sigma for the 256 KiB site (p = 0.39).
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/host_helper"
R="$PST_TMP/r.json"

"$H" sites || fail "host_helper sites failed without the shim"
shim POOLSHIM_BACKTRACE=8 "POOLSHIM_STATS=$R" -- "$H" sites || fail "host_helper sites failed under the shim"
[ -s "$R" ] || { fail "no report"; finish; }
# site FUNCTION FIELD: the sum of FIELD over the alloc sites whose innermost frame is FUNCTION
site() {
	json_get "$R" "sum(s['$2'] for s in r.get('callsites', []) if s['kind'] == 'alloc' and s['frames'] and s['frames'][0].get('function') == '$1')"
}
for f in big_site:4194304 medium_site:262144; do
	fn=${f%%:*} size=${f#*:}
	calls=$(site "$fn" count) bytes=$(site "$fn" bytes)
	want=$((400 * size))
	if [ "$calls" -ge 300 ] && [ "$calls" -le 500 ] &&
	   [ "$bytes" -ge $((want * 3 / 4)) ] && [ "$bytes" -le $((want * 5 / 4)) ]; then
		pass "$fn: $calls calls, $bytes bytes estimated (400 calls, $want bytes made)"
	else
		fail "$fn: $calls calls, $bytes bytes estimated; 400 calls, $want bytes made"
	fi
done
finish
