#!/bin/sh
# SPDX-License-Identifier: MIT
# The shim's folders are its layers (shim/format, shim/core, shim/doors,
# with tools/ on the format layer): no file includes a header of a layer
# above its own, no object uses a layer above's names (but the one start-up
# call, ps_init_slow), and neither the include graph nor the use graph has
# a circle.  tests/tools/layers.py does the reading; this runs it over the
# sources and the objects just built.
. "$PS_TOP_SRCDIR/tests/lib.sh"
command -v python3 >/dev/null 2>&1 || skip "no python3"
command -v nm >/dev/null 2>&1 || skip "no nm"
out=$(python3 "$PS_TOP_SRCDIR/tests/tools/layers.py" "$PS_TOP_SRCDIR" "$PS_TOP_BUILDDIR" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] && pass "layers hold: $(printf '%s\n' "$out" | tail -n 1)" ||
	fail "layers broken ($(printf '%s\n' "$out" | wc -l) findings)"
finish
