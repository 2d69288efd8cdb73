#!/bin/sh
# SPDX-License-Identifier: MIT
# The shipped library carries no test hook; the test build carries them
# all.  libpoolshim.so must not name POOLSHIM_URING_TEST or
# PS_TEST_POOL_DELAY_US (what it does not name it cannot read), must warn
# of POOLSHIM_URING_TEST as of any unknown POOLSHIM_ variable, and leaves
# it out of its effective configuration.  tests/preload/libpoolshim-test.so,
# which the tests that force a fault preload, must name both and take
# POOLSHIM_URING_TEST as an option; it exports what libpoolshim.so exports
# (the same library, plus the hooks).
. "$PS_TOP_SRCDIR/tests/lib.sh"
for lib in "$SHIM" "$SHIM_TEST"; do
	[ -r "$lib" ] || { fail "$lib not built"; finish; }
done

for h in POOLSHIM_URING_TEST PS_TEST_POOL_DELAY_US; do
	if grep -q -F "$h" "$SHIM"; then
		fail "libpoolshim.so names $h: a test hook is in the shipped library"
	else
		pass "libpoolshim.so does not name $h"
	fi
	if grep -q -F "$h" "$SHIM_TEST"; then
		pass "the test build names $h"
	else
		fail "the test build does not name $h (built without -DPS_TEST_HOOKS?)"
	fi
done

# banner LIB: the verbose banner and warnings of a short program under LIB.
banner() {
	env POOLSHIM_URING_TEST=keepfd POOLSHIM_VERBOSE=1 POOLSHIM_STATS=off POOLSHIM_LIVE=0 \
		LD_PRELOAD="$1" true 2>&1
}
banner "$SHIM" >"$PST_TMP/shipped"
if grep -q 'unknown variable POOLSHIM_URING_TEST' "$PST_TMP/shipped" &&
	! grep -q 'POOLSHIM_URING_TEST=keepfd$' "$PST_TMP/shipped"; then
	pass "libpoolshim.so: POOLSHIM_URING_TEST is an unknown variable"
else
	fail "libpoolshim.so took POOLSHIM_URING_TEST: $(grep URING_TEST "$PST_TMP/shipped" | tr '\n' ' ')"
fi
banner "$SHIM_TEST" >"$PST_TMP/test"
if grep -qx 'POOLSHIM_URING_TEST=keepfd' "$PST_TMP/test" &&
	! grep -q 'unknown variable' "$PST_TMP/test"; then
	pass "the test build: POOLSHIM_URING_TEST=keepfd in its effective configuration"
else
	fail "the test build ignored POOLSHIM_URING_TEST: $(grep URING_TEST "$PST_TMP/test" | tr '\n' ' ')"
fi

NM=${NM:-nm}
if command -v "$NM" >/dev/null; then
	"$NM" -D --defined-only "$SHIM" | awk '{ print $NF }' | sort >"$PST_TMP/shipped.syms"
	"$NM" -D --defined-only "$SHIM_TEST" | awk '{ print $NF }' | sort >"$PST_TMP/test.syms"
	if [ -s "$PST_TMP/shipped.syms" ] && cmp -s "$PST_TMP/shipped.syms" "$PST_TMP/test.syms"; then
		pass "both export the same $(wc -l <"$PST_TMP/shipped.syms") symbols"
	else
		fail "exports differ: $(diff "$PST_TMP/shipped.syms" "$PST_TMP/test.syms" | tr '\n' ' ')"
	fi
fi
finish
