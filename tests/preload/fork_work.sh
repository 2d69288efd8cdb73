#!/bin/sh
# SPDX-License-Identifier: MIT
# A fork child that does the work and ends with _exit() (fio's job
# processes, prefork servers' workers) writes its own report, counting
# its own calls; one that does next to nothing before _exit() (a failed
# exec) writes none.  Both end as without the shim.  Likewise before an
# exec: bash's fork child that only sets up the exec of a command writes
# no snapshot of its own, so `bash -c 'ls; true; :'` gives three reports
# (ls, true, bash), not five.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/host_helper"
F="$PST_TMP/data"
head -c 65536 /dev/zero >"$F"

for n in 200 0; do
	d="$PST_TMP/n$n"
	mkdir -p "$d/live"
	"$H" fork-work $n "$F" 2>/dev/null
	rc_none=$?
	shim POOLSHIM_STATS="$d/r-%p.json" POOLSHIM_LIVE_DIR="$d/live" -- "$H" fork-work $n "$F" 2>"$d/err"
	rc_shim=$?
	[ "$rc_none" = 0 ] && [ "$rc_shim" = 0 ] && pass "n=$n: exit 0 with and without the shim" ||
		fail "n=$n: exit $rc_shim under the shim, $rc_none without"
	child=$(sed -n 's/^child //p' "$d/err")
	r="$d/r-$child.json"
	if [ $n = 0 ]; then
		[ ! -e "$r" ] && pass "n=0: the idle child wrote no report" || fail "n=0: the idle child wrote $r"
	elif [ -s "$r" ]; then
		got=$(json_get "$r" "sum(c['calls'] for c in r['calls'] if c['call'] == 'pread')")
		bytes=$(json_get "$r" "sum(c['bytes'] for c in r['calls'] if c['call'] == 'pread')")
		[ "$got" = $n ] && [ "$bytes" = $((n * 65536)) ] &&
			pass "n=$n: the child's report counts its $got preads, $bytes bytes" ||
			fail "n=$n: the child's report counts $got preads, $bytes bytes; want $n, $((n * 65536))"
	else
		fail "n=$n: no report from the child $child: $(ls "$d")"
	fi
	parent=$(find "$d" -maxdepth 1 -name 'r-*.json' ! -name "r-$child.json" | wc -l)
	[ "$parent" = 1 ] && pass "n=$n: the parent's report" || fail "n=$n: $parent parent reports"
	left=$(ls -A "$d/live")
	[ -z "$left" ] && pass "n=$n: no live file left" || fail "n=$n: live files left: $left"
done
if command -v bash >/dev/null 2>&1; then
	d="$PST_TMP/bash"
	mkdir -p "$d"
	shim POOLSHIM_STATS="$d/r-%p-%e.json" -- bash -c '/bin/ls / >/dev/null; /bin/true; :' ||
		fail "bash failed under the shim"
	names=$(cd "$d" && ls | sed 's/^r-[0-9]*-//; s/\.json$//' | sort | tr '\n' ' ')
	[ "$names" = "bash ls true " ] && pass "bash -c: one report each for bash, ls and true" ||
		fail "bash -c: reports from '$names', want 'bash ls true '"
fi
finish
