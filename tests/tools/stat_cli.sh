#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim stat`'s options say what they do (issue 37): --prometheus is
# the Prometheus text format, not OpenMetrics (no "# EOF"), and says so;
# -c without -i is a usage error (2), not ignored; a --textfile DIR where
# nothing can be created is refused with 2 at start, as root too (access(2)
# says yes to root on /proc); the live view names the pool's configured
# retain and decay, not "keeps up to 0 free for 0 ms".
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
H="$PS_TOP_BUILDDIR/tests/preload/signal_helper"

env POOLSHIM_STATS=off POOLSHIM_POOL_RETAIN=96M POOLSHIM_POOL_DECAY_MS=4321 \
	LD_PRELOAD="$SHIM" "$H" --signals 1000000 >"$PST_TMP/h.out" 2>&1 &
pid=$!
at_exit "kill $pid 2>/dev/null"
for _ in $(seq 300); do grep -q '^ready' "$PST_TMP/h.out" && break; sleep 0.1; done
# The record appears with the first pooled buffer: wait for it.
for _ in $(seq 300); do "$STAT" "$pid" >"$PST_TMP/view" 2>/dev/null && break; sleep 0.1; done

grep -q "^pool     keeps up to 96M free for 4321 ms" "$PST_TMP/view" &&
	pass "live view: $(grep 'keeps up to' "$PST_TMP/view")" ||
	fail "live view: $(grep '^pool' "$PST_TMP/view" | head -3)"

"$STAT" --prometheus "$pid" >"$PST_TMP/scrape" 2>"$PST_TMP/scrape.err"
rc=$?
last=$(tail -n 1 "$PST_TMP/scrape")
[ $rc = 0 ] && ! grep -q '^# EOF' "$PST_TMP/scrape" && grep -q '^# TYPE poolshim_calls_total counter' "$PST_TMP/scrape" &&
	case $last in poolshim_*) true ;; *) false ;; esac &&
	pass "--prometheus: Prometheus text format (counter families keep _total; no # EOF)" ||
	fail "--prometheus: rc=$rc last line '$last'"
"$STAT" --help | tr '\n' ' ' | grep -q 'Prometheus text exposition format 0.0.4 (not OpenMetrics' &&
	pass "--help names the format" || fail "--help: $("$STAT" --help | grep -i prom)"

"$STAT" -c 3 "$pid" >"$PST_TMP/c.out" 2>"$PST_TMP/c.err"
rc=$?
[ $rc = 2 ] && [ ! -s "$PST_TMP/c.out" ] && grep -q -- "-c COUNT counts the intervals of -i" "$PST_TMP/c.err" &&
	pass "-c without -i: status 2, $(cat "$PST_TMP/c.err")" ||
	fail "-c without -i: rc=$rc $(cat "$PST_TMP/c.err") $(head -2 "$PST_TMP/c.out")"
"$STAT" -i 0.05 -c 2 "$pid" >"$PST_TMP/ci.out" 2>&1 && [ "$(grep -c '^==== poolshim report' "$PST_TMP/ci.out")" = 2 ] &&
	pass "-i with -c: two views" || fail "-i -c: $(head -3 "$PST_TMP/ci.out")"

"$STAT" --textfile /proc "$pid" >"$PST_TMP/tf.out" 2>"$PST_TMP/tf.err"
rc=$?
[ $rc = 2 ] && grep -q "^poolshim stat: --textfile /proc: " "$PST_TMP/tf.err" && [ ! -s "$PST_TMP/tf.out" ] &&
	pass "--textfile /proc (as uid $(id -u)): status 2, $(cat "$PST_TMP/tf.err")" ||
	fail "--textfile /proc: rc=$rc $(cat "$PST_TMP/tf.err")"
kill "$pid"; wait "$pid" 2>/dev/null
finish
