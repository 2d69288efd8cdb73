#!/bin/sh
# SPDX-License-Identifier: MIT
# The shim holds no descriptor and leaves no file behind a program that
# leaves the way it started (issue 25): `out=$(prog 2>&1)` of a program that
# daemonises returns as soon as the parent exits, as without the shim (no
# hidden copy of stderr holds the pipe); and no live file stays after a
# daemon(3) parent, a program that drops to user nobody (setresuid or
# seteuid), or one that execs a short program; one that chroots leaves its
# record, which `poolshim collect` removes.
# tests/preload/leave_helper.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/leave_helper"
# A sticky, world-writable live directory like /dev/shm, reachable by nobody.
LIVE=$(mktemp -d /tmp/pst-live.XXXXXX)
at_exit "rm -rf '$LIVE'"
chmod 1777 "$LIVE"

now() { date +%s%N; }
# empty_soon: the live directory empties within 3 s (a daemon's child may still run).
empty_soon() {
	for _ in $(seq 60); do
		[ -z "$(ls -A "$LIVE")" ] && return 0
		sleep 0.05
	done
	return 1
}
left() { ls -la "$LIVE" | tail -n +4 | tr '\n' '|'; }

# 1. The daemonising capture: the daemon lives 3 s; the capture must not wait for it.
t0=$(now)
out=$("$H" daemon 3000 2>&1)
plain_ms=$((($(now) - t0) / 1000000))
t0=$(now)
out=$(shim POOLSHIM_LIVE_DIR="$LIVE" -- "$H" daemon 3000 2>&1)
ms=$((($(now) - t0) / 1000000))
echo "out=\$(prog 2>&1) of a daemonising program: ${plain_ms} ms without the shim, ${ms} ms under it"
if [ "$ms" -lt 1500 ]; then
	pass "the daemonising capture returned in $ms ms (daemon lives 3000 ms)"
else
	fail "the daemonising capture took $ms ms: something held the pipe until the daemon ended"
fi
parent=$(echo "$out" | sed -n 's/^pid //p')
echo "$out" | grep -q "==== poolshim report: pid $parent " && pass "the daemon(3) parent wrote its report" ||
	fail "no report from the daemon(3) parent (pid $parent): $(echo "$out" | head -c 200 | tr '\n' '|')"
rm -f "$LIVE"/*

# 2. No live file after a daemon(3) parent (and its daemon, once it ends).
shim POOLSHIM_LIVE_DIR="$LIVE" -- "$H" daemon 200 >/dev/null 2>&1 || fail "daemon run failed"
empty_soon && pass "no live file after daemon(3)" || fail "live file left after daemon(3): $(left)"
rm -f "$LIVE"/*

# 3. A change of user, 4. a chroot: root only.
if [ "$(id -u)" != 0 ] || ! id nobody >/dev/null 2>&1; then
	echo "note: not root, or no user nobody: user change and chroot not tried"
	finish
fi
for how in setuid seteuid; do
	shim POOLSHIM_LIVE_DIR="$LIVE" -- "$H" $how nobody >"$PST_TMP/out" 2>"$PST_TMP/err" ||
		fail "$how nobody failed: $(cat "$PST_TMP/err" | head -c 200)"
	grep -q "==== end of poolshim report ====" "$PST_TMP/err" || fail "$how: no report"
	empty_soon && pass "no live file after $how to nobody" || fail "live file left after $how to nobody: $(left)"
	rm -f "$LIVE"/*
done
# A round trip (seteuid away and back to root) keeps the live view, and leaves nothing.
shim POOLSHIM_LIVE_DIR="$LIVE" -- "$H" seteuid nobody back >"$PST_TMP/out" 2>"$PST_TMP/err" ||
	fail "seteuid round trip failed: $(cat "$PST_TMP/err" | head -c 200)"
grep -qx "live 1" "$PST_TMP/out" && pass "the live file stays through seteuid away and back" ||
	fail "after seteuid away and back: $(grep live "$PST_TMP/out")"
empty_soon && pass "no live file after the seteuid round trip" || fail "live file left after the round trip: $(left)"
rm -f "$LIVE"/*
# An exec into a short program: the old image's file goes before the exec,
# and the new image, which does no real work, makes none.
TRUE=/bin/true
[ -x "$TRUE" ] || TRUE=/usr/bin/true    # `command -v true` names the shell's builtin
shim POOLSHIM_LIVE_DIR="$LIVE" -- "$H" exec "$TRUE" >"$PST_TMP/out" 2>"$PST_TMP/err" ||
	fail "exec $TRUE failed: $(cat "$PST_TMP/err" | head -c 200)"
grep -qx "live 1" "$PST_TMP/out" || fail "exec: no live file before the exec: $(cat "$PST_TMP/out")"
empty_soon && pass "no live file after an exec into a short program" ||
	fail "live file left after an exec into a short program: $(left)"
rm -f "$LIVE"/*
mkdir "$PST_TMP/jail"
shim POOLSHIM_LIVE_DIR="$LIVE" -- "$H" chroot "$PST_TMP/jail" >"$PST_TMP/out" 2>"$PST_TMP/err" ||
	fail "chroot failed: $(cat "$PST_TMP/err" | head -c 200)"
grep -q "==== end of poolshim report ====" "$PST_TMP/err" || fail "chroot: no report"
# The record stays (the process cannot reach it by path from its jail) and
# says its report was delivered: collect removes it and writes nothing.
[ -n "$(left)" ] && pass "chroot: the record stays, out of the jail's reach" ||
	fail "chroot: no record left"
"$PS_TOP_BUILDDIR/poolshim" collect --live-dir "$LIVE" >"$PST_TMP/collect" 2>&1
[ -s "$PST_TMP/collect" ] && fail "chroot: collect wrote a second report: $(head -c 300 "$PST_TMP/collect")"
empty_soon && pass "no record after chroot and collect" || fail "record left after chroot and collect: $(left)"

# A report path outside the jail (haproxy's workers, chrooted, with
# POOLSHIM_STATS=/var/log/...): out of the process's reach at its end, so the
# record keeps it (counters only: the record is out of reach too) and
# collect writes it there afterwards.
rm -f "$LIVE"/*
shim POOLSHIM_LIVE_DIR="$LIVE" POOLSHIM_STATS="$PST_TMP/jailed-%p.json" -- \
	"$H" chroot "$PST_TMP/jail" >"$PST_TMP/out" 2>"$PST_TMP/err" ||
	fail "chroot (report path outside): failed: $(head -c 200 "$PST_TMP/err")"
grep -q "cannot write the report to .*ENOENT" "$PST_TMP/err" &&
	grep -q "the report is kept in" "$PST_TMP/err" &&
	pass "chroot: the path out of reach is said, and the report kept" ||
	fail "chroot (report path outside): $(cat "$PST_TMP/err")"
ls "$PST_TMP"/jailed-*.json >/dev/null 2>&1 && fail "chroot: a report appeared before collect"
"$PS_TOP_BUILDDIR/poolshim" collect --live-dir "$LIVE" >"$PST_TMP/collect" 2>&1 ||
	fail "chroot: collect: $(cat "$PST_TMP/collect")"
r=$(ls "$PST_TMP"/jailed-*.json 2>/dev/null | head -1)
pid=${r##*/jailed-}; pid=${pid%.json}
[ -n "$r" ] && [ "$(json_get "$r" "r['pid']")" = "$pid" ] &&
	pass "chroot: collect wrote the jailed process's report outside the jail ($r)" ||
	fail "chroot: no report after collect: $(cat "$PST_TMP/collect")"
empty_soon && pass "no record after collect" || fail "record left after collect: $(left)"
finish
