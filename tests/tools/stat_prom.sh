#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim stat --prometheus` and `--textfile DIR -i S`: the scrape of two
# running processes of one program passes `promtool check metrics` and
# carries their counters in one series per program (no pid label; with
# --per-pid one per process, which the program's series adds up), 13
# latency buckets per call, and page faults and CPU seconds;
# the textfile is replaced whole by rename (a reader loop never sees a
# partial file, and the inode changes between writes); a missing DIR is
# refused with a clear message.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
H="$PS_TOP_BUILDDIR/tests/preload/signal_helper"
command -v promtool >/dev/null || skip "promtool (Debian package prometheus) not installed"

env POOLSHIM_STATS=off LD_PRELOAD="$SHIM" "$H" --signals 1000000 >"$PST_TMP/h.out" 2>&1 &
pid=$!
at_exit "kill $pid 2>/dev/null"
for _ in $(seq 100); do grep -q '^ready' "$PST_TMP/h.out" && break; sleep 0.1; done
sleep 0.3

# A second process of the same program: per program, the two are one series.
env POOLSHIM_STATS=off LD_PRELOAD="$SHIM" "$H" --signals 1000000 >"$PST_TMP/h2.out" 2>&1 &
pid2=$!
at_exit "kill $pid2 2>/dev/null"
for _ in $(seq 100); do grep -q '^ready' "$PST_TMP/h2.out" && break; sleep 0.1; done
sleep 0.3

"$STAT" --prometheus "$pid" "$pid2" >"$PST_TMP/scrape" 2>"$PST_TMP/scrape.err"
rc=$?
[ $rc = 0 ] && promtool check metrics <"$PST_TMP/scrape" >"$PST_TMP/lint" 2>&1 &&
	pass "promtool check metrics accepts the scrape" ||
	fail "rc=$rc $(cat "$PST_TMP/scrape.err" "$PST_TMP/lint" | head -5)"
grep -Eq "^poolshim_calls_total\{program=\"signal_helper\",call=\"malloc\",kind=\"none\"\} [1-9]" "$PST_TMP/scrape" &&
	grep -q '^poolshim_call_duration_seconds_bucket{.*le="+Inf"}' "$PST_TMP/scrape" &&
	grep -q '^poolshim_uring_fallbacks_total{.*reason="not_pooled"}' "$PST_TMP/scrape" &&
	grep -q '^poolshim_pool_in_use_bytes{' "$PST_TMP/scrape" &&
	pass "calls, latency histogram, pool gauges and fallbacks, labelled by program" ||
	fail "scrape lacks series: $(head -5 "$PST_TMP/scrape")"
# per program by default: no pid label, the two processes counted in one series
grep -q 'pid="' "$PST_TMP/scrape" && fail "a pid label without --per-pid: $(grep -m1 'pid="' "$PST_TMP/scrape")" ||
	pass "no pid label by default"
grep -qx 'poolshim_processes{program="signal_helper"} 2' "$PST_TMP/scrape" &&
	[ "$(grep -c '^poolshim_pool_on{' "$PST_TMP/scrape")" = 1 ] &&
	pass "one series for the two processes (poolshim_processes 2)" ||
	fail "per program: $(grep -E '^poolshim_(processes|pool_on)' "$PST_TMP/scrape")"
# fewer buckets: 12 bounds and +Inf per call and kind
n=$(grep -c '^poolshim_call_duration_seconds_bucket{program="signal_helper",call="malloc",kind="none",' "$PST_TMP/scrape")
[ "$n" = 13 ] && pass "13 latency buckets per call" || fail "latency buckets per call: $n"
# page faults and CPU time, for the dashboard
grep -Eq '^poolshim_page_faults_total\{program="signal_helper",type="minor"\} [1-9]' "$PST_TMP/scrape" &&
	grep -Eq '^poolshim_cpu_seconds_total\{program="signal_helper",mode="(user|system)"\} [0-9.]+$' "$PST_TMP/scrape" &&
	pass "page faults and CPU seconds" ||
	fail "faults/cpu: $(grep -E '^poolshim_(page_faults|cpu_seconds)' "$PST_TMP/scrape")"
# --per-pid: one series per process, labelled pid and program; the program's sums add up
"$STAT" --prometheus --per-pid "$pid" "$pid2" >"$PST_TMP/perpid" 2>"$PST_TMP/perpid.err"
rc=$?
[ $rc = 0 ] && promtool check metrics <"$PST_TMP/perpid" >/dev/null 2>&1 &&
	grep -Eq "^poolshim_calls_total\{pid=\"$pid\",program=\"signal_helper\",call=\"malloc\",kind=\"none\"\} [1-9]" "$PST_TMP/perpid" &&
	grep -Eq "^poolshim_calls_total\{pid=\"$pid2\",program=\"signal_helper\",call=\"malloc\",kind=\"none\"\} [1-9]" "$PST_TMP/perpid" &&
	pass "--per-pid: labels pid and program" || fail "--per-pid: rc=$rc $(head -5 "$PST_TMP/perpid.err" "$PST_TMP/perpid")"
sum=$(sed -n 's/^poolshim_pool_backed_bytes{pid="[0-9]*",program="signal_helper"} //p' "$PST_TMP/perpid" | awk '{ s += $1 } END { if (NR) print s }')
one=$(sed -n 's/^poolshim_pool_backed_bytes{program="signal_helper"} //p' "$PST_TMP/scrape")
[ -n "$sum" ] && [ "$sum" = "$one" ] && pass "per program is the sum of the processes (backed $one)" ||
	fail "backed: per program '$one', per pid sum '$sum'"
lines=$(grep -vc '^#' "$PST_TMP/scrape") perpid=$(grep -vc '^#' "$PST_TMP/perpid")
[ "$lines" -lt "$perpid" ] && pass "per program: $lines samples, per pid $perpid" ||
	fail "samples: per program $lines, per pid $perpid"
"$STAT" --per-pid "$pid" >/dev/null 2>"$PST_TMP/pp.err"
[ $? = 2 ] && grep -q "give --prometheus or --textfile" "$PST_TMP/pp.err" && pass "--per-pid alone: usage error" ||
	fail "--per-pid alone: $(cat "$PST_TMP/pp.err")"
kill "$pid2"; wait "$pid2" 2>/dev/null

D="$PST_TMP/tf"
mkdir "$D"
"$STAT" --textfile "$D" -i 0.05 -c 40 "$pid" 2>"$PST_TMP/tf.err" &
st=$!
for _ in $(seq 100); do [ -f "$D/poolshim.prom" ] && break; sleep 0.05; done
partial=0 seen=0 inodes=""
for _ in $(seq 2000); do
	if [ -f "$D/poolshim.prom" ]; then
		# A whole scrape ends with the last fallback reason's line.
		tail -n 1 "$D/poolshim.prom" | grep -q 'reason="unaligned"' || partial=$((partial + 1))
		seen=$((seen + 1))
		inodes="$inodes $(stat -c %i "$D/poolshim.prom" 2>/dev/null)"
	fi
	kill -0 $st 2>/dev/null || break
done
wait $st; rc=$?
n=$(echo $inodes | tr ' ' '\n' | sort -u | wc -l)
[ $rc = 0 ] && [ $seen -gt 0 ] && [ $partial = 0 ] && [ "$n" -gt 1 ] &&
	pass "textfile: $seen reads, none partial, $n inodes (replaced by rename)" ||
	fail "textfile: rc=$rc seen=$seen partial=$partial inodes=$n $(cat "$PST_TMP/tf.err")"
promtool check metrics <"$D/poolshim.prom" >/dev/null 2>&1 && pass "textfile passes promtool" ||
	fail "textfile rejected by promtool"
[ -z "$(ls -A "$D" | grep -v '^poolshim.prom$')" ] && pass "no temporary files left" ||
	fail "left in DIR: $(ls -A "$D")"
"$STAT" --textfile "$PST_TMP/nonesuch" "$pid" >/dev/null 2>"$PST_TMP/no.err"
rc=$?
[ $rc = 2 ] && grep -q "textfile $PST_TMP/nonesuch: No such file" "$PST_TMP/no.err" &&
	pass "missing DIR: $(cat "$PST_TMP/no.err")" || fail "missing DIR: rc=$rc $(cat "$PST_TMP/no.err")"
kill "$pid"; wait "$pid" 2>/dev/null
finish
