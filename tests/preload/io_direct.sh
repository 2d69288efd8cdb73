#!/bin/sh
# SPDX-License-Identifier: MIT
# O_DIRECT data integrity (tests/preload/io_direct) under the configurations
# that change the I/O path: io_uring on and off, a 4 KiB-page pool, small
# chunks with a shallow ring (many splits, depth limit reached), and the
# shim loaded but switched off (POOLSHIM=off).  Then the
# JSON report: with io_uring eligible the reads went through it (SQEs, none
# with a registered buffer, split calls, several SQEs per enter) and the calls are counted as
# "direct"; with POOLSHIM_URING=off no SQE at all.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_direct"
RUN="$PS_TOP_SRCDIR/tests/run-test.sh"


# 1. the matrix (each run prints its own Check summary)
PS_CONFIGS="default:
uring-off:POOLSHIM_URING=off
uring-on:POOLSHIM_URING=on
nohuge:POOLSHIM_HUGEPAGES=none
chunk64k:POOLSHIM_URING_CHUNK=64K POOLSHIM_URING_DEPTH=2
thp-chunk3m:POOLSHIM_HUGEPAGES=thp POOLSHIM_URING_CHUNK=3M
off:POOLSHIM=off" \
	"$RUN" "$P"
case $? in
0) pass "io_direct matrix" ;;
77) skip "O_DIRECT not supported here" ;;
*) fail "io_direct matrix" ;;
esac

# 2. the report.  CK_FORK=no: the test cases run in this one process, whose
# exit writes the report.
uring_lock -s
report() {  # report NAME VAR=VAL ...
	name=$1; shift
	shim CK_FORK=no PST_IO_SCALE=0.25 POOLSHIM_STATS="$PST_TMP/$name.json" "$@" -- "$P" \
		>"$PST_TMP/$name.out" 2>&1 || fail "$name: io_direct failed: $(tail -5 "$PST_TMP/$name.out")"
	if [ ! -s "$PST_TMP/$name.json" ]; then
		fail "$name: no report"
		return 1
	fi
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/$name.json" || fail "$name: schema"
}
get() { json_get "$PST_TMP/$1.json" "$2" 2>&1; }
check() {  # check NAME EXPR MESSAGE
	v=$(get "$1" "$2")
	[ "$v" = True ] && pass "$1: $3" || fail "$1: $3 ($2 -> $v; uring: $(get "$1" "r.get('uring')"))"
}

# Where io_uring is not available at all (a container's seccomp profile, a
# kernel without it), the checks of the io_uring path cannot apply.
if ! probe=$("$PRELOAD_BIN/io_sandbox" --probe); then
	echo "$probe: io_uring report checks skipped"
	exec 9<&- 2>/dev/null
	finish
fi

if report auto && [ -s "$PST_TMP/auto.json" ]; then
	check auto "r['uring']['state'] == 'ok' and r['uring']['reason'] is None" "uring state ok"
	check auto "r['uring']['rings'] >= 1" "rings created"
	# Nothing is registered: the kernel pins the program's pages of the moment per I/O (uring.c)
	check auto "r['uring']['sqes'] > 0 and r['uring']['fixed'] == 0" "SQEs submitted, none on a registered buffer"
	check auto "r['uring']['split_calls'] > 0" "large requests split"
	check auto "r['uring']['enters'] > 0 and r['uring']['enters'] <= r['uring']['sqes']" "enters <= sqes"
	check auto "any(lo > 1 and n > 0 for lo, n in r['uring']['sqes_per_enter'])" "several SQEs per enter"
	check auto "sum(n for _, n in r['uring']['sqes_per_enter']) == r['uring']['enters']" "sqes_per_enter adds up to enters"
	check auto "r['uring']['fallbacks']['setup'] == 0 and r['uring']['fallbacks']['register'] == 0" "no setup/register fallback"
	check auto "r['uring']['fallbacks']['small'] + r['uring']['fallbacks']['not_pooled'] > 0" "small/unpooled requests passed through"
	for c in pread preadv preadv2 read readv pwrite pwritev pwritev2 write writev; do
		check auto "any(c['call'] == '$c' and c['kind'] == 'direct' and c['calls'] > 0 for c in r['calls'])" "$c counted as direct"
	done
	check auto "sum(c['bytes'] for c in r['calls'] if c['call'] == 'pread' and c['kind'] == 'direct') > 100 << 20" "pread bytes counted"
	check auto "sum(c['errors'] for c in r['calls'] if c['call'] == 'pread' and c['kind'] == 'direct') > 0" "EINVAL preads counted as errors"
	check auto "any(c['call'] == 'pread' and c['errnos'].get('EINVAL', 0) > 0 for c in r['calls'])" "EINVAL named"
fi

if report off POOLSHIM_URING=off; then
	check off "r['uring']['state'] == 'off'" "uring state off"
	check off "r['uring']['sqes'] == 0 and r['uring']['rings'] == 0 and r['uring']['enters'] == 0" "no SQE with POOLSHIM_URING=off"
	check off "any(c['call'] == 'pread' and c['kind'] == 'direct' for c in r['calls'])" "preads still counted"
fi

# small chunks: more splits and SQEs than the default for the same program
if [ -z "$limited" ] && report small POOLSHIM_URING_CHUNK=128K POOLSHIM_URING_DEPTH=4 && [ -s "$PST_TMP/auto.json" ]; then
	a=$(get auto "r['uring']['sqes']")
	check small "r['uring']['sqes'] > $a" "128K chunks: more SQEs than 1M chunks (than $a)"
	check small "max(lo for lo, n in r['uring']['sqes_per_enter'] if n) <= 4" "no more than DEPTH=4 SQEs per enter"
fi

# a high POOLSHIM_URING_MIN keeps everything but the largest reads off the ring
if [ -z "$limited" ] && report min POOLSHIM_URING_MIN=32M && [ -s "$PST_TMP/auto.json" ]; then
	a=$(get auto "r['uring']['sqes']")
	check min "r['uring']['sqes'] < $a and r['uring']['fallbacks']['small'] > 0" "URING_MIN=32M: fewer SQEs (than $a), small fallbacks"
fi

# A buffer over two merged slabs, read-only in the second (issue 35): the
# pool reads protection marks over every slab a buffer touches, so the read
# takes the plain call (a "protected" fallback).  Reading only the first
# slab's mark sent it to the ring.  4 KiB pages: the pool places the test's
# blocks so that they merge (the case says so on stderr when it did not).
if report span CK_RUN_CASE=protected_span POOLSHIM_URING=on POOLSHIM_HUGEPAGES=none; then
	if grep -q "did not reuse the two blocks" "$PST_TMP/span.out"; then
		echo "span: the buffer did not reuse the two blocks here; only the kernel's answer was compared"
	else
		check span "r['uring']['fallbacks']['protected'] >= 1" "a buffer read-only in its second slab took the plain call"
	fi
fi

# 3. fork: each child that does O_DIRECT I/O builds its own ring (tests/preload/io_fork;
# its children exit() after their I/O, so each writes a report of its own)
mkdir "$PST_TMP/fork"
if [ -n "$limited" ]; then
	echo "fork check skipped: $limited"
elif shim CK_FORK=no POOLSHIM_URING=on POOLSHIM_STATS="$PST_TMP/fork/r-%p.json" -- "$PRELOAD_BIN/io_fork" >"$PST_TMP/fork.out" 2>&1; then
	n=$(python3 -c '
import glob, json, sys
ok = 0
for f in glob.glob(sys.argv[1] + "/r-*.json"):
    u = json.load(open(f)).get("uring", {})
    ok += u.get("state") == "ok" and u.get("rings", 0) >= 1 and u.get("sqes", 0) > 0
print(ok)' "$PST_TMP/fork")
	[ "$n" -ge 4 ] 2>/dev/null && pass "fork: $n processes (parent and children) used a ring of their own" ||
		fail "fork: only $n reports with a working ring: $(ls "$PST_TMP/fork")"
else
	fail "io_fork under the shim: $(tail -5 "$PST_TMP/fork.out")"
fi
exec 9<&- 2>/dev/null
finish
