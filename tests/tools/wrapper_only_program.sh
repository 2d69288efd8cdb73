#!/bin/sh
# SPDX-License-Identifier: MIT
# The tools around the shim do what they say, no more, no less:
# - the `poolshim` command runs nothing under the shim but the program it
#   starts (--dry-run used to run its quoting sed preloaded: a "(sed)"
#   report on stderr, a stray ps-sed-PID.json for `poolshim report` to merge);
# - a static-pie binary (Debian 12's /sbin/ldconfig) gets the warning a
#   static one gets;
# - `poolshim systemd` refuses a value the shim would refuse (its own
#   parser judges, through poolshim-stat --check-config), and for a
#   template unit tells to restart an instance, not the template.
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
[ -x "$PS" ] || { fail "$PS not built"; finish; }
unset POOLSHIM_LIBRARY LD_PRELOAD

# --dry-run: no report from anything, no file in the report directory.
mkdir "$PST_TMP/r"
out=$("$PS" --dry-run POOLSHIM_STATS="$PST_TMP/r/ps-%e-%p.json" -- echo 'a b' 2>"$PST_TMP/err")
[ "$out" = "env LD_PRELOAD=$SHIM POOLSHIM_STATS=$PST_TMP/r/ps-%e-%p.json echo 'a b'" ] &&
	[ -z "$(ls "$PST_TMP/r")" ] && [ ! -s "$PST_TMP/err" ] &&
	pass "--dry-run runs nothing under the shim" ||
	fail "--dry-run: '$out', reports: '$(ls "$PST_TMP/r")', stderr: $(head -3 "$PST_TMP/err")"

# A run: the program's report only (the warnings' file/readelf are not shimmed).
"$PS" POOLSHIM_STATS="$PST_TMP/r/ps-%e-%p.json" -- cat /dev/null 2>"$PST_TMP/err"
n=$(ls "$PST_TMP/r" | grep -c .)
[ "$n" = 1 ] && ls "$PST_TMP/r" | grep -q '^ps-cat-[0-9]*\.json$' &&
	pass "a run writes the program's report and no other" ||
	fail "a run left: $(ls "$PST_TMP/r" | tr '\n' ' ') $(head -3 "$PST_TMP/err")"

# static-pie
if command -v file >/dev/null 2>&1 && file -L /sbin/ldconfig 2>/dev/null | grep -q 'static-pie linked'; then
	"$PS" POOLSHIM_STATS=off -- /sbin/ldconfig -p >/dev/null 2>"$PST_TMP/err"
	grep -q "^poolshim: warning: /sbin/ldconfig is statically linked" "$PST_TMP/err" &&
		pass "a static-pie program is said to be out of reach" ||
		fail "static-pie /sbin/ldconfig: no warning: $(cat "$PST_TMP/err")"
else
	echo "(no static-pie /sbin/ldconfig here: that check not run)"
fi

# systemd: values judged by the shim's parser.
for bad in POOLSHIM_HUGEPAGES=huge POOLSHIM_URING_DEPTH=0 POOLSHIM_STATS_FORMAT=xml \
	POOLSHIM_DUMP_SIGNAL=KILL POOLSHIM_PROGRAMS=/usr/sbin/nginx POOLSHIM_PREFAULT=maybe; do
	"$PS" systemd nginx "$bad" >"$PST_TMP/out" 2>"$PST_TMP/err"
	rc=$?
	[ $rc = 2 ] && [ ! -s "$PST_TMP/out" ] &&
		grep -q "^poolshim systemd: ${bad%%=*}='${bad#*=}' " "$PST_TMP/err" &&
		pass "systemd refuses $bad" ||
		fail "systemd $bad: rc=$rc, stderr: $(cat "$PST_TMP/err")"
done
"$PS" systemd nginx POOLSHIM_HUGEPAGES=thp POOLSHIM_URING_DEPTH=8 POOLSHIM_PROGRAMS=nginx,haproxy \
	>"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && grep -q '^Environment=POOLSHIM_HUGEPAGES=thp$' "$PST_TMP/out" &&
	pass "systemd takes good values" || fail "systemd good values: rc=$rc $(cat "$PST_TMP/err")"

# A template: restart an instance.
"$PS" systemd nginx@.service --install --root "$PST_TMP/root" >"$PST_TMP/out" 2>/dev/null
rc=$?
[ $rc = 0 ] && [ -f "$PST_TMP/root/etc/systemd/system/nginx@.service.d/poolshim.conf" ] &&
	grep -q 'systemctl restart nginx@INSTANCE\.service' "$PST_TMP/out" &&
	! grep -q 'restart nginx@\.service' "$PST_TMP/out" &&
	pass "a template unit: restart each instance" || fail "template: rc=$rc $(cat "$PST_TMP/out")"
finish
