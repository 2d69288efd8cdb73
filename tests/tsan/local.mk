# SPDX-License-Identifier: MIT
# (included from Makefile.am)  ThreadSanitizer on the core, with
# ./configure --enable-tsan.  TSan's runtime interposes malloc, so it cannot
# run under the preloaded library: tests/tsan/stress links a third copy of
# the core built with -fsanitize=thread and drives it from many threads
# (see the comment at its top).  jemalloc stays uninstrumented.
#   make check TESTS=tests/tsan/stress.sh     just this test
if TSAN
check_LTLIBRARIES += libpscore_tsan.la
libpscore_tsan_la_SOURCES = $(PS_FMT_SOURCES) $(PS_CORE_SOURCES)
libpscore_tsan_la_CFLAGS = $(libpscore_la_CFLAGS) $(TSAN_CFLAGS)

check_PROGRAMS += tests/tsan/stress
tests_tsan_stress_SOURCES = tests/tsan/stress.c
tests_tsan_stress_CFLAGS = $(AM_CFLAGS) $(TSAN_CFLAGS)
tests_tsan_stress_LDADD = libpscore_tsan.la $(JEMALLOC_PS) $(URING_LIBS) -lm -ldl
tests_tsan_stress_LDFLAGS = $(TSAN_CFLAGS) $(JEMALLOC_PS_UNDEF)
TESTS += tests/tsan/stress.sh
endif
EXTRA_DIST += tests/tsan/stress.sh tests/tsan/suppressions
