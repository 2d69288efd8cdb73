# SPDX-License-Identifier: MIT
# The tools that read live records (included from Makefile.am).  They link
# the format layer only (libpsfmt.la: no jemalloc, liburing or libunwind;
# tests/tools/stat_deps.sh checks), through libpstools.la: the checked
# record reader (record.c) and the collector (collect.c), shared by
# `poolshim stat`, `poolshim collect` and the `poolshim` wrapper.
noinst_LTLIBRARIES += libpstools.la
libpstools_la_SOURCES = tools/record.c tools/record.h tools/collect.c tools/collect.h
libpstools_la_CFLAGS = $(AM_CFLAGS)
libpstools_la_LIBADD = libpsfmt.la

# The live view: `poolshim stat` runs it.
bin_PROGRAMS += tools/poolshim-stat
tools_poolshim_stat_SOURCES = tools/poolshim-stat.c
tools_poolshim_stat_LDADD = libpstools.la -lm

# Reports of processes that ended: `poolshim collect` runs it.
bin_PROGRAMS += tools/poolshim-collect
tools_poolshim_collect_SOURCES = tools/poolshim-collect.c
tools_poolshim_collect_LDADD = libpstools.la -lm

# The `poolshim` wrapper's last step: starts the detached helper that
# delivers the run's kept reports, then execs the program in place.
bin_PROGRAMS += tools/poolshim-run
tools_poolshim_run_SOURCES = tools/poolshim-run.c
tools_poolshim_run_LDADD = libpstools.la -lm

# --enable-sanitizers: the tools read untrusted records, so they are built
# with ASan and UBSan too (tests/tools/fuzz_quick.sh runs in that leg).
if SANITIZERS
libpstools_la_CFLAGS += $(SANITIZER_CFLAGS)
tools_poolshim_stat_CFLAGS = $(AM_CFLAGS) $(SANITIZER_CFLAGS)
tools_poolshim_stat_LDFLAGS = $(SANITIZER_CFLAGS)
tools_poolshim_collect_CFLAGS = $(AM_CFLAGS) $(SANITIZER_CFLAGS)
tools_poolshim_collect_LDFLAGS = $(SANITIZER_CFLAGS)
tools_poolshim_run_CFLAGS = $(AM_CFLAGS) $(SANITIZER_CFLAGS)
tools_poolshim_run_LDFLAGS = $(SANITIZER_CFLAGS)
endif
