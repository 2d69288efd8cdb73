# SPDX-License-Identifier: MIT
# Preload tests: small programs run under libpoolshim.so (included from
# Makefile.am).  C programs run through tests/run-test.sh once per
# configuration of the matrix there; .sh tests run their own scenarios.

pst_programs = \
	tests/preload/alloc_api \
	tests/preload/alloc_threads \
	tests/preload/alloc_lifecycle \
	tests/preload/alloc_cxx
check_PROGRAMS += $(pst_programs) tests/preload/alloc_helper tests/preload/signal_helper \
	tests/preload/callsite_helper tests/preload/alloc_mix tests/preload/report_helper
TESTS += $(pst_programs) tests/preload/report.sh tests/preload/hugepages.sh tests/preload/live.sh \
	tests/preload/callsite.sh tests/preload/alloc_foreign.sh \
	tests/preload/report_fd2.sh tests/preload/report_path.sh
EXTRA_DIST += tests/preload/report.sh tests/preload/hugepages.sh tests/preload/live.sh \
	tests/preload/callsite.sh tests/preload/alloc_foreign.sh \
	tests/preload/report_fd2.sh tests/preload/report_path.sh \
	tests/report_schema.py

# One block per group of tests, so groups are added without touching each other.
# Signal semantics under POOLSHIM_DUMP_SIGNAL, and failed execs.
check_PROGRAMS += tests/preload/signal_sem tests/preload/exec_fail
TESTS += tests/preload/signal_sem.sh tests/preload/exec_fail.sh
EXTRA_DIST += tests/preload/signal_sem.sh tests/preload/exec_fail.sh

# Start-up cost of a short program, the pool lock across fork, _Fork children.
check_PROGRAMS += tests/preload/alloc_faults tests/preload/fork_pool tests/preload/fork_underscore
TESTS += tests/preload/alloc_faults.sh tests/preload/fork_pool.sh tests/preload/fork_underscore.sh
EXTRA_DIST += tests/preload/alloc_faults.sh tests/preload/fork_pool.sh tests/preload/fork_underscore.sh

# The live file: a full /dev/shm, children made without atfork, pid namespaces.
check_PROGRAMS += tests/preload/live_threads tests/preload/live_rawfork
TESTS += tests/preload/live_shm_full.sh tests/preload/live_rawfork.sh tests/preload/live_pidns.sh
EXTRA_DIST += tests/preload/live_shm_full.sh tests/preload/live_rawfork.sh tests/preload/live_pidns.sh

# The report's advice, metadata and configuration; poolshim report --csv/--diff.
check_PROGRAMS += tests/preload/advice_helper
TESTS += tests/preload/advice.sh
EXTRA_DIST += tests/preload/advice.sh
tests_preload_advice_helper_SOURCES = tests/preload/advice_helper.c

tests_preload_alloc_api_SOURCES = tests/preload/alloc_api.c
tests_preload_alloc_api_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_api_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_threads_SOURCES = tests/preload/alloc_threads.c
tests_preload_alloc_threads_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_threads_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_lifecycle_SOURCES = tests/preload/alloc_lifecycle.c
tests_preload_alloc_lifecycle_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_lifecycle_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_cxx_SOURCES = tests/preload/alloc_cxx.cc
tests_preload_alloc_cxx_LDADD = -ldl
check_PROGRAMS += tests/preload/cxx_throw
tests_preload_cxx_throw_SOURCES = tests/preload/cxx_throw.cc
TESTS += tests/preload/cxx_throw.sh
EXTRA_DIST += tests/preload/cxx_throw.sh
tests_preload_signal_helper_SOURCES = tests/preload/signal_helper.c
tests_preload_signal_sem_SOURCES = tests/preload/signal_sem.c
tests_preload_exec_fail_SOURCES = tests/preload/exec_fail.c
tests_preload_callsite_helper_SOURCES = tests/preload/callsite_helper.c
tests_preload_callsite_helper_CFLAGS = $(AM_CFLAGS) -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls
tests_preload_callsite_helper_LDFLAGS = -rdynamic
tests_preload_alloc_helper_SOURCES = tests/preload/alloc_helper.c
tests_preload_alloc_helper_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_helper_LDADD = $(PST_LIBS_ALL)

tests_preload_live_threads_SOURCES = tests/preload/live_threads.c
tests_preload_live_threads_LDADD = -lpthread
tests_preload_live_rawfork_SOURCES = tests/preload/live_rawfork.c
tests_preload_live_rawfork_LDADD = -lpthread
tests_preload_alloc_faults_SOURCES = tests/preload/alloc_faults.c
tests_preload_fork_pool_SOURCES = tests/preload/fork_pool.c
tests_preload_fork_pool_LDADD = -lpthread
tests_preload_fork_underscore_SOURCES = tests/preload/fork_underscore.c

tests_preload_alloc_mix_SOURCES = tests/preload/alloc_mix.c
tests_preload_alloc_mix_LDADD = -ldl
tests_preload_report_helper_SOURCES = tests/preload/report_helper.c

# A forwarding malloc wrapper (as tracers preload) for alloc_foreign.sh.
check_LTLIBRARIES += tests/preload/libfwdwrap.la
tests_preload_libfwdwrap_la_SOURCES = tests/preload/fwd_wrapper.c
tests_preload_libfwdwrap_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_preload_libfwdwrap_la_LIBADD = -ldl

# I/O tests (tests/preload/io.mk)
include tests/preload/io.mk

# Call sites named without -rdynamic, and from split debug info (callsite_named.sh).
check_PROGRAMS += tests/preload/callsite_plain
TESTS += tests/preload/callsite_named.sh
EXTRA_DIST += tests/preload/callsite_named.sh
TESTS += tests/preload/callsite_nonet.sh
EXTRA_DIST += tests/preload/callsite_nonet.sh
tests_preload_callsite_plain_SOURCES = tests/preload/callsite_helper.c
tests_preload_callsite_plain_CFLAGS = $(AM_CFLAGS) -g -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls

# POOLSHIM_PROGRAMS, MALLOC_CONF kept from the private jemalloc, the log prefix.
TESTS += tests/preload/scope.sh
EXTRA_DIST += tests/preload/scope.sh

# poolshim report names call sites offline, by build id (callsite_offline.sh).
TESTS += tests/preload/callsite_offline.sh
EXTRA_DIST += tests/preload/callsite_offline.sh

# poolshim report --folded, checked against the folded-stack grammar (folded.sh).
TESTS += tests/preload/folded.sh
EXTRA_DIST += tests/preload/folded.sh

# A Debian-style stripped server with a -dbgsym tree, named in process and offline.
TESTS += tests/preload/callsite_dbgsym.sh
EXTRA_DIST += tests/preload/callsite_dbgsym.sh

# Ends that skip the destructors: _exit, _Exit, from a handler, a thread, children.
check_PROGRAMS += tests/preload/exit_abrupt
TESTS += tests/preload/exit_abrupt.sh
EXTRA_DIST += tests/preload/exit_abrupt.sh
tests_preload_exit_abrupt_SOURCES = tests/preload/exit_abrupt.c
tests_preload_exit_abrupt_LDADD = -lpthread
