# SPDX-License-Identifier: MIT
# I/O benchmark (included from Makefile.am): bench/iobench, driven by
# scripts/bench-io (`make bench-io`).  Never part of make check.
noinst_PROGRAMS += bench/iobench
bench_iobench_SOURCES = bench/iobench.c
bench_iobench_CFLAGS = $(AM_CFLAGS) -O2
EXTRA_DIST += scripts/bench-io

bench-io: all bench/iobench
	PS_TOP_BUILDDIR='$(abs_top_builddir)' $(top_srcdir)/scripts/bench-io
.PHONY: bench-io
