#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim report` names call sites offline: a -g binary (no -rdynamic) is
# stripped, its debug info split into a build-id tree, and run under the shim
# where no debug info is found, so the report's frames are unnamed; the
# reader then names them from --debug-dir by build id, from the object at its
# path when the build id matches (or its debuglink), and never from an object
# whose build id differs.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/callsite_plain"
REPORT="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
R="$PST_TMP/sites.json"
command -v eu-addr2line >/dev/null || skip "eu-addr2line not installed (elfutils)"
for t in objcopy readelf; do
	command -v $t >/dev/null || skip "$t not installed (binutils)"
done
want="['main', 'site_big_buffers', 'site_read_file', 'site_small_buffers', 'site_write_file']"

id=$(LC_ALL=C readelf -n "$H" | awk '/Build ID:/ { print $3 }')
[ -n "$id" ] || skip "callsite_plain has no build id (linker without --build-id)"
D="$PST_TMP/debug"
mkdir -p "$D/.build-id/$(echo "$id" | cut -c1-2)" "$PST_TMP/bin"
objcopy --only-keep-debug "$H" "$D/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
B="$PST_TMP/bin/callsite_plain"
objcopy --strip-all "$H" "$B"

# The run: debug info looked for where there is none.
shim POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1 "POOLSHIM_DEBUGINFO_PATH=$PST_TMP/nowhere" \
	"POOLSHIM_STATS=$R" -- "$B" >/dev/null || fail "helper failed"
own="[f for s in r['callsites'] for f in s['frames'] if f['object'] == 'callsite_plain']"
[ "$(json_get "$R" "(len($own) >= 10, {(f['function'], f['build_id'], f['path']) for f in $own})")" = \
  "(True, {(None, '$id', '$B')})" ] && pass "the report's own frames are unnamed, with build id and path" ||
	fail "frames in the report: $(json_get "$R" "$own")"

# names NAME ARGS...: the sorted innermost function names per site of
# poolshim report --json; stderr kept in $PST_TMP/NAME.err
names() {
	n=$1
	shift
	python3 "$REPORT" --json "$PST_TMP/$n.json" "$@" "$R" >/dev/null 2>"$PST_TMP/$n.err" || fail "report $n: $(cat "$PST_TMP/$n.err")"
	json_get "$PST_TMP/$n.json" "sorted({s['frames'][0]['function'] or '?' for s in r['programs'][0]['callsites']})"
}
[ "$(names dir --debug-dir "$D")" = "$want" ] && pass "named from --debug-dir by build id" ||
	fail "--debug-dir names: $(names dir --debug-dir "$D")"
q="[(f['function'], f['file'], f['line']) for s in r['programs'][0]['callsites'] for f in s['frames'] if f['object'] == 'callsite_plain' and f['function'] not in ('_start', 'main')]"
json_get "$PST_TMP/dir.json" "all(fn.startswith('site_') and fi.endswith('callsite_helper.c') and li > 20 for fn, fi, li in $q) and len($q) >= 4" |
	grep -qx True && pass "file:line from the split DWARF" || fail "sources: $(json_get "$PST_TMP/dir.json" "$q")"
python3 "$REPORT" --debug-dir "$D" "$R" 2>&1 | grep -Eq "#0 site_big_buffers\+0x[0-9a-f]+ \(callsite_plain\) .*callsite_helper.c:[0-9]+" &&
	pass "text report names the frames" || fail "text: $(python3 "$REPORT" --debug-dir "$D" "$R" 2>&1 | grep '#0' | head -3)"
python3 "$REPORT" --folded --debug-dir "$D" "$R" | grep -q ";main;site_big_buffers;alloc:malloc 10$" &&
	pass "--folded carries the names" || fail "folded: $(python3 "$REPORT" --folded --debug-dir "$D" "$R")"

[ "$(names plain)" != "$want" ] && pass "stripped object alone: not named" || fail "named without its debug info?"
[ "$(names off --no-symbolize --debug-dir "$D")" != "$want" ] && pass "--no-symbolize leaves them unnamed" ||
	fail "--no-symbolize named them"

# The object at its path, unstripped, with the same build id: its .symtab
cp "$H" "$B"
[ "$(names same)" = "$want" ] && pass "named from the object at its path (same build id)" ||
	fail "same object: $(names same)"

# Stripped again with a debuglink to a file beside it (no build-id tree)
mkdir -p "$PST_TMP/bin/.debug"
objcopy --only-keep-debug "$H" "$PST_TMP/bin/.debug/callsite_plain.dbg"
objcopy --strip-all --add-gnu-debuglink="$PST_TMP/bin/.debug/callsite_plain.dbg" "$H" "$B"
[ "$(names link)" = "$want" ] && pass "named through the object's debuglink" || fail "debuglink: $(names link)"
rm -rf "$PST_TMP/bin/.debug"

# A different build at the path (the -rdynamic one, with a full .symtab):
# never named from it, and said once
cp "$PRELOAD_BIN/callsite_helper" "$B"
[ "$(LC_ALL=C readelf -n "$B" | awk '/Build ID:/ { print $3 }')" != "$id" ] || fail "the other build has the same build id"
[ "$(names other)" != "$want" ] && pass "another build at the path: not named" || fail "named from another build"
[ "$(grep -c "$B: build id .* in the report: not naming" "$PST_TMP/other.err")" = 1 ] &&
	pass "the mismatch is said once" || fail "mismatch message: $(cat "$PST_TMP/other.err")"
[ "$(names both --debug-dir "$D")" = "$want" ] && pass "the debug file by build id wins over another build" ||
	fail "with --debug-dir: $(names both --debug-dir "$D")"
finish
