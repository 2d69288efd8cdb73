#!/bin/sh
# SPDX-License-Identifier: MIT
# POOLSHIM_POOL=off (issue 37): a baseline in the report's own currency.
# Every call is counted as with the pool on (the malloc rows, sizes and
# bytes are the pooled run's), and every block goes to glibc's heap as
# without the shim: the report says mode off (text, JSON, a record rendered
# by `poolshim collect`, `poolshim stat` and its Prometheus gauge), its
# saved line says nothing was saved, and its advice says the run is a
# baseline, not why the pool did nothing.  No pool range is mapped
# (/proc/self/maps), jemalloc never starts, and the allocations make the
# system calls they make without the shim (strace).  A bad value is one
# line, and the pool stays on.  `poolshim report --diff` of the baseline
# against a pooled run names the base's mode.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/advice_helper"
SCHEMA="$PS_TOP_SRCDIR/tests/report_schema.py"
REPORT="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
T=$PST_TMP
MiB=1048576

# 1. The same counts, nothing pooled: JSON.
shim POOLSHIM_POOL=off "POOLSHIM_STATS=$T/off.json" -- "$H" loop 40 $MiB >/dev/null ||
	fail "helper, pool off"
shim "POOLSHIM_STATS=$T/on.json" -- "$H" loop 40 $MiB >/dev/null || fail "helper, pool on"
python3 "$SCHEMA" "$T/off.json" && pass "schema: a pool-off report is valid" || fail "schema (off)"
got=$(json_get "$T/off.json" "[r['pool']['mode'], r['pool']['allocations'], r['pool']['slabs'], \
sum(r['pool']['fallbacks'].values()), r['saved']['allocations'], r['saved']['taken'], \
r['config'].get('POOLSHIM_POOL')]")
[ "$got" = "['off', 0, 0, 0, 0, 0, 'off']" ] &&
	pass "JSON: mode off, nothing pooled or saved, no fallback counted" || fail "pool off: $got"
rows="[(c['calls'], c['bytes'], c['size_hist']) for c in r['calls'] if c['call'] == 'malloc']"
off_rows=$(json_get "$T/off.json" "$rows")
on_rows=$(json_get "$T/on.json" "$rows")
on_pool=$(json_get "$T/on.json" "[r['pool']['mode'] != 'off', r['pool']['allocations']]")
[ "$on_pool" = "[True, 40]" ] || fail "the pooled run: $on_pool"
[ "$off_rows" = "$on_rows" ] && case $off_rows in *"[1048576, 40]]"*) true ;; *) false ;; esac &&
	pass "malloc counted as with the pool: $off_rows" || fail "malloc rows: off $off_rows, on $on_rows"
got=$(json_get "$T/off.json" "[a['id'] for a in r['advice']]")
msg=$(json_get "$T/off.json" "[a['message'] for a in r['advice'] if a['id'] == 'pool_off']")
case $got:$msg in
"['pool_off']:"*"40 allocating calls were of POOLSHIM_POOL_MIN=64K or more"*)
	pass "advice: a baseline, with the calls the pool would serve" ;;
*) fail "advice: $got $msg" ;;
esac

# 2. Text; verbose says it at start, and reserves nothing.
shim POOLSHIM_POOL=off POOLSHIM_VERBOSE=on POOLSHIM_STATS=stderr -- "$H" loop 40 $MiB \
	>/dev/null 2>"$T/text" || fail "helper, text"
grep -q "^pool     mode off (requested auto); placement pages; 0 slabs, 0 backed" "$T/text" &&
	grep -q "^saved    nothing: the pool was off (POOLSHIM_POOL=off)" "$T/text" &&
	grep -q "^  - the pool was off (POOLSHIM_POOL=off): every allocation went to the program's own heap" "$T/text" &&
	grep -q "pool off (POOLSHIM_POOL=off): every allocation goes to the program's heap" "$T/text" &&
	! grep -q "the pool served\|arena made on first use\|^pool     keeps up to\|allocations served" "$T/text" &&
	pass "text: mode off, saved nothing, the baseline advice, verbose" || fail "text: $(cat "$T/text")"

# 3. A bad value: one line, the pool stays on.
shim POOLSHIM_POOL=sometimes "POOLSHIM_STATS=$T/bad.json" -- "$H" loop 4 $MiB >/dev/null 2>"$T/bad" ||
	fail "helper, bad value"
got=$(json_get "$T/bad.json" "[r['pool']['mode'] != 'off', r['pool']['allocations']]")
if [ "$(wc -l <"$T/bad")" = 1 ] && [ "$got" = "[True, 4]" ] &&
	grep -q "POOLSHIM_POOL='sometimes' is not valid (accepted: 1|0|on|off|yes|no|true|false); using the default on" "$T/bad"; then
	pass "a bad value: one line, the pool on"
else
	fail "bad value: $got $(cat "$T/bad")"
fi

# 4. No pool range: the pool lives between 16 and 32 TiB (shim/core/pool.c).
in_pool_range() {
	awk '{ split($1, a, "-"); if (length(a[1]) == 12 && a[1] >= "100000000000" && a[1] < "200000000000") n++ }
	     END { print n + 0 }' "$1"
}
shim POOLSHIM_POOL=off POOLSHIM_STATS=off -- "$H" maps 8 $MiB >"$T/maps.off" || fail "helper, maps off"
shim POOLSHIM_STATS=off -- "$H" maps 8 $MiB >"$T/maps.on" || fail "helper, maps on"
off=$(in_pool_range "$T/maps.off") on=$(in_pool_range "$T/maps.on")
[ "$off" = 0 ] && [ "$on" -gt 0 ] &&
	pass "maps: no pool range with the pool off ($on mappings there with it on)" ||
	fail "maps: $off mappings in the pool's range with the pool off, $on on"

# 5. Seen from outside: a record left by SIGKILL, read by stat and collect.
L="$T/rec"
mkdir "$L"
(env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=pooloff POOLSHIM_POOL=off LD_PRELOAD="$SHIM" \
	"$H" loop 200 $MiB kill) >/dev/null 2>&1
timeout 120 "$STAT" --live-dir "$L" >"$T/stat" 2>&1
timeout 120 "$STAT" --live-dir "$L" --prometheus >"$T/prom" 2>&1
timeout 120 "$COLLECT" --live-dir "$L" >"$T/coll" 2>&1
grep -q "^pool     mode off " "$T/stat" && pass "stat: mode off from the record" ||
	fail "stat: $(cat "$T/stat")"
grep -q '^poolshim_pool_on{.*} 0$' "$T/prom" && pass "stat --prometheus: poolshim_pool_on 0" ||
	fail "prometheus: $(grep pool_on "$T/prom")"
grep -q "^pool     mode off " "$T/coll" && grep -q "^saved    nothing: the pool was off" "$T/coll" &&
	pass "collect: mode off, saved nothing" || fail "collect: $(cat "$T/coll")"

# 6. --diff: the base's mode said, and what the pool changed.
python3 "$REPORT" --diff "$T/off.json" "$T/on.json" >"$T/diff" 2>&1 || fail "--diff: $(cat "$T/diff")"
grep -q "^pool mode: A off (POOLSHIM_POOL=off: every call counted, nothing pooled); B " "$T/diff" &&
	grep -q "^page faults, minor  *[0-9]" "$T/diff" && grep -q "^A is the baseline" "$T/diff" &&
	grep -q "^pool allocations served  *0  *40  *new" "$T/diff" &&
	pass "--diff: pool off as the base" || fail "--diff: $(cat "$T/diff")"

# 7. A fork child whose work is 80 large allocations reports, pool off as on.
for pool in on off; do
	mkdir "$T/fork-$pool"
	shim POOLSHIM_POOL=$pool "POOLSHIM_STATS=$T/fork-$pool/r-%p.json" -- "$H" forkloop 80 $MiB \
		>/dev/null || fail "helper, forkloop, pool $pool"
done
on=$(ls "$T/fork-on" | wc -l) off=$(ls "$T/fork-off" | wc -l)
[ "$on" = 2 ] && [ "$off" = 2 ] && pass "a fork child that allocates reports with the pool off too" ||
	fail "fork child: $on reports with the pool on, $off with it off"

# 8. System calls: the allocations make those they make without the shim
# (brk, and mmap/munmap of anonymous private memory of 64 KiB or more, the
# addresses made relative; the shim's own live record is a shared file
# mapping), and neither the pool's range nor jemalloc's set-up is seen
# (MAP_NORESERVE, THP and cgroup files): glibc's own dynamic mmap threshold
# at 1 MiB, and 64 MiB blocks mapped whatever it is.
if ! command -v strace >/dev/null 2>&1 || ! strace -o /dev/null true 2>/dev/null; then
	echo "# strace missing or not allowed here: system calls not compared"
	finish
fi
cat >"$T/norm.py" <<'PY'
import re, sys
base = None
for line in open(sys.argv[1]):
    m = re.match(r"brk\((\w+)\)\s+= (0x[0-9a-f]+)", line)
    if m:
        base = base if base is not None else int(m.group(2), 16)
        print("brk NULL" if m.group(1) == "NULL" else f"brk +{int(m.group(1), 16) - base}")
    m = re.match(r"mmap\(NULL, (\d+), PROT_READ\|PROT_WRITE, MAP_PRIVATE\|MAP_ANONYMOUS, -1, 0\)", line)
    if m and int(m.group(1)) >= 65536:
        print("mmap", m.group(1))
    m = re.match(r"munmap\(0x[0-9a-f]+, (\d+)\)", line)
    if m and int(m.group(1)) >= 65536:
        print("munmap", m.group(1))
    if line.startswith("mremap("):
        print("mremap")
    if "MAP_NORESERVE" in line or re.search(r"overcommit_memory|transparent_hugepage|cgroup", line):
        print("the pool or jemalloc:", line.strip())
PY
for args in "loop 20 $MiB" "alloc 4 $((64 * MiB))"; do
	# shellcheck disable=SC2086
	strace -o "$T/st.none" -e trace=memory,openat "$H" $args >/dev/null
	for pool in off on; do
		# -E: the traced program is shimmed, strace itself is not
		# shellcheck disable=SC2086
		strace -E POOLSHIM_POOL=$pool -E "POOLSHIM_STATS=$T/st.json" -E LD_PRELOAD="$SHIM" \
			-o "$T/st.$pool" -e trace=memory,openat "$H" $args >/dev/null
	done
	for k in none off on; do python3 "$T/norm.py" "$T/st.$k" >"$T/st.$k.n"; done
	if cmp -s "$T/st.none.n" "$T/st.off.n" && grep -q '^mmap' "$T/st.none.n" &&
		! cmp -s "$T/st.none.n" "$T/st.on.n"; then
		pass "$args: the allocations' system calls as without the shim ($(grep -c . "$T/st.none.n") calls; not so with the pool on)"
	else
		fail "$args: without the shim, with the pool off, with it on: $(paste -d'|' "$T/st.none.n" "$T/st.off.n" "$T/st.on.n")"
	fi
done
finish
