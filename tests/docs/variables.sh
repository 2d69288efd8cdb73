#!/bin/sh
# SPDX-License-Identifier: MIT
# Every variable the shim reads is documented: each POOLSHIM_* of the
# option table in shim/format/config.c (less the test build's hooks under
# PS_TEST_HOOKS) has its entry in poolshim(7), CONFIGURATION (a
# ".BR POOLSHIM_X =" item), and every variable README.md's table names is
# one the shim reads (the README lists the ones most people set).
. "$PS_TOP_SRCDIR/tests/lib.sh"
sed '/^#ifdef PS_TEST_HOOKS/,/^#endif/d' "$PS_TOP_SRCDIR/shim/format/config.c" |
	sed -n 's/^	{ "\(POOLSHIM[A-Z_]*\)", OPT_.*/\1/p' | sort -u >"$PST_TMP/table"
sed -n 's/^\.BR \(POOLSHIM[A-Z_]*\) =.*/\1/p' "$PS_TOP_SRCDIR/man/poolshim.7" | sort -u >"$PST_TMP/man"
sed -n 's/^| `\(POOLSHIM[A-Z_]*\)` |.*/\1/p' "$PS_TOP_SRCDIR/README.md" | sort -u >"$PST_TMP/readme"
n=$(wc -l <"$PST_TMP/table")
[ "$n" -ge 20 ] || fail "only $n variables found in shim/format/config.c's table"
missing=$(comm -23 "$PST_TMP/table" "$PST_TMP/man" | tr '\n' ' ')
[ -z "$missing" ] && pass "poolshim(7) documents all $n variables of the option table" ||
	fail "poolshim(7) CONFIGURATION lacks: $missing"
extra=$(comm -13 "$PST_TMP/table" "$PST_TMP/man" | tr '\n' ' ')
[ -z "$extra" ] || fail "poolshim(7) documents variables the shim does not read: $extra"
[ "$(wc -l <"$PST_TMP/readme")" -ge 10 ] || fail "README.md's variables table not found ($(wc -l <"$PST_TMP/readme") rows)"
unknown=$(comm -13 "$PST_TMP/table" "$PST_TMP/readme" | tr '\n' ' ')
[ -z "$unknown" ] && pass "README.md's table: $(wc -l <"$PST_TMP/readme") variables, all read by the shim" ||
	fail "README.md's table names variables the shim does not read: $unknown"
finish
