# SPDX-License-Identifier: MIT
# The shim in three layers, one folder each (shim/format, shim/core,
# shim/doors; included from Makefile.am; docs/architecture.md
# draws them):
#   libpsfmt.la    names, formatting, configuration, counters, the report's
#                  renderer and the live file's format: what the tools link;
#                  no jemalloc, liburing or libunwind
#   libpscore.la   the runtime: pool, allocator, kind table, io_uring, live
#                  file, call sites; unit tests link it without preloading
#   libpoolshim.la the preloaded library: start-up and the interposers
#                  (doors, libpsdoors.la) over the core; blocks placed to
#                  the page (blocks.c)
#   libpoolshim-jemalloc.la  the same objects with the private jemalloc
#                  linked in, for POOLSHIM_POOL_ALLOCATOR=jemalloc: its
#                  2 MiB of static metadata and 400 KiB of code are address
#                  space every process would pay (one 16 MiB buffer fewer
#                  fit under `ulimit -v 300000`), so the default library
#                  does without it

# ---------------------------------------------------------------------------
# A private copy of Debian's jemalloc.  Every public symbol (malloc, mallocx,
# mallctl, ...) is renamed to psje_*, so the copy inside libpoolshim.so never
# collides with the interposers, with a jemalloc the program links itself, or
# with another preloaded allocator.  Its secure_getenv and readlink go to
# shim/core/alloc.c, which hides MALLOC_CONF and /etc/malloc.conf: those are the
# program's allocator settings, not ours.  Its constructor is dropped: the
# copy starts when the pool is made, so a process the shim leaves alone
# never starts it.
# ---------------------------------------------------------------------------
shim/jemalloc_ps.a: $(JEMALLOC_PIC)
	$(AM_V_GEN)mkdir -p shim && \
	$(NM) -g --defined-only $(JEMALLOC_PIC) 2>/dev/null | \
	  awk 'NF == 3 && $$3 !~ /^je_/ { print $$3 " psje_" $$3 }' | sort -u > shim/jemalloc.syms && \
	printf '%s\n' 'secure_getenv ps_jemalloc_getenv' 'readlink ps_jemalloc_readlink' \
	  '_Unwind_Backtrace ps_jemalloc_unwind_backtrace' '_Unwind_GetIP ps_jemalloc_unwind_getip' \
	  'log ps_jemalloc_log' 'exp ps_jemalloc_exp' 'round ps_jemalloc_round' >> shim/jemalloc.syms && \
	$(OBJCOPY) --redefine-syms=shim/jemalloc.syms --remove-section=.init_array $(JEMALLOC_PIC) $@
CLEANFILES += shim/jemalloc_ps.a shim/jemalloc.syms
JEMALLOC_PS = $(top_builddir)/shim/jemalloc_ps.a
# alloc.c's references to the copy are weak (jemalloc_ps.h), and a weak
# reference pulls nothing out of an archive: name what it uses.
JEMALLOC_PS_UNDEF = -Wl,-u,psje_mallocx -Wl,-u,psje_rallocx \
	-Wl,-u,psje_sallocx -Wl,-u,psje_dallocx -Wl,-u,psje_mallctl \
	-Wl,-u,je_opt_cache_oblivious -Wl,-u,je_opt_retain \
	-Wl,-u,je_opt_lg_extent_max_active_fit -Wl,-u,je_opt_tcache -Wl,-u,je_opt_narenas

PS_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden -ftls-model=initial-exec

# The format layer.
PS_FMT_SOURCES = \
	shim/format/names.c shim/format/names.h shim/format/fmt.c shim/format/fmt.h \
	shim/format/emit.c shim/format/emit.h shim/format/report.c shim/format/report.h \
	shim/format/config.c shim/format/config.h \
	shim/format/stats.c shim/format/stats.h shim/format/poolinfo.h \
	shim/format/livefmt.c shim/format/livefmt.h shim/format/sitesfmt.c shim/format/sites.h \
	shim/format/sys.h shim/format/compiler.h
noinst_LTLIBRARIES = libpsfmt.la
libpsfmt_la_SOURCES = $(PS_FMT_SOURCES)
libpsfmt_la_CFLAGS = $(PS_CFLAGS)

# The runtime.
PS_CORE_SOURCES = \
	shim/core/pool.c shim/core/pool.h shim/core/blocks.c shim/core/blocks.h \
	shim/core/tcache.c shim/core/tcache.h shim/core/alloc.c shim/core/alloc.h shim/core/posix.h \
	shim/core/jemalloc_ps.h \
	shim/core/gather.c shim/core/report_out.c shim/core/report_out.h \
	shim/core/fdinfo.c shim/core/fdinfo.h shim/core/uring.c shim/core/uring.h shim/core/route.c shim/core/route.h \
	shim/core/live.c shim/core/live.h shim/core/sweep.c shim/core/callsite.c shim/core/callsite.h
noinst_LTLIBRARIES += libpscore.la
libpscore_la_SOURCES = $(PS_CORE_SOURCES)
libpscore_la_CFLAGS = $(PS_CFLAGS) $(URING_CFLAGS) $(UNWIND_CFLAGS)
libpscore_la_LIBADD = libpsfmt.la

# The preloadable library: start-up and the doors.
lib_LTLIBRARIES = libpoolshim.la libpoolshim-jemalloc.la
include_HEADERS = shim/poolshim.h
PS_DOOR_SOURCES = \
	shim/doors/start.c shim/doors/start.h shim/doors/init.c \
	shim/doors/real.c shim/doors/real.h shim/doors/heap.c shim/doors/heap.h \
	shim/doors/malloc.c shim/doors/protect.c \
	shim/doors/iocount.c shim/doors/iocount.h shim/doors/direct.c shim/doors/direct.h shim/doors/io.c \
	shim/doors/fdcalls.c shim/doors/leave.c \
	shim/doors/dump.c shim/doors/dump.h shim/doors/end.c shim/doors/end.h shim/doors/api.c
# -U_FORTIFY_SOURCE: the interposers define read, pread, recv, ..., which
# fortified headers turn into always-inline wrappers that cannot also be
# defined here (distribution CPPFLAGS, Debian's dpkg-buildflags among them,
# set it); it comes after $(CPPFLAGS) on the command line, so it wins.
PS_DOOR_CFLAGS = $(PS_CFLAGS) \
	-fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc \
	-U_FORTIFY_SOURCE
noinst_LTLIBRARIES += libpsdoors.la
libpsdoors_la_SOURCES = $(PS_DOOR_SOURCES)
libpsdoors_la_CFLAGS = $(PS_DOOR_CFLAGS)
libpoolshim_la_SOURCES =
libpoolshim_la_LIBADD = libpsdoors.la libpscore.la $(URING_LINK) -ldl
libpoolshim_la_LDFLAGS = -module -avoid-version -shared \
	-Wl,--version-script=$(top_srcdir)/shim/poolshim.map -Wl,-z,now
EXTRA_libpoolshim_la_DEPENDENCIES = $(top_srcdir)/shim/poolshim.map
libpoolshim_jemalloc_la_SOURCES =
libpoolshim_jemalloc_la_LIBADD = libpsdoors.la libpscore.la $(JEMALLOC_PS) $(URING_LINK) -ldl
libpoolshim_jemalloc_la_LDFLAGS = $(libpoolshim_la_LDFLAGS) $(JEMALLOC_PS_UNDEF)
EXTRA_libpoolshim_jemalloc_la_DEPENDENCIES = $(top_srcdir)/shim/poolshim.map $(JEMALLOC_PS)
EXTRA_DIST += shim/poolshim.map

# The tools (poolshim-stat, poolshim-collect, poolshim-run) are built by tools/local.mk.

