# SPDX-License-Identifier: MIT
# I/O benchmarks (included from Makefile.am): bench/iobench, driven by
# scripts/bench-io (`make bench-io`), and bench/smallbench, driven by
# scripts/bench small.  Never part of make check (tests/harness/bench_small.sh
# only checks that the small loops run).
noinst_PROGRAMS += bench/iobench
bench_iobench_SOURCES = bench/iobench.c bench/cputime.h
bench_iobench_CFLAGS = $(AM_CFLAGS) -O2
EXTRA_DIST += scripts/bench-io

bench-io: all bench/iobench
	PS_TOP_BUILDDIR='$(abs_top_builddir)' $(top_srcdir)/scripts/bench-io
.PHONY: bench-io

# Small-call loops (issue 11: do no harm), driven by `scripts/bench small`.
noinst_PROGRAMS += bench/smallbench
bench_smallbench_SOURCES = bench/smallbench.c
bench_smallbench_CFLAGS = $(AM_CFLAGS) -O2
# bench/smallalloc: programs whose allocations are all small (scripts/bench smallalloc).
noinst_PROGRAMS += bench/smallalloc
bench_smallalloc_SOURCES = bench/smallalloc.c bench/cputime.h
bench_smallalloc_CFLAGS = $(AM_CFLAGS) -O2
bench_smallalloc_LDADD = -lpthread
# bench/allocthreads: bench-malloc-thread- and larson-style threads (scripts/bench allocthreads).
noinst_PROGRAMS += bench/allocthreads
bench_allocthreads_SOURCES = bench/allocthreads.c bench/cputime.h
bench_allocthreads_CFLAGS = $(AM_CFLAGS) -O2
bench_allocthreads_LDADD = -lpthread
# Issue 44's measuring tools: T threads churning 64 KiB-4 MiB blocks
# (scripts/bench threads), a proxy whose large buffers are partly filled and
# the aligned and idle shapes (scripts/bench footprint real, shapes).
noinst_PROGRAMS += bench/threadchurn bench/proxybuf bench/shapes
bench_threadchurn_SOURCES = bench/threadchurn.c bench/cputime.h
bench_threadchurn_CFLAGS = $(AM_CFLAGS) -O2
bench_threadchurn_LDADD = -lpthread -lm
bench_proxybuf_CFLAGS = $(AM_CFLAGS) -O2
bench_proxybuf_LDADD = -lm
bench_shapes_CFLAGS = $(AM_CFLAGS) -O2
EXTRA_DIST += bench/threads.py bench/realprogs.py
# The floor any malloc interposer pays, run beside the shim by the same command.
noinst_LTLIBRARIES += bench/libdoorfloor.la
bench_libdoorfloor_la_SOURCES = bench/doorfloor.c
bench_libdoorfloor_la_CFLAGS = $(AM_CFLAGS) -O2
bench_libdoorfloor_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

# Exit time with 10,000 distinct call sites (issue 13): bench/callsites.py, run by hand.
EXTRA_DIST += bench/callsites.py

# READ against READ_FIXED against pread on THP, hugetlb and 4 KiB buffers
# (issue 25): the measurement behind uring.c registering no buffer.  Run by
# hand: bench/fixedbench FILE (scripts/hugepages 20 ... for hugetlb rows).
noinst_PROGRAMS += bench/fixedbench
bench_fixedbench_SOURCES = bench/fixedbench.c bench/cputime.h
bench_fixedbench_CFLAGS = $(AM_CFLAGS) $(URING_CFLAGS) -O2
bench_fixedbench_LDADD = $(URING_LIBS)

# What this host charges for a page fault, a THP fault, a system call, a
# copy and an O_DIRECT MiB (issue 39): scripts/demo prints it before its runs.
noinst_PROGRAMS += bench/hostcost
bench_hostcost_SOURCES = bench/hostcost.c
bench_hostcost_CFLAGS = $(AM_CFLAGS) -O2
