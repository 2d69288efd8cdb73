#!/bin/sh
# SPDX-License-Identifier: MIT
# The `poolshim` command's own conveniences: run from a build tree it finds
# .libs/libpoolshim.so by itself; it puts the library in LD_PRELOAD once,
# first, also when it is already there (or another copy is); --print-env
# and --dry-run say what it would do, quoted for sh, and run nothing;
# --version names the jemalloc and liburing it was built with; and its own
# POOLSHIM_LIBRARY does not reach the program, whose shim would otherwise
# warn about an unknown variable.
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
[ -x "$PS" ] || { fail "$PS not built"; finish; }
[ -r "$SHIM" ] || { fail "$SHIM not built"; finish; }
unset POOLSHIM_LIBRARY LD_PRELOAD

# count_shim LIST: how many entries of an LD_PRELOAD value are libpoolshim.so.
count_shim() {
	printf '%s\n' "$1" | tr ': ' '\n\n' | grep -c 'libpoolshim\.so$'
}

# Build tree: no POOLSHIM_LIBRARY, called by its path from elsewhere.
out=$(cd / && "$PS" --print-env)
[ "$out" = "LD_PRELOAD=$SHIM" ] && pass "build tree: finds $SHIM" ||
	fail "build tree: --print-env says '$out', not LD_PRELOAD=$SHIM"
(cd "$PST_TMP" && "$PS" POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/bt.json" true) 2>"$PST_TMP/err"
[ $? = 0 ] && [ -s "$PST_TMP/bt.json" ] && pass "build tree: a program runs under its library (report written)" ||
	fail "build tree run: $(cat "$PST_TMP/err")"

# Already in LD_PRELOAD: once, first, the others kept in order.  (The
# command's own shell then runs under that LD_PRELOAD too: reports off, and
# a harmless real library as the other one.)
other=$(ls /lib/*/libdl.so.2 /usr/lib/*/libdl.so.2 2>/dev/null | head -1)
[ -n "$other" ] || other=$(ls /lib/*/libm.so.6 /usr/lib/*/libm.so.6 2>/dev/null | head -1)
export POOLSHIM_STATS=off
out=$(LD_PRELOAD="$SHIM" "$PS" --print-env 2>/dev/null)
[ "$out" = "LD_PRELOAD=$SHIM" ] && pass "already in LD_PRELOAD: named once" ||
	fail "already in LD_PRELOAD: '$out'"
out=$(LD_PRELOAD="$other:$SHIM $other" "$PS" --print-env 2>"$PST_TMP/err")
[ "$out" = "LD_PRELOAD=$SHIM:$other:$other" ] && [ ! -s "$PST_TMP/err" ] &&
	pass "after another library: moved first, once, quietly" ||
	fail "after another library: '$out' $(cat "$PST_TMP/err")"
# What the program really gets (it runs under the shim, so LD_PRELOAD is what the loader used).
got=$(LD_PRELOAD="$SHIM" "$PS" POOLSHIM_STATS=off sh -c 'printf %s "$LD_PRELOAD"' 2>/dev/null)
[ "$(count_shim "$got")" = 1 ] && pass "the program's LD_PRELOAD names the shim once ($got)" ||
	fail "the program's LD_PRELOAD: '$got'"
# Another copy of the library (another path): replaced, and said so.
mkdir -p "$PST_TMP/copy"
cp "$SHIM" "$PST_TMP/copy/libpoolshim.so"
out=$(LD_PRELOAD="$PST_TMP/copy/libpoolshim.so" "$PS" --print-env 2>"$PST_TMP/err")
[ "$out" = "LD_PRELOAD=$SHIM" ] && grep -q "LD_PRELOAD named $PST_TMP/copy/libpoolshim.so" "$PST_TMP/err" &&
	pass "another copy in LD_PRELOAD: replaced, with a note" ||
	fail "another copy: '$out' $(cat "$PST_TMP/err")"

unset POOLSHIM_STATS

# --print-env: VAR=VALUE lines that sh reads back to the same values.
val="/tmp/r.%p it's \$HOME *"
"$PS" --print-env POOLSHIM_STATS="$val" POOLSHIM_VERBOSE=1 >"$PST_TMP/env" 2>"$PST_TMP/err"
rc=$?
n=$(wc -l <"$PST_TMP/env")
back=$(set -f; eval "$(cat "$PST_TMP/env")"; printf '%s|%s|%s' "$LD_PRELOAD" "$POOLSHIM_STATS" "$POOLSHIM_VERBOSE")
if [ $rc = 0 ] && [ "$n" = 3 ] && [ "$back" = "$SHIM|$val|1" ]; then
	pass "--print-env: 3 lines, sh reads them back ($(sed -n 2p "$PST_TMP/env"))"
else
	fail "--print-env: exit $rc, $n lines, read back '$back': $(cat "$PST_TMP/env" "$PST_TMP/err")"
fi

# --dry-run: prints a command line, runs nothing; that line does the same.
"$PS" --dry-run POOLSHIM_STATS=off -- touch "$PST_TMP/ran" >"$PST_TMP/line" 2>"$PST_TMP/err"
[ $? = 0 ] && [ ! -e "$PST_TMP/ran" ] && grep -q "^env LD_PRELOAD=$SHIM POOLSHIM_STATS=off touch " "$PST_TMP/line" &&
	pass "--dry-run: prints $(cut -c1-60 "$PST_TMP/line")..., runs nothing" ||
	fail "--dry-run: $(cat "$PST_TMP/line" "$PST_TMP/err"), ran: $(ls "$PST_TMP/ran" 2>&1)"
"$PS" --dry-run POOLSHIM_STATS=off printf '<%s>' "a  b" "it's" '$x' >"$PST_TMP/line" 2>/dev/null
want=$(printf '<%s>' "a  b" "it's" '$x')
got=$(sh -c "$(cat "$PST_TMP/line")" 2>/dev/null)
[ "$got" = "$want" ] && pass "--dry-run's line, run by sh, passes the same arguments" ||
	fail "--dry-run line '$(cat "$PST_TMP/line")' gives '$got', not '$want'"

# POOLSHIM_POOL_ALLOCATOR=jemalloc: the library with jemalloc, the one beside it.
"$PS" --print-env POOLSHIM_POOL_ALLOCATOR=jemalloc >"$PST_TMP/env" 2>"$PST_TMP/err"
want="LD_PRELOAD=${SHIM%/*}/libpoolshim-jemalloc.so"
if grep -qx "$want" "$PST_TMP/env" && [ -r "${SHIM%/*}/libpoolshim-jemalloc.so" ]; then
	pass "POOLSHIM_POOL_ALLOCATOR=jemalloc preloads libpoolshim-jemalloc.so"
else
	fail "POOLSHIM_POOL_ALLOCATOR=jemalloc: $(cat "$PST_TMP/env" "$PST_TMP/err"), wanted $want"
fi

# --version: the built-in versions, substituted.
"$PS" --version >"$PST_TMP/v" 2>&1
ur=$(pkg-config --modversion liburing 2>/dev/null)
if ! grep -q '@' "$PST_TMP/v" && grep -q '^poolshim [0-9]' "$PST_TMP/v" &&
	grep -Eq 'jemalloc [0-9]+\.[0-9]+' "$PST_TMP/v" && grep -Eq 'liburing [0-9]+\.[0-9]+' "$PST_TMP/v" &&
	{ [ -z "$ur" ] || grep -q "liburing $ur\$" "$PST_TMP/v"; }; then
	pass "--version: $(tr '\n' ' ' <"$PST_TMP/v")"
else
	fail "--version: $(cat "$PST_TMP/v")"
fi

# POOLSHIM_LIBRARY, from the environment or as VAR=VALUE, stays with the command.
POOLSHIM_LIBRARY="$SHIM" "$PS" POOLSHIM_VERBOSE=1 POOLSHIM_STATS=off env >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
if [ $rc = 0 ] && ! grep -q '^POOLSHIM_LIBRARY=' "$PST_TMP/out" && grep -q '^POOLSHIM_VERBOSE=1' "$PST_TMP/out" &&
	! grep -q 'unknown variable' "$PST_TMP/err"; then
	pass "POOLSHIM_LIBRARY in the environment: not passed on, no unknown-variable warning"
else
	fail "POOLSHIM_LIBRARY: exit $rc, $(grep -h 'POOLSHIM_LIBRARY\|unknown' "$PST_TMP/out" "$PST_TMP/err")"
fi
"$PS" POOLSHIM_LIBRARY="$SHIM" POOLSHIM_VERBOSE=1 POOLSHIM_STATS=off env >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && ! grep -q '^POOLSHIM_LIBRARY=' "$PST_TMP/out" && ! grep -q 'unknown variable' "$PST_TMP/err" &&
	pass "POOLSHIM_LIBRARY=... as an argument: chooses the library, not passed on" ||
	fail "POOLSHIM_LIBRARY argument: exit $rc, $(grep -h 'POOLSHIM_LIBRARY\|unknown' "$PST_TMP/out" "$PST_TMP/err")"
finish
