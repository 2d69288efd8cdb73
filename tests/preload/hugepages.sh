#!/bin/sh
# SPDX-License-Identifier: MIT
# Page kinds behind the pool, as root: hugetlb when reserved, THP when
# there are none, a mixed pool when hugetlb pages run out mid-run, 4 KiB
# pages with POOLSHIM_HUGEPAGES=none, THP disabled or turned off by the
# program itself (prctl), and the pool cap.
# Each case checks the data and the mode and reason in the JSON report.
# System settings are restored on every exit path.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/alloc_helper"
NR=/proc/sys/vm/nr_hugepages
THP=/sys/kernel/mm/transparent_hugepage/enabled

report() {  # report NAME VAR=VAL ... -- helper args: run and keep NAME.json
	name=$1; shift
	vars=
	while [ "$1" != -- ]; do vars="$vars $1"; shift; done
	shift
	# shellcheck disable=SC2086
	shim POOLSHIM_STATS="$PST_TMP/$name.json" $vars -- "$H" "$@" >"$PST_TMP/$name.out" 2>&1 ||
		fail "$name: helper failed: $(cat "$PST_TMP/$name.out")"
	python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/$name.json" || fail "$name: schema"
}
get() { json_get "$PST_TMP/$1.json" "$2"; }

# Without root: only the user-selectable cases.
report none POOLSHIM_HUGEPAGES=none -- --count 16 --size 3000000 --live 4
[ "$(get none "r['pool']['mode']")" = 4k ] && pass "HUGEPAGES=none -> 4k" || fail "none: mode $(get none "r['pool']['mode']")"

report cap POOLSHIM_POOL_SIZE=8M -- --count 64 --size 1048576 --live 20
[ "$(get cap "r['pool']['fallbacks']['pool_full'] > 0 and r['pool']['backed'] <= 8<<20")" = True ] &&
	pass "pool cap: fallbacks $(get cap "r['pool']['fallbacks']['pool_full']"), backed $(get cap "r['pool']['backed']")" ||
	fail "pool cap: $(get cap "r['pool']")"

# The program turns THP off for itself (prctl PR_SET_THP_DISABLE, as Ceph's
# daemons do): before the pool is set up, then after its first THP units.
if [ -r "$THP" ] && ! grep -q '\[never\]' "$THP"; then
	report thpoff0 -- --count 16 --size 3000000 --live 4 --thp-off-after 0
	[ "$(get thpoff0 "r['pool']['mode']")" = 4k ] &&
		get thpoff0 "r['pool']['thp_reason']" | grep -q PR_SET_THP_DISABLE &&
		pass "program turned THP off first -> 4k, reason given" || fail "THP off first: $(get thpoff0 "r['pool']")"
	report thpoff4 -- --count 16 --size 3000000 --live 8 --thp-off-after 4
	[ "$(get thpoff4 "r['pool']['backed_by']['thp'] > 0 and r['pool']['backed_by']['4k'] > 0")" = True ] &&
		get thpoff4 "r['pool']['thp_reason']" | grep -q "PR_SET_THP_DISABLE) after" &&
		pass "program turned THP off mid-run -> later units 4k ($(get thpoff4 "r['pool']['backed_by']"))" ||
		fail "THP off mid-run: $(get thpoff4 "r['pool']")"
	grep -q "helper ok allocations=16 pooled=16" "$PST_TMP/thpoff4.out" && pass "data intact" ||
		fail "THP off mid-run: $(cat "$PST_TMP/thpoff4.out")"
else
	echo "THP is never: program-THP-off cases skipped"
fi

if [ "$(id -u)" != 0 ] || [ ! -w "$NR" ]; then
	echo "not root: hugetlb cases skipped"
	finish
fi
old_nr=$(cat "$NR")
at_exit "echo $old_nr > $NR"

# free hugetlb pages now (other tests running at the same time may hold some)
in_use() { echo $(( $(cat "$NR") - $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages) )); }
reserve_free() { echo $(( $(in_use) + $1 )) > "$NR"; }

# auto never uses hugetlb: a fork child writing inherited hugetlb pages dies when none are free
reserve_free 64
report auto_mode -- --count 16 --size 3000000 --live 4
[ "$(get auto_mode "r['pool']['backed_by']['hugetlb']")" = 0 ] &&
	get auto_mode "r['pool']['hugetlb_reason']" | grep -q "POOLSHIM_HUGEPAGES=hugetlb" &&
	pass "auto: no hugetlb, reason given" || fail "auto: $(get auto_mode "r['pool']")"

# O_DIRECT reads on the THP pool by a process that never forked, with
# hugetlb pages free: the report advises POOLSHIM_HUGEPAGES=hugetlb; not
# after a fork, not on a pool already on hugetlb, not with none free (below).
A="$PRELOAD_BIN/advice_helper"
DF=$(mktemp /var/tmp/pst-hugeadv.XXXXXX) && at_exit "rm -f '$DF'"
direct() {  # direct NAME MODE VAR=VAL ...: advice_helper MODE under the shim, NAME.json
	name=$1 mode=$2; shift 2
	shim POOLSHIM_STATS="$PST_TMP/$name.json" "$@" -- "$A" "$mode" "$DF" >"$PST_TMP/$name.out" 2>&1
}
advised() { get "$1" "([a['suggested'] for a in r['advice'] if a['id'] == 'hugetlb_pays'], r['uring']['sqes'] > 0)"; }
direct dthp direct
case $? in
77) direct_ok= ; echo "no O_DIRECT under /var/tmp: hugetlb advice cases skipped" ;;
0) direct_ok=1 ;;
*) direct_ok= ; fail "advice_helper direct: $(cat "$PST_TMP/dthp.out")" ;;
esac
if [ -n "$direct_ok" ] && [ "$(get dthp "r['uring']['state']")" = ok ]; then
	[ "$(advised dthp)" = "(['hugetlb'], True)" ] && pass "O_DIRECT on THP, hugetlb pages free: hugetlb advice" ||
		fail "no hugetlb advice: $(get dthp "(r['advice'], r['pool']['backed_by'], r['uring']['sqes'])")"
	direct dfork forked || fail "advice_helper forked: $(cat "$PST_TMP/dfork.out")"
	[ "$(advised dfork)" = "([], True)" ] && pass "after a fork: no hugetlb advice" ||
		fail "forked: $(get dfork "r['advice']")"
	direct dhuge direct POOLSHIM_HUGEPAGES=hugetlb || fail "advice_helper on hugetlb: $(cat "$PST_TMP/dhuge.out")"
	[ "$(advised dhuge)" = "([], True)" ] && pass "pool on hugetlb already: no hugetlb advice" ||
		fail "on hugetlb: $(get dhuge "(r['advice'], r['pool']['backed_by'])")"
else
	direct_ok=
fi

# no hugetlb pages at all
echo 0 > "$NR"
if [ -n "$direct_ok" ]; then
	direct dnone direct || fail "advice_helper direct (no pages): $(cat "$PST_TMP/dnone.out")"
	# (pages may appear meanwhile, reserved by others: then the advice is right)
	[ "$(advised dnone)" = "([], True)" ] && pass "no hugetlb pages free: no hugetlb advice" ||
		[ "$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)" != 0 ] ||
		fail "none free: $(get dnone "r['advice']")"
fi
report nohuge POOLSHIM_HUGEPAGES=hugetlb -- --count 16 --size 3000000 --live 4
mode=$(get nohuge "r['pool']['mode']")
[ "$mode" = thp ] || [ "$mode" = 4k ] && pass "hugetlb requested, none reserved -> $mode" || fail "no hugetlb: mode $mode"
# (pages may appear meanwhile, held by others: then the reason is that they ran out)
get nohuge "r['pool']['hugetlb_reason']" | grep -Eq "nr_hugepages=0|ran out" &&
	pass "reason: $(get nohuge "r['pool']['hugetlb_reason']")" || fail "no reason: $(get nohuge "r['pool']")"

# plenty of hugetlb pages
reserve_free 64
if [ "$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)" -lt 16 ]; then
	echo "kernel gave only $(cat "$NR") hugetlb pages: hugetlb cases skipped"
	finish
fi
report huge POOLSHIM_HUGEPAGES=hugetlb POOLSHIM_POOL_SIZE=64M -- --count 16 --size 3000000 --live 4
[ "$(get huge "r['pool']['backed_by']['hugetlb'] > 0")" = True ] && pass "hugetlb used: mode $(get huge "r['pool']['mode']")" || fail "hugetlb not used: $(get huge "r['pool']")"

# hugetlb pages running out mid-run: 4 free pages (8 MiB) for 40 MiB of live buffers
reserve_free 4
report short POOLSHIM_HUGEPAGES=hugetlb -- --count 40 --size 4000000 --live 10
[ "$(get short "r['pool']['backed_by']['hugetlb'] > 0 and r['pool']['backed_by']['hugetlb'] < r['pool']['backed']")" = True ] &&
	pass "hugetlb ran out -> mixed pool ($(get short "r['pool']['hugetlb_reason']"))" || fail "short: $(get short "r['pool']")"
grep -q "helper ok allocations=40 pooled=40" "$PST_TMP/short.out" && pass "data intact" || fail "short: $(cat "$PST_TMP/short.out")"

# THP disabled
if [ -w "$THP" ]; then
	old_thp=$(sed 's/.*\[\(.*\)\].*/\1/' "$THP")
	at_exit "echo $old_thp > $THP"
	echo 0 > "$NR"
	echo never > "$THP"
	report nothp -- --count 16 --size 3000000 --live 4
	[ "$(get nothp "r['pool']['mode']")" = 4k ] && pass "THP never -> 4k" || fail "THP never: $(get nothp "r['pool']['mode']")"
	get nothp "r['pool']['thp_reason']" | grep -q never && pass "reason: THP never" || fail "no THP reason"
	echo "$old_thp" > "$THP"
fi
finish
