#!/bin/sh
# SPDX-License-Identifier: MIT
# Live files are named by pid and pid namespace, so two processes with the
# same pid in different namespaces sharing /dev/shm keep apart, and
# `poolshim stat` and `poolshim collect` judge only files of their own
# namespace: a pid from another means nothing to kill(2) here.  In a
# private mount namespace with a /dev/shm of its own (nobody else's files
# in the way), a program under the shim runs as pid 1 of a new pid
# namespace next to one in ours; stat, scanning, shows both and removes
# neither, shows ours as gone once it is killed, and collect then removes
# ours and leaves the other.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/signal_helper"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"

[ "$(id -u)" = 0 ] || skip "needs root for pid and mount namespaces"
unshare -m -p -f --mount-proc true 2>/dev/null || skip "unshare -p -f --mount-proc not permitted here"

# The body runs in the private mount namespace; its results come back on stdout.
cat >"$PST_TMP/body.sh" <<'BODY'
mount -t tmpfs -o size=64m tmpfs /dev/shm || { echo "FAIL: no tmpfs"; exit 1; }
NS=$(stat -L -c %i /proc/self/ns/pid)
env POOLSHIM_STATS=off LD_PRELOAD="$SHIM" "$H" --signals 1000000 >"$T/ours.out" 2>&1 &
ours=$!
unshare -p -f --kill-child --mount-proc env POOLSHIM_STATS=off LD_PRELOAD="$SHIM" "$H" --signals 1000000 \
	>"$T/inner.out" 2>&1 &
inner=$!
for _ in $(seq 100); do
	grep -q '^ready' "$T/ours.out" "$T/inner.out" 2>/dev/null &&
		[ "$(grep -l '^ready' "$T/ours.out" "$T/inner.out" | wc -l)" = 2 ] && break
	sleep 0.1
done
sleep 0.3
echo "inner: $(cat "$T/inner.out")"
echo "files: $(cd /dev/shm && ls)"
ls /dev/shm/poolshim-$ours-$NS.stats >/dev/null 2>&1 && echo "ok: our file names our namespace" ||
	echo "FAIL: no /dev/shm/poolshim-$ours-$NS.stats"
other=$(cd /dev/shm && ls | grep -v -- "-$NS.stats\$" | grep '^poolshim-1[-.]')
[ -n "$other" ] && echo "ok: the inner pid 1 has a file of its own: $other" ||
	echo "FAIL: no file of the inner process"
"$STAT" >"$T/stat1" 2>&1
echo "stat status $?"
grep -q "pid 1 (signal_helper).*another pid namespace" "$T/stat1" &&
	echo "ok: stat shows the other namespace's process, not judged" ||
	echo "FAIL: stat on the other namespace: $(cat "$T/stat1")"
[ -n "$other" ] && [ -e "/dev/shm/$other" ] && echo "ok: stat left the running inner process's file" ||
	echo "FAIL: stat removed the file of a running process in another pid namespace"
kill -KILL $ours; wait $ours 2>/dev/null
"$STAT" >"$T/stat2" 2>&1
[ -e /dev/shm/poolshim-$ours-$NS.stats ] && grep -q "pid $ours .*process gone" "$T/stat2" &&
	echo "ok: stat shows a dead process's file of our namespace as gone, and leaves it" ||
	echo "FAIL: dead file of ours: $(cat "$T/stat2")"
"$COLLECT" >"$T/collect" 2>&1
[ ! -e /dev/shm/poolshim-$ours-$NS.stats ] && echo "ok: collect removes it" ||
	echo "FAIL: collect left the dead file of ours: $(cat "$T/collect")"
[ -n "$other" ] && [ -e "/dev/shm/$other" ] && echo "ok: still left the inner one" ||
	echo "FAIL: inner file gone after stat and collect"
kill -KILL $inner 2>/dev/null; wait 2>/dev/null
BODY
env T="$PST_TMP" SHIM="$SHIM" H="$H" STAT="$STAT" COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect" unshare -m sh "$PST_TMP/body.sh" >"$PST_TMP/res" 2>&1
cat "$PST_TMP/res"
grep -q '^FAIL' "$PST_TMP/res" && pst_fail=1
grep -q '^ok' "$PST_TMP/res" || fail "the test body did not run"
finish
