# SPDX-License-Identifier: MIT
# Preload tests: small programs run under libpoolshim.so (included from
# Makefile.am).  C programs run through tests/run-test.sh once per
# configuration of the matrix there; .sh tests run their own scenarios.
# Each group adds its shell tests to pst_scripts, which make check runs
# and the tarball carries; a helper built from X.c alone has no _SOURCES
# line (automake's default source).

pst_programs = \
	tests/preload/alloc_api \
	tests/preload/alloc_threads \
	tests/preload/alloc_tcache \
	tests/preload/alloc_lifecycle \
	tests/preload/alloc_cxx
pst_scripts = tests/preload/report.sh tests/preload/hugepages.sh tests/preload/live.sh \
	tests/preload/callsite.sh tests/preload/alloc_foreign.sh \
	tests/preload/report_fd2.sh tests/preload/report_path.sh
check_PROGRAMS += $(pst_programs) tests/preload/alloc_helper tests/preload/signal_helper \
	tests/preload/callsite_helper tests/preload/alloc_mix tests/preload/report_helper
TESTS += $(pst_programs) $(pst_scripts)
EXTRA_DIST += $(pst_scripts) tests/report_schema.py

# The Check programs, and alloc_helper, link tests/lib.c and Check.
tests_preload_alloc_api_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_api_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_threads_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_threads_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_tcache_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_tcache_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_lifecycle_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_lifecycle_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_helper_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_helper_LDADD = $(PST_LIBS_ALL)
tests_preload_alloc_cxx_SOURCES = tests/preload/alloc_cxx.cc
tests_preload_alloc_cxx_LDADD = -ldl
tests_preload_alloc_mix_LDADD = -ldl
tests_preload_callsite_helper_CFLAGS = $(AM_CFLAGS) -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls
tests_preload_callsite_helper_LDFLAGS = -rdynamic

# One block per group of tests, so groups are added without touching each other.
# C++ exceptions unwind as without the shim (libunwind stays out of the way).
check_PROGRAMS += tests/preload/cxx_throw
tests_preload_cxx_throw_SOURCES = tests/preload/cxx_throw.cc
pst_scripts += tests/preload/cxx_throw.sh

# Signal semantics under POOLSHIM_DUMP_SIGNAL, and failed execs.
check_PROGRAMS += tests/preload/signal_sem tests/preload/exec_fail
pst_scripts += tests/preload/signal_sem.sh tests/preload/exec_fail.sh

# Start-up cost of a short program, the pool lock across fork, _Fork children.
check_PROGRAMS += tests/preload/alloc_faults tests/preload/fork_pool tests/preload/fork_underscore
pst_scripts += tests/preload/alloc_faults.sh tests/preload/fork_pool.sh tests/preload/fork_underscore.sh
tests_preload_fork_pool_LDADD = -lpthread

# The live file: a full /dev/shm, children made without atfork, pid namespaces.
check_PROGRAMS += tests/preload/live_threads tests/preload/live_rawfork tests/preload/live_late
check_PROGRAMS += tests/preload/fork_cost
pst_scripts += tests/preload/live_shm_full.sh tests/preload/live_rawfork.sh tests/preload/live_pidns.sh \
	tests/preload/live_late.sh tests/preload/record_sweep.sh \
	tests/preload/record_sweep_syslog.sh
tests_preload_live_threads_LDADD = -lpthread
tests_preload_live_late_LDADD = -lpthread
tests_preload_live_rawfork_LDADD = -lpthread

# The report's advice, metadata and configuration; poolshim report --csv/--diff.
check_PROGRAMS += tests/preload/advice_helper
pst_scripts += tests/preload/advice.sh
# What the pool saved: the report's saved line and object, from a record too.
pst_scripts += tests/preload/saved.sh
# The CPUs' caches bypassed where frees come slowly (POOLSHIM_POOL_CACHE_PACE_US), in the report.
pst_scripts += tests/preload/pool_pace.sh
pst_scripts += tests/preload/pool_tails.sh
# POOLSHIM_POOL=off: every call counted, nothing pooled, the allocations'
# system calls as without the shim; the report's mode off everywhere.
pst_scripts += tests/preload/pool_off.sh
# Debian's nginx with sendfile on and default buffers: the report says why the pool did nothing.
pst_scripts += tests/preload/advice_nginx.sh
# The haproxy POOLSHIM_POOL_MIN trap (issue 46): no threshold advice that saves nothing.
pst_scripts += tests/preload/advice_haproxy.sh
# The verdict line under every report's header; no text report for a process that did no work.
pst_scripts += tests/preload/report_verdict.sh

# A forwarding malloc wrapper (as tracers preload) for alloc_foreign.sh.
check_LTLIBRARIES += tests/preload/libfwdwrap.la
# The cost of preloading any library at all (startup_syscalls.sh).
check_LTLIBRARIES += tests/preload/libemptypreload.la
tests_preload_libemptypreload_la_SOURCES = tests/preload/empty_preload.c
tests_preload_libemptypreload_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere -Wl,-z,now
tests_preload_libfwdwrap_la_SOURCES = tests/preload/fwd_wrapper.c
tests_preload_libfwdwrap_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_preload_libfwdwrap_la_LIBADD = -ldl
# site_plugin: a library callsite_helper dlopens (tests/tools/collect_sites.sh).
check_LTLIBRARIES += tests/preload/libsiteplugin.la
tests_preload_libsiteplugin_la_SOURCES = tests/preload/site_plugin.c
tests_preload_libsiteplugin_la_CFLAGS = $(AM_CFLAGS) -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls
tests_preload_libsiteplugin_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

# The test build of the shim, as jemalloc's tests link its JET build: the
# same three layers from the same sources and flags, plus -DPS_TEST_HOOKS,
# which compiles in the faults that io_uring_keepfd.sh, io_uring_fork.sh,
# io_uring_submit.sh and fork_pool.sh force (POOLSHIM_URING_TEST,
# PS_TEST_POOL_DELAY_US).  Never installed; lib.sh calls it $SHIM_TEST.
# test_build.sh checks that libpoolshim.so has none of the hooks and this
# one has them all.
check_LTLIBRARIES += tests/preload/libpsfmt-test.la tests/preload/libpscore-test.la \
	tests/preload/libpoolshim-test.la
tests_preload_libpsfmt_test_la_SOURCES = $(PS_FMT_SOURCES)
tests_preload_libpsfmt_test_la_CFLAGS = $(libpsfmt_la_CFLAGS) -DPS_TEST_HOOKS
tests_preload_libpscore_test_la_SOURCES = $(PS_CORE_SOURCES)
tests_preload_libpscore_test_la_CFLAGS = $(libpscore_la_CFLAGS) -DPS_TEST_HOOKS
tests_preload_libpscore_test_la_LIBADD = tests/preload/libpsfmt-test.la
tests_preload_libpoolshim_test_la_SOURCES = $(PS_DOOR_SOURCES)
tests_preload_libpoolshim_test_la_CFLAGS = $(PS_DOOR_CFLAGS) -DPS_TEST_HOOKS
tests_preload_libpoolshim_test_la_LIBADD = tests/preload/libpscore-test.la $(JEMALLOC_PS) $(URING_LINK) -ldl
tests_preload_libpoolshim_test_la_LDFLAGS = $(libpoolshim_la_LDFLAGS) $(JEMALLOC_PS_UNDEF) -rpath /nowhere
EXTRA_tests_preload_libpoolshim_test_la_DEPENDENCIES = $(EXTRA_libpoolshim_jemalloc_la_DEPENDENCIES)
pst_scripts += tests/preload/test_build.sh

# I/O tests (tests/preload/io.mk)
include tests/preload/io.mk

# Call sites named without -rdynamic, and from split debug info (callsite_named.sh).
check_PROGRAMS += tests/preload/callsite_plain
pst_scripts += tests/preload/callsite_named.sh tests/preload/callsite_nonet.sh
tests_preload_callsite_plain_SOURCES = tests/preload/callsite_helper.c
tests_preload_callsite_plain_CFLAGS = $(AM_CFLAGS) -g -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls

# POOLSHIM_PROGRAMS, MALLOC_CONF kept from the private jemalloc, the log prefix.
pst_scripts += tests/preload/scope.sh

# poolshim report names call sites offline, by build id (callsite_offline.sh).
pst_scripts += tests/preload/callsite_offline.sh

# poolshim report --folded, checked against the folded-stack grammar (folded.sh).
pst_scripts += tests/preload/folded.sh

# A Debian-style stripped server with a -dbgsym tree, named in process and offline.
pst_scripts += tests/preload/callsite_dbgsym.sh

# Ends that skip the destructors: _exit, _Exit, from a handler, a thread, children.
check_PROGRAMS += tests/preload/exit_abrupt
pst_scripts += tests/preload/exit_abrupt.sh
tests_preload_exit_abrupt_LDADD = -lpthread

# Issue 27: the host as without the shim.  host_helper prints what a program
# sees (errno, sigaction, vfork, fork children, call sites) for the scripts
# to compare with and without the shim; signal_end.sh: reports from
# programs stopped by TERM/INT/HUP (sleep, haproxy) and vfork children.
check_PROGRAMS += tests/preload/host_helper
tests_preload_host_helper_LDADD = -lpthread
pst_scripts += tests/preload/signal_end.sh tests/preload/host_errno.sh \
	tests/preload/fork_work.sh tests/preload/callsite_bytes.sh tests/preload/fio.sh

# Issue 25/27 (threads): thread churn, the hidden stderr copy, files left by daemon(3), setuid, chroot.
check_PROGRAMS += tests/preload/thread_churn
pst_scripts += tests/preload/thread_churn.sh
tests_preload_thread_churn_LDADD = -lpthread
check_PROGRAMS += tests/preload/leave_helper
pst_scripts += tests/preload/leave.sh

# What small malloc + free cost through the doors (callgrind budgets, issue 26).
check_PROGRAMS += tests/preload/alloc_cost
pst_scripts += tests/preload/alloc_cost.sh
# The rest of the malloc family sampled like malloc, and labelled so.
pst_scripts += tests/preload/alloc_sampled.sh
# What start-up costs a process that never pools (strace).
pst_scripts += tests/preload/startup_syscalls.sh tests/preload/report_faults.sh

# Footprint: the pool's memory follows the work (RSS after free and
# malloc_trim, peak, steady reuse, decay, RLIMIT_AS), in a memory cgroup.
check_PROGRAMS += tests/preload/footprint
pst_scripts += tests/preload/footprint.sh tests/preload/footprint_cgroup.sh
# Issue 35: a live set swinging from small to large buffers in 160 MiB.
pst_scripts += tests/preload/footprint_swing.sh

# Issue 34: the shim takes no signal: masks, vfork waits, TERM races, errno.
check_PROGRAMS += tests/preload/sig_invisible
pst_scripts += tests/preload/sig_invisible.sh

# Issue 34: an OOM-killed process's report, rendered from its record.
check_PROGRAMS += tests/preload/oom_victim
pst_scripts += tests/preload/oom_report.sh

# The address space and RSS the pool holds: a limit set after start, one
# 16 MiB buffer's VmPeak, one 64 KiB buffer's RSS (with and without the shim).
check_PROGRAMS += tests/preload/alloc_aslimit
tests_preload_alloc_aslimit_LDADD = -lpthread
pst_scripts += tests/preload/alloc_aslimit.sh

# Issue 35: nothing allocated from the program's heap at start.
check_PROGRAMS += tests/preload/trim_start
pst_scripts += tests/preload/trim_start.sh

# The page-exact placement through the shim: bad pointers, resizes and the purge policy.
check_PROGRAMS += tests/preload/alloc_blocks
pst_scripts += tests/preload/alloc_blocks.sh

# Any placement of pooled blocks, checked through the malloc API: threads of
# random calls with every block's data, zeroes, alignment, usable size and
# overlap checked, under the defaults, 4 KiB pages, a pool that fills,
# constant purges, and without the shim.
check_PROGRAMS += tests/preload/alloc_torture
tests_preload_alloc_torture_LDADD = -lpthread
pst_scripts += tests/preload/alloc_torture.sh
# Real programs (xz -9, sort -S, sqlite3) with and without the shim: the same
# output, peak RSS within issue 44's target (1.10x glibc + 4 MiB).
pst_scripts += tests/preload/real_programs.sh

# Issue 44: aligned requests reuse freed blocks, decay between pooled calls
# (small allocations and I/O only), a 4 KiB threshold takes no slab count.
check_PROGRAMS += tests/preload/pool_fit
pst_scripts += tests/preload/pool_aligned.sh tests/preload/pool_decay_io.sh \
	tests/preload/pool_decay_signals.sh tests/preload/pool_small.sh
# The page placement's arenas (POOLSHIM_POOL_ARENAS).
pst_scripts += tests/preload/pool_arenas.sh
EXTRA_DIST += tests/preload/proc_status.h
