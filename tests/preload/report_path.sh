#!/bin/sh
# SPDX-License-Identifier: MIT
# What sits at the report path never hangs or harms the program: a FIFO
# with no reader (at exit and in the dump handler), a FIFO whose reader
# stalls or hangs up, a hard link, a %p file someone planted, and a stderr
# pipe with no reader.  A FIFO with a reader gets the report, and an exec
# chain with a %p path still ends with the last image's report.
. "$PS_TOP_SRCDIR/tests/lib.sh"
RH="$PRELOAD_BIN/report_helper"
H="$PRELOAD_BIN/alloc_helper"

# run_timed SECONDS CMD...: run CMD under timeout; sets rc and took
run_timed() {
	lim=$1; shift
	t0=$(date +%s)
	timeout -s KILL "$lim" "$@"
	rc=$?
	took=$(( $(date +%s) - t0 ))
}
reader_pid=
stop_reader() { [ -n "$reader_pid" ] && kill "$reader_pid" 2>/dev/null; wait "$reader_pid" 2>/dev/null; reader_pid=; }
at_exit stop_reader
# start_reader FIFO MODE: a reader in the background, there before we go on
start_reader() {
	rm -f "$PST_TMP/ready"
	"$RH" fifo-reader "$1" "$PST_TMP/got" "$PST_TMP/ready" "$2" >"$PST_TMP/reader.out" 2>&1 &
	reader_pid=$!
	for _ in $(seq 200); do [ -e "$PST_TMP/ready" ] && return; sleep 0.05; done
	fail "the FIFO reader did not start: $(cat "$PST_TMP/reader.out")"
}

# 1. a FIFO with no reader: the program exits at once with its own status
mkfifo "$PST_TMP/fifo"
run_timed 20 env POOLSHIM_STATS="$PST_TMP/fifo" LD_PRELOAD="$SHIM" "$H" --count 2 >"$PST_TMP/out" 2>"$PST_TMP/err"
if [ $rc = 0 ] && [ $took -le 5 ] && grep -q "helper ok" "$PST_TMP/out"; then
	pass "FIFO without a reader: exit 0 in ${took}s"
else
	fail "FIFO without a reader: exit $rc after ${took}s (137: hung, killed)"
fi
# One line says why, one where the report is kept (issue 34), nothing else.
[ "$(grep -c "^poolshim\[[0-9]*\] [^:]*: cannot write the report to $PST_TMP/fifo" "$PST_TMP/err")" = 1 ] &&
	[ "$(grep -c "^poolshim\[[0-9]*\] [^:]*: the report is kept in .*poolshim collect" "$PST_TMP/err")" = 1 ] &&
	[ "$(grep -c . "$PST_TMP/err")" = 2 ] && pass "two lines: $(cat "$PST_TMP/err")" ||
	fail "FIFO without a reader: message: $(cat "$PST_TMP/err")"

# 2. the same in the dump handler
run_timed 20 env POOLSHIM_DUMP_SIGNAL=USR2 POOLSHIM_STATS="$PST_TMP/fifo" LD_PRELOAD="$SHIM" \
	"$RH" dump >"$PST_TMP/out" 2>"$PST_TMP/err"
[ $rc = 0 ] && grep -q "after dump" "$PST_TMP/out" && pass "dump handler, FIFO without a reader: went on, exit 0" ||
	fail "dump handler, FIFO without a reader: exit $rc after ${took}s: $(cat "$PST_TMP/out")"

# 3. a FIFO with a reader receives the report
start_reader "$PST_TMP/fifo" all
run_timed 20 env POOLSHIM_STATS="$PST_TMP/fifo" POOLSHIM_STATS_FORMAT=json LD_PRELOAD="$SHIM" \
	"$H" --count 3 >"$PST_TMP/out" 2>"$PST_TMP/err"
[ $rc = 0 ] || fail "FIFO with a reader: exit $rc: $(cat "$PST_TMP/err")"
for _ in $(seq 100); do kill -0 "$reader_pid" 2>/dev/null || break; sleep 0.05; done
stop_reader
python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$PST_TMP/got" >/dev/null 2>&1 &&
	pass "FIFO with a reader: the report arrived whole" ||
	fail "FIFO with a reader: got $(wc -c <"$PST_TMP/got") bytes: $(head -c 200 "$PST_TMP/got"); $(cat "$PST_TMP/err")"

# 4. the reader stops reading (a one-page pipe, full): the wait is bounded.
# The busy report is over 4 KiB; a one-page pipe is bigger on other pages.
if [ "$(getconf PAGESIZE)" != 4096 ]; then
	echo "note: page size $(getconf PAGESIZE): stalled and hung-up readers not tested"
else
	big="POOLSHIM_STATS_FORMAT=json POOLSHIM_TIMING_SAMPLE=1"
	rm -f "$PST_TMP/got.full"
	start_reader "$PST_TMP/fifo" stall
	# shellcheck disable=SC2086
	run_timed 30 env $big POOLSHIM_STATS="$PST_TMP/fifo" LD_PRELOAD="$SHIM" "$RH" busy "$PST_TMP/busy" \
		>"$PST_TMP/out" 2>"$PST_TMP/err"
	stop_reader
	[ -e "$PST_TMP/got.full" ] || fail "stalled reader: the pipe never filled (is the report under a page?)"
	if [ $rc = 0 ] && [ $took -le 10 ]; then
		pass "reader that stops reading: exit 0 in ${took}s"
	else
		fail "reader that stops reading: exit $rc after ${took}s"
	fi
	grep -q "cannot write the report" "$PST_TMP/err" && pass "stalled reader reported: $(head -1 "$PST_TMP/err")" ||
		fail "stalled reader: no message: $(cat "$PST_TMP/err")"

	# 5. the reader hangs up half-way: no SIGPIPE for the program
	rm -f "$PST_TMP/got.full"
	start_reader "$PST_TMP/fifo" hangup
	# shellcheck disable=SC2086
	run_timed 30 env $big POOLSHIM_STATS="$PST_TMP/fifo" LD_PRELOAD="$SHIM" "$RH" busy "$PST_TMP/busy" \
		>"$PST_TMP/out" 2>"$PST_TMP/err"
	stop_reader
	[ -e "$PST_TMP/got.full" ] || fail "hung-up reader: the pipe never filled"
	[ $rc = 0 ] && [ $took -le 10 ] && pass "reader that hangs up: exit 0 in ${took}s" ||
		fail "reader that hangs up: exit $rc after ${took}s (141: SIGPIPE)"
fi

# 6. stderr a pipe nobody reads: the report's write must not kill the program
"$RH" broken-stderr "$SHIM" "$H" --count 2 >"$PST_TMP/out"
rc=$?
[ $rc = 0 ] && pass "stderr pipe without a reader: exit 0" || fail "stderr pipe without a reader: exit $rc (141: SIGPIPE)"

# 7. a hard link to a file (ours or not) is refused, the file left alone
printf 'precious\n' >"$PST_TMP/precious"
ln "$PST_TMP/precious" "$PST_TMP/hard.json"
shim "POOLSHIM_STATS=$PST_TMP/hard.json" -- "$H" --count 2 >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "hard link: helper failed"
[ "$(cat "$PST_TMP/precious")" = precious ] && pass "hard link not written through" ||
	fail "hard link: the linked file now holds: $(head -c 200 "$PST_TMP/precious")"
grep -q "cannot write the report" "$PST_TMP/err" && pass "hard link refusal reported" || fail "hard link: no message"

# 8. a %p path that already exists, planted before the program ran
mkdir "$PST_TMP/p"
sh -c 'printf "planted\n" >"$1/r-$$.json"; export POOLSHIM_STATS="$1/r-%p.json" LD_PRELOAD="$2"; exec "$3" --count 2' \
	sh "$PST_TMP/p" "$SHIM" "$H" >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "planted: helper failed"
set -- "$PST_TMP"/p/r-*.json
[ $# = 1 ] && [ "$(cat "$1")" = planted ] && pass "planted %p file not written into" ||
	fail "planted %p file now holds: $(head -c 200 "$1")"
grep -q "cannot write the report" "$PST_TMP/err" && pass "planted file refusal reported" || fail "planted: no message"

# 9. but an exec chain with a %p path: the last image's report replaces the first's
for ext in json txt; do
	mkdir "$PST_TMP/x-$ext"
	shim "POOLSHIM_STATS=$PST_TMP/x-$ext/r-%p.$ext" -- sh -c 'exec "$1" --count 2' sh "$H" >/dev/null \
		2>"$PST_TMP/err" || fail "exec chain ($ext): helper failed"
	set -- "$PST_TMP/x-$ext"/r-*
	if [ $ext = json ]; then
		prog=$(json_get "$1" "r['program']")
	else
		prog=$(sed -n '1s/^==== poolshim report: pid [0-9]* (\(.*\)) ====$/\1/p' "$1")
	fi
	[ $# = 1 ] && [ "$prog" = alloc_helper ] && pass "exec chain ($ext): the exec'd image's report" ||
		fail "exec chain ($ext): $(head -c 200 "$1"); $(cat "$PST_TMP/err")"
done

# 10. a symbolic link (issue 37): refused, the target untouched, and the message
# names ELOOP and the reason, not "error"
printf 'precious\n' >"$PST_TMP/target"
ln -s "$PST_TMP/target" "$PST_TMP/sym.json"
shim "POOLSHIM_STATS=$PST_TMP/sym.json" -- "$H" --count 2 >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "symlink: helper failed"
[ "$(cat "$PST_TMP/target")" = precious ] &&
	grep -q "cannot write the report to $PST_TMP/sym.json: ELOOP (a symbolic link: a report is never written through one; name the file itself)" "$PST_TMP/err" &&
	pass "symbolic link refused, said: $(grep 'cannot write' "$PST_TMP/err" | cut -c1-120)" ||
	fail "symbolic link: $(cat "$PST_TMP/err") / target: $(head -c 100 "$PST_TMP/target")"

# 11. /dev/null: thrown away as asked, with no complaint and nothing kept in
# the live directory (before, "not owned by this user" and a kept record).
ls "$POOLSHIM_LIVE_DIR" 2>/dev/null | sort >"$PST_TMP/live.before"
shim POOLSHIM_STATS=/dev/null -- "$H" --count 2 >"$PST_TMP/out" 2>"$PST_TMP/err" || fail "/dev/null: helper failed"
ls "$POOLSHIM_LIVE_DIR" 2>/dev/null | sort >"$PST_TMP/live.after"
[ ! -s "$PST_TMP/err" ] && cmp -s "$PST_TMP/live.before" "$PST_TMP/live.after" &&
	pass "POOLSHIM_STATS=/dev/null: discarded, nothing said, nothing kept" ||
	fail "POOLSHIM_STATS=/dev/null: said '$(head -c 300 "$PST_TMP/err")'; kept: $(comm -13 "$PST_TMP/live.before" "$PST_TMP/live.after" | tr '\n' ' ')"

finish
