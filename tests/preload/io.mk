# SPDX-License-Identifier: MIT
# I/O preload tests (included from tests/preload/local.mk).  The Check
# programs run through tests/run-test.sh; the expensive one (io_direct) and
# the scenarios that need a report, a sandbox or root run from .sh wrappers
# that choose their own configuration matrix.  io_baseline.sh runs every
# program without the shim: the expectations are the kernel's.

pst_io_programs = \
	tests/preload/io_fork \
	tests/preload/io_signals \
	tests/preload/io_sockets \
	tests/preload/io_errno
pst_io_scripts = \
	tests/preload/io_direct.sh \
	tests/preload/io_nouring.sh \
	tests/preload/io_fortify.sh \
	tests/preload/io_kinds.sh \
	tests/preload/io_syscalls.sh \
	tests/preload/io_cost.sh \
	tests/preload/io_nginx.sh \
	tests/preload/io_fdclobber.sh \
	tests/preload/fork_soak.sh \
	tests/preload/alloc_rlimit.sh \
	tests/preload/io_baseline.sh \
	tests/preload/io_uring_nested.sh \
	tests/preload/io_uring_keepfd.sh \
	tests/preload/io_uring_link.sh \
	tests/preload/io_uring_submit.sh \
	tests/preload/io_uring_fork.sh \
	tests/preload/io_uring_bounds.sh
check_PROGRAMS += $(pst_io_programs) tests/preload/io_direct \
	tests/preload/io_sandbox tests/preload/io_fortify tests/preload/io_kinds \
	tests/preload/io_fdclobber tests/preload/fork_soak tests/preload/alloc_rlimit \
	tests/preload/io_uring_cases tests/preload/io_syscalls tests/preload/io_syscalls_fortify \
	tests/preload/io_cost
TESTS += $(pst_io_programs) $(pst_io_scripts)
EXTRA_DIST += $(pst_io_scripts) tests/preload/io_uring_lib.sh

# The programs on tests/preload/io_common.c link tests/lib.c and Check.
pst_io_common = tests/preload/io_common.c tests/preload/io_common.h

tests_preload_io_direct_SOURCES = tests/preload/io_direct.c $(pst_io_common)
tests_preload_io_direct_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_direct_LDADD = $(PST_LIBS_ALL)
tests_preload_io_fork_SOURCES = tests/preload/io_fork.c $(pst_io_common)
tests_preload_io_fork_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_fork_LDADD = $(PST_LIBS_ALL)
tests_preload_io_signals_SOURCES = tests/preload/io_signals.c $(pst_io_common)
tests_preload_io_signals_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_signals_LDADD = $(PST_LIBS_ALL)
tests_preload_io_sockets_SOURCES = tests/preload/io_sockets.c $(pst_io_common)
tests_preload_io_sockets_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_sockets_LDADD = $(PST_LIBS_ALL)
tests_preload_io_errno_SOURCES = tests/preload/io_errno.c $(pst_io_common)
tests_preload_io_errno_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_errno_LDADD = $(PST_LIBS_ALL)

tests_preload_io_kinds_SOURCES = tests/preload/io_kinds.c $(pst_io_common)
tests_preload_io_kinds_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_kinds_LDADD = $(PST_LIBS_ALL)

# io_syscalls: plain loops of small I/O, run under strace by io_syscalls.sh
# (io_syscalls_fortify: the same, fortified).  io_cost: loops of small I/O,
# run under callgrind by io_cost.sh.  io_sandbox: runs a command in a
# sandbox: a seccomp filter on io_uring_setup, a tiny RLIMIT_MEMLOCK,
# CAP_IPC_LOCK dropped.  Each is built from its own .c alone.
tests_preload_io_syscalls_fortify_SOURCES = tests/preload/io_syscalls.c
tests_preload_io_syscalls_fortify_CFLAGS = $(AM_CFLAGS) -U_FORTIFY_SOURCE -O2 -D_FORTIFY_SOURCE=2 -Wno-error=cpp

# Built fortified, so that it calls __read_chk and friends.
tests_preload_io_fortify_CFLAGS = $(AM_CFLAGS) -U_FORTIFY_SOURCE -O2 -D_FORTIFY_SOURCE=2 -Wno-error=cpp
tests_preload_io_fdclobber_SOURCES = tests/preload/io_fdclobber.c $(pst_io_common)
tests_preload_io_fdclobber_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_fdclobber_LDADD = $(PST_LIBS_ALL) -lpthread
tests_preload_fork_soak_SOURCES = tests/preload/fork_soak.c $(pst_io_common)
tests_preload_fork_soak_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_fork_soak_LDADD = $(PST_LIBS_ALL) -lpthread
tests_preload_alloc_rlimit_SOURCES = tests/preload/alloc_rlimit.c $(pst_io_common)
tests_preload_alloc_rlimit_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_alloc_rlimit_LDADD = $(PST_LIBS_ALL)

# The io_uring hostile cases, one mode each, run by tests/preload/io_uring_*.sh.
tests_preload_io_uring_cases_SOURCES = tests/preload/io_uring_cases.c $(pst_io_common)
tests_preload_io_uring_cases_CFLAGS = $(PST_CFLAGS_ALL)
tests_preload_io_uring_cases_LDADD = $(PST_LIBS_ALL) -lpthread -ldl

# O_DIRECT reads split in chunks of the device's request size (issue 29).
check_PROGRAMS += tests/preload/io_devchunk
TESTS += tests/preload/io_devchunk.sh
EXTRA_DIST += tests/preload/io_devchunk.sh

# The O_DIRECT router: one route made dearer, the other chosen, a change followed (issue 36).
TESTS += tests/preload/io_route.sh
EXTRA_DIST += tests/preload/io_route.sh

# What the program does to its pooled buffers (MADV_DONTNEED, raw mprotect,
# munmap), its locked-memory limit as another user, and pthread_cancel in
# O_DIRECT calls, with and without the shim (issues 25 and 27).
check_PROGRAMS += tests/preload/io_uring_coherent
TESTS += tests/preload/io_uring_coherent.sh
EXTRA_DIST += tests/preload/io_uring_coherent.sh
tests_preload_io_uring_coherent_CFLAGS = $(AM_CFLAGS) $(URING_CFLAGS)
tests_preload_io_uring_coherent_LDADD = $(URING_LIBS) -lpthread
