#!/bin/sh
# SPDX-License-Identifier: MIT
# An exec that fails leaves the process running: the report written before
# exec is only a snapshot, so the live file must stay until the real exit
# and the exit report must count the work done after the failed exec.  An
# exec that cannot succeed (missing path, PATH search that finds nothing,
# a directory, no execute bit) writes no snapshot at all: with the report on
# stderr, the program's stderr gets one report, at exit.
# exec_fail.c looks for its record in /dev/shm.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
E="$PRELOAD_BIN/exec_fail"
printf 'not a program\n' >"$PST_TMP/text"
chmod 644 "$PST_TMP/text"
printf '\177ELF garbage\n' >"$PST_TMP/garbage"
chmod 755 "$PST_TMP/garbage"

EXEC_FAIL_PLAIN="$PST_TMP/text" "$E" --writes 200 >"$PST_TMP/plain.out" 2>/dev/null
shim "EXEC_FAIL_PLAIN=$PST_TMP/text" "POOLSHIM_STATS=$PST_TMP/r.json" -- "$E" --writes 200 \
	>"$PST_TMP/shim.out" 2>"$PST_TMP/shim.err"
rc=$?
[ $rc = 0 ] && cmp -s "$PST_TMP/plain.out" "$PST_TMP/shim.out" &&
	pass "failed execs return as without the shim: $(tr '\n' ';' <"$PST_TMP/shim.out")" ||
	fail "exec results (status $rc): $(cat "$PST_TMP/shim.out") want $(cat "$PST_TMP/plain.out")"
for when in "after the failed execs" "before exit"; do
	grep -q "^live file $when: yes" "$PST_TMP/shim.err" && pass "live file kept: $when" ||
		fail "live file gone $when: $(cat "$PST_TMP/shim.err")"
done
w=$(json_get "$PST_TMP/r.json" "sum(c['calls'] for c in r['calls'] if c['call']=='write')")
[ "${w:-0}" -ge 200 ] && pass "exit report counts the writes after the failed exec ($w)" ||
	fail "exit report counts $w writes, want >= 200"
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/r.json" || fail "schema"

shim "EXEC_FAIL_PLAIN=$PST_TMP/text" POOLSHIM_STATS=stderr -- "$E" --writes 10 >/dev/null 2>"$PST_TMP/stderr.err"
n=$(grep -c '^==== poolshim report' "$PST_TMP/stderr.err")
[ "$n" = 1 ] && pass "execs that cannot succeed add no report to stderr" ||
	fail "$n reports on stderr, want 1 (at exit)"

# An exec that fails only in the kernel (ENOEXEC): the snapshot is written,
# and still the file stays and the exit report is complete.
shim "EXEC_FAIL_PLAIN=$PST_TMP/garbage" "POOLSHIM_STATS=$PST_TMP/g.json" -- "$E" --writes 150 \
	>"$PST_TMP/g.out" 2>"$PST_TMP/g.err"
grep -q '^execv not executable: -1 Exec format error' "$PST_TMP/g.out" &&
	grep -q '^live file before exit: yes' "$PST_TMP/g.err" &&
	[ "$(json_get "$PST_TMP/g.json" "sum(c['calls'] for c in r['calls'] if c['call']=='write') >= 150")" = True ] &&
	pass "ENOEXEC: live file kept, exit report complete" ||
	fail "ENOEXEC: $(cat "$PST_TMP/g.out" "$PST_TMP/g.err")"
finish
