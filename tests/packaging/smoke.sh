#!/bin/sh
# SPDX-License-Identifier: MIT
# The build's library and commands, as they get installed: libpoolshim.so
# preloaded into ordinary programs leaves their exit status and output
# alone, writes its report, and the poolshim, poolshim-stat and
# poolshim-report commands run.  Needs nothing beyond the library and tools,
# so it is the test a ./configure --disable-demo build (a package) runs.
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
[ -r "$SHIM" ] || { fail "$SHIM not built"; finish; }

env LD_PRELOAD="$SHIM" POOLSHIM_STATS=off true 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && [ ! -s "$PST_TMP/err" ] && pass "true under the shim: exit 0, quiet" ||
	fail "true under the shim: exit $rc, stderr: $(head -c 300 "$PST_TMP/err")"
env LD_PRELOAD="$SHIM" POOLSHIM_STATS=off false 2>/dev/null
rc=$?
[ $rc = 1 ] && pass "false under the shim: exit 1" || fail "false under the shim: exit $rc"

# A large buffer through a pipe: the data arrive intact and the report is written.
head -c 3000000 /dev/urandom >"$PST_TMP/in"
LD_PRELOAD="$SHIM" POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/r.json" \
	sh -c 'cat "$1" | cat >"$2"' sh "$PST_TMP/in" "$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
if [ $rc = 0 ] && cmp -s "$PST_TMP/in" "$PST_TMP/out" && [ -s "$PST_TMP/r.json" ]; then
	pass "cat pipeline under the shim: same bytes, report written"
else
	fail "cat pipeline under the shim: exit $rc, $(cat "$PST_TMP/err")"
fi

v=$("$PS" --version 2>&1) && echo "$v" | grep -q '^poolshim [0-9]' &&
	pass "poolshim --version: $v" || fail "poolshim --version: $v"
# (ls exits with exit(), so the report is written; dash's own exit is _exit.)
POOLSHIM_LIBRARY="$SHIM" "$PS" POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/run.json" \
	-- ls "$PST_TMP/nonexistent" 2>"$PST_TMP/err"
rc=$?
[ $rc = 2 ] && [ -s "$PST_TMP/run.json" ] && pass "poolshim ls (a missing file): exit 2, report written" ||
	fail "poolshim ls (a missing file): exit $rc, $(cat "$PST_TMP/err")"
"$PS" stat --help >"$PST_TMP/out" 2>&1 && grep -q 'usage: poolshim stat' "$PST_TMP/out" &&
	pass "poolshim stat --help" || fail "poolshim stat --help: $(cat "$PST_TMP/out")"
if command -v python3 >/dev/null; then
	"$PS" report "$PST_TMP/run.json" >"$PST_TMP/out" 2>&1 && grep -q '^==== ' "$PST_TMP/out" &&
		pass "poolshim report on the report" || fail "poolshim report: $(head -5 "$PST_TMP/out")"
fi
finish
