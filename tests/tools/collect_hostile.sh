#!/bin/sh
# SPDX-License-Identifier: MIT
# A record is untrusted input: `poolshim collect` run as root never writes
# where the record's owner could not.  Processes running as nobody, killed
# with SIGKILL, whose POOLSHIM_STATS names: a file in a root-only
# directory; a symbolic link (planted by nobody) to a root-owned file; a
# file under a symbolic link to a directory nobody may write.  Collected
# as root: none of those is written (the root-owned file keeps its bytes),
# each is refused in one line, the records are kept, and a fourth
# process's plain path is written, owned by nobody.  Then --into DIR
# writes the three.  And nobody collecting root's record is refused with
# the way to do it.  Needs root and setpriv (else skipped).
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
[ "$(id -u)" = 0 ] || skip "not root"
command -v setpriv >/dev/null || skip "no setpriv"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody true 2>/dev/null || skip "setpriv cannot become nobody here"
T=$PST_TMP
chmod 0755 "$T"
L="$T/live"
mkdir -m 1777 "$L" "$T/pub" "$T/pub2"
mkdir -m 0700 "$T/rootonly"
mkdir "$T/into"
echo "root's own bytes" >"$T/rootfile"
chmod 0644 "$T/rootfile"
as_nobody ln -s "$T/rootfile" "$T/pub/link.txt"
as_nobody ln -s "$T/pub2" "$T/pub/dirlink"
as_nobody true <"$SHIM" || skip "nobody cannot read $SHIM"

# dd as nobody, killed once its record is there; its pid appended to $pids.
pids=
killed_dd() {
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=hostile POOLSHIM_STATS="$1" \
		LD_PRELOAD="$SHIM" dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
	p=$!
	for _ in $(seq 100); do ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 && break; sleep 0.1; done
	sleep 0.2
	kill -KILL "$p"; wait "$p" 2>/dev/null
	ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 || fail "no record of $p ($1)"
	pids="$pids $p"
}
killed_dd "$T/rootonly/r-%p.txt"; p_rootonly=$p
killed_dd "$T/pub/link.txt"; p_link=$p
killed_dd "$T/pub/dirlink/r-%p.txt"; p_dirlink=$p
killed_dd "$T/pub/ok-%p.txt"; p_ok=$p

timeout 60 "$COLLECT" --live-dir "$L" >"$T/out" 2>"$T/err"
rc=$?
cat "$T/err"
[ $rc = 3 ] && pass "exit status 3: some refused" || fail "exit status $rc, want 3"
[ -z "$(ls -A "$T/rootonly")" ] && pass "nothing written in the root-only directory" ||
	fail "written in the root-only directory: $(ls -l "$T/rootonly")"
[ "$(cat "$T/rootfile")" = "root's own bytes" ] && [ -L "$T/pub/link.txt" ] &&
	pass "the root-owned file behind the link is untouched" || fail "the link's target changed"
[ -z "$(ls -A "$T/pub2")" ] && pass "nothing written through the linked directory" ||
	fail "written through the linked directory: $(ls -l "$T/pub2")"
for p in $p_rootonly $p_link $p_dirlink; do
	[ "$(grep -c "pid $p (dd): cannot write the report to .*as user 65534: .*; record kept" "$T/err")" = 1 ] &&
		pass "$p refused in one line" || fail "no single refusal line for $p"
	ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 && pass "$p's record kept" || fail "$p's record removed"
done
grep -q "pid $p_link (dd): .*(a symbolic link on the way)" "$T/err" &&
	grep -q "pid $p_dirlink (dd): .*(a symbolic link on the way)" "$T/err" &&
	pass "the links are named as the reason" || fail "links not named as the reason"
f="$T/pub/ok-$p_ok.txt"
[ -f "$f" ] && [ "$(stat -c %u "$f")" = 65534 ] && grep -q "==== poolshim report: pid $p_ok (dd)" "$f" &&
	pass "the plain path is written, owned by nobody" || fail "plain path: $(ls -l "$T/pub")"
ls "$L"/poolshim-"$p_ok"-*.stats >/dev/null 2>&1 && fail "the written report's record kept"

timeout 60 "$COLLECT" --live-dir "$L" --into "$T/into" >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 0 ] && pass "--into: exit status 0" || fail "--into: status $rc: $(cat "$T/err")"
for p in $p_rootonly $p_link $p_dirlink; do
	[ -f "$T/into/dd-$p.txt" ] && grep -q "^ended    no exit seen" "$T/into/dd-$p.txt" &&
		pass "--into wrote $p's report" || fail "--into did not write $p's report"
done
[ -z "$(ls "$L")" ] && pass "no record left" || fail "records left: $(ls "$L")"

# nobody collecting root's record: refused, with the way to do it.
env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=hostile LD_PRELOAD="$SHIM" \
	dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
p=$!
for _ in $(seq 100); do ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 && break; sleep 0.1; done
kill -KILL "$p"; wait "$p" 2>/dev/null
as_nobody "$COLLECT" --live-dir "$L" "$p" >"$T/out" 2>"$T/err"
rc=$?
[ $rc = 3 ] && grep -q "root writes its report as its owner" "$T/err" &&
	pass "nobody is refused root's record, told how" || fail "nobody on root's record: $rc $(cat "$T/err")"
ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 && pass "root's record kept" || fail "root's record removed"
finish
