#!/bin/sh
# SPDX-License-Identifier: MIT
# The O_DIRECT router (shim/core/route.c, issue 36).  The test build's
# POOLSHIM_URING_TEST makes one route dearer (1 ms of CPU and 10 ms asleep
# per call) and measures again every 64 calls: with the ring dear the
# router gives a device's reads to the plain call, with the plain call dear
# to the ring, and when the dear route changes half way (dear_swap) it
# follows.  Whatever the route, io_devchunk's 800 preads of 128 KiB (and
# 100 pwrites of the same bytes back) return what they return without the
# shim: the same counts, bytes and file offset.  The shipped library under
# POOLSHIM_URING=auto, on and off: the same results, the report's route by
# device (uring.devices) as each mode says.  Where measuring the dear
# route cost more than 1% of the process's CPU, the advice names
# POOLSHIM_URING and the value that forces the cheaper route; where it
# cost little (the shipped library here), no advice.  Reads that give the
# router no sample (past the end of the file) are decided plain after
# 1024 calls rather than measured for ever.  The file lives on a real disk
# (/var/tmp, or PST_FIO_DIR).
. "$PS_TOP_SRCDIR/tests/lib.sh"
need_test_hooks
P="$PRELOAD_BIN/io_devchunk"
D=${PST_FIO_DIR:-/var/tmp}
F=$(mktemp "$D/pst-route.XXXXXX") || skip "no file in $D"
at_exit "rm -f '$F'"
"$P" write "$F"
case $? in
0) ;;
77) skip "no O_DIRECT in $D" ;;
*) fail "io_devchunk write"; finish ;;
esac
"$P" route "$F" 800 >"$PST_TMP/plain.out" || fail "io_devchunk route without the shim"
grep -q "good=800 bad=0 pwrites=100 failed=0" "$PST_TMP/plain.out" ||
	fail "without the shim: $(cat "$PST_TMP/plain.out")"

uring_lock -s
# run NAME LIB VAR=VAL ...: the calls under LIB; NAME.json is its report
run() {
	name=$1 lib=$2; shift 2
	timeout -s KILL 120 env POOLSHIM_STATS="$PST_TMP/$name.json" "$@" LD_PRELOAD="$lib" \
		"$P" route "$F" 800 >"$PST_TMP/$name.out" 2>&1 ||
		{ fail "$name: io_devchunk route: $(cat "$PST_TMP/$name.out")"; return 1; }
	cmp -s "$PST_TMP/plain.out" "$PST_TMP/$name.out" &&
		pass "$name: the same results and offset as without the shim" ||
		fail "$name: $(diff "$PST_TMP/plain.out" "$PST_TMP/$name.out")"
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/$name.json" || fail "$name: schema"
}
# check NAME EXPR MESSAGE, over the reads' slot d (and the whole report r)
check() {
	v=$(json_get "$PST_TMP/$1.json" "(lambda d: $2)(([x for x in r['uring']['devices'] if x['op'] == 'read'] or [None])[0])" 2>&1)
	[ "$v" = True ] && pass "$1: $3" || fail "$1: $3 ($v; devices: $(json_get "$PST_TMP/$1.json" "r['uring']['devices']"))"
}

run auto "$SHIM"
if [ "$(json_get "$PST_TMP/auto.json" "r['uring']['state']")" != ok ]; then
	echo "io_uring unavailable: route checks skipped"
	finish
fi
check auto "r['uring']['route_mode'] == 'auto' and d['route_decisions'] >= 1" "auto: the reads' route measured"
check auto "d['route_measured']['plain']['samples'] >= 32 and d['route_measured']['ring']['samples'] >= 32" \
	"auto: 32 samples of each route behind the decision"
check auto "sum(d['route_calls'].values()) == 800 + 2 and d['route_bytes']['plain'] + d['route_bytes']['ring'] == 800 * 131072 + 8192" \
	"auto: every eligible pread counted by route"
check auto "any(x['op'] == 'write' and sum(x['route_calls'].values()) == 100 for x in r['uring']['devices'])" \
	"auto: the pwrites have a slot of their own"
run on "$SHIM" POOLSHIM_URING=on
check on "r['uring']['route_mode'] == 'on' and d['route'] == 'forced_ring' and d['route_calls']['plain'] == 0 and d['route_decisions'] == 0" \
	"on: every eligible call on the ring, nothing measured"
run off "$SHIM" POOLSHIM_URING=off
v=$(json_get "$PST_TMP/off.json" "r['uring']['route_mode'] == 'off' and r['uring']['devices'] == [] and r['uring']['sqes'] == 0")
[ "$v" = True ] && pass "off: no route, no SQE" || fail "off: $(json_get "$PST_TMP/off.json" "r['uring']")"

run ring_dear "$SHIM_TEST" POOLSHIM_URING_TEST=ring_dear
check ring_dear "d['route_chosen'] == 'plain' and d['route_changes'] == 0 and d['route_decisions'] >= 3" \
	"ring dearer: the router keeps the reads on the plain call"
check ring_dear "d['route_calls']['plain'] > 2 * d['route_calls']['ring']" "ring dearer: most reads plain"
check ring_dear "d['route_measured']['ring']['cpu_us_per_gib'] > 2 * d['route_measured']['plain']['cpu_us_per_gib']" \
	"ring dearer: the figures say why"
v=$(json_get "$PST_TMP/ring_dear.json" "[(a['variable'], a['suggested']) for a in r['advice'] if a['id'] == 'uring_route']")
[ "$v" = "[('POOLSHIM_URING', 'off')]" ] && pass "ring dearer: the advice names POOLSHIM_URING=off" ||
	fail "ring dearer: advice $v"
v=$(json_get "$PST_TMP/auto.json" "[a['id'] for a in r['advice'] if a['id'] == 'uring_route']")
[ "$v" = "[]" ] && pass "auto: no route advice where measuring cost little" || fail "auto: advice $v"
run plain_dear "$SHIM_TEST" POOLSHIM_URING_TEST=plain_dear
# (a measurement swamped by a loaded machine's noise chooses plain, so
# here, unlike ring_dear, a change on the way is allowed)
check plain_dear "d['route_chosen'] == 'ring' and d['route_calls']['ring'] > 2 * d['route_calls']['plain']" \
	"plain dearer: the router sends the reads to the ring"
v=$(json_get "$PST_TMP/plain_dear.json" "[(a['variable'], a['suggested']) for a in r['advice'] if a['id'] == 'uring_route'] if all(x['route_changes'] == 0 and x['route_chosen'] == 'ring' for x in r['uring']['devices']) else 'noisy'")
if [ "$v" = noisy ]; then
	echo "plain dearer: a noisy measurement chose plain on the way; the advice check does not apply"
else
	[ "$v" = "[('POOLSHIM_URING', 'on')]" ] && pass "plain dearer: the advice names POOLSHIM_URING=on" ||
		fail "plain dearer: advice $v"
fi
run dear_swap "$SHIM_TEST" POOLSHIM_URING_TEST=dear_swap
check dear_swap "d['route_chosen'] == 'ring' and d['route_changes'] >= 1" \
	"the dear route changes half way: the router follows it to the ring"
# A route that gives no sample (reads past the end return 0) does not keep
# the slot measuring for ever: decided after 1024 calls, plain.
POOLSHIM_STATS="$PST_TMP/pastend.json" LD_PRELOAD="$SHIM" "$P" pastend "$F" 1500 >"$PST_TMP/pastend.out" 2>&1
grep -q "pastend preads=1500 zero=1500" "$PST_TMP/pastend.out" || fail "pastend: $(cat "$PST_TMP/pastend.out")"
check pastend "d['route_decisions'] >= 1 and d['route_chosen'] == 'plain' and d['route_calls']['ring'] <= 520 and d['route_calls']['plain'] >= 900" \
	"reads that give no sample: decided plain after 1024 calls"

# poolshim stat: the route by device, live, from the process's live file
mkdir "$PST_TMP/live"
POOLSHIM_LIVE_DIR="$PST_TMP/live" POOLSHIM_STATS=off LD_PRELOAD="$SHIM" "$P" route "$F" 1000000 \
	>/dev/null 2>&1 &
bg=$!
at_exit "kill $bg 2>/dev/null"
seen=
for _ in $(seq 100); do
	"$PS_TOP_BUILDDIR/tools/poolshim-stat" --live-dir "$PST_TMP/live" "$bg" >"$PST_TMP/stat.out" 2>&1 &&
		grep -q "^io_uring route [0-9]*:[0-9]* reads: plain\|^io_uring route [0-9]*:[0-9]* reads: ring" \
			"$PST_TMP/stat.out" && { seen=1; break; }
	sleep 0.2
done
kill "$bg" 2>/dev/null
[ -n "$seen" ] && pass "poolshim stat: the reads' route, live" || fail "poolshim stat: $(cat "$PST_TMP/stat.out")"
grep -q "^io_uring route [0-9]*:[0-9]* reads: " "$PST_TMP/dear_swap.out" 2>/dev/null ||
	POOLSHIM_STATS=stderr POOLSHIM_URING_TEST=dear_swap LD_PRELOAD="$SHIM_TEST" "$P" route "$F" 200 2>&1 >/dev/null |
	grep -q "^io_uring route [0-9]*:[0-9]* reads: .* after [0-9]* measurements" &&
	pass "text report: one line per device and direction" || fail "text report: no route line"
finish
