// SPDX-License-Identifier: MIT
/*
 * Lazy initialisation, constructor and destructor, fork and thread-exit
 * handling.
 *
 * Order matters at start: the on/off decision comes first and touches
 * nothing but the environment, so no allocation can happen before we know
 * which allocator owns the heap.  Then the configuration is read, the pool
 * and its arena are created (this initialises the private jemalloc, which
 * registers its own fork handlers), and only then do we call into libc
 * functions that may allocate (pthread_atfork, pthread_key_create): their
 * allocations re-enter malloc, which by then takes the normal path.
 *
 * One pthread_atfork comes before jemalloc exists: the pool lock's.  glibc
 * runs prepare handlers in the reverse order of registration and the others
 * in order, so the pool's run inside jemalloc's: at fork jemalloc's mutexes
 * are taken first, then the pool lock, the order the extent hook takes them
 * in.  (The other way round, a thread in the hook under jemalloc's grow
 * mutex would wait for the pool lock held by the forking thread, which
 * would wait for the grow mutex.)  glibc's handler list starts in static
 * storage (a dynarray), so this early registration does not allocate.
 *
 * _Fork() (glibc 2.34) runs no fork handlers; its wrapper below does the
 * child's part itself, with nothing that allocates or locks.
 *
 * At the end, the destructor (exit, a return from main) and _exit/_Exit
 * (which run no destructor) hand over to end.c: the record's last
 * numbers, and the report delivered or kept.
 */
#include "doors/start.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/blocks.h"
#include "core/callsite.h"
#include "format/config.h"
#include "format/fmt.h"
#include "doors/heap.h"
#include "doors/dump.h"
#include "doors/end.h"
#include "doors/iocount.h"
#include "core/live.h"
#include "core/pool.h"
#include "doors/real.h"
#include "core/uring.h"
#include "core/report_out.h"
#include "format/stats.h"
#include "format/sys.h"

static __thread bool initialising;
static bool decided_on;
static pthread_key_t thread_key;
static bool have_thread_key;

extern char **environ;

static const char *env_get(const char *name)
{
	return secure_getenv(name);
}

/*
 * argv[0]'s last part.  glibc sets program_invocation_short_name before any
 * constructor; a call from the loader itself may come earlier, and then
 * the name is read from /proc (the only system calls a left-alone process
 * makes, and only when POOLSHIM_PROGRAMS asks for the name that early).
 */
static void keep_program_name(bool need)
{
	char cmd[256];

	if (program_invocation_short_name) {
		ps_program_clean(ps_program, sizeof(ps_program), program_invocation_short_name);
		return;
	}
	if (!need)
		return;
	long fd = PS_SYSCALL(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	long n = PS_SYSCALL(SYS_read, (int)fd, cmd, sizeof(cmd) - 1);
	PS_SYSCALL(SYS_close, (int)fd);
	if (n <= 0)
		return;
	cmd[n] = '\0';
	const char *slash = strrchr(cmd, '/');
	ps_program_clean(ps_program, sizeof(ps_program), slash ? slash + 1 : cmd);
}

/* Why this process was left alone, for the one line start() may write. */
static const char *scope_why;
static bool scope_tell;

static bool decide_enabled(void)
{
	const char *v = secure_getenv("POOLSHIM");
	const char *list = secure_getenv("POOLSHIM_PROGRAMS");
	bool on = true, mentioned;

	/* A bad value is reported by ps_config_load(), which keeps the default. */
	if (v && ps_parse_bool(v, &on) < 0)
		on = true;
	/*
	 * poolshim's own tools never run under it: a unit's ExecStopPost=
	 * runs poolshim-collect with the unit's LD_PRELOAD and POOLSHIM_RUN,
	 * and a collector with a record of its own in the run it collects
	 * would report on itself.
	 */
	if (program_invocation_short_name &&
	    strncmp(program_invocation_short_name, "poolshim-", 9) == 0)
		return false;
	keep_program_name(on && list);
	if (!on || !list)
		return on;
	int r = ps_programs_match(list, ps_program, &mentioned, &scope_why);
	if (r == 1)
		return true;
	/* Malformed: told where the user meant the shim to run, or in verbose mode. */
	scope_tell = r < 0 && mentioned;
	if (r == 0)
		scope_why = NULL;
	return false;
}

/* The off path's only output: never a descriptor, never an allocation. */
static void say_left_alone(void)
{
	const char *v = secure_getenv("POOLSHIM_VERBOSE");
	const char *list = secure_getenv("POOLSHIM_PROGRAMS");
	bool verbose = false;

	if (!list || (v && ps_parse_bool(v, &verbose) < 0))
		verbose = false;
	if (!list || (!verbose && !scope_tell))
		return;
	if (scope_why)
		ps_log("POOLSHIM_PROGRAMS='%s' %s; poolshim leaves this and every other "
		       "program alone (names separated by commas, as the report's program "
		       "field gives them)", list, scope_why);
	else
		ps_log("left alone on purpose: POOLSHIM_PROGRAMS='%s' does not name '%s'",
		       list, ps_program);
}

/* Runs in the child of fork() and _Fork(): async-signal-safe work only. */
static void after_fork_child(void)
{
	ps_pid = (int)PS_SYSCALL(SYS_getpid);
	ps_alloc_after_fork_child();
	/* Move the counters to our own live file before zeroing them. */
	ps_live_after_fork_child();
	ps_stats_after_fork_child();
	ps_uring_after_fork_child();
}

static void thread_exit(void *block)
{
	/* Counts made before the live file existed move into it now, or never. */
	ps_live_thread_exit();
	ps_uring_thread_exit();
	ps_stats_release(block);
}

/* Tie a newly claimed counter block to its thread's exit. */
static void thread_register(void *block)
{
	if (have_thread_key && !initialising)
		pthread_setspecific(thread_key, block);
}

static void verbose_banner(void)
{
	char storage[2048];
	struct ps_buf b;
	struct ps_pool_info info;

	ps_buf_init(&b, storage, sizeof(storage), 2);
	ps_buf_log_prefix(&b);
	ps_buf_puts(&b, "effective configuration:\n");
	ps_config_print(&ps_cfg, &b);
	if (!ps_cfg.pool) {
		/* Nothing to reserve or probe: the baseline leaves the heap as it is. */
		ps_buf_log_prefix(&b);
		ps_buf_puts(&b, "pool off (POOLSHIM_POOL=off): every allocation goes to the "
			    "program's heap, counted as with the pool\n");
		ps_buf_flush(&b);
		return;
	}
	/* Verbose only: reserve and probe now, so the reasons below are known. */
	ps_pool_prepare();
	ps_pool_get_info(&info);
	ps_buf_log_prefix(&b);
	ps_buf_printf(&b, "pool %s, arena made on first use, reserve ",
		      ps_alloc_pool_ready() ? "ready" : "unavailable");
	ps_buf_size(&b, info.reserve);
	ps_buf_puts(&b, "; hugetlb: ");
	ps_buf_puts(&b, info.hugetlb_reason ? info.hugetlb_reason : "will be tried first");
	ps_buf_puts(&b, "; THP: ");
	ps_buf_puts(&b, info.thp_reason ? info.thp_reason : "fallback when hugetlb is short");
	ps_buf_putc(&b, '\n');
	ps_buf_flush(&b);
}

/*
 * Whether anything will read the counters: the report, the live file or
 * the dump signal.  If not, the doors count nothing they need not.
 */
static bool counters_read(const struct ps_config *cfg)
{
	return strcmp(cfg->stats, "off") != 0 || cfg->live || cfg->dump_signal != 0;
}

static void start(void)
{
	int saved_errno = errno;

	decided_on = decide_enabled();
	if (!decided_on) {
		ps_config_defaults(&ps_cfg);
		ps_cfg.enabled = false;
		ps_cfg.uring = PS_URING_OFF;
		ps_cfg.timing = false;
		ps_heap_choose(false);
		ps_door_open(ps_heap_chosen_mine(), false);
		ps_heap_publish();
		__atomic_store_n(&ps_state, PS_STATE_OFF, __ATOMIC_RELEASE);
		/* The interposers still need the real functions. */
		ps_real_init();
		ps_io_go_quiet();
		say_left_alone();
		errno = saved_errno;
		return;
	}

	/* Unknown names are looked for only where the environment is trusted. */
	ps_config_load(&ps_cfg, env_get, getauxval(AT_SECURE) ? NULL : environ);
	if (ps_cfg.pool_allocator == PS_POOL_ALLOC_JEMALLOC && !ps_alloc_have_jemalloc()) {
		ps_log("POOLSHIM_POOL_ALLOCATOR=jemalloc: this library has no jemalloc; preload "
		       "libpoolshim-jemalloc.so for it (the poolshim command does); blocks are "
		       "placed to the page");
		ps_cfg.pool_allocator = PS_POOL_ALLOC_PAGES;
	}
	/* Before jemalloc initialises (ps_alloc_init): see the top of the file. */
	pthread_atfork(ps_pool_atfork_prepare, ps_pool_atfork_parent, ps_pool_atfork_child);
	/* The blocks' lock is never held with the pool's: the order is free. */
	pthread_atfork(ps_blocks_atfork_prepare, ps_blocks_atfork_parent, ps_blocks_atfork_child);
	int r = ps_alloc_init(&ps_cfg);
	if (r < 0)
		ps_log("the pool could not be created (%s); large buffers use glibc's "
		       "heap", ps_errno_name(-r) ? ps_errno_name(-r) : "error");
	ps_heap_choose(true);
	ps_pid = ps_start_pid = (int)getpid();
	ps_report_keep_name();
	/* Bound now, with the heap's owner chosen: dlsym may allocate. */
	ps_real_init();
	ps_iocount_init(&ps_cfg);
	if (!counters_read(&ps_cfg))
		ps_io_go_quiet();
	ps_clock_init();
	ps_uring_init(&ps_cfg);
	/* What stderr is now: reports and messages go there only while it still is. */
	ps_report_keep_stderr();
	__atomic_store_n(&ps_log_fd, ps_report_stderr_fd, __ATOMIC_RELEASE);
	if (ps_cfg.live && ps_live_init(&ps_cfg) == 0)
		ps_pool_on_change = ps_live_pool_changed;
	ps_door_open(ps_heap_chosen_mine(), counters_read(&ps_cfg));
	ps_heap_publish();
	__atomic_store_n(&ps_state, PS_STATE_ON, __ATOMIC_RELEASE);

	/* These may allocate: malloc now takes the normal path. */
	pthread_atfork(NULL, NULL, after_fork_child);
	have_thread_key = pthread_key_create(&thread_key, thread_exit) == 0;
	if (have_thread_key) {
		ps_stats_on_claim = thread_register;
		/* The starting thread claimed its block before the key existed. */
		if (ps_stats_tls)
			pthread_setspecific(thread_key, ps_stats_tls);
	}
	ps_dump_init(&ps_cfg);
	ps_callsite_init(&ps_cfg);
	if (ps_cfg.verbose)
		verbose_banner();
	errno = saved_errno;
}

bool ps_init_slow(void)
{
	int expected = PS_STATE_NEW;

	if (initialising) {
		/* Re-entered from our own start-up: the decision is already made. */
		return decided_on;
	}
	if (__atomic_compare_exchange_n(&ps_state, &expected, PS_STATE_STARTING, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		initialising = true;
		start();
		initialising = false;
	} else {
		while (__atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) == PS_STATE_STARTING)
			sched_yield();
	}
	return __atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) == PS_STATE_ON;
}

/*
 * _Fork: fork without the handlers, async-signal-safe.  The child gets the
 * after-fork work that fork() gives it through pthread_atfork, so that its
 * pid, live file, counters and rings are its own.  The pool lock and
 * jemalloc are not repaired, as glibc repairs nothing either: such a child
 * may only make async-signal-safe calls (or, single-threaded, anything).
 */
PS_EXPORT pid_t _Fork(void)
{
	/* Bound at start, so that a fork from a signal handler never calls dlsym. */
	if (!real__Fork)
		ps_enabled();     /* called before our constructor: start binds it */
	pid_t pid = REAL(_Fork)();
	if (pid == 0 && __atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) == PS_STATE_ON) {
		int saved_errno = errno;
		after_fork_child();
		errno = saved_errno;
	}
	return pid;
}

__attribute__((constructor)) static void poolshim_ctor(void)
{
	ps_enabled();
}

/*
 * Preloaded first, so finalised last: the program's atexit handlers and
 * other libraries' destructors have run and their work is counted.
 */
__attribute__((destructor)) static void poolshim_dtor(void)
{
	ps_end(PS_END_EXIT, 0, false, PS_END_BY_EXIT);
}

/* _exit and _Exit skip the destructors: the end's work is done here (end.c). */
PS_EXPORT void _exit(int status)
{
	ps_end(PS_END_EXIT, status, true, PS_REPORT_IN_SIGNAL);
	REAL(_exit)(status);
	/* Only if libc had no _exit (the ENOSYS stub returned). */
	for (;;)
		PS_SYSCALL(SYS_exit_group, status);
}

PS_EXPORT void _Exit(int status)
{
	ps_end(PS_END_EXIT, status, true, PS_REPORT_IN_SIGNAL);
	REAL(_Exit)(status);
	for (;;)
		PS_SYSCALL(SYS_exit_group, status);
}
