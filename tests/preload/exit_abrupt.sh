#!/bin/sh
# SPDX-License-Identifier: MIT
# A program that ends with _exit() or _Exit() (Ceph's OSD does) still gets
# its report and leaves no live file, and ends as it would without the
# shim: same exit status, same output (stdio buffers stay unflushed).  Its
# fork and vfork children that _exit write no report (tests/preload/
# exit_abrupt.c says what each mode does).
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/exit_abrupt"

# writes FILE: the report's count of write(2) calls on files
writes() { json_get "$1" "sum(c['calls'] for c in r['calls'] if c['call'] == 'write' and c['kind'] == 'file')"; }

for case in _exit:7:10 _Exit:9:10 signal:4:10 thread:6:+ fork:0:10 vfork:5:10; do
	mode=${case%%:*}; rest=${case#*:}; want_rc=${rest%%:*}; want_writes=${rest#*:}
	d="$PST_TMP/$mode"
	mkdir -p "$d/live"
	"$P" "$mode" "$d/data" >"$d/out.none" 2>"$d/err.none"
	rc_none=$?
	shim POOLSHIM_STATS="$d/r-%p.json" POOLSHIM_LIVE_DIR="$d/live" -- \
		"$P" "$mode" "$d/data" >"$d/out.shim" 2>"$d/err.shim"
	rc_shim=$?
	[ "$rc_none" = "$want_rc" ] || fail "$mode: exit $rc_none without the shim, not $want_rc"
	[ "$rc_shim" = "$rc_none" ] && pass "$mode: exit $rc_shim, as without the shim" ||
		fail "$mode: exit $rc_shim under the shim, $rc_none without: $(cat "$d/err.shim")"
	cmp -s "$d/out.none" "$d/out.shim" && pass "$mode: the same output ($(wc -c <"$d/out.shim") bytes)" ||
		fail "$mode: output '$(cat "$d/out.shim")' under the shim, '$(cat "$d/out.none")' without"
	# shellcheck disable=SC2012
	n=$(ls "$d" | grep -c '^r-[0-9]*\.json$')
	if [ "$n" = 1 ]; then
		r=$(ls "$d"/r-*.json)
		pid=${r##*/r-}; pid=${pid%.json}
		child=$(sed -n 's/^child //p' "$d/err.shim")
		[ -n "$child" ] && [ "$pid" = "$child" ] && fail "$mode: the one report is the child's ($child)"
		w=$(writes "$r")
		if [ "$want_writes" = + ]; then
			[ "$w" -ge 10 ] 2>/dev/null && pass "$mode: the report counts $w writes" ||
				fail "$mode: the report counts '$w' writes, fewer than 10"
		else
			[ "$w" = "$want_writes" ] && pass "$mode: the report counts its own $w writes" ||
				fail "$mode: the report counts '$w' writes, not $want_writes"
		fi
	else
		fail "$mode: $n reports, not 1: $(ls "$d")"
	fi
	left=$(ls -A "$d/live")
	[ -z "$left" ] && pass "$mode: no live file left" || fail "$mode: live files left: $left"
done
finish
