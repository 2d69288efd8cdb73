#!/bin/sh
# SPDX-License-Identifier: MIT
# Another allocator preloaded before or after the shim (jemalloc, tcmalloc,
# mimalloc), with the shim on and off.  The heap must belong to exactly one
# allocator: tests/preload/alloc_mix takes blocks from every malloc-family
# entry point and releases them through others, so a block made by one
# allocator and freed by the other aborts it.  Ahead of the shim, an
# allocator keeps the heap: one line says so, the report says "foreign" and
# names it, and I/O is still counted.  A forwarding wrapper ahead of the
# shim (as tracers are) is not an owner: the shim still pools.
. "$PS_TOP_SRCDIR/tests/lib.sh"
MIX="$PRELOAD_BIN/alloc_mix"
LIBDIR=$(dirname "$(ldd "$MIX" | sed -n 's/.*libc\.so\.6 => \([^ ]*\).*/\1/p')")
found=0
for lib in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
	other="$LIBDIR/$lib"
	if [ ! -e "$other" ]; then
		echo "note: $other not installed (scripts/bootstrap installs it)"
		continue
	fi
	found=$((found + 1))
	for order in ahead after; do
		if [ $order = ahead ]; then lp="$other:$SHIM"; else lp="$SHIM:$other"; fi
		for on in on off; do
			j="$PST_TMP/$lib.$order.$on.json"
			env POOLSHIM=$on POOLSHIM_STATS="$j" LD_PRELOAD="$lp" "$MIX" 30 \
				>"$PST_TMP/out" 2>"$PST_TMP/err"
			rc=$?
			case $order in ahead) where="ahead of" ;; *) where=after ;; esac
			what="$lib $where the shim, POOLSHIM=$on"
			if [ $rc -ne 0 ] || ! grep -q '^mix ok' "$PST_TMP/out"; then
				fail "$what: exit $rc: $(head -c 300 "$PST_TMP/err")"
				continue
			fi
			lines=$(grep -c 'poolshim\[[0-9]*\] [^:]*: malloc comes from' "$PST_TMP/err")
			if [ $order = ahead ] && [ $on = on ]; then
				want=1
			else
				want=0
			fi
			[ "$lines" = $want ] && pass "$what: heap intact, $lines warning line(s)" ||
				fail "$what: $lines warning lines, want $want: $(cat "$PST_TMP/err")"
			[ $on = off ] && continue
			python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$j" || fail "$what: schema"
			mode=$(json_get "$j" "r['pool']['mode']")
			owner=$(json_get "$j" "r['pool']['heap_owner']")
			pooled=$(json_get "$j" "r['pool']['allocations']")
			reads=$(json_get "$j" "sum(c['calls'] for c in r['calls'] if c['call'] == 'read')")
			if [ $order = ahead ]; then
				[ "$mode" = foreign ] && [ "$owner" = "$other" ] && [ "$pooled" = 0 ] &&
					pass "$what: report says foreign, owner $lib, nothing pooled" ||
					fail "$what: mode $mode owner $owner pooled $pooled"
			else
				[ "$mode" != foreign ] && [ "$owner" = None ] && [ "$pooled" -gt 0 ] &&
					pass "$what: the shim owns the heap ($pooled pooled)" ||
					fail "$what: mode $mode owner $owner pooled $pooled"
			fi
			[ "$reads" -ge 1 ] && pass "$what: I/O counted" || fail "$what: read not counted"
		done
	done
done
[ $found -gt 0 ] || skip "no other allocator installed"

# A forwarding wrapper ahead of the shim: the shim still owns the heap.
wrap="$PS_TOP_BUILDDIR/tests/preload/.libs/libfwdwrap.so"
j="$PST_TMP/wrap.json"
env POOLSHIM_STATS="$j" LD_PRELOAD="$wrap:$SHIM" "$MIX" 30 >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
pooled=$(json_get "$j" "r['pool']['allocations']" 2>/dev/null)
if [ $rc -eq 0 ] && ! grep -q 'malloc comes from' "$PST_TMP/err" && [ "${pooled:-0}" -gt 0 ]; then
	pass "forwarding wrapper ahead: the shim still pools ($pooled pooled), no warning"
else
	fail "forwarding wrapper ahead: exit $rc, pooled ${pooled:-?}: $(head -c 300 "$PST_TMP/err")"
fi
finish
