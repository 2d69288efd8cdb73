#!/bin/sh
# SPDX-License-Identifier: MIT
# The fortified entry points (__read_chk, __pread_chk, __pread64_chk,
# __recv_chk, __recvfrom_chk) of a program built with -D_FORTIFY_SOURCE=2:
# calls that fit work under the shim, and one that overflows its buffer
# aborts with SIGABRT and "buffer overflow detected" before reading
# anything, exactly as without the shim.  The shim must also count them.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/io_fortify"

syms=$(nm -u "$H" 2>/dev/null | grep -Eo '__(read|pread|pread64|recv|recvfrom)_chk' | sort -u | tr '\n' ' ')
for s in __read_chk __pread_chk __pread64_chk __recv_chk __recvfrom_chk; do
	case " $syms" in
	*" $s "*) ;;
	*) skip "the compiler did not emit $s (have: $syms); CFLAGS without optimization?" ;;
	esac
done
pass "helper references $syms"

# fits: identical output with and without the shim
"$H" ok >"$PST_TMP/ok.plain" 2>&1 || fail "without the shim: $(cat "$PST_TMP/ok.plain")"
shim "POOLSHIM_STATS=$PST_TMP/ok.json" -- "$H" ok >"$PST_TMP/ok.shim" 2>&1 || fail "under the shim: $(cat "$PST_TMP/ok.shim")"
grep -q "fortify ok" "$PST_TMP/ok.shim" && pass "fitting calls under the shim" || fail "fitting calls: $(cat "$PST_TMP/ok.shim")"
if [ -s "$PST_TMP/ok.json" ]; then
	# the report may name the fortified entry or the plain call it stands
	# for; pread64 is pread on 64-bit, so the two may share one row
	count() { json_get "$PST_TMP/ok.json" "sum(c['calls'] for c in r['calls'] if c['call'] in ($1))" 2>&1; }
	for c in read recv recvfrom; do
		v=$(count "'$c', '__${c}_chk'")
		[ "$v" -ge 1 ] 2>/dev/null && pass "__${c}_chk counted ($v)" || fail "__${c}_chk not counted: $v"
	done
	v=$(count "'pread', 'pread64', '__pread_chk', '__pread64_chk'")
	[ "$v" -ge 2 ] 2>/dev/null && pass "__pread_chk and __pread64_chk counted ($v)" || fail "__pread(64)_chk not counted: $v"
else
	fail "no report"
fi

# overflow: same fate, same message, nothing consumed
for c in read pread pread64 recv recvfrom; do
	"$H" overflow "$c" >"$PST_TMP/$c.plain" 2>"$PST_TMP/$c.plain.err"
	shim POOLSHIM_STATS=off -- "$H" overflow "$c" >"$PST_TMP/$c.shim" 2>"$PST_TMP/$c.shim.err"
	if cmp -s "$PST_TMP/$c.plain" "$PST_TMP/$c.shim" && grep -q "killed by signal $(kill -l ABRT 2>/dev/null || echo 6)\|signal 6" "$PST_TMP/$c.shim" &&
	   grep -q "buffer overflow detected" "$PST_TMP/$c.shim.err"; then
		pass "$c overflow: $(cat "$PST_TMP/$c.shim")"
	else
		fail "$c overflow: shim '$(cat "$PST_TMP/$c.shim")' [$(cat "$PST_TMP/$c.shim.err")], without '$(cat "$PST_TMP/$c.plain")' [$(cat "$PST_TMP/$c.plain.err")]"
	fi
done
finish
