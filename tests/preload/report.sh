#!/bin/sh
# SPDX-License-Identifier: MIT
# The exit report and the configuration contract, seen from outside:
# text on stderr by default, JSON to a per-process path (validated against
# the schema in docs/report-schema.md by tests/report_schema.py), "off",
# POOLSHIM=off, every bad value answered with one line, the placement of
# pooled blocks said (POOLSHIM_POOL_ALLOCATOR: pages by default, jemalloc
# on request, the default after a bad value), and report files that are
# never written through a symlink.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/alloc_helper"
# The library with the private jemalloc, for POOLSHIM_POOL_ALLOCATOR=jemalloc.
JE="${SHIM%/*}/libpoolshim-jemalloc.so"
# shellcheck disable=SC2034 # read by shim_with (tests/lib.sh)
shim_je() { pst_lib=$JE; shim_with "$@"; }

# 1. default: text report on stderr
shim -- "$H" --count 20 --size 1048576 >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "helper failed"
grep -q "helper ok allocations=20 pooled=20" "$PST_TMP/out" && pass "20 of 20 pooled" || fail "pooling: $(cat "$PST_TMP/out")"
grep -q "==== poolshim report: pid [0-9]* (alloc_helper) ====" "$PST_TMP/err" && pass "text report" || fail "no text report"
grep -Eq "^malloc +- +[0-9]+ " "$PST_TMP/err" && pass "malloc row" || fail "no malloc row"
grep -q "^pool     mode [a-z0-9]* (requested auto); placement pages; " "$PST_TMP/err" &&
	pass "text: placement pages by default" || fail "text placement: $(grep '^pool' "$PST_TMP/err")"

# 1b. The CPUs' caches in the JSON report (defaults): the allocations
# they served, and the bytes they held at the exit (the blocks freed last).
shim "POOLSHIM_STATS=$PST_TMP/cache.json" POOLSHIM_STATS_FORMAT=json -- "$H" --count 40 --size 200000 \
	--live 4 >/dev/null 2>"$PST_TMP/err" || fail "helper failed (cache)"
got=$(json_get "$PST_TMP/cache.json" "[r['pool'].get('cached', 0) > 0, r['pool'].get('cached_bytes', 0) >= 200000]")
[ "$got" = "[True, True]" ] && pass "json: the CPUs' caches served blocks and held some at the exit" ||
	fail "json cache: $(json_get "$PST_TMP/cache.json" "r['pool']")"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/cache.json" && pass "schema (cache)" || fail "schema (cache)"

# 1c. The page placement's arenas: one used by a single thread; four
# threads over POOLSHIM_POOL_ARENAS=3 use all three, in the text and the JSON.
got=$(json_get "$PST_TMP/cache.json" "r['pool'].get('arenas')")
[ "$got" = "{'used': 1, 'max': 0}" ] && pass "json: one thread, one arena" || fail "json arenas (1 thread): $got"
shim "POOLSHIM_STATS=$PST_TMP/arenas.json" POOLSHIM_STATS_FORMAT=json POOLSHIM_POOL_ARENAS=3 -- "$H" \
	--count 20 --size 200000 --live 2 --threads 4 >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "helper failed (arenas)"
got=$(json_get "$PST_TMP/arenas.json" "r['pool'].get('arenas')")
[ "$got" = "{'used': 3, 'max': 3}" ] && pass "json: four threads over three arenas" || fail "json arenas: $got"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/arenas.json" && pass "schema (arenas)" || fail "schema (arenas)"
# Threads count the pooled bytes per CPU and add them up in batches
# (alloc.c): the report adds what is pending first, so all of it freed
# reads 0 in use (802816 without), and the first allocation, made before
# any batching, took the pool past its peak.
got=$(json_get "$PST_TMP/arenas.json" "[r['pool']['in_use'], r['pool']['peak'] > 0, \
	r['pool']['allocations'] == r['pool']['frees'], 0 < r['saved']['fresh'] <= r['saved']['allocations']]")
[ "$got" = "[0, True, True, True]" ] && pass "json: threads' counts added up at the exit" ||
	fail "json counts with threads: $got $(json_get "$PST_TMP/arenas.json" "r['pool']")"
shim POOLSHIM_POOL_ARENAS=3 -- "$H" --count 20 --size 200000 --live 2 --threads 4 >"$PST_TMP/out" \
	2>"$PST_TMP/err" || fail "helper failed (arenas, text)"
grep -q "^pool     mode [a-z0-9]* (requested auto); placement pages (3 of 3 arenas); " "$PST_TMP/err" &&
	pass "text: the arenas used" || fail "text arenas: $(grep '^pool' "$PST_TMP/err")"

# 2. JSON to a per-process path, validated against the schema.  No thread
# cache (POOLSHIM_POOL_CACHE=0): the blocks freed last would stay in it,
# live to the placement, and the free blocks checked below are the placement's.
shim "POOLSHIM_STATS=$PST_TMP/r-%e-%p.json" POOLSHIM_POOL_CACHE=0 -- "$H" --count 40 --size 200000 --live 4 >/dev/null 2>"$PST_TMP/err" || fail "helper failed (json)"
set -- "$PST_TMP"/r-alloc_helper-*.json
if [ -f "$1" ]; then
	pass "json written to $(basename "$1")"
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$1" && pass "schema" || fail "schema"
	[ "$(json_get "$1" "r['pool']['allocations'] >= 40")" = True ] && pass "40 pooled allocations counted" || fail "pool allocations: $(json_get "$1" "r['pool']")"
	[ "$(json_get "$1" "sum(c['calls'] for c in r['calls'] if c['call']=='malloc') >= 40")" = True ] && pass "malloc calls counted" || fail "malloc calls"
	[ "$(json_get "$1" "r['pool']['allocator']")" = pages ] && pass "json: allocator pages by default" ||
		fail "json allocator: $(json_get "$1" "r['pool']")"
	# Every block freed at the end: the pool holds them, in one or more free blocks.
	got=$(json_get "$1" "[r['pool']['free']['blocks'] >= 1, r['pool']['free']['bytes'] >= 200000, r['pool']['free']['largest'] >= 200000]")
	[ "$got" = "[True, True, True]" ] && pass "json: the pool's free blocks ($(json_get "$1" "r['pool']['free']"))" ||
		fail "json pool.free: $(json_get "$1" "r['pool']")"
else
	fail "no json report in $PST_TMP"
fi
[ -s "$PST_TMP/err" ] && fail "stderr not empty with a file report: $(cat "$PST_TMP/err")"

# 2b. POOLSHIM_POOL_ALLOCATOR=jemalloc (libpoolshim-jemalloc.so): said so, in
# JSON and text, with the blocks pooled; asked of libpoolshim.so, which has
# no jemalloc, the placement that served, pages; a bad value is one line
# (5. below) and the default placement
shim_je POOLSHIM_POOL_ALLOCATOR=jemalloc "POOLSHIM_STATS=$PST_TMP/je.json" -- "$H" --count 40 --size 200000 --live 4 \
	>"$PST_TMP/out" 2>"$PST_TMP/err" || fail "helper failed (jemalloc)"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/je.json" || fail "schema (jemalloc)"
got=$(json_get "$PST_TMP/je.json" "[r['pool']['allocator'], r['pool']['allocations'] >= 40, r['config']['POOLSHIM_POOL_ALLOCATOR']]")
[ "$got" = "['jemalloc', True, 'jemalloc']" ] && [ ! -s "$PST_TMP/err" ] &&
	[ "$(json_get "$PST_TMP/je.json" "r['pool']['free']")" = None ] &&
	pass "json: allocator jemalloc, 40 pooled" || fail "jemalloc placement: $got $(cat "$PST_TMP/err")"
shim_je POOLSHIM_POOL_ALLOCATOR=jemalloc -- "$H" --count 4 --size 1048576 >/dev/null 2>"$PST_TMP/err"
grep -q "^pool     mode [a-z0-9]* (requested auto); placement jemalloc; " "$PST_TMP/err" &&
	pass "text: placement jemalloc" || fail "text placement: $(grep '^pool' "$PST_TMP/err")"
shim POOLSHIM_POOL_ALLOCATOR=jemalloc "POOLSHIM_STATS=$PST_TMP/nje.json" -- "$H" --count 4 --size 1048576 \
	>/dev/null 2>"$PST_TMP/err" || fail "helper failed (jemalloc asked of libpoolshim.so)"
got=$(json_get "$PST_TMP/nje.json" "[r['pool']['allocator'], r['pool']['allocations']]")
[ "$got" = "['pages', 4]" ] && [ "$(grep -c . "$PST_TMP/err")" = 1 ] &&
	grep -q "POOLSHIM_POOL_ALLOCATOR=jemalloc: this library has no jemalloc" "$PST_TMP/err" &&
	pass "jemalloc asked of libpoolshim.so: one line, the report says pages, which served" ||
	fail "jemalloc without jemalloc: $got $(cat "$PST_TMP/err")"
shim POOLSHIM_POOL_ALLOCATOR=bogus "POOLSHIM_STATS=$PST_TMP/bogus.json" -- "$H" --count 4 --size 1048576 \
	>/dev/null 2>"$PST_TMP/err" || fail "helper failed (bogus placement)"
got=$(json_get "$PST_TMP/bogus.json" "[r['pool']['allocator'], r['pool']['allocations']]")
if [ "$got" = "['pages', 4]" ] && [ "$(grep -c . "$PST_TMP/err")" = 1 ] &&
	grep -q "^poolshim\[[0-9]*\] .*POOLSHIM_POOL_ALLOCATOR='bogus' is not valid (accepted: pages|jemalloc); using the default pages$" "$PST_TMP/err"; then
	pass "bad placement: one line, the default pages used"
else
	fail "bad placement: $got $(cat "$PST_TMP/err")"
fi

# 3. STATS_FORMAT=json to stderr
shim POOLSHIM_STATS_FORMAT=json -- "$H" --count 2 >/dev/null 2>"$PST_TMP/err.json"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/err.json" && pass "json on stderr" || fail "json on stderr"

# 4. off, and POOLSHIM=off (everything off: glibc's allocator, no report)
shim POOLSHIM_STATS=off -- "$H" --count 3 >/dev/null 2>"$PST_TMP/err"
[ -s "$PST_TMP/err" ] && fail "report with STATS=off" || pass "STATS=off is silent"
shim POOLSHIM=off -- "$H" --count 5 >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "helper failed (off)"
grep -q "pooled=0" "$PST_TMP/out" && [ ! -s "$PST_TMP/err" ] && pass "POOLSHIM=off" || fail "POOLSHIM=off: $(cat "$PST_TMP/out" "$PST_TMP/err")"

# 5. every bad value: exactly one line naming it, the program still correct
for kv in POOLSHIM=perhaps POOLSHIM_POOL_MIN=64X POOLSHIM_POOL_MIN=1 POOLSHIM_POOL_SIZE=1T \
	POOLSHIM_HUGEPAGES=maybe POOLSHIM_POOL_ALLOCATOR=bogus POOLSHIM_PREFAULT=2 POOLSHIM_STATS= POOLSHIM_STATS_FORMAT=yaml \
	POOLSHIM_VERBOSE=very POOLSHIM_URING=fast POOLSHIM_URING_MIN=abc POOLSHIM_URING_CHUNK=0 \
	POOLSHIM_URING_DEPTH=0 POOLSHIM_TIMING=2 POOLSHIM_TIMING_SAMPLE=x POOLSHIM_UNKNOWN=1; do
	shim POOLSHIM_STATS=off "$kv" -- "$H" --count 4 >"$PST_TMP/out" 2>"$PST_TMP/err"
	rc=$?
	name=${kv%%=*}
	lines=$(grep -c . "$PST_TMP/err")
	if [ "$name" = POOLSHIM_STATS ]; then
		# the bad STATS value falls back to stderr, where the report then goes
		lines=$(grep -c "^poolshim\[[0-9]*\] [^:]*: " "$PST_TMP/err")
	fi
	if [ $rc -eq 0 ] && grep -q "helper ok" "$PST_TMP/out" && [ "$lines" = 1 ] &&
	   grep -q "^poolshim\[[0-9]*\] [^:]*: .*$name" "$PST_TMP/err"; then
		pass "bad $kv: $(head -1 "$PST_TMP/err")"
	else
		fail "bad $kv: rc=$rc lines=$lines: $(cat "$PST_TMP/err")"
	fi
done

# 6. a symlink at the report path is not followed; the program is unharmed
ln -s "$PST_TMP/target" "$PST_TMP/link.json"
shim "POOLSHIM_STATS=$PST_TMP/link.json" -- "$H" --count 2 >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "helper failed (symlink)"
[ -e "$PST_TMP/target" ] && fail "report followed a symlink" || pass "symlink not followed"
grep -q "cannot write the report" "$PST_TMP/err" && pass "symlink refusal reported" || fail "no refusal message"

# 7. a program that closes its stderr has let go of it: the shim holds no
# copy (it would keep a capture pipe open), so the report is not written
# there; a report path still gets it.
shim -- bash -c 'exec 2>&-; exit 0' 2>"$PST_TMP/err" || fail "bash failed after closing fd 2"
[ -s "$PST_TMP/err" ] && fail "something reached the stderr the program closed: $(head -c 200 "$PST_TMP/err")" ||
	pass "nothing written to the stderr the program closed"
# (one read of its own: a process with no work at all gets no text report)
shim POOLSHIM_STATS="$PST_TMP/closed.txt" -- bash -c 'exec 2>&-; read -r x </etc/hostname; exit 0' || fail "bash failed (report path)"
grep -q "poolshim report" "$PST_TMP/closed.txt" && pass "report to a path after fd 2 closed" ||
	fail "no report in the path after fd 2 closed"

# 8. but stderr closed by an atexit handler (gnulib's close_stdout: every
# coreutils program) still gets the report: exit had begun.
shim -- cat /dev/null 2>"$PST_TMP/err" || fail "cat failed"
grep -q "==== poolshim report: pid [0-9]* (cat)" "$PST_TMP/err" && pass "report after stderr closed at exit (cat)" ||
	fail "no report from cat, which closes stderr at exit: $(head -c 200 "$PST_TMP/err")"

# 9. A record left by SIGKILL: `poolshim collect` and `poolshim stat` say the
# placement from the configuration the record carries.
L="$PST_TMP/rec"
mkdir "$L"
(env POOLSHIM_LIVE_DIR="$L" POOLSHIM_POOL_ALLOCATOR=jemalloc LD_PRELOAD="$JE" \
	"$PRELOAD_BIN/advice_helper" loop 20 1048576 kill) >/dev/null 2>&1
timeout 120 "$PS_TOP_BUILDDIR/tools/poolshim-stat" --live-dir "$L" >"$PST_TMP/stat" 2>&1
timeout 120 "$PS_TOP_BUILDDIR/tools/poolshim-collect" --live-dir "$L" >"$PST_TMP/coll" 2>&1
grep -q "^pool     mode [a-z0-9]* (requested auto); placement jemalloc; " "$PST_TMP/stat" &&
	grep -q "^pool     mode [a-z0-9]* (requested auto); placement jemalloc; " "$PST_TMP/coll" &&
	pass "stat and collect: placement jemalloc from the record" ||
	fail "record placement: $(cat "$PST_TMP/stat" "$PST_TMP/coll")"
! grep -q "^pool     free blocks" "$PST_TMP/coll" && pass "collect: no free-block line with jemalloc's placement" ||
	fail "collect, jemalloc: $(grep '^pool     free' "$PST_TMP/coll")"

# 10. With the page-exact placement the record keeps the free blocks up to
# date: after 20 buffers of 1 MiB, each freed, the killed process's pool
# holds one free block of 1 MiB (with no thread cache, which would hold it).
L="$PST_TMP/rec2"
mkdir "$L"
(env POOLSHIM_LIVE_DIR="$L" POOLSHIM_POOL_CACHE=0 LD_PRELOAD="$SHIM" "$PRELOAD_BIN/advice_helper" loop 20 1048576 kill) \
	>/dev/null 2>&1
# (stat first: collect renders the record and removes it)
timeout 120 "$PS_TOP_BUILDDIR/tools/poolshim-stat" --live-dir "$L" --prometheus >"$PST_TMP/prom" 2>&1
timeout 120 "$PS_TOP_BUILDDIR/tools/poolshim-collect" --live-dir "$L" >"$PST_TMP/coll" 2>&1
grep -q "^pool     free blocks 1, 1M (largest 1M); up to 1M of it resident, " "$PST_TMP/coll" &&
	pass "collect: the killed process's free blocks from the record" ||
	fail "record free blocks: $(grep '^pool' "$PST_TMP/coll")"
grep -q '^poolshim_pool_free_bytes{.*,state="resident_max"} 1048576$' "$PST_TMP/prom" &&
	grep -q '^poolshim_pool_free_bytes{.*,state="zero"} 0$' "$PST_TMP/prom" &&
	grep -q '^poolshim_pool_free_blocks{.*} 1$' "$PST_TMP/prom" &&
	grep -q '^poolshim_pool_free_largest_bytes{.*} 1048576$' "$PST_TMP/prom" &&
	pass "stat --prometheus: the free blocks' gauges" ||
	fail "prometheus free blocks: $(grep free "$PST_TMP/prom")"
if command -v promtool >/dev/null; then
	promtool check metrics <"$PST_TMP/prom" >"$PST_TMP/lint" 2>&1 &&
		pass "promtool accepts the scrape with the free blocks" ||
		fail "promtool: $(head -5 "$PST_TMP/lint")"
fi

finish
