#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim run`/`poolshim PROGRAM` on programs the loader will not preload
# into: a setuid copy of a program and a statically linked one get one
# warning line each and still run; an ordinary program gets none and runs
# under the shim (its report appears); an allocator already in LD_PRELOAD
# ends up after the shim, which therefore owns the heap.
. "$PS_TOP_SRCDIR/tests/lib.sh"
PS="$PS_TOP_BUILDDIR/poolshim"
export POOLSHIM_LIBRARY="$SHIM"
[ -x "$PS" ] || { fail "$PS not built"; finish; }

# An ordinary dynamically linked program: no warning, the shim is loaded.
"$PS" POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/plain.json" \
	"$PRELOAD_BIN/alloc_helper" --count 4 >"$PST_TMP/out" 2>"$PST_TMP/err"
if [ $? = 0 ] && ! grep -q warning "$PST_TMP/err" && [ -s "$PST_TMP/plain.json" ]; then
	pass "ordinary program: no warning, report written"
else
	fail "ordinary program: $(cat "$PST_TMP/err")"
fi

# setuid: the loader ignores LD_PRELOAD for it.
cp "$PRELOAD_BIN/alloc_helper" "$PST_TMP/suid_helper"
chmod u+s "$PST_TMP/suid_helper"
"$PS" "$PST_TMP/suid_helper" --count 2 >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
n=$(grep -c 'setuid/setgid; the loader ignores LD_PRELOAD' "$PST_TMP/err")
[ $rc = 0 ] && [ "$n" = 1 ] && pass "setuid program: one warning, runs" ||
	fail "setuid program: exit $rc, $n warning lines: $(cat "$PST_TMP/err")"

# Statically linked (needs glibc's static libraries: libc6-dev has them).
printf '#include <stdio.h>\nint main(void){puts("static ok");return 0;}\n' >"$PST_TMP/st.c"
if ${CC:-cc} -static -o "$PST_TMP/static_prog" "$PST_TMP/st.c" 2>/dev/null; then
	"$PS" "$PST_TMP/static_prog" >"$PST_TMP/out" 2>"$PST_TMP/err"
	rc=$?
	n=$(grep -c 'statically linked; LD_PRELOAD cannot reach it' "$PST_TMP/err")
	[ $rc = 0 ] && [ "$n" = 1 ] && grep -q 'static ok' "$PST_TMP/out" &&
		pass "static program: one warning, runs" ||
		fail "static program: exit $rc, $n warning lines: $(cat "$PST_TMP/err")"
else
	echo "note: cannot link a static program here; static case not run"
fi

# An allocator already preloaded: the shim goes first and owns the heap.
other=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -1)
if [ -n "$other" ]; then
	LD_PRELOAD="$other" "$PS" POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/je.json" \
		"$PRELOAD_BIN/alloc_helper" --count 8 >"$PST_TMP/out" 2>"$PST_TMP/err"
	mode=$(json_get "$PST_TMP/je.json" "r['pool']['mode']" 2>/dev/null)
	[ $? = 0 ] && [ -n "$mode" ] && [ "$mode" != foreign ] && ! grep -q 'malloc comes from' "$PST_TMP/err" &&
		pass "jemalloc already in LD_PRELOAD: the shim is put first and pools (mode $mode)" ||
		fail "jemalloc already in LD_PRELOAD: mode '$mode': $(cat "$PST_TMP/err")"
fi
finish
