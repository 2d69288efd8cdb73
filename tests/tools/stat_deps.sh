#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim stat`, `poolshim collect` and the wrapper's poolshim-run read
# live records and render them; they link the shim's format layer
# (libpsfmt.la) only, not the runtime.
# So none of their symbols nor their shared-library dependencies include
# jemalloc (the private copy's psje_* names, its settings glue
# ps_jemalloc_*, or je_*), liburing or libunwind.  They must also still run (--help).
. "$PS_TOP_SRCDIR/tests/lib.sh"
for STAT in "$PS_TOP_BUILDDIR/tools/poolshim-stat" "$PS_TOP_BUILDDIR/tools/poolshim-collect" \
	"$PS_TOP_BUILDDIR/tools/poolshim-run"; do
	[ -x "$STAT" ] || { fail "no $STAT"; continue; }
	syms=$(nm "$STAT" 2>/dev/null) || { fail "nm could not read $STAT"; continue; }
	[ -n "$syms" ] || { fail "nm found no symbols in $STAT (stripped?)"; continue; }
	# A name the format layer must bring, to show nm saw the linked objects.
	printf '%s\n' "$syms" | grep -q ' ps_report_render$' || fail "no ps_report_render in $STAT"
	for pat in ' psje_' ' je_' ' ps_jemalloc_' ' io_uring_' ' unw_' ' ps_pool_take$' ' ps_uring_rw$'; do
		n=$(printf '%s\n' "$syms" | grep -c -- "$pat")
		[ "$n" -eq 0 ] && pass "${STAT##*/}: no '$pat' symbols" ||
			fail "$n '$pat' symbols in $STAT, e.g. $(printf '%s\n' "$syms" | grep -- "$pat" | head -n 3 | tr '\n' ' ')"
	done
	deps=$(ldd "$STAT" 2>&1)
	for lib in libjemalloc liburing libunwind; do
		case $deps in
		*"$lib"*) fail "$STAT needs $lib: $deps" ;;
		*) pass "${STAT##*/}: no $lib" ;;
		esac
	done
	"$STAT" --help >/dev/null 2>&1 || fail "$STAT --help failed"
done
finish
