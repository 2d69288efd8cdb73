#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim stat --prometheus` and `--textfile DIR -i S`: the scrape of a
# running process passes `promtool check metrics` and carries its counters;
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

"$STAT" --prometheus "$pid" >"$PST_TMP/scrape" 2>"$PST_TMP/scrape.err"
rc=$?
[ $rc = 0 ] && promtool check metrics <"$PST_TMP/scrape" >"$PST_TMP/lint" 2>&1 &&
	pass "promtool check metrics accepts the scrape" ||
	fail "rc=$rc $(cat "$PST_TMP/scrape.err" "$PST_TMP/lint" | head -5)"
grep -Eq "^poolshim_calls_total\{pid=\"$pid\",program=\"signal_helper\",call=\"malloc\",kind=\"none\"\} [1-9]" "$PST_TMP/scrape" &&
	grep -q '^poolshim_call_duration_seconds_bucket{.*le="+Inf"}' "$PST_TMP/scrape" &&
	grep -q '^poolshim_uring_fallbacks_total{.*reason="not_pooled"}' "$PST_TMP/scrape" &&
	grep -q '^poolshim_pool_in_use_bytes{' "$PST_TMP/scrape" &&
	pass "calls, latency histogram, pool gauges and fallbacks, labelled by pid and program" ||
	fail "scrape lacks series: $(head -5 "$PST_TMP/scrape")"

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
