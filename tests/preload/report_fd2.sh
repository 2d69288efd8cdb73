#!/bin/sh
# SPDX-License-Identifier: MIT
# The exit report to stderr goes only to the stderr the program started
# with, never into what the program later put at fd 2 (a file it opened
# after closing stderr, a socket, a dup2'd file) nor into any other file it
# opened.  Once fd 2 was replaced the report is not written at all: the shim
# keeps no hidden copy of stderr (it would hold the program's stderr pipe
# open; see report_daemon.sh).  tests/preload/report_helper.
. "$PS_TOP_SRCDIR/tests/lib.sh"
RH="$PRELOAD_BIN/report_helper"
printf 'program data\n' >"$PST_TMP/want"

# data_only NAME FILE: FILE holds only the program's line
data_only() {
	if cmp -s "$PST_TMP/want" "$2"; then
		pass "$1: the program's file holds only its own data"
	else
		fail "$1: the program's file holds: $(head -c 200 "$2" | tr '\n' '|')"
	fi
}
# report_in NAME FILE: FILE (the original stderr) got the report
report_in() {
	grep -q "==== end of poolshim report ====" "$2" && pass "$1: report on the original stderr" ||
		fail "$1: no report on the original stderr: $(head -c 200 "$2" | tr '\n' '|')"
}
# no_report NAME FILE: the original stderr, let go of by the program, got nothing
no_report() {
	[ -s "$2" ] && fail "$1: the stderr the program let go of got: $(head -c 200 "$2" | tr '\n' '|')" ||
		pass "$1: nothing on the stderr the program let go of"
}

# 1. stderr untouched: the report is there as always
shim -- "$PRELOAD_BIN/alloc_helper" --count 2 >/dev/null 2>"$PST_TMP/err1" || fail "alloc_helper failed"
report_in "stderr untouched" "$PST_TMP/err1"

# 2. close(2), then open a file: it gets fd 2
shim -- "$RH" fd2 closeopen "$PST_TMP/closeopen" >"$PST_TMP/out" 2>"$PST_TMP/err2" ||
	fail "closeopen: $(cat "$PST_TMP/out")"
data_only "close(2) + open" "$PST_TMP/closeopen"
no_report "close(2) + open" "$PST_TMP/err2"

# 3. dup2 of another file onto 2
shim -- "$RH" fd2 dup2 "$PST_TMP/dup2" >"$PST_TMP/out" 2>"$PST_TMP/err3" || fail "dup2: $(cat "$PST_TMP/out")"
data_only "dup2 onto 2" "$PST_TMP/dup2"
no_report "dup2 onto 2" "$PST_TMP/err3"

# 4. a socket at fd 2: its peer must receive only the program's line
shim -- "$RH" fd2 socket "$PST_TMP/sock" >"$PST_TMP/out" 2>"$PST_TMP/err4" || fail "socket: $(cat "$PST_TMP/out")"
for _ in $(seq 100); do [ -e "$PST_TMP/sock.done" ] && break; sleep 0.05; done
[ -e "$PST_TMP/sock.done" ] || fail "socket: the copier did not finish"
data_only "socket at fd 2" "$PST_TMP/sock"
no_report "socket at fd 2" "$PST_TMP/err4"

# 5. started with fd 2 closed, then a file got 2: nothing is ours to write to
shim -- "$RH" fd2 startclosed "$PST_TMP/startclosed" >"$PST_TMP/out" 2>&- || fail "startclosed: $(cat "$PST_TMP/out")"
data_only "started without fd 2" "$PST_TMP/startclosed"

# 6. close everything, reopen files at many numbers (where a copy of stderr used to be)
mkdir "$PST_TMP/all" "$PST_TMP/all2"
shim -- "$RH" fd2 closeall "$PST_TMP/all" >"$PST_TMP/out" 2>"$PST_TMP/err6" || fail "closeall: $(cat "$PST_TMP/out")"
n=$(cat "$PST_TMP/all"/* | grep -vxc 'program data')
[ "$n" = 0 ] && pass "close-all + reopen (fd 2 too): no report in any of the program's files" ||
	fail "close-all + reopen: $n foreign lines in $(grep -lvx 'program data' "$PST_TMP/all"/* | head -3)"
# fd 2 is the program's now: the report is lost, not misplaced.
[ -s "$PST_TMP/err6" ] && fail "close-all: something reached the original stderr: $(head -c 200 "$PST_TMP/err6")"
shim -- "$RH" fd2 closeall "$PST_TMP/all2" keep2 >"$PST_TMP/out" 2>"$PST_TMP/err7" || fail "closeall keep2: $(cat "$PST_TMP/out")"
n=$(cat "$PST_TMP/all2"/* | grep -vxc 'program data')
[ "$n" = 0 ] && pass "close-all + reopen (fd 2 kept): no report in the program's files" ||
	fail "close-all + reopen (fd 2 kept): $n foreign lines"
report_in "close-all + reopen (fd 2 kept)" "$PST_TMP/err7"

# 7. the report goes to a file the shim may not write (no such directory):
# the one-line complaint at exit is a message for the user, and goes where
# the report would, never into the file the program put at fd 2.
shim POOLSHIM_STATS="$PST_TMP/no/such/dir/r.json" -- "$RH" fd2 closeopen "$PST_TMP/msg" \
	>"$PST_TMP/out" 2>"$PST_TMP/err8" || fail "message: $(cat "$PST_TMP/out")"
data_only "message after close(2) + open" "$PST_TMP/msg"
# (No copy of stderr is kept when the report goes to a file, so the line is dropped.)

finish
