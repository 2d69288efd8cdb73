# SPDX-License-Identifier: MIT
# (included from Makefile.am)  Which copy of the core the unit tests link,
# and the suites kept here rather than in Makefile.am's list.
# With --enable-sanitizers it is a second copy built with ASan and UBSan, so
# that the sanitizers check the core's code and not only the tests';
# libpoolshim.so keeps the plain copy (an ASan runtime cannot be preloaded
# under a program that was not built with it).
tests_unit_unit_SOURCES += tests/unit/test_fdinfo.c tests/unit/test_cgroup.c
# The pool's page-exact placement (issue 35).
tests_unit_unit_SOURCES += tests/unit/test_blocks.c
# The O_DIRECT router's decision (issue 36).
tests_unit_unit_SOURCES += tests/unit/test_route.c
# The per-thread cache of pooled blocks (issue 44).
tests_unit_unit_SOURCES += tests/unit/test_tcache.c

if SANITIZERS
check_LTLIBRARIES += libpscore_asan.la
libpscore_asan_la_SOURCES = $(PS_FMT_SOURCES) $(PS_CORE_SOURCES)
libpscore_asan_la_CFLAGS = $(libpscore_la_CFLAGS) $(SANITIZER_CFLAGS)
PSCORE_UNIT = libpscore_asan.la
# Tests that cannot run in this build (sanitized programs under the
# preloaded shim) look for this and skip.
AM_TESTS_ENVIRONMENT += PS_SANITIZERS=1; export PS_SANITIZERS;
else
PSCORE_UNIT = libpscore.la
endif

# The tests that the sanitizer builds instrument: the unit tests (ASan and
# UBSan on the core), the demo stack (ASan and UBSan on the demo programs),
# the record reader's fuzz (ASan and UBSan on the tools) and, with
# --enable-tsan, tests/tsan.  Preload tests run uninstrumented
# programs under the plain library, as in any build; the fuzz targets are
# built with their own sanitizers in every build.  .ci/run uses this.
check-sanitized:
	@tests=; for t in $(TESTS); do \
	  case $$t in \
	  tests/demo/fuzz.sh) ;; \
	  tests/unit/*|tests/demo/*|tests/tsan/*|tests/tools/fuzz_quick.sh) tests="$$tests $$t" ;; \
	  esac; \
	done; \
	$(MAKE) $(AM_MAKEFLAGS) check TESTS="$$tests"
.PHONY: check-sanitized
