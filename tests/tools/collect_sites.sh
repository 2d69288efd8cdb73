#!/bin/sh
# SPDX-License-Identifier: MIT
# Call sites of a process killed with SIGKILL (issue 34's gap): with
# POOLSHIM_BACKTRACE the call-site table lives in the process's live
# record, with the modules its frames fall in, so `poolshim collect` and
# `poolshim stat` render the call-site section the process's own exit
# report has, named offline.  callsite_helper allocates pooled buffers from
# site_small_buffers and site_big_buffers (and does I/O from two more
# functions); every call is captured (POOLSHIM_BACKTRACE_SAMPLE=1), so the
# counts are exact and must equal those of the same run that exits.  A
# damaged table (a slot's depth past the most a stack keeps, a region that
# is not where the shim puts it) is refused alone, in one line: the report
# is still made, without call sites, and says why.  A library dlopen'd
# after the record was made is named too; as root, another user's record
# is named only from the objects that user may read.  Without
# POOLSHIM_BACKTRACE the record has no table and keeps its size.
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
OFFSETS="$PS_TOP_BUILDDIR/tests/tools/live_offsets"
REPORT="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
H="$PRELOAD_BIN/callsite_helper"
L="$PST_TMP/live"
mkdir "$L"
"$OFFSETS" >"$PST_TMP/offsets" || { fail "no $OFFSETS"; finish; }
BT="POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1"

# The run that exits: its own report (the same arguments up to "kill",
# so that the compiler's paths through main are the same).
# shellcheck disable=SC2086
shim $BT "POOLSHIM_LIVE_DIR=$L" "POOLSHIM_STATS=$PST_TMP/exit.json" -- "$H" 1 >/dev/null ||
	fail "helper failed"

# The same run, killed by SIGKILL after the same work: a record, no report.
# killed NAME: run it with its report due at $PST_TMP/NAME.json; $rec is its record.
killed() {
	# shellcheck disable=SC2086
	shim $BT "POOLSHIM_LIVE_DIR=$L" "POOLSHIM_STATS=$PST_TMP/$1.json" -- "$H" 1 kill >/dev/null 2>&1
	rc=$?
	[ $rc = 137 ] || fail "$1: the helper ended with $rc, not by SIGKILL"
	rec=$(ls "$L"/poolshim-*.stats 2>/dev/null | head -n 1)
	[ -n "$rec" ] || fail "$1: no record left"
	[ ! -e "$PST_TMP/$1.json" ] || fail "$1: a killed process wrote its report?"
}
killed kill
kpid=${rec#"$L"/poolshim-}
kpid=${kpid%%-*}

# poolshim stat renders the gone process's call sites, named.
timeout 120 "$STAT" --live-dir "$L" "$kpid" >"$PST_TMP/stat" 2>&1
sed -n '/call sites by bytes/,$p' "$PST_TMP/stat" | grep -q '#0 site_big_buffers+0x' &&
	sed -n '/call sites by bytes/,$p' "$PST_TMP/stat" | grep -q '#0 site_small_buffers+0x' &&
	pass "stat names both allocating functions of the killed process" ||
	fail "stat's call sites: $(grep -A6 'call sites by bytes' "$PST_TMP/stat" | head -8)"

timeout 120 "$COLLECT" --live-dir "$L" >"$PST_TMP/out" 2>"$PST_TMP/err" ||
	fail "collect: $(cat "$PST_TMP/err")"
[ -f "$PST_TMP/kill.json" ] || { fail "no report collected: $(cat "$PST_TMP/err")"; finish; }
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/kill.json" || fail "schema"

# Each site by its innermost function: (kind, call, count, bytes).
sites='sorted((s["frames"][0]["function"], s["kind"], s["call"], s["count"], s["bytes"]) for s in r.get("callsites", []))'
want=$(json_get "$PST_TMP/exit.json" "$sites")
got=$(json_get "$PST_TMP/kill.json" "$sites")
echo "exit report: $want"
echo "collected:   $got"
echo "$got" | grep -q "('site_big_buffers', 'alloc', 'malloc', 10, 41943040)" &&
	echo "$got" | grep -q "('site_small_buffers', 'alloc', 'malloc', 40, 10485760)" &&
	pass "collect names both allocating functions, with their exact counts" ||
	fail "collected sites: $got"
[ "$got" = "$want" ] && pass "the same sites and counts as the exit report" ||
	fail "sites differ from the exit report's"
frames='sorted(tuple((f["function"], f["object"], f["rel"]) for f in s["frames"]) for s in r.get("callsites", []))'
[ "$(json_get "$PST_TMP/kill.json" "$frames")" = "$(json_get "$PST_TMP/exit.json" "$frames")" ] &&
	pass "every frame named as the exit report names it" ||
	fail "frames differ: $(json_get "$PST_TMP/kill.json" "$frames" | head -c 800)"
python3 "$REPORT" --folded "$PST_TMP/exit.json" >"$PST_TMP/exit.folded" 2>/dev/null
python3 "$REPORT" --folded "$PST_TMP/kill.json" >"$PST_TMP/kill.folded" 2>/dev/null
grep -q ";site_big_buffers;alloc:malloc 10$" "$PST_TMP/kill.folded" &&
	cmp -s "$PST_TMP/exit.folded" "$PST_TMP/kill.folded" &&
	pass "--folded: the same stacks as the exit report's" ||
	fail "folded: $(diff "$PST_TMP/exit.folded" "$PST_TMP/kill.folded" | head -5)"
ls "$L"/poolshim-*.stats >/dev/null 2>&1 && fail "record left after collect"

# A library opened after the record was made (dlopen): its frames are
# named too, from the module list brought up to date at its first stack.
PLUGIN="$PRELOAD_BIN/.libs/libsiteplugin.so"
[ -f "$PLUGIN" ] || fail "no $PLUGIN"
# shellcheck disable=SC2086
shim $BT "POOLSHIM_LIVE_DIR=$L" "POOLSHIM_STATS=$PST_TMP/plugin.json" -- \
	env "CALLSITE_PLUGIN=$PLUGIN" "$H" 1 kill >/dev/null 2>&1
timeout 120 "$COLLECT" --live-dir "$L" >/dev/null 2>"$PST_TMP/plugin.err" ||
	fail "collect: $(cat "$PST_TMP/plugin.err")"
p=$(json_get "$PST_TMP/plugin.json" '[(s["count"], s["frames"][0]["object"], s["frames"][1]["function"]) for s in r.get("callsites", []) if s["frames"][0]["function"] == "plugin_buffers"]')
[ "$p" = "[(5, 'libsiteplugin.so', 'main')]" ] &&
	pass "a dlopen'd library's frames named after SIGKILL" ||
	fail "plugin site: $p; $(json_get "$PST_TMP/plugin.json" '[s["frames"][0] for s in r.get("callsites", [])]' | head -c 600)"

# A fork child's stacks are its own: counted in private memory, never in
# its parent's record (site_big_buffers stays at the parent's 10).
# shellcheck disable=SC2086
shim $BT "POOLSHIM_LIVE_DIR=$L" "POOLSHIM_STATS=$PST_TMP/fork.json" -- \
	env CALLSITE_FORK=1 "$H" 1 kill >/dev/null 2>&1
timeout 120 "$COLLECT" --live-dir "$L" >/dev/null 2>"$PST_TMP/fork.err" ||
	fail "collect: $(cat "$PST_TMP/fork.err")"
p=$(json_get "$PST_TMP/fork.json" '[s["count"] for s in r.get("callsites", []) if s["frames"][0]["function"] == "site_big_buffers"]')
[ "$p" = "[10]" ] && pass "a fork child's stacks stay out of its parent's record" ||
	fail "site_big_buffers in the parent's record after a fork: $p"

# As root, a record of another user's process: its objects are read with
# that user's permissions.  The program, readable by nobody only while it
# runs (then root's, mode 0700), is not named (raw addresses, its build id
# and offsets kept), while libc, which nobody may read, still is.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	U=$(mktemp -d /tmp/pst-sites-nobody.XXXXXX)
	at_exit "rm -rf '$U'"
	chmod 755 "$U"
	mkdir -m 1777 "$U/L"
	mkdir -m 755 "$U/bin"
	cp "$H" "$U/bin/helper"
	chown nobody "$U/bin/helper"
	chmod 700 "$U/bin/helper"
	# shellcheck disable=SC2086
	setpriv --reuid=nobody --regid=nogroup --clear-groups env $BT "POOLSHIM_LIVE_DIR=$U/L" \
		POOLSHIM_STATS=stderr LD_PRELOAD="$SHIM" "$U/bin/helper" 1 kill >/dev/null 2>&1
	chown root "$U/bin/helper"
	mkdir "$PST_TMP/nobody.d"
	timeout 120 "$COLLECT" --live-dir "$U/L" --into "$PST_TMP/nobody.d" >/dev/null 2>"$PST_TMP/nobody.err"
	r=$(ls "$PST_TMP/nobody.d"/*.txt 2>/dev/null | head -n 1)
	if [ -z "$r" ]; then
		fail "nobody's record: no report: $(cat "$PST_TMP/nobody.err")"
	else
		grep -Eq '#0 0x[0-9a-f]+ \(helper\)' "$r" && ! grep -q 'site_big_buffers' "$r" &&
			grep -q '__libc_start_main+0x[0-9a-f]* (libc.so.6)' "$r" &&
			pass "as root: named only from what the record's owner may read" ||
			fail "nobody's record: $(grep -A4 'call sites by bytes' "$r")"
	fi
else
	echo "not root (or no setpriv): the owner's-permissions case not run"
fi

# Damaged tables: each refused alone, the report still made.
# damage NAME PYTHON: a killed run's record patched by PYTHON (f: the file,
# o: offsets, so: the region's offset), then collected as text.
damage() {
	killed "$1"
	python3 - "$PST_TMP/offsets" "$rec" "$2" <<'PY' || fail "patching $1"
import struct, sys
o = {}
for line in open(sys.argv[1]):
    w = line.split()
    o[w[0]] = int(w[1])
f = open(sys.argv[2], "r+b")
f.seek(o["sites_off"])
so = struct.unpack("<Q", f.read(8))[0]
assert so, "the record has no call-site table"
exec(sys.argv[3])
PY
	timeout 120 "$COLLECT" --live-dir "$L" --into "$PST_TMP/$1.d" >"$PST_TMP/$1.out" 2>"$PST_TMP/$1.err"
	echo "$1: $(cat "$PST_TMP/$1.err")"
	r=$(ls "$PST_TMP/$1.d"/*.json 2>/dev/null | head -n 1)
	[ -n "$r" ] || { fail "$1: no report made"; return; }
	[ "$(json_get "$r" "'callsites' in r")" = False ] &&
		[ "$(json_get "$r" "sum(c['calls'] for c in r['calls'] if c['call'] == 'malloc') >= 50")" = True ] &&
		pass "$1: the report without call sites, its counts still there" ||
		fail "$1: report: $(head -c 300 "$r")"
}
mkdir "$PST_TMP/depth.d" "$PST_TMP/place.d"
# A ready slot whose depth is past the most a stack keeps.
damage depth '
t = so + o["sites_table"]
for i in range(o["sites_slots"]):
    f.seek(t + i * o["site_size"] + o["site_ready"])
    if struct.unpack("<i", f.read(4))[0] == 1:
        f.seek(t + i * o["site_size"] + o["site_depth"])
        f.write(struct.pack("<I", 100000))
        break
else:
    raise SystemExit("no ready slot")
'
grep -q "call sites refused: a site's depth, kind or call is out of range; the report has none" \
	"$PST_TMP/depth.err" && pass "a slot's depth out of range: refused in one line" ||
	fail "depth: $(cat "$PST_TMP/depth.err")"
# The region said to reach past the end of the file.
damage place '
f.seek(o["sites_len"])
f.write(struct.pack("<Q", 1 << 40))
'
grep -q "call sites refused: its place in the file is not one the shim would use" "$PST_TMP/place.err" &&
	pass "a region outside the file: refused in one line" || fail "place: $(cat "$PST_TMP/place.err")"

# A module's path naming a FIFO (a hostile record): never opened to
# block; that module's frames stay unnamed, the others are named.
mkfifo "$PST_TMP/fifo"
killed fifo
python3 - "$PST_TMP/offsets" "$rec" "$PST_TMP/fifo" <<'PY' || fail "patching fifo"
import struct, sys
o = {w.split()[0]: int(w.split()[1]) for w in open(sys.argv[1])}
f = open(sys.argv[2], "r+b")
f.seek(o["sites_off"])
so = struct.unpack("<Q", f.read(8))[0]
f.seek(so + o["sites_modules"] + o["module_path"])
assert f.read(256).split(b"\0")[0].endswith(b"callsite_helper"), "the first module is not the program"
f.seek(so + o["sites_modules"] + o["module_path"])
f.write(sys.argv[3].encode() + b"\0")
PY
mkdir "$PST_TMP/fifo.d"
timeout 60 "$COLLECT" --live-dir "$L" --into "$PST_TMP/fifo.d" >/dev/null 2>"$PST_TMP/fifo.err"
rc=$?
r=$(ls "$PST_TMP/fifo.d"/*.json 2>/dev/null | head -n 1)
[ $rc = 0 ] && [ -n "$r" ] &&
	[ "$(json_get "$r" "sorted({f['function'] is None for s in r['callsites'] for f in s['frames'] if f['object'] == 'fifo'})")" = "[True]" ] &&
	[ "$(json_get "$r" "any(f['function'] == '__libc_start_main' for s in r['callsites'] for f in s['frames'])")" = True ] &&
	pass "a module path naming a FIFO: not opened, the rest named" ||
	fail "fifo: status $rc: $(cat "$PST_TMP/fifo.err")"

# The text report says why it has no call sites.
killed text
python3 - "$PST_TMP/offsets" "$rec" <<'PY' || fail "patching text"
import struct, sys
o = {w.split()[0]: int(w.split()[1]) for w in open(sys.argv[1])}
f = open(sys.argv[2], "r+b")
f.seek(o["sites_off"])
so = struct.unpack("<Q", f.read(8))[0]
f.seek(so)
f.write(b"XXXXXXXX")
PY
kp=${rec#"$L"/poolshim-}
kp=${kp%%-*}
timeout 120 "$STAT" --live-dir "$L" "$kp" >"$PST_TMP/text.stat" 2>&1
grep -q "call sites: not shown, the record's table is damaged (not a call-site table of this layout)" \
	"$PST_TMP/text.stat" && grep -q "^malloc " "$PST_TMP/text.stat" &&
	pass "stat: the rest rendered, and why there are no call sites" ||
	fail "stat on a damaged table: $(tail -5 "$PST_TMP/text.stat")"
rm -f "$rec"

# Without POOLSHIM_BACKTRACE: no table, the record's size as before.
shim "POOLSHIM_LIVE_DIR=$L" -- "$H" 1 kill >/dev/null 2>&1
rec=$(ls "$L"/poolshim-*.stats 2>/dev/null | head -n 1)
python3 - "$PST_TMP/offsets" "$rec" <<'PY' && pass "no table without POOLSHIM_BACKTRACE" || fail "a table without POOLSHIM_BACKTRACE"
import os, struct, sys
o = {w.split()[0]: int(w.split()[1]) for w in open(sys.argv[1])}
f = open(sys.argv[2], "rb")
f.seek(o["sites_off"])
so, sl = struct.unpack("<QQ", f.read(16))
f.seek(o["block_stride"])
stride = struct.unpack("<Q", f.read(8))[0]
size = os.stat(sys.argv[2]).st_size
sys.exit(0 if so == 0 and sl == 0 and size < o["header"] + 128 * stride else 1)
PY
rm -f "$rec"
finish
