#!/bin/sh
# SPDX-License-Identifier: MIT
# A server packaged the way Debian packages nginx: built -g -O2, its debug
# info split by dh_strip into a -dbgsym-style tree
# (usr/lib/debug/.build-id/xx/rest.debug, compressed DWARF), the binary
# stripped with a .gnu_debuglink.  Debian's own nginx-dbgsym is in the
# debian-debug archive, which is not reachable from every machine, so the
# stand-in is the demo's storage node (demo/storaged), an HTTP server with
# a buffer per request.  Its call sites are named in the process
# (POOLSHIM_DEBUGINFO_PATH=the tree) and, from a report made without any
# debug info, offline by `poolshim report --debug-dir`, to the same names.
. "$PS_TOP_SRCDIR/tests/lib.sh"
SRC="$PS_TOP_BUILDDIR/demo/storaged"
REPORT="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
[ -x "$SRC" ] || skip "demo/storaged not built (configured with --disable-demo?)"
[ -e /usr/lib/x86_64-linux-gnu/libdw.so.1 ] || [ -e /lib/x86_64-linux-gnu/libdw.so.1 ] ||
	skip "libdw.so.1 not installed (libdw1)"
for t in objcopy strip readelf curl eu-addr2line; do
	command -v $t >/dev/null || skip "$t not installed"
done
LC_ALL=C readelf -S "$SRC" | grep -q '\.debug_info' || skip "demo/storaged built without -g"

# dh_strip's steps
id=$(LC_ALL=C readelf -n "$SRC" | awk '/Build ID:/ { print $3 }')
[ -n "$id" ] || skip "demo/storaged has no build id"
D="$PST_TMP/pkg/usr/lib/debug"
DBG="$D/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
S="$PST_TMP/pkg/usr/sbin/storaged"
mkdir -p "$(dirname "$DBG")" "$(dirname "$S")"
cp "$SRC" "$S"
objcopy --only-keep-debug --compress-debug-sections "$S" "$DBG"
strip --remove-section=.comment --remove-section=.note "$S"
objcopy --add-gnu-debuglink="$DBG" "$S"
sec=$(LC_ALL=C readelf -S "$S")
case $sec in
*.symtab*|*.debug_info*) fail "the binary is not stripped" ;;
*.gnu_debuglink*) pass "stripped, with a debuglink; debug info in a build-id tree" ;;
*) fail "no .gnu_debuglink" ;;
esac
LC_ALL=C readelf -S "$DBG" 2>/dev/null | grep -A1 '\.debug_info' | grep -q ' C ' && pass "compressed DWARF (as dh_strip writes it)" ||
	echo "note: objcopy did not compress the debug sections"

# serve RUN DEBUGINFO_PATH: PUT a bucket and a 3 MiB object, GET it back, SIGTERM.
head -c 3000000 /dev/urandom >"$PST_TMP/obj"
serve() {
	rm -rf "$PST_TMP/data"
	env POOLSHIM_BACKTRACE=16 POOLSHIM_BACKTRACE_SAMPLE=1 POOLSHIM_BACKTRACE_TOP=64 \
		"POOLSHIM_DEBUGINFO_PATH=$2" "POOLSHIM_STATS=$PST_TMP/$1.json" LD_PRELOAD="$SHIM" \
		"$S" --dir "$PST_TMP/data" --port 0 --no-fsync >"$PST_TMP/$1.out" 2>"$PST_TMP/$1.err" &
	pid=$!
	at_exit "kill $pid 2>/dev/null"
	i=0
	while ! grep -qs '^listening on ' "$PST_TMP/$1.out"; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
			fail "storaged did not start: $(cat "$PST_TMP/$1.err")"
			return 1
		fi
		sleep 0.1
	done
	E="http://127.0.0.1:$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$PST_TMP/$1.out")"
	c1=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data-binary '' "$E/bkt")
	c2=$(curl -s -o /dev/null -w '%{http_code}' -T "$PST_TMP/obj" "$E/bkt/obj")
	curl -s -o "$PST_TMP/back" "$E/bkt/obj"
	kill -TERM $pid
	wait $pid || fail "storaged exit status $?"
	[ "$c1 $c2" = "200 200" ] && cmp -s "$PST_TMP/obj" "$PST_TMP/back" || fail "requests: $c1 $c2"
}
# what NAME: the program's frames of a report as sorted (function, offset) pairs
own="[f for s in r['callsites'] for f in s['frames'] if f['object'] == 'storaged']"
pairs="sorted({(f['function'], f['offset']) for f in $own})"
# put_object is small enough to be inlined into the request handler: not here.
core="{'conn_main', 'get_object', 'receive_object_body', 'store_object'}"

serve inproc "$D"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/inproc.json" || fail "schema"
[ "$(json_get "$PST_TMP/inproc.json" "(len($own) >= 10, all(f['function'] for f in $own), $core <= {f['function'] for f in $own})")" = \
  "(True, True, True)" ] && pass "in process: every storaged frame named from the tree, $core among them" ||
	fail "in process: $(json_get "$PST_TMP/inproc.json" "$pairs")"
json_get "$PST_TMP/inproc.json" "any(f['line'] and f['file'].endswith('storaged.c') for f in $own)" | grep -qx True &&
	pass "in process: file:line from the compressed DWARF" || fail "no storaged.c:line"

serve bare "$PST_TMP/nowhere"
[ "$(json_get "$PST_TMP/bare.json" "(len($own) >= 10, {(f['function'], f['build_id']) for f in $own})")" = "(True, {(None, '$id')})" ] &&
	pass "no debug info found in the run: storaged frames unnamed" ||
	fail "bare run frames: $(json_get "$PST_TMP/bare.json" "$own")"

python3 "$REPORT" --json "$PST_TMP/offline.json" --debug-dir "$D" "$PST_TMP/bare.json" >/dev/null 2>"$PST_TMP/offline.err" ||
	fail "report: $(cat "$PST_TMP/offline.err")"
off=$(json_get "$PST_TMP/offline.json" "sorted({(f['function'], f['offset']) for s in r['programs'][0]['callsites'] for f in s['frames'] if f['object'] == 'storaged'})")
[ "$off" = "$(json_get "$PST_TMP/inproc.json" "$pairs")" ] && pass "offline: the same names and offsets as in process" ||
	fail "offline $off; in process $(json_get "$PST_TMP/inproc.json" "$pairs")"
python3 "$REPORT" --folded --debug-dir "$D" "$PST_TMP/bare.json" | grep -Eq ";conn_main;(serve_one_\[i\];)?(handle;)?put_object(_\[i\])?;receive_object_body;" &&
	pass "offline --folded: conn_main, put_object, inlined frames marked _[i]" || fail "folded: $(python3 "$REPORT" --folded --debug-dir "$D" "$PST_TMP/bare.json")"
finish
