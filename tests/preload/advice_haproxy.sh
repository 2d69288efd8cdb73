#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 46, the haproxy trap: haproxy allocates its tune.bufsize buffers
# (16K) once and keeps them in its own pools.  Its report must not suggest
# a POOLSHIM_POOL_MIN that pools them (glibc serves and reuses blocks that
# small itself: pooled, none is reused and nothing is saved), and after
# POOLSHIM_POOL_MIN=16K anyway (the pool serves them, reuses none) the
# haproxy advice is still given and the verdict still says the pool is
# idle.  The helper runs under the name haproxy; its 24 buffers of 16K
# live at once and are freed at the end, as haproxy's pools at exit.
. "$PS_TOP_SRCDIR/tests/lib.sh"
mkdir -p "$PST_TMP/bin"
cp "$PRELOAD_BIN/advice_helper" "$PST_TMP/bin/haproxy" || fail "copy the helper"
H="$PST_TMP/bin/haproxy"
SCHEMA="$PS_TOP_SRCDIR/tests/report_schema.py"

# 1. the default threshold (64K): no pool_min advice, the haproxy advice, an idle verdict
shim "POOLSHIM_STATS=$PST_TMP/a.json" -- "$H" alloc 24 16384 >/dev/null || fail "helper (default)"
python3 "$SCHEMA" "$PST_TMP/a.json" && pass "schema (default)" || fail "schema (default)"
ids=$(json_get "$PST_TMP/a.json" "[a['id'] for a in r['advice']]")
case $ids in
*pool_min*) fail "POOLSHIM_POOL_MIN suggested for 16K buffers: $(json_get "$PST_TMP/a.json" "r['advice']")" ;;
*program_settings*) pass "no pool_min advice; the haproxy advice: $ids" ;;
*) fail "no haproxy advice: $ids" ;;
esac
[ "$(json_get "$PST_TMP/a.json" "r['verdict']['kind']")" = idle ] &&
	json_get "$PST_TMP/a.json" "r['verdict']['text']" | grep -q "^pool idle: haproxy" &&
	pass "verdict: $(json_get "$PST_TMP/a.json" "r['verdict']['text']")" ||
	fail "verdict: $(json_get "$PST_TMP/a.json" "r.get('verdict')")"

# 2. following the old advice (POOLSHIM_POOL_MIN=16K): pooled, none reused; the advice stays
shim POOLSHIM_POOL_MIN=16K "POOLSHIM_STATS=$PST_TMP/b.json" -- "$H" alloc 24 16384 >/dev/null || fail "helper (16K)"
python3 "$SCHEMA" "$PST_TMP/b.json" && pass "schema (16K)" || fail "schema (16K)"
[ "$(json_get "$PST_TMP/b.json" "(r['pool']['allocations'] >= 24, r['saved']['reused'])")" = "(True, 0)" ] &&
	pass "with 16K the pool serves them and reuses none" ||
	fail "with 16K: pool $(json_get "$PST_TMP/b.json" "(r['pool']['allocations'], r['saved'])")"
msg=$(json_get "$PST_TMP/b.json" "[a['message'] for a in r['advice'] if a['id'] == 'program_settings']")
case $msg in
*"reused memory for 0"*"saves nothing"*"at par, 0.99x"*) pass "the haproxy advice is still there, with the at-par figure" ;;
*) fail "haproxy advice after 16K: $(json_get "$PST_TMP/b.json" "r['advice']")" ;;
esac
json_get "$PST_TMP/b.json" "[a['id'] for a in r['advice']]" | grep -q pool_min &&
	fail "pool_min advice again at 16K" || pass "no pool_min advice at 16K"
[ "$(json_get "$PST_TMP/b.json" "r['verdict']['kind']")" = idle ] &&
	pass "verdict still idle: $(json_get "$PST_TMP/b.json" "r['verdict']['text']")" ||
	fail "verdict at 16K: $(json_get "$PST_TMP/b.json" "r.get('verdict')")"

# 3. the text report: the verdict right under the header, the haproxy item first
shim -- "$H" alloc 24 16384 >/dev/null 2>"$PST_TMP/a.txt"
sed -n 2p "$PST_TMP/a.txt" | grep -q "^verdict  pool idle: haproxy" && pass "text: verdict on line 2" ||
	fail "text line 2: $(sed -n 2p "$PST_TMP/a.txt")"
sed -n '/^advice$/{n;p;}' "$PST_TMP/a.txt" | grep -q "^  - haproxy moves data" &&
	pass "text: the haproxy item comes first" || fail "text advice: $(sed -n '/^advice$/,$p' "$PST_TMP/a.txt")"
finish
