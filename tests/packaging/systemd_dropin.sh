#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim systemd UNIT VAR=VALUE ...`: the drop-in it prints passes
# `systemd-analyze verify` next to a test unit without a complaint, and
# systemd reads back the environment we meant: LD_PRELOAD, a value with
# %p (which must stay %p for the shim, not become the unit's prefix), one
# with blanks, quotes and a backslash; POOLSHIM_RUN, the unit's name made
# an identifier, and the ExecStopPost= that collects that run's reports
# (issue 34); no LimitMEMLOCK= unless --memlock asks (the shim registers
# nothing); the shim leaves that collector alone although it runs with the
# unit's LD_PRELOAD.  Bad unit names and variables the shim does not read are
# refused with status 2 (names judged by shim/format/config.c's table, as
# values are); --install --root writes the file by rename.  A
# POOLSHIM_STATS path under /var/log gets LogsDirectory= (systemd makes the
# directory and gives it to the unit's User=); one whose directory does not
# exist, or a relative one, is refused (issue 46).
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
[ -x "$PS" ] || { fail "$PS not built"; finish; }
SA=$(command -v systemd-analyze) || skip "systemd-analyze not installed (apt-get install systemd)"
unset POOLSHIM_LIBRARY

# The variables the command accepts are the shim's option table, less the
# rows under #ifdef PS_TEST_HOOKS (the fault injection only the test build
# of the library has; refused below): each name of it, given a value,
# is never refused as a variable the shim does not read (a value may be
# refused; POOLSHIM_RUN is the drop-in's own).
awk '/^#ifdef PS_TEST_HOOKS/ { t = 1 } !t; /^#endif/ { t = 0 }' "$PS_TOP_SRCDIR/shim/format/config.c" |
	grep -o '{ "POOLSHIM[A-Z_]*"' | tr -d '{ "' | sort >"$PST_TMP/table"
n=0 refused=''
while read -r name; do
	[ "$name" = POOLSHIM_RUN ] && continue
	n=$((n + 1))
	"$PS" systemd pstest "$name=1" >/dev/null 2>"$PST_TMP/err1"
	! grep -q 'not a variable the shim reads' "$PST_TMP/err1" || refused="$refused $name"
done <"$PST_TMP/table"
if [ "$n" -ge 30 ] && [ -z "$refused" ]; then
	pass "every variable of shim/format/config.c's table ($n) is accepted as a name"
else
	fail "table of $n names; refused as unknown:$refused"
fi

# verify_unit NAME DROPIN [LINE]: NAME.service (ExecStart=/bin/true, and
# LINE in [Service]) with DROPIN as its poolshim.conf, verified; the
# settings dump goes to $PST_TMP/dump.
units="$PST_TMP/units"
verify_unit() {
	rm -rf "$units"
	mkdir -p "$units/$1.service.d"
	printf '[Unit]\nDescription=poolshim test\n[Service]\nExecStart=/bin/true\n%s\n' "${3:-}" >"$units/$1.service"
	cp "$2" "$units/$1.service.d/poolshim.conf"
	SYSTEMD_UNIT_PATH="$units:" "$SA" verify "$units/$1.service" >"$PST_TMP/verify" 2>&1
	vrc=$?
	SYSTEMD_LOG_LEVEL=debug SYSTEMD_UNIT_PATH="$units:" "$SA" verify "$units/$1.service" \
		>"$PST_TMP/dump" 2>&1
	# Only this unit's block: its Environment: and LimitMEMLOCK: lines.
	sed -n "/-> Unit $1.service:/,/-> Unit /p" "$PST_TMP/dump" | sed -n 's/^[[:space:]]*//p' >"$PST_TMP/settings"
}

odd='/tmp/a b\c"d'"'e"
"$PS" systemd pstest POOLSHIM_STATS='/tmp/r.%p' POOLSHIM_PROGRAMS=nginx,haproxy \
	POOLSHIM_DEBUGINFO_PATH="$odd" POOLSHIM_POOL_SIZE=1G \
	>"$PST_TMP/d1" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && grep -q '^\[Service\]$' "$PST_TMP/d1" && pass "drop-in printed" ||
	fail "poolshim systemd: exit $rc: $(cat "$PST_TMP/err")"
grep -qx 'Environment=POOLSHIM_STATS=/tmp/r.%%p' "$PST_TMP/d1" &&
	pass "% written as %% in the drop-in" || fail "no %%p line: $(grep STATS "$PST_TMP/d1")"

verify_unit pstest "$PST_TMP/d1"
if [ $vrc = 0 ] && ! grep -q 'pstest' "$PST_TMP/verify"; then
	pass "systemd-analyze verify: no complaint"
else
	fail "systemd-analyze verify (exit $vrc): $(cat "$PST_TMP/verify")"
fi
lib=$(sed -n 's/^Environment=LD_PRELOAD=//p' "$PST_TMP/d1")
case $lib in
/*/libpoolshim.so) [ "$lib" != "$SHIM" ] && pass "LD_PRELOAD is the installed library ($lib)" ||
	fail "LD_PRELOAD is the build tree's ($lib)" ;;
*) fail "LD_PRELOAD line: '$lib'" ;;
esac
printf '%s\n' "Environment: LD_PRELOAD=$lib" 'Environment: POOLSHIM_STATS=/tmp/r.%p' \
	'Environment: POOLSHIM_PROGRAMS=nginx,haproxy' "Environment: POOLSHIM_DEBUGINFO_PATH=$odd" \
	'Environment: POOLSHIM_POOL_SIZE=1G' 'Environment: POOLSHIM_RUN=pstest' >"$PST_TMP/want"
grep '^Environment: ' "$PST_TMP/settings" >"$PST_TMP/got"
if cmp -s "$PST_TMP/want" "$PST_TMP/got"; then
	pass "systemd reads the environment back as given (%p literal, quotes, backslash)"
else
	fail "environment as systemd reads it: $(diff "$PST_TMP/want" "$PST_TMP/got" | tr '\n' '|')"
fi
! grep -q '^LimitMEMLOCK' "$PST_TMP/d1" && pass "no LimitMEMLOCK= without --memlock" ||
	fail "LimitMEMLOCK without --memlock: $(grep LimitMEMLOCK "$PST_TMP/d1")"
# The collect step: the installed poolshim-collect, for this unit's run, as
# root, its failure no failure of the unit.
grep -qx 'ExecStopPost=-+/.*/poolshim-collect --run pstest --user %u' "$PST_TMP/d1" &&
	grep -A1 'ExecStopPost:' "$PST_TMP/dump" | grep -q 'Command Line: /.*/poolshim-collect --run pstest --user [^ ]*$' &&
	pass "ExecStopPost= collects the run pstest, and systemd reads it" ||
	fail "ExecStopPost: $(grep ExecStopPost "$PST_TMP/d1") / $(grep -i 'ExecStopPost' "$PST_TMP/dump")"
# The collector runs with the unit's environment, LD_PRELOAD included: the
# shim leaves poolshim's own tools alone (no record, no report of its own).
if [ -r "$SHIM" ] && [ -x "$PS_TOP_BUILDDIR/tools/poolshim-stat" ]; then
	mkdir "$PST_TMP/live"
	env LD_PRELOAD="$SHIM" POOLSHIM_RUN=pstest POOLSHIM_LIVE_DIR="$PST_TMP/live" \
		"$PS_TOP_BUILDDIR/tools/poolshim-stat" --live-dir "$PST_TMP/live" >/dev/null 2>"$PST_TMP/err"
	[ -z "$(ls "$PST_TMP/live")" ] && ! grep -q 'poolshim report' "$PST_TMP/err" &&
		pass "a poolshim-* tool under the unit's LD_PRELOAD runs without the shim" ||
		fail "poolshim-stat under the shim: records $(ls "$PST_TMP/live"), $(cat "$PST_TMP/err")"
fi
# Unit names that are no identifiers: a template, an escaped path.
# jemalloc's placement: the library beside, as for a program run by poolshim.
"$PS" systemd pstest POOLSHIM_POOL_ALLOCATOR=jemalloc 2>/dev/null |
	grep -q '^Environment=LD_PRELOAD=/.*/libpoolshim-jemalloc\.so$' &&
	pass "POOLSHIM_POOL_ALLOCATOR=jemalloc: LD_PRELOAD names libpoolshim-jemalloc.so" ||
	fail "POOLSHIM_POOL_ALLOCATOR=jemalloc: $("$PS" systemd pstest POOLSHIM_POOL_ALLOCATOR=jemalloc 2>&1 | grep LD_PRELOAD)"
"$PS" systemd 'pstest@' 2>/dev/null | grep -qx 'Environment=POOLSHIM_RUN=pstest_' &&
	"$PS" systemd 'srv-a\x2db:c' 2>/dev/null | grep -qx 'Environment=POOLSHIM_RUN=srv-a_x2db_c' &&
	pass "POOLSHIM_RUN from a template's and an escaped unit's name: [A-Za-z0-9._-] only" ||
	fail "POOLSHIM_RUN of odd names: $("$PS" systemd 'pstest@' 2>&1 | grep RUN) $("$PS" systemd 'srv-a\x2db:c' 2>&1 | grep RUN)"

"$PS" systemd pstest.service --memlock 3000001K >"$PST_TMP/d2" 2>/dev/null
verify_unit pstest "$PST_TMP/d2"
[ $vrc = 0 ] && grep -qx 'LimitMEMLOCK: 3072001024' "$PST_TMP/settings" &&
	pass "--memlock 3000001K" ||
	fail "--memlock 3000001K: $(grep LimitMEMLOCK "$PST_TMP/settings") $(cat "$PST_TMP/verify")"
"$PS" systemd pstest --memlock infinity >"$PST_TMP/d3" 2>/dev/null
verify_unit pstest "$PST_TMP/d3"
[ $vrc = 0 ] && grep -qx 'LimitMEMLOCK: 18446744073709551615' "$PST_TMP/settings" && pass "--memlock infinity" ||
	fail "--memlock infinity: $(grep LimitMEMLOCK "$PST_TMP/settings")"

# With or without .service, the same drop-in; a template too.
"$PS" systemd pstest >"$PST_TMP/a" 2>/dev/null
"$PS" systemd pstest.service >"$PST_TMP/b" 2>/dev/null
sed 1,2d "$PST_TMP/a" >"$PST_TMP/a2"
sed 1,2d "$PST_TMP/b" >"$PST_TMP/b2"
cmp -s "$PST_TMP/a2" "$PST_TMP/b2" && pass "UNIT and UNIT.service: same drop-in" ||
	fail "UNIT and UNIT.service differ"
"$PS" systemd 'pstest@.service' >/dev/null 2>&1 && pass "template unit accepted" || fail "template unit refused"

# Refusals: status 2 and a line saying why.
refuse() {
	what=$1
	shift
	"$PS" systemd "$@" >"$PST_TMP/out" 2>"$PST_TMP/err"
	rc=$?
	if [ $rc = 2 ] && [ ! -s "$PST_TMP/out" ] && grep -q 'poolshim systemd: ' "$PST_TMP/err"; then
		pass "refused: $what ($(head -1 "$PST_TMP/err"))"
	else
		fail "$what: exit $rc, out $(head -c 200 "$PST_TMP/out"), err $(cat "$PST_TMP/err")"
	fi
}
refuse "a socket unit" nginx.socket
refuse "a name with /" 'a/b'
refuse "a name with a blank" 'a b'
refuse "two @" 'a@b@c'
refuse "no unit" POOLSHIM_VERBOSE=1
refuse "an unknown POOLSHIM_ variable" pstest POOLSHIM_POOLSIZE=1G
refuse "a variable that is not the shim's" pstest MALLOC_CONF=junk:true
refuse "LD_PRELOAD" pstest LD_PRELOAD=/x.so
refuse "POOLSHIM_RUN (the drop-in's own)" pstest POOLSHIM_RUN=x
# The test build's fault injection is no variable of the shipped library.
refuse "POOLSHIM_URING_TEST, which only the test build reads" pstest POOLSHIM_URING_TEST=keepfd
grep -q 'POOLSHIM_URING_TEST is not a variable the shim reads' "$PST_TMP/err" &&
	pass "POOLSHIM_URING_TEST refused as an unknown variable" ||
	fail "POOLSHIM_URING_TEST: $(cat "$PST_TMP/err")"
refuse "a misspelt variable" pstest POOLSHIM_POOL_CACH=8M
grep -q 'POOLSHIM_POOL_CACH is not a variable the shim reads: did you mean POOLSHIM_POOL_CACHE?' "$PST_TMP/err" &&
	pass "a misspelt variable: the shim's own suggestion" ||
	fail "POOLSHIM_POOL_CACH: $(cat "$PST_TMP/err")"
refuse "a variable in the wrong case" pstest poolshim_stats=/tmp/r
refuse "a pool size the shim refuses" pstest POOLSHIM_POOL_SIZE=64G
refuse "a line break in a value" pstest "POOLSHIM_STATS=/tmp/a
b"

# Reports where the unit's user can write them (issue 46): under /var/log
# the drop-in asks systemd for the directory (LogsDirectory=, made at each
# start and given to the unit's User=); elsewhere the directory must exist.
# A path whose reports would be lost is refused, in one line, status 2.
for v in /var/log/poolshim/%e-%p.json:poolshim /var/log/poolshim/nginx/%p.json:poolshim/nginx; do
	"$PS" systemd pstest "POOLSHIM_STATS=${v%:*}" >"$PST_TMP/d4" 2>/dev/null
	verify_unit pstest "$PST_TMP/d4" 'User=daemon'
	if [ $vrc = 0 ] && grep -qx "LogsDirectory=${v#*:}" "$PST_TMP/d4" &&
		grep -qx "LogsDirectory: ${v#*:}" "$PST_TMP/settings" && grep -qx 'User: daemon' "$PST_TMP/settings"; then
		pass "POOLSHIM_STATS=${v%:*}: LogsDirectory=${v#*:}, as systemd reads it for a User=daemon unit"
	else
		fail "POOLSHIM_STATS=${v%:*}: $(grep -i logsdirectory "$PST_TMP/d4" "$PST_TMP/settings" | tr '\n' ' ') verify $vrc: $(cat "$PST_TMP/verify")"
	fi
done
if ! grep -q '^LogsDirectory' "$PST_TMP/d1" &&
	grep -q "^# The reports' directory, /tmp, is not made by the drop-in" "$PST_TMP/d1"; then
	pass "POOLSHIM_STATS=/tmp/r.%p: no LogsDirectory=, and the drop-in says /tmp must stay writable"
else
	fail "POOLSHIM_STATS=/tmp/r.%p: $(grep -i 'logsdirectory\|reports' "$PST_TMP/d1" | tr '\n' ' ')"
fi
refuse1() {
	refuse "$@"
	[ "$(wc -l <"$PST_TMP/err")" = 1 ] || fail "$1: not one line: $(cat "$PST_TMP/err")"
}
refuse1 "a report directory that does not exist" pstest POOLSHIM_STATS=/nonexistent/dir/r.%p.json
refuse1 "a relative report path" pstest POOLSHIM_STATS=r.json
refuse1 "%e in the report directory" pstest 'POOLSHIM_STATS=/var/log/%e/r.json'
refuse1 ".. in the report directory" pstest POOLSHIM_STATS=/var/log/poolshim/../../tmp/r.json
refuse1 "a /var/log directory LogsDirectory= cannot name" pstest 'POOLSHIM_STATS=/var/log/a b/r.json'
# With --root, the directory is looked for in that root (an image being
# built): refused while it is missing there, taken once it is made.
root="$PST_TMP/root"
"$PS" systemd pstest POOLSHIM_STATS=/srv/psreports/r.json --install --root "$root" >/dev/null 2>"$PST_TMP/err"
rc1=$?
mkdir -p "$root/srv/psreports"
"$PS" systemd pstest POOLSHIM_STATS=/srv/psreports/r.json --install --root "$root" >/dev/null 2>&1
rc2=$?
if [ $rc1 = 2 ] && grep -q "$root/srv/psreports does not exist" "$PST_TMP/err" && [ $rc2 = 0 ] &&
	grep -qx 'Environment=POOLSHIM_STATS=/srv/psreports/r.json' "$root/etc/systemd/system/pstest.service.d/poolshim.conf"; then
	pass "--root: a report directory missing in the root refused, taken once it is there"
else
	fail "--root: exit $rc1 ($(cat "$PST_TMP/err")) while missing, $rc2 once made"
fi
rm -rf "$root"

# --install --root: the file appears by rename (a new inode each time),
# with what the command prints, and no temporary file is left.
root="$PST_TMP/root"
"$PS" systemd pstest POOLSHIM_PROGRAMS=nginx --install --root "$root" >"$PST_TMP/out" 2>/dev/null
rc=$?
f="$root/etc/systemd/system/pstest.service.d/poolshim.conf"
"$PS" systemd pstest POOLSHIM_PROGRAMS=nginx 2>/dev/null | sed 2d >"$PST_TMP/printed"
if [ $rc = 0 ] && [ -f "$f" ] && sed 2d "$f" | cmp -s - "$PST_TMP/printed" &&
	grep -qF "$f" "$PST_TMP/out" && grep -q 'systemctl daemon-reload' "$PST_TMP/out"; then
	pass "--install --root wrote $f and says to daemon-reload"
else
	fail "--install: exit $rc, $(cat "$PST_TMP/out"), file: $(ls -l "$f" 2>&1)"
fi
ino1=$(stat -c %i "$f" 2>/dev/null)
"$PS" systemd pstest POOLSHIM_PROGRAMS=haproxy --install --root "$root" >/dev/null 2>&1
ino2=$(stat -c %i "$f" 2>/dev/null)
left=$(find "$root" -name '.poolshim*' | wc -l)
if [ -n "$ino1" ] && [ "$ino1" != "$ino2" ] && grep -qx 'Environment=POOLSHIM_PROGRAMS=haproxy' "$f" &&
	[ "$left" = 0 ] && [ "$(stat -c %a "$f")" = 644 ]; then
	pass "--install again: replaced by rename (inode $ino1 -> $ino2), mode 644, no temporary left"
else
	fail "--install again: inode $ino1 -> $ino2, $left temporaries, $(cat "$f")"
fi
finish
