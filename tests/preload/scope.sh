#!/bin/sh
# SPDX-License-Identifier: MIT
# POOLSHIM_PROGRAMS, the private jemalloc's settings, and the log prefix.
# A program the list does not name is left alone: its system calls are
# the ones it makes without the shim (the loader's for our library aside),
# it writes no report and no live file, and its exec'd children are judged
# by their own names.  A malformed list leaves everyone alone, and every
# process says so in one line.  MALLOC_CONF is the program's: our jemalloc
# never reads it, the program's own jemalloc still does.  Log lines read
# "poolshim[PID] PROGRAM: ".
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"

# A listed program is shimmed: its report names it.
head -c 2097152 /dev/zero >"$PST_TMP/2m"
shim POOLSHIM_PROGRAMS=haproxy,cat -- cat "$PST_TMP/2m" 2>"$PST_TMP/on" >/dev/null
grep -q "^==== poolshim report: pid [0-9]* (cat) ====" "$PST_TMP/on" &&
	pass "a listed program is shimmed" || fail "no report from a listed cat: $(head -3 "$PST_TMP/on")"

# A run of a listed program that did no work worth a report (`nginx -t`,
# `nginx -s reload`) writes none and leaves no live file; verbose says
# why.  Without the list the same run reports: a first try says something.
shim POOLSHIM_PROGRAMS=haproxy,cat POOLSHIM_LIVE_DIR="$PST_TMP" -- cat /dev/null 2>"$PST_TMP/idle"
[ ! -s "$PST_TMP/idle" ] && ! ls "$PST_TMP"/poolshim* >/dev/null 2>&1 &&
	pass "a listed program's run with no work writes no report" ||
	fail "idle listed cat: '$(head -3 "$PST_TMP/idle")' $(ls "$PST_TMP"/poolshim* 2>/dev/null)"
shim POOLSHIM_PROGRAMS=cat POOLSHIM_VERBOSE=on -- cat /dev/null 2>"$PST_TMP/idlev"
grep -q "^poolshim\[[0-9]*\] cat: no report: less than 64 calls and 1024 KiB of work, and POOLSHIM_PROGRAMS is set\$" "$PST_TMP/idlev" &&
	! grep -q '^==== poolshim report' "$PST_TMP/idlev" &&
	pass "verbose mode says why a listed program's idle run has no report" ||
	fail "idle listed cat, verbose: $(grep -v '^POOLSHIM' "$PST_TMP/idlev" | tail -3)"
# Its fork child that ends with exit() keeps its report, however little it
# did (as nginx's master, forked by the parent that daemonizes, does), so
# long as it did something: here one read (one that did nothing at all
# gets no text report, with or without the list: report_verdict.sh).
shim POOLSHIM_PROGRAMS=bash -- bash -c '(read -r x </etc/hostname; cat /dev/null; exit 3); echo "$$"' \
	>"$PST_TMP/fk.pid" 2>"$PST_TMP/fk"
n=$(grep -c '^==== poolshim report' "$PST_TMP/fk")
[ "$n" = 1 ] && ! grep -q "^==== poolshim report: pid $(cat "$PST_TMP/fk.pid") " "$PST_TMP/fk" &&
	pass "under the list a forked child's exit still reports; the idle parent does not" ||
	fail "bash subshell under the list: $n reports, parent $(cat "$PST_TMP/fk.pid"): $(grep '^====' "$PST_TMP/fk")"
shim -- cat /dev/null 2>"$PST_TMP/idle0"
grep -q "^==== poolshim report: pid [0-9]* (cat) ====" "$PST_TMP/idle0" &&
	pass "without POOLSHIM_PROGRAMS an idle run still reports" ||
	fail "idle cat without the list: $(head -3 "$PST_TMP/idle0")"

# An unlisted one: nothing on stderr, no live file; verbose says why.
shim POOLSHIM_PROGRAMS=nginx,haproxy -- sh -c 'ls /dev/shm/poolshim* 2>/dev/null | grep -c "\.$$\$"; true' \
	>"$PST_TMP/off.out" 2>"$PST_TMP/off"
[ ! -s "$PST_TMP/off" ] && [ "$(cat "$PST_TMP/off.out")" = 0 ] &&
	pass "an unlisted program writes nothing and has no live file" ||
	fail "unlisted sh: stderr '$(head -3 "$PST_TMP/off")', live files $(cat "$PST_TMP/off.out")"
shim POOLSHIM_PROGRAMS=nginx,haproxy POOLSHIM_VERBOSE=1 -- cat /dev/null 2>"$PST_TMP/v"
grep -q "^poolshim\[[0-9]*\] cat: left alone on purpose: POOLSHIM_PROGRAMS='nginx,haproxy' does not name 'cat'\$" "$PST_TMP/v" &&
	[ "$(wc -l <"$PST_TMP/v")" = 1 ] &&
	pass "verbose mode says the program was left alone" || fail "verbose unlisted: $(cat "$PST_TMP/v")"

# A listed parent's unlisted child is left alone; a listed child is not.
# (bash reads 2 MiB itself, work enough for a report under the list.)
tr '\0' a <"$PST_TMP/2m" >"$PST_TMP/2ma"
shim POOLSHIM_PROGRAMS=bash -- bash -c 'cat /dev/null; read -r -N 2097152 v <"$1"' bash "$PST_TMP/2ma" \
	2>"$PST_TMP/kid"
# (bash's forked child reports as bash when it execs cat: that part was listed.)
! grep -q '(cat) ====' "$PST_TMP/kid" && grep -q '(bash) ====' "$PST_TMP/kid" &&
	pass "an unlisted exec'd child of a listed parent is left alone" ||
	fail "sh then cat: $(grep '^====' "$PST_TMP/kid")"

# Malformed lists: nobody is shimmed; the program named hears why.
for list in '/bin/cat' 'nginx,,cat' 'cat;nginx' 'ca*'; do
	shim POOLSHIM_PROGRAMS="$list" -- cat /dev/null 2>"$PST_TMP/bad"
	if grep -q '^==== poolshim report' "$PST_TMP/bad"; then
		fail "POOLSHIM_PROGRAMS='$list' shimmed cat"
	elif ! grep -q "^poolshim\[[0-9]*\] cat: POOLSHIM_PROGRAMS='$(printf '%s' "$list" | sed 's/[*.]/\\&/g')' .*leaves this and every other program alone" "$PST_TMP/bad"; then
		fail "POOLSHIM_PROGRAMS='$list': no clear error: $(cat "$PST_TMP/bad")"
	else
		pass "POOLSHIM_PROGRAMS='$list' is refused"
	fi
done
# Where it names nobody, too: one line, else a typo shims nothing unseen.
shim POOLSHIM_PROGRAMS='nginx,' -- cat /dev/null 2>"$PST_TMP/bad2"
[ "$(wc -l <"$PST_TMP/bad2")" = 1 ] &&
	grep -q "^poolshim\[[0-9]*\] cat: POOLSHIM_PROGRAMS='nginx,' has an empty name; poolshim leaves this and every other program alone" "$PST_TMP/bad2" &&
	pass "a malformed list is said in one line where it names nobody" ||
	fail "malformed list, unnamed program: '$(cat "$PST_TMP/bad2")'"
# With the report off as well (issue 37): the list is still judged and said.
shim POOLSHIM_PROGRAMS='ngin*' POOLSHIM_STATS=off -- cat /dev/null 2>"$PST_TMP/bad3"
[ "$(wc -l <"$PST_TMP/bad3")" = 1 ] &&
	grep -q "^poolshim\[[0-9]*\] cat: POOLSHIM_PROGRAMS='ngin\*' has a character that is not part of a program name" "$PST_TMP/bad3" &&
	pass "a malformed list is said with POOLSHIM_STATS=off too" ||
	fail "malformed list, POOLSHIM_STATS=off: '$(cat "$PST_TMP/bad3")'"

# System calls of an unlisted program: no kind the program does not make
# itself, and no file opened but the libraries the loader maps.
if command -v strace >/dev/null 2>&1 && strace -o /dev/null true 2>/dev/null; then
	strace -f -o "$PST_TMP/plain" cat /dev/null
	strace -f -o "$PST_TMP/left" -E LD_PRELOAD="$SHIM" -E POOLSHIM_PROGRAMS=nginx cat /dev/null
	kinds() { sed -E -n 's/^[0-9]+ +([a-z_0-9]+)\(.*/\1/p' "$1" | sort -u; }
	extra=$(kinds "$PST_TMP/left" | comm -13 "$(kinds "$PST_TMP/plain" >"$PST_TMP/k"; echo "$PST_TMP/k")" -)
	files=$(grep -E '^[0-9]+ +open(at)?\(' "$PST_TMP/left" | grep -v -E '\.so[.0-9]*"' |
		sed -E 's/^[^"]*"([^"]*)".*/\1/' | sort -u |
		comm -23 - "$(grep -E '^[0-9]+ +open(at)?\(' "$PST_TMP/plain" | sed -E 's/^[^"]*"([^"]*)".*/\1/' | sort -u >"$PST_TMP/f"; echo "$PST_TMP/f")")
	[ -z "$extra" ] && [ -z "$files" ] &&
		pass "an unlisted program makes no system call of ours" ||
		fail "unlisted cat: extra system calls '$(echo $extra)', extra files '$(echo $files)'"
else
	echo "(strace absent or ptrace refused: system-call comparison not run)"
fi

# MALLOC_CONF and /etc/malloc.conf belong to the program's allocator.
out=$(MALLOC_CONF=abort_conf:true,bogus:1 shim POOLSHIM_STATS=off -- sh -c 'echo hi' 2>"$PST_TMP/mc")
rc=$?
[ "$rc" = 0 ] && [ "$out" = hi ] && [ ! -s "$PST_TMP/mc" ] &&
	pass "our jemalloc ignores MALLOC_CONF" || fail "MALLOC_CONF reached the shim: rc $rc, $(head -3 "$PST_TMP/mc")"
JE=$(ls /usr/lib/*-linux-gnu/libjemalloc.so.2 2>/dev/null | head -1)
if [ -n "$JE" ]; then
	# It aborts after the shim's pool took a buffer (the live file made): a
	# private live directory keeps the file it cannot remove out of /dev/shm.
	mkdir -p "$PST_TMP/live"
	MALLOC_CONF=abort_conf:true,bogus:1 env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$PST_TMP/live" \
		LD_PRELOAD="$SHIM $JE" sh -c 'echo hi' >/dev/null 2>"$PST_TMP/mc2"
	rc=$?
	[ "$rc" != 0 ] && grep -q 'bogus' "$PST_TMP/mc2" &&
		pass "the program's own jemalloc still reads MALLOC_CONF" ||
		fail "the program's jemalloc did not see MALLOC_CONF: rc $rc"
fi

# Log lines carry the pid and program.
shim POOLSHIM_URING=bogus POOLSHIM_STATS=off -- cat /dev/null 2>"$PST_TMP/log"
grep -q "^poolshim\[[0-9][0-9]*\] cat: POOLSHIM_URING='bogus' is not valid" "$PST_TMP/log" &&
	pass "log lines read poolshim[PID] PROGRAM:" || fail "log line: $(cat "$PST_TMP/log")"
finish
