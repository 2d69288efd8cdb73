// SPDX-License-Identifier: MIT
/*
 * Routing between glibc's heap and the pool.
 *
 * Below POOLSHIM_POOL_MIN, and whenever the pool cannot serve, a request
 * goes to glibc's own malloc (its __libc_* entry points), exactly as it
 * would without the shim: small allocations are where the shim cannot
 * help, so they keep the program's allocator, its layout, its caches and
 * its costs.  (Serving them from jemalloc instead cost radosgw 5-15% more
 * CPU per 1 MiB request: docs/results.md.)  A block is told apart by its
 * address: the pool's range is one reserved mapping (ps_pool_contains).
 *
 * Which pages of the pool a block gets is blocks.c's (the default,
 * POOLSHIM_POOL_ALLOCATOR=pages: page-exact best fit, see blocks.h), or
 * with POOLSHIM_POOL_ALLOCATOR=jemalloc, in libpoolshim-jemalloc.so only,
 * a jemalloc arena's.  The rest of this comment is about that arena, then
 * about what both share: when to purge.
 *
 * The jemalloc arena is its arena 0, made with jemalloc's default
 * hooks (so its metadata stays out of the pool) and then switched to the
 * hooks below, which take slabs from pool.c, never unmap or decommit them, and let jemalloc split
 * and merge extents freely, across slabs too: slabs are carved back to
 * back, so free blocks on either side of a slab border are one range of
 * memory, and freed small blocks can serve a larger request.  (Nothing is
 * registered with io_uring any more, which is what a buffer spanning
 * slabs used to break.)  jemalloc's "retain" is off in our copy for that:
 * with it, jemalloc 5.3 never merges an extent with the one below it when
 * the hook returned them separately (its head check, whatever the merge
 * hook says), and asks the hook for growth steps well above the request,
 * whose tails only the same slab could use.  Without it, the hook is asked
 * for exactly the extent a request needs, and everything the pool holds
 * merges.  Their purge hook gives free pages back to the kernel
 * (ps_pool_purge).
 *
 * When to purge is decided here, not by jemalloc's decay: its dirty and
 * muzzy decay are -1, because decay sampled at its ticks purges a little of
 * memory that a steady loop reuses every time, and every purged page is a
 * page fault in the next request (that is most of jemalloc's 450-650
 * faults per operation in scripts/bench alloc).  Instead, as glibc trims
 * its heap above a threshold and mimalloc purges after a delay, with no
 * thread of our own:
 * - amount: after a pooled free, when the freed pool memory not yet reused
 *   (an estimate: + each freed block, - each pooled allocation; with
 *   threads, added up per CPU in batches, see struct acct) passes
 *   both POOLSHIM_POOL_RETAIN (256 MiB, at most a sixteenth of the cgroup's
 *   limit) and the pooled memory in use, all of the arena's free memory
 *   goes back (arena.N.purge).  So a program that frees what it used goes
 *   back to the retention, while a busy one whose use swings (many
 *   threads, bursts) is not purged at every dip: what the pool holds stays
 *   under twice what is in use plus the retention.  The default is
 *   256 MiB because a server's use falls to nothing between bursts: the
 *   demo's storage nodes (peak 80 MiB, 4 connections of 16 MiB PUTs) were
 *   purged 5-11 times in 6 s under 64 MiB and took 2 faults per request;
 * - time: POOLSHIM_POOL_DECAY_MS (10 s, as jemalloc's dirty_decay_ms) is
 *   watched in quarters.  Each quarter keeps the lowest that estimate
 *   fell to in it: memory that stayed free through a quarter.  At the
 *   first pooled call after a quarter ends, if the estimate stayed above
 *   4 MiB through each of the last three whole quarters, that much sat
 *   unused for at least three quarters of the window: all of the free
 *   memory goes back.  Memory freed at t is gone at the first pooled call
 *   after t + DECAY_MS at the latest, whatever came before (a burst's peak
 *   no longer holds it for a second window).  A loop whose sizes vary
 *   reuses its free memory within a quarter and keeps it;
 * - malloc_trim() gives it all back at once, then trims glibc's heap.
 * A loop that frees and mallocs the same buffers reuses them within the
 * window and under the retention, so it never purges and never faults.
 *
 * The arena, and jemalloc itself, are made on the first pooled request,
 * not at start: initialising jemalloc costs some 20 system calls and
 * 6 MiB of metadata mappings (a 2 MiB base block, then a 4 MiB one for the
 * 2 MiB rtree leaf of the pool's first GiB), and the arena faults in some
 * 50 pages of its metadata, which a short program that never asks for a
 * large buffer should not pay for.
 *
 * Pool allocations bypass the thread cache, which is off (ps_alloc_init):
 * they are at least POOLSHIM_POOL_MIN bytes, where tcache has nothing to
 * offer, and an explicit-arena allocation must not land in another
 * arena's cache.
 */
#include "core/alloc.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#include "format/compiler.h"
#include "format/fmt.h"
#include "core/callsite.h"
#include "core/jemalloc_ps.h"
#include "core/blocks.h"
#include "core/pool.h"
#include "core/posix.h"
#include "core/tcache.h"
#include "format/stats.h"
#include "format/sys.h"

static _Noreturn void bad_free(const char *call, void *p);

/* The pool arena's life: made on first use, by whichever thread gets there. */
enum arena_state {
	ARENA_NONE,       /* ps_alloc_init() not called, or the pool could not be set up */
	ARENA_OFF,        /* POOLSHIM_POOL=off: counted as with the pool, none made */
	ARENA_LAZY,       /* to be made by the first pooled request */
	ARENA_MAKING,     /* a thread is making it; others use glibc's heap */
	ARENA_READY,
	ARENA_FAILED,
};
static int arena_state = ARENA_NONE;
/* The heap's owner (heap.h): decided by heap.c, read by the report's gathering. */
int ps_heap = PS_HEAP_UNDECIDED;
const char *ps_heap_owner;

static int pool_flags;           /* MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE */
/* POOLSHIM_POOL_ALLOCATOR=jemalloc: the arena places blocks, not blocks.c. */
static bool use_je;
/*
 * jemalloc has initialised (with the arena, by the first pooled request)
 * and registered its fork handlers.  Before that, a fork that lands while
 * another thread is inside jemalloc's initialisation leaves the child a
 * half-made jemalloc with its init lock held and no handler to repair it:
 * such a child never uses the pool (ps_alloc_after_fork_child).
 */
static bool je_ready;
static size_t pool_min = SIZE_MAX;

/* glibc's malloc returns blocks aligned to this; larger alignments need memalign. */
#define LIBC_ALIGN _Alignof(max_align_t)

/*
 * The heap below the threshold: the allocator that defines __libc_malloc,
 * glibc's, or one preloaded after us that takes glibc's names too
 * (tcmalloc, mimalloc do).  Every function comes from that one object, so
 * a block is always freed by the allocator that made it; never by the
 * bare names, which find ours.
 * Until bind_libc() at start, __libc_* serve; usable stays NULL if the
 * set could not be bound whole, and then no block leaves that heap for the
 * pool (its size is not known).
 */
static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	void *(*memalign)(size_t, size_t);
	size_t (*usable)(void *);
}
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/*
 * The sanitizer builds of the core (tests only; the shim is never
 * preloaded under a sanitizer): there the program's allocator is the
 * sanitizer's, reached by the plain names, and only through it does the
 * sanitizer see a block change hands between threads.
 */
libc = { malloc, calloc, realloc, free, memalign, malloc_usable_size };
#define PS_LIBC_SANITIZED 1
#else
libc = { __libc_malloc, __libc_calloc, __libc_realloc, __libc_free, __libc_memalign, NULL };
#define PS_LIBC_SANITIZED 0
#endif

#define PS_LIBC_FUNCS(X)                                                          \
	X(malloc, "malloc") X(calloc, "calloc") X(realloc, "realloc") X(free, "free") \
	X(memalign, "memalign") X(usable, "malloc_usable_size")

/* Which loaded object holds addr: its load bias and file name (dl_iterate_phdr). */
struct object_of {
	uintptr_t addr;
	uintptr_t base;
	const char *name;   /* NULL: found in no object */
};

static int object_of_cb(struct dl_phdr_info *i, size_t size, void *data)
{
	struct object_of *o = data;

	for (int k = 0; k < i->dlpi_phnum; k++) {
		const ElfW(Phdr) *ph = &i->dlpi_phdr[k];
		uintptr_t lo = i->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && o->addr - lo < ph->p_memsz) {
			o->base = i->dlpi_addr;
			o->name = i->dlpi_name;
			return 1;
		}
	}
	return 0;
}

/*
 * The name of the object holding addr ("" for the main program), its
 * load bias in *base; NULL when no object holds it.  Not dladdr: that
 * looks for the nearest symbol too, a walk of the object's symbol table
 * that cost ~90,000 instructions a call in libc, 620,000 at every
 * process start for the seven lookups of bind_libc.
 */
static const char *object_of(const void *addr, uintptr_t *base)
{
	struct object_of o = { (uintptr_t)addr, 0, NULL };

	dl_iterate_phdr(object_of_cb, &o);
	*base = o.base;
	return o.name;
}

/*
 * Bind the set from the object loaded at base, through `h` (a handle, or
 * RTLD_NEXT); false if a name is missing or comes from another object.
 */
static bool bind_from(void *h, uintptr_t base)
{
	__typeof__(libc) found;
	uintptr_t where;

#define PS_LIBC_BIND(field, name)                                               \
	{                                                                       \
		void *sym = dlsym(h, name);                                     \
		if (!sym || !object_of(sym, &where) || where != base)           \
			return false;                                           \
		memcpy(&found.field, &sym, sizeof(sym));                        \
	}
	PS_LIBC_FUNCS(PS_LIBC_BIND)
#undef PS_LIBC_BIND
	libc = found;
	return true;
}

/*
 * The names after ours are the heap's own in the usual case (glibc, or an
 * allocator preloaded after us): dlsym(RTLD_NEXT) finds them without
 * allocating.  Only when they are not (an allocator that takes some names
 * and not others) is the object opened by name, which allocates: a
 * process that never calls malloc otherwise would initialise glibc's heap
 * for it (three system calls at start, issue 26).
 */
static void bind_libc(void)
{
	uintptr_t base;
	void *h;

	if (PS_LIBC_SANITIZED)
		return;
	/* The main program has no file name here: __libc_* keep serving. */
	const char *file = object_of((void *)__libc_malloc, &base);
	if (!file || !*file)
		return;
	if (bind_from(RTLD_NEXT, base))
		return;
	if ((h = dlopen(file, RTLD_LAZY | RTLD_NOLOAD)))
		bind_from(h, base);
}

/* free's door (malloc.c, alloc.h): every pointer takes the slow path until start-up ends. */
uintptr_t ps_door_pool_end = UINTPTR_MAX;
size_t ps_door_exact_min, ps_door_sample_below;
static bool count_small;            /* POOLSHIM_COUNT_SMALL */
static size_t small_below;          /* calls below this are small (ps_alloc_set_small) */
static bool small_counted;          /* and sampled, else not counted */
__thread uint32_t ps_alloc_gate = 1;
/* The gap the gate is counting down, and the calls still counted one by one. */
static __thread uint32_t alloc_gap = 1;
static __thread uint32_t alloc_exact_left = PS_ALLOC_EXACT_FIRST;
static __thread uint32_t alloc_rng;
/* Nothing reads the counters: ps_alloc_gate_quiet. */
static bool gate_quiet;

/*
 * The gate ran out: the call that closed the gap stands for the gap's
 * calls.  The next gap is drawn from [SAMPLE/2, SAMPLE*3/2): a fixed one
 * would sample the same call of a loop every time.
 */
static uint32_t alloc_gate_refill(void)
{
	uint32_t w = alloc_gap, g = 1;

	if (__atomic_load_n(&gate_quiet, __ATOMIC_RELAXED))
		g = UINT32_MAX;
	else if (alloc_exact_left)
		alloc_exact_left--;
	else {
		uint32_t x = alloc_rng;
		if (ps_unlikely(x == 0))
			x = (uint32_t)__builtin_ia32_rdtsc() | 1;
		alloc_rng = x = ps_xorshift32(x);
		g = PS_ALLOC_SAMPLE / 2 + (x & (PS_ALLOC_SAMPLE - 1));
	}
	alloc_gap = g;
	ps_alloc_gate = g;
	return w;
}

/*
 * A pooled block is about to reach the program: make sure free() looks
 * at the pool's range before any thread can hand the block to free.
 */
static void door_see_pool(void)
{
	uintptr_t lo = __atomic_load_n(&ps_pool_lo, __ATOMIC_ACQUIRE);
	if (ps_unlikely(__atomic_load_n(&ps_door_pool_end, __ATOMIC_RELAXED) != lo + ps_pool_span))
		__atomic_store_n(&ps_door_pool_end, lo + ps_pool_span, __ATOMIC_RELEASE);
}


/* The interposed call in progress, for call-site records. */
static __thread enum ps_call site_call;

/* Why the last slab request on this thread failed (set by the hook). */
static __thread enum ps_pool_fail hook_fail;
/*
 * The pooled request in progress on this thread, for the hook: what of a
 * new slab to prefault with POOLSHIM_PREFAULT=on (the rest of its size
 * class faults in when used).
 */
static __thread size_t hook_need;

static void *hook_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment,
			bool *zero, bool *commit, unsigned arena_ind)
{
	bool zeroed = false;
	enum ps_pool_fail why;

	/* Growing in place would mean backing a range we did not choose. */
	if (new_addr != NULL)
		return NULL;
	void *p = ps_pool_take(size, alignment, hook_need, &zeroed, &why);
	if (!p) {
		hook_fail = why;
		return NULL;
	}
	*zero = zeroed;
	*commit = true;
	return p;
}

/*
 * jemalloc purges with this when told (arena.N.purge): false (done) when
 * the whole range was given back and reads as zeros now; true otherwise,
 * so jemalloc keeps treating it as holding old contents.
 */
static bool hook_purge_forced(extent_hooks_t *h, void *addr, size_t size, size_t offset,
			      size_t length, unsigned arena_ind)
{
	return ps_pool_purge((char *)addr + offset, length) != 0;
}

/* Returning true opts out: the address range stays with the pool. */
static bool hook_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed,
			unsigned arena_ind)
{
	return true;
}

static void hook_destroy(extent_hooks_t *h, void *addr, size_t size, bool committed,
			 unsigned arena_ind)
{
}

static bool hook_commit(extent_hooks_t *h, void *addr, size_t size, size_t offset,
			size_t length, unsigned arena_ind)
{
	return false;    /* slabs are always committed */
}

static bool hook_decommit(extent_hooks_t *h, void *addr, size_t size, size_t offset,
			  size_t length, unsigned arena_ind)
{
	return true;     /* refuse: the range stays mapped; purging gives the pages back */
}

static bool hook_split(extent_hooks_t *h, void *addr, size_t size, size_t size_a,
		       size_t size_b, bool committed, unsigned arena_ind)
{
	return false;
}

/*
 * jemalloc merges only neighbours (a's end is b's start), so the two are
 * one range of pool memory, backed and read-write: always allowed.
 */
static bool hook_merge(extent_hooks_t *h, void *addr_a, size_t size_a, void *addr_b,
		       size_t size_b, bool committed, unsigned arena_ind)
{
	return false;
}

static extent_hooks_t pool_hooks = {
	.alloc = hook_alloc,
	.dalloc = hook_dalloc,
	.destroy = hook_destroy,
	.commit = hook_commit,
	.decommit = hook_decommit,
	.purge_lazy = NULL,
	.purge_forced = hook_purge_forced,
	.split = hook_split,
	.merge = hook_merge,
};

/*
 * The purge policy's state (see the head of this file).  Estimates, kept
 * with relaxed atomics: a race costs one purge too many or too few.
 */
static char purge_ctl[32];          /* "arena.N.purge" */
static int64_t dirty;               /* freed pool bytes not yet reused */
static int64_t freed_since_purge;   /* pool bytes freed since the last purge (not lowered by reuse) */
static int64_t in_use;              /* pooled bytes live */
static uint64_t window_end;         /* when this quarter of the window ends (ns, coarse clock) */
static int64_t quarter_low;         /* the lowest dirty in this quarter */
static int64_t past_low[3];         /* ... in each of the last three whole quarters */
static int rollover;                /* a thread is closing a quarter */
static int64_t retain_bytes = INT64_MAX;
static uint64_t decay_ns;           /* 0: no time limit */
static int purging;


/* The vDSO's coarse clock: no syscall, a few ns, 4 ms steps. */
static uint64_t now_ns(void)
{
	return ps_clock_ns(CLOCK_MONOTONIC_COARSE);
}

/*
 * Set while this thread is inside jemalloc (pooled calls with the
 * jemalloc placement), whose locks it may hold: a purge asked for by a
 * door's poll (ps_alloc_decay_poll) waits for a call outside, since the
 * door may run in a signal handler that interrupted this thread there.
 */
static __thread bool in_je;

/*
 * Give all of the pool arena's free memory back; one thread at a time.
 * polled: from a door's poll, which may run in a signal handler: nothing
 * is done if this thread may hold a lock the purge takes (false then).
 */
static bool purge_now(bool polled)
{
	int idle = 0;

	if (polled && in_je)
		return false;
	if (!__atomic_compare_exchange_n(&purging, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return false;
	int saved_errno = errno;
	bool done = true;
	ps_alloc_counts_sync();
	/*
	 * The CPUs' cached blocks are free memory too: they go back with
	 * the rest.  From a poll (the I/O doors', possibly in a signal
	 * handler that interrupted a thread holding a cache's lock or
	 * blocks.c's) only what can go without waiting: else a program that
	 * went on with small allocations and I/O after a burst of buffers
	 * kept the caches' 32 MiB a CPU for ever (64 x 2 MiB freed: 35 MiB
	 * resident after 12 s, glibc 1.5).
	 */
	if (!polled)
		ps_tcache_flush_all();
	else
		ps_tcache_flush_try();
	if (use_je) {
		__atomic_store_n(&dirty, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&freed_since_purge, 0, __ATOMIC_RELAXED);
		psje_mallctl(purge_ctl, NULL, NULL, NULL, 0);
	} else {
		size_t total;
		int r = 0;
		int64_t d = __atomic_exchange_n(&dirty, 0, __ATOMIC_RELAXED);
		int64_t f = __atomic_exchange_n(&freed_since_purge, 0, __ATOMIC_RELAXED);
		if (!polled)
			ps_blocks_purge();
		else
			r = ps_blocks_purge_try(&total);
		if (r != 0) {
			/*
			 * Some arenas were busy: the estimates stand, for the
			 * next look (which finds nothing left in the arenas
			 * purged now).  A purge that gave back part still counts.
			 */
			__atomic_add_fetch(&dirty, d, __ATOMIC_RELAXED);
			__atomic_add_fetch(&freed_since_purge, f, __ATOMIC_RELAXED);
			done = false;
			if (r == -EAGAIN)
				ps_pool_count_purge();
		}
	}
	if (done)
		ps_pool_count_purge();
	errno = saved_errno;
	__atomic_store_n(&purging, 0, __ATOMIC_RELEASE);
	return done;
}

static void pool_purge(void)
{
	purge_now(false);
}

/*
 * Following the memory cgroup's usage (pool.c found its limit), on the
 * pooled calls only: the bytes we believe are left below the limit, less
 * each pooled block and each fallback since the usage was last read.  When
 * that falls under an eighth of the limit, the usage is read (one open,
 * read, close); when what is left is under an eighth, or under the request
 * about to be written, all of the pool's free memory goes back (partly used
 * THP units too, by the page: pool.c) before the program touches the new
 * block, rather than the kernel's OOM killer ending it.
 */
static int64_t cg_limit;            /* 0: no limit */
static int64_t cg_headroom;         /* estimate */

static void cgroup_watch(size_t n)
{
	if (ps_likely(cg_limit == 0))
		return;
	int64_t h = __atomic_sub_fetch(&cg_headroom, (int64_t)n, __ATOMIC_RELAXED);
	if (ps_likely(h > cg_limit / 8))
		return;
	int saved_errno = errno;
	int64_t used = (int64_t)ps_pool_cgroup_usage();
	if (used > 0) {
		h = cg_limit - used;
		if (h < cg_limit / 8 || h < (int64_t)n) {
			pool_purge();
			used = (int64_t)ps_pool_cgroup_usage();
			h = used > 0 ? cg_limit - used : h;
		}
		__atomic_store_n(&cg_headroom, h, __ATOMIC_RELAXED);
	}
	errno = saved_errno;
}

/*
 * A pooled call at now, which moved the free memory estimate from before
 * to d: close the quarters that ended, and purge if free
 * memory stayed above the floor through the last three.  One thread at a
 * time; the others go on (the counts are estimates anyway).
 */
static void decay_tick(uint64_t now, int64_t d, int64_t before, bool polled)
{
	int idle = 0;

	if (!__atomic_compare_exchange_n(&rollover, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	uint64_t end = __atomic_load_n(&window_end, __ATOMIC_RELAXED);
	uint64_t quarter = decay_ns / 4 ? decay_ns / 4 : 1;
	if (now >= end) {
		int64_t low = __atomic_load_n(&quarter_low, __ATOMIC_RELAXED);
		low = before < low ? before : low;
		/* Quarters with no pooled call in them held what this call found. */
		uint64_t skipped = (now - end) / quarter;
		for (uint64_t k = 0; k < 3 && k <= skipped; k++) {
			past_low[0] = past_low[1];
			past_low[1] = past_low[2];
			past_low[2] = k == 0 ? low : before;
		}
		__atomic_store_n(&window_end, end + (skipped + 1) * quarter, __ATOMIC_RELAXED);
		__atomic_store_n(&quarter_low, d, __ATOMIC_RELAXED);
		int64_t least = past_low[0];
		least = past_low[1] < least ? past_low[1] : least;
		least = past_low[2] < least ? past_low[2] : least;
		if (least > ((int64_t)4 << 20) && purge_now(polled)) {
			past_low[0] = past_low[1] = past_low[2] = 0;
			__atomic_store_n(&quarter_low, 0, __ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&rollover, 0, __ATOMIC_RELEASE);
}

/* The free memory estimate went from before to d: the quarter's low, and its end. */
static void decay_note(int64_t d, int64_t before)
{
	if (d < __atomic_load_n(&quarter_low, __ATOMIC_RELAXED))
		__atomic_store_n(&quarter_low, d, __ATOMIC_RELAXED);
	if (decay_ns == 0)
		return;
	uint64_t now = now_ns();
	if (ps_unlikely(now >= __atomic_load_n(&window_end, __ATOMIC_RELAXED)))
		decay_tick(now, d, before, false);
}

bool ps_alloc_decay_on(void)
{
	return decay_ns != 0;
}

void ps_alloc_decay_poll(void)
{
	if (decay_ns == 0 || __atomic_load_n(&arena_state, __ATOMIC_ACQUIRE) != ARENA_READY)
		return;
	int saved_errno = errno;
	uint64_t now = now_ns();
	if (now >= __atomic_load_n(&window_end, __ATOMIC_RELAXED)) {
		ps_alloc_counts_sync();
		/* No pooled call moved the estimate: it held all along. */
		int64_t d = __atomic_load_n(&dirty, __ATOMIC_RELAXED);
		decay_tick(now, d, d, true);
	}
	errno = saved_errno;
}

/*
 * Pooled blocks were handed out and freed, used bytes more handed out
 * than freed (less than 0: more freed), freed of them freed: free memory
 * reused, if any; if act, a purge if too much, or for too long, is kept
 * (not from a poll or a report, which may run in a signal handler).
 */
static void note_moved(int64_t used, int64_t freed, bool act)
{
	if (freed)
		__atomic_add_fetch(&freed_since_purge, freed, __ATOMIC_RELAXED);
	int64_t live = __atomic_add_fetch(&in_use, used, __ATOMIC_RELAXED);
	int64_t d = __atomic_sub_fetch(&dirty, used, __ATOMIC_RELAXED);
	int64_t before = d + used;
	if (d < 0) {
		/* Served from fresh memory (or a purged range): nothing was reused. */
		__atomic_store_n(&dirty, 0, __ATOMIC_RELAXED);
		d = 0;
	}
	if (!act) {
		if (d < __atomic_load_n(&quarter_low, __ATOMIC_RELAXED))
			__atomic_store_n(&quarter_low, d, __ATOMIC_RELAXED);
		return;
	}
	if (used < 0 && d > retain_bytes && d > live) {
		pool_purge();
		__atomic_store_n(&quarter_low, 0, __ATOMIC_RELAXED);
		return;
	}
	decay_note(d, before);
}

/* A pooled block of n bytes was handed out. */
static void note_alloc(size_t n)
{
	note_moved((int64_t)n, 0, true);
}

/* A pooled block of n bytes was freed. */
static void note_free(size_t n)
{
	note_moved(-(int64_t)n, (int64_t)n, true);
}

/*
 * A pooled block was resized in place from before to after bytes: what it
 * took counts as allocated, what it gave back as freed.  Else the policy's
 * live size drifts by the difference at the block's free (a block grown
 * from 1 MiB to 64 MiB took 1 MiB at malloc and gave 64 back), and a
 * shrink's tail would never count towards a purge.
 */
static void note_resize(size_t before, size_t after)
{
	if (after > before)
		note_alloc(after - before);
	else if (after < before)
		note_free(before - after);
}

/*
 * The counts of pooled bytes (the report's in-use gauge and peak, and the
 * purge policy's in_use, dirty and freed_since_purge) are shared by all
 * threads: with two or more threads running at once, the four atomic
 * updates every pooled malloc and free made to them moved their cache
 * lines between CPUs at each call (bench/threadchurn, one byte touched a
 * block, 2 threads on 2 CPUs: 52% of the CPU time in those updates,
 * 3.1M steps per CPU second against 9.1M with one thread).  So from a
 * process's second thread on, each CPU keeps its own changes, on a line
 * only its threads write, and adds them to the shared counts when they
 * pass acct_batch bytes (either way), and before anything reads them
 * for a decision (a purge, malloc_trim, the decay's poll, the report).
 * The counts are then off by at most acct_batch a CPU, either way; a
 * one-thread process keeps them exact, call by call.  The memory cgroup's headroom
 * (cgroup_watch) is lowered by each batch too: under a limit it was a
 * fifth shared update (2 threads: 10-15% fewer steps than without a
 * limit); a block larger than the batch still folds, and is checked, at
 * once, before the program writes it.
 */
#define ACCT_SLOTS 256
struct acct {
	int64_t used;           /* bytes handed out less bytes freed, not yet added */
	int64_t freed;          /* bytes freed, not yet added */
	int64_t allocs;         /* allocations among them */
} __attribute__((aligned(64)));

static struct acct accts[ACCT_SLOTS];
static bool acct_on;
static int64_t acct_batch;
static uint32_t acct_threads;
static __thread bool acct_seen;

/* Whether this call should batch: counts the threads making pooled calls, up to two. */
static bool acct_batching(void)
{
	if (ps_likely(__atomic_load_n(&acct_on, __ATOMIC_RELAXED)))
		return true;
	if (acct_seen)
		return false;
	acct_seen = true;
	if (__atomic_add_fetch(&acct_threads, 1, __ATOMIC_RELAXED) < 2)
		return false;
	/* A sixty-fourth of the retention, 256 KiB to 4 MiB: the error stays small beside it. */
	int64_t b = retain_bytes / 64;
	b = b < ((int64_t)256 << 10) ? (int64_t)256 << 10 : b > ((int64_t)4 << 20) ? (int64_t)4 << 20 : b;
	__atomic_store_n(&acct_batch, b, __ATOMIC_RELAXED);
	__atomic_store_n(&acct_on, true, __ATOMIC_RELEASE);
	return true;
}

/* One CPU's changes into the shared counts; act: as note_moved's. */
static void acct_fold(struct acct *a, bool act)
{
	int64_t used = __atomic_exchange_n(&a->used, 0, __ATOMIC_RELAXED);
	int64_t freed = __atomic_exchange_n(&a->freed, 0, __ATOMIC_RELAXED);
	int64_t allocs = __atomic_exchange_n(&a->allocs, 0, __ATOMIC_RELAXED);
	if (used || freed || allocs) {
		ps_stats_pool_moved(used, (uint64_t)allocs);
		note_moved(used, freed, act);
		/* The cgroup's headroom falls by what was handed out (used + freed). */
		if (act && used + freed > 0)
			cgroup_watch((size_t)(used + freed));
	}
}

/*
 * Every CPU's changes into the shared counts, before they are read for a
 * decision or a report: atomics only, no purge (a signal handler may ask).
 */
void ps_alloc_counts_sync(void)
{
	if (!__atomic_load_n(&acct_on, __ATOMIC_ACQUIRE))
		return;
	for (unsigned i = 0; i < ACCT_SLOTS; i++)
		if (__atomic_load_n(&accts[i].used, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&accts[i].freed, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&accts[i].allocs, __ATOMIC_RELAXED))
			acct_fold(&accts[i], false);
}

static struct acct *acct_mine(void)
{
	int cpu = sched_getcpu();
	return &accts[cpu < 0 ? 0 : (unsigned)cpu % ACCT_SLOTS];
}

/* A pooled block of n bytes was handed out. */
static void pool_took(size_t n)
{
	if (!acct_batching()) {
		ps_stats_pool_used((int64_t)n);
		note_alloc(n);
		cgroup_watch(n);
		return;
	}
	struct acct *a = acct_mine();
	int64_t u = __atomic_add_fetch(&a->used, (int64_t)n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&a->allocs, 1, __ATOMIC_RELAXED);
	if (u > __atomic_load_n(&acct_batch, __ATOMIC_RELAXED))
		acct_fold(a, true);
}

/* A pooled block of n bytes was freed. */
static void pool_gave(size_t n)
{
	if (!acct_batching()) {
		ps_stats_pool_used(-(int64_t)n);
		note_free(n);
		return;
	}
	struct acct *a = acct_mine();
	int64_t b = __atomic_load_n(&acct_batch, __ATOMIC_RELAXED);
	int64_t u = __atomic_sub_fetch(&a->used, (int64_t)n, __ATOMIC_RELAXED);
	int64_t f = __atomic_add_fetch(&a->freed, (int64_t)n, __ATOMIC_RELAXED);
	if (u < -b || f > b)
		acct_fold(a, true);
}

static int arena_ctl_ssize(unsigned arena, const char *leaf, ssize_t value)
{
	char name[64];
	struct ps_buf b;

	ps_buf_init(&b, name, sizeof(name), -1);
	ps_buf_printf(&b, "arena.%u.%s", arena, leaf);
	return psje_mallctl(ps_buf_str(&b), NULL, NULL, &value, sizeof(value));
}

/* Make the jemalloc arena: 0, or -errno with the arena (if any) left unused. */
static int make_je_arena(void)
{
	unsigned arena;
	extent_hooks_t *hooks = &pool_hooks;
	char name[64];
	struct ps_buf b;

	if (!__atomic_load_n(&je_ready, __ATOMIC_ACQUIRE)) {
		unsigned narenas;
		size_t nsz = sizeof(narenas);
		/* Initialises jemalloc, which registers its fork handlers. */
		if (psje_mallctl("arenas.narenas", &narenas, &nsz, NULL, 0) != 0)
			return -ENOMEM;
		__atomic_store_n(&je_ready, true, __ATOMIC_RELEASE);
	}
	/*
	 * The pool arena is arena 0, jemalloc's one automatic arena, which
	 * nothing else uses here: no thread cache, no profiling, and every
	 * call names its arena.  A second arena would cost a 2 MiB base block
	 * of address space and some 100 KiB of resident metadata and
	 * statistics.  Its metadata stays out of the pool all the same: the
	 * hooks set below serve its extents, never its base blocks.
	 */
	arena = 0;
	/* jemalloc never purges on its own: pool_purge() below decides. */
	if (arena_ctl_ssize(arena, "dirty_decay_ms", -1) != 0 ||
	    arena_ctl_ssize(arena, "muzzy_decay_ms", -1) != 0)
		return -EINVAL;
	ps_buf_init(&b, name, sizeof(name), -1);
	ps_buf_printf(&b, "arena.%u.extent_hooks", arena);
	if (psje_mallctl(ps_buf_str(&b), NULL, NULL, &hooks, sizeof(hooks)) != 0)
		return -EINVAL;

	pool_flags = MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE;
	ps_buf_init(&b, purge_ctl, sizeof(purge_ctl), -1);
	ps_buf_printf(&b, "arena.%u.purge", arena);
	return 0;
}

/*
 * Set the pool up for its first block: the jemalloc arena if it places
 * them, the range, the cgroup's limit and the purge policy's clock.  0 or
 * -errno.
 */
static int make_arena(void)
{
	if (use_je) {
		int r = make_je_arena();
		if (r < 0)
			return r;
	}
	/* The cgroup's limit, read now, may lower what the pool keeps. */
	ps_pool_prepare();
	retain_bytes = (int64_t)(ps_pool_retain() > INT64_MAX ? INT64_MAX : ps_pool_retain());
	ps_tcache_limit_total((size_t)retain_bytes / 2);
	struct ps_pool_info info;
	ps_pool_get_info(&info);
	if (info.cgroup_limit && info.cgroup_limit < INT64_MAX) {
		cg_headroom = 0;   /* read at the first pooled call */
		cg_limit = (int64_t)info.cgroup_limit;
	}
	window_end = now_ns() + (decay_ns / 4 ? decay_ns / 4 : 1);
	return 0;
}

/*
 * The slow path of pool_try(): make the arena if nobody has.  Never waits
 * for another thread (nor holds a lock a fork could inherit): while one
 * thread makes it, the others' requests go to glibc's heap.
 */
static bool arena_usable(void)
{
	int s = ARENA_LAZY;

	if (__atomic_compare_exchange_n(&arena_state, &s, ARENA_MAKING, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		int saved_errno = errno;
		int r = make_arena();
		errno = saved_errno;
		if (r < 0)
			ps_log("the pool arena could not be created (%s); large buffers use "
			       "glibc's heap",
			       ps_errno_name(-r) ? ps_errno_name(-r) : "error");
		s = r < 0 ? ARENA_FAILED : ARENA_READY;
		__atomic_store_n(&arena_state, s, __ATOMIC_RELEASE);
	}
	return s == ARENA_READY;
}

/*
 * A free to the page placement, its tail given back as POOLSHIM_POOL_TAILS
 * says (counted), unless this CPU frees fast (its cache's pace): there a
 * system call and the refaults would cost beside each buffer's work (the
 * threads benchmark's one-byte rows, whose tails are unwritten, fell to a
 * third of their steps when AUTO gave them back); hot as
 * ps_blocks_free(), else as ps_blocks_free_cold().
 */
static size_t blocks_free(void *p, bool hot)
{
	bool trimmed;
	size_t n = ps_blocks_free_tail(p, hot, !ps_tcache_cpu_fast(), &trimmed);
	if (trimmed)
		ps_stats_event(PS_EV_POOL_TAIL);
	return n;
}

/* What tcache.c flushes into: the block's placement, the free counted already. */
static void backend_release(void *p, size_t n, bool hot)
{
	(void)n;
	if (use_je)
		psje_dallocx(p, pool_flags);
	else if (blocks_free(p, hot) == 0)
		bad_free("free", p);
}

/* backend_release, only if blocks.c's lock is free now (the decay's poll). */
static int backend_release_try(void *p, size_t n)
{
	ssize_t r = ps_blocks_free_try(p);
	if (r == -EBUSY)
		return -1;
	if (r == 0)
		bad_free("free", p);
	(void)n;
	return 0;
}

/*
 * jemalloc's size class for a large request (4 classes to a doubling, as
 * its sz_s2u): what a cached block of the arena's is compared with.
 */
static size_t je_good_size(size_t size)
{
	if (size <= PS_PAGE)
		return PS_PAGE;
	unsigned lg = 63 - (unsigned)__builtin_clzll((unsigned long long)(size << 1) - 1);
	size_t delta = (size_t)1 << (lg - 3);
	return (size + delta - 1) & ~(delta - 1);
}

int ps_alloc_init(const struct ps_config *cfg)
{
	int r;

	/* First: the small heap serves whether or not the pool can be made. */
	bind_libc();
	if ((r = ps_pool_init(cfg)) < 0)
		return r;
	pool_min = cfg->pool_min;
	count_small = cfg->count_small;
	/*
	 * POOLSHIM_POOL=off, the baseline run: every block goes to the
	 * program's heap, as without the shim, and every call is counted as
	 * with the pool (the doors' thresholds follow pool_min).  No range is
	 * reserved, jemalloc never starts, no arena is made (pool_try).
	 */
	if (!cfg->pool) {
		__atomic_store_n(&arena_state, ARENA_OFF, __ATOMIC_RELEASE);
		return 0;
	}
	decay_ns = cfg->pool_decay_ms * 1000000u;
	/* Without the copy in this library, init.c has said so and asked for pages. */
	use_je = cfg->pool_allocator == PS_POOL_ALLOC_JEMALLOC && ps_have_jemalloc();
	struct ps_tcache_backend be = { backend_release, use_je ? NULL : backend_release_try,
					use_je ? je_good_size : NULL };
	ps_tcache_init(cfg->pool_cache, cfg->pool_cache_pace_us * 1000, &be);
	if (!use_je) {
		ps_blocks_init((unsigned)cfg->pool_arenas);
		ps_blocks_set_tails(cfg->pool_tails, cfg->pool_tail_keep);
		__atomic_store_n(&arena_state, ARENA_LAZY, __ATOMIC_RELEASE);
		return 0;
	}
	/*
	 * jemalloc initialises with the arena, on the first pooled request: its
	 * set-up (some 20 system calls, 6 MiB of mappings, /proc and /sys
	 * probes) is not paid by a process that never asks for a large
	 * buffer.  It registers its fork handlers then, after the shim's, as
	 * init.c needs (see there).
	 *
	 * No cache-oblivious offset in the private jemalloc (its
	 * opt.cache_oblivious, which Debian's 5.3 reads from no configuration
	 * string, so set before it starts): a large block then starts on its
	 * extent's first page and its extent is exactly its size class (32 MiB,
	 * not 32 MiB + 4 KiB).  Freed blocks are then whole 2 MiB units that
	 * purging gives back without splitting a hugepage, and a 32 MiB buffer
	 * does not hold a 17th hugepage.  The offset spreads the first cache
	 * lines of small large blocks over cache sets; pooled blocks are 64 KiB
	 * and up, and streamed through.
	 */
	je_opt_cache_oblivious = false;
	/* Extents that merge across slabs, exactly the size asked: see the head of this file. */
	je_opt_retain = false;
	/*
	 * First fit over every free extent, however much larger than the
	 * request (jemalloc skips free extents over 64 times the request's
	 * size, so that small blocks do not split a large one it may want
	 * whole later).  A swinging live set frees its large buffers into one
	 * merged range well over 64 times a 1 MiB request: skipped, it made
	 * the pool take new slabs above while the range sat free below.
	 */
	je_opt_lg_extent_max_active_fit = 63;
	/*
	 * No thread cache and one automatic arena.  Every pooled call names
	 * the pool arena and bypasses the cache, so neither is ever used; but
	 * with the cache on, each thread's first call into jemalloc carves a
	 * cache from arena 0 (and so maps arena 0's first 2 MiB extent, and an
	 * rtree leaf of 2 MiB for its addresses) and may make an automatic
	 * arena for the thread (a 2 MiB base block each, up to four per CPU);
	 * and jemalloc's control layer reserves statistics for every
	 * automatic arena there may be (some 30 KiB each).  All of that is
	 * address space an RLIMIT_AS counts, for nothing.
	 */
	je_opt_tcache = false;
	je_opt_narenas = 1;
	__atomic_store_n(&arena_state, ARENA_LAZY, __ATOMIC_RELEASE);
	return 0;
}

bool ps_alloc_blocks_info(struct ps_blocks_info *out)
{
	if (use_je || __atomic_load_n(&arena_state, __ATOMIC_ACQUIRE) != ARENA_READY)
		return false;
	ps_blocks_get_info(out);
	return true;
}

bool ps_alloc_have_jemalloc(void)
{
	return ps_have_jemalloc();
}

bool ps_alloc_pool_ready(void)
{
	int s = __atomic_load_n(&arena_state, __ATOMIC_ACQUIRE);
	return s != ARENA_NONE && s != ARENA_FAILED && s != ARENA_OFF;
}

void ps_alloc_after_fork_child(void)
{
	/* A purge in another thread did not come along. */
	__atomic_store_n(&purging, 0, __ATOMIC_RELAXED);
	ps_tcache_after_fork_child();
	/*
	 * The thread making the arena is gone: let the next request retry,
	 * unless it was still initialising jemalloc (see je_ready).  The
	 * page placement starts no jemalloc: its set-up (make_arena) holds
	 * no lock a fork keeps, and can always be run again.
	 */
	int s = ARENA_MAKING;
	int to = !use_je || __atomic_load_n(&je_ready, __ATOMIC_ACQUIRE) ? ARENA_LAZY : ARENA_FAILED;
	__atomic_compare_exchange_n(&arena_state, &s, to, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

/*
 * A request the pool would have served, with the pool off: no fallback (the
 * pool was not asked).  The first one is where a pooled run takes its
 * first slab and makes its live record (ps_pool_on_change): so does this
 * run, for `poolshim stat` and `poolshim collect` to see it alike.
 */
static void pool_off_large(void)
{
	static int seen;

	if (ps_likely(__atomic_load_n(&seen, __ATOMIC_RELAXED)) ||
	    __atomic_exchange_n(&seen, 1, __ATOMIC_ACQ_REL))
		return;
	void (*changed)(void) = ps_pool_on_change;
	if (changed) {
		int saved_errno = errno;
		changed();
		errno = saved_errno;
	}
}

/*
 * A block of size bytes from whichever places them, aligned to align (0:
 * the heap's own), zeroed if zero: its usable size in *n.  NULL with *why
 * set, errno kept.
 */
static void *place(size_t size, size_t align, bool zero, size_t *n, enum ps_pool_fail *why)
{
	if (!use_je) {
		void *p = ps_blocks_alloc(size, align, zero, why);
		*n = (size + PS_PAGE - 1) & ~(size_t)(PS_PAGE - 1);
		return p;
	}
	int saved_errno = errno;
	int flags = pool_flags | (zero ? MALLOCX_ZERO : 0) |
		    (align > LIBC_ALIGN ? MALLOCX_ALIGN(align) : 0);
	hook_fail = PS_FAIL_NONE;
	hook_need = size;
	in_je = true;
	void *p = psje_mallocx(size, flags);
	in_je = false;
	hook_need = 0;
	*why = hook_fail;
	if (p)
		*n = psje_sallocx(p, 0);
	errno = saved_errno;
	return p;
}

/*
 * place(), and once more after a purge when the pool is at its cap with
 * free memory kept.  The purged blocks, merged, may hold the request, and
 * what is resident no longer counts them.  Before, the request went to
 * glibc's heap while the pool sat on its free memory: two heaps' free
 * memory under one limit.  (Not by the dirty estimate, which fresh slabs
 * lower too: anything freed since the last purge may still be held.)
 */
static void *place_or_purge(size_t size, size_t align, bool zero, size_t *n,
			    enum ps_pool_fail *why)
{
	void *p = place(size, align, zero, n, why);
	if (ps_unlikely(p == NULL) && *why == PS_FAIL_POOL_FULL) {
		ps_alloc_counts_sync();        /* frees the CPUs have not added yet count too */
		if (__atomic_load_n(&freed_since_purge, __ATOMIC_RELAXED) > 0) {
			pool_purge();
			p = place(size, align, zero, n, why);
		}
	}
	return p;
}

/*
 * Whether blocks.c has no free block that could hold size bytes at align
 * (the counts it publishes, read without its lock): the request would take
 * a new slab.  Memory in the CPUs' caches is flushed first, so that it
 * merges and serves, and the pool's peak is not the cached bytes higher
 * (a churn of 1-24 MiB buffers peaked 5-15% higher with 32 MiB caches).
 * Never for jemalloc's placement, which publishes no counts.
 */
static bool placement_short(size_t size, size_t align)
{
	if (use_je || size <= ps_tcache_largest() || ps_tcache_cached_bytes_mine() == 0)
		return false;
	return ps_blocks_largest_free() < size + (align > PS_PAGE ? align - PS_PAGE : 0);
}

/*
 * Try the pool for a large request.  NULL (errno preserved) means "use
 * glibc's heap", with the reason counted.
 */
static void *pool_try(size_t size, size_t align, bool zero)
{
	int s = __atomic_load_n(&arena_state, __ATOMIC_ACQUIRE);

	if (ps_unlikely(s != ARENA_READY)) {
		if (s == ARENA_OFF) {
			pool_off_large();
			return NULL;
		}
		if (!arena_usable()) {
			ps_stats_event(PS_EV_FB_NOT_READY);
			return NULL;
		}
	}
	size_t n = 0;
	enum ps_pool_fail why = PS_FAIL_NONE;
	void *p = NULL;
	bool cached = false;
	if (ps_tcache_on && (p = ps_tcache_take(size, align, &n)) != NULL) {
		ps_stats_event(PS_EV_POOL_CACHED);
		cached = true;          /* the size map says it is live already */
		if (zero)
			memset(p, 0, size);     /* a cached block held the program's data */
	}
	if (!p) {
		/* The pool would grow while caches hold memory: let the placement have it first. */
		if (ps_tcache_on && placement_short(size, align))
			ps_tcache_flush_all();
		/*
		 * Too large for the cache: the block this CPU freed last, its
		 * lines likely still in the CPU's caches, goes to the placement
		 * first, which places the request where it lies if the free
		 * memory there holds it.  A block larger than the cache's
		 * largest pays one more placement call; smaller requests never
		 * come here.
		 */
		else if (ps_tcache_on && !use_je && size > ps_tcache_largest())
			ps_tcache_give_newest(size);
		p = place_or_purge(size, align, zero, &n, &why);
	}
	/* Refused: what the CPUs' caches hold may serve it. */
	if (ps_unlikely(p == NULL) && ps_tcache_flush_all())
		p = place_or_purge(size, align, zero, &n, &why);
	if (ps_likely(p != NULL)) {
		if (ps_tcache_on && !cached)
			ps_tcache_note_live(p, n);
		door_see_pool();
		ps_stats_event(PS_EV_POOL_ALLOC);
		pool_took(n);
		ps_callsite_record(PS_SITE_ALLOC, site_call, size, 0);
		return p;
	}
	ps_stats_event(ps_pool_fail_event(why));
	/* glibc's heap takes it: it counts against the cgroup's limit all the same. */
	cgroup_watch(size);
	return NULL;
}

/*
 * size bytes aligned to align (a power of two), zeroed if zero: from the
 * pool at or above the threshold, else (or when the pool cannot) from
 * glibc's heap, which sets errno on failure as it would without us.
 */
static void *alloc_flags(size_t size, size_t align, bool zero)
{
	if (size >= pool_min) {
		void *p = pool_try(size, align, zero);
		if (p)
			return p;
	}
	if (zero)
		return libc.calloc(1, size);
	if (align > LIBC_ALIGN)
		return libc.memalign(align, size);
	return libc.malloc(size);
}

/*
 * free() or realloc() (call) of an address in the pool's range that starts
 * no live block: the program freed a block twice or freed an interior
 * pointer.  glibc ends the program on a pointer it never handed out
 * ("free(): invalid pointer"), so does the shim, rather than corrupt what
 * others hold.  ps_log has no %p: the address goes as hex.
 */
static _Noreturn void bad_free(const char *call, void *p)
{
	ps_log("%s(): invalid pointer 0x%lx: no pooled block starts there (freed twice?)", call,
	       (unsigned long)(uintptr_t)p);
	abort();
}

static void release(void *p)
{
	if (ps_pool_contains(p)) {
		size_t n;
		int cached = ps_tcache_on ? ps_tcache_put(p, &n) : 0;
		if (cached < 0)
			bad_free("free", p);
		if (cached == 2)
			ps_stats_event(PS_EV_POOL_PACED);
		if (cached > 0) {
			/* In this CPU's cache, or handed on by it: counted freed as before. */
		} else if (use_je) {
			n = psje_sallocx(p, 0);
			in_je = true;
			psje_dallocx(p, pool_flags);
			in_je = false;
		} else if ((n = blocks_free(p, true)) == 0) {
			bad_free("free", p);
		}
		ps_stats_event(PS_EV_POOL_FREE);
		pool_gave(n);
	} else {
		libc.free(p);
	}
}

int ps_alloc_trim(size_t pad)
{
	static int (*next_trim)(size_t);
	int released = 0;

	if (__atomic_load_n(&arena_state, __ATOMIC_ACQUIRE) == ARENA_READY) {
		struct ps_pool_info before, after;
		ps_pool_get_info(&before);
		__atomic_store_n(&purging, 0, __ATOMIC_RELAXED);
		pool_purge();
		ps_pool_get_info(&after);
		released = after.purged > before.purged;
	}
	/*
	 * Then the program's heap, as without the shim: the next malloc_trim
	 * after ours in the lookup order (glibc's, or that of an allocator
	 * preloaded after us).
	 */
	int (*t)(size_t) = __atomic_load_n(&next_trim, __ATOMIC_ACQUIRE);
	if (!t) {
		void *sym = dlsym(RTLD_NEXT, "malloc_trim");
		memcpy(&t, &sym, sizeof(sym));
		__atomic_store_n(&next_trim, t, __ATOMIC_RELEASE);
	}
	if (t && t(pad))
		released = 1;
	return released;
}

/* Count a call of size bytes, the call-site record's name for it kept. */
static void enter(enum ps_call call, size_t size)
{
	site_call = call;
	ps_stats_count(call, PS_FD_NONE, size);
}

/*
 * A small call whose gate ran out: counted for the gap it closes.  Not
 * when nothing reads the counters: then only a thread's first small call
 * comes here, and counting it would claim the thread a counter block.
 */
static void enter_sampled(enum ps_call call, size_t size)
{
	uint64_t n = alloc_gate_refill();
	site_call = call;
	if (ps_likely(!__atomic_load_n(&gate_quiet, __ATOMIC_RELAXED)))
		ps_stats_count_sampled(call, size, n);
}

/*
 * Count a call of size bytes that has no door of its own (reallocarray,
 * the aligned ones): exactly from the small size up (ps_alloc_set_small),
 * below it not at all, or with POOLSHIM_COUNT_SMALL one call in about
 * PS_ALLOC_SAMPLE on the same gate as malloc's slow path, so that a
 * program's small allocations cost the same whichever call makes them.
 */
static void enter_small(enum ps_call call, size_t size)
{
	if (size >= __atomic_load_n(&small_below, __ATOMIC_RELAXED)) {
		enter(call, size);
		return;
	}
	site_call = call;
	if (__atomic_load_n(&small_counted, __ATOMIC_RELAXED) && ps_unlikely(--ps_alloc_gate == 0))
		enter_sampled(call, size);
}

bool ps_alloc_count_small(void)
{
	return count_small;
}

void ps_alloc_set_small(size_t below, bool counted)
{
	__atomic_store_n(&small_counted, counted, __ATOMIC_RELAXED);
	__atomic_store_n(&small_below, below, __ATOMIC_RELAXED);
}

size_t ps_alloc_small_uncounted_below(void)
{
	return __atomic_load_n(&small_counted, __ATOMIC_RELAXED) ? 0
	       : __atomic_load_n(&small_below, __ATOMIC_RELAXED);
}

/*
 * n * size for calloc and reallocarray, counted (sampled if small: calloc
 * comes here at or above ps_door_exact_min only); false (ENOMEM set) on
 * overflow.
 */
static bool array_total(enum ps_call call, size_t n, size_t size, size_t *total)
{
	bool ok = ps_posix_array(n, size, total);
	enter_small(call, ok ? *total : SIZE_MAX);
	if (!ok)
		errno = ENOMEM;
	return ok;
}

void *ps_malloc(size_t size)
{
	enter(PS_CALL_MALLOC, size);
	return alloc_flags(size, 0, false);
}

void *ps_calloc(size_t n, size_t size)
{
	size_t total;

	if (!array_total(PS_CALL_CALLOC, n, size, &total))
		return NULL;
	/* MALLOCX_ZERO zeroes recycled pool memory; fresh slabs are known zero. */
	return alloc_flags(total, 0, true);
}

void ps_free(void *p)
{
	ps_stats_call(PS_CALL_FREE);
	if (p)
		release(p);
}

void ps_alloc_small_heap(struct ps_heap_entries *e, size_t *min)
{
	e->malloc = libc.malloc;
	e->calloc = libc.calloc;
	e->realloc = libc.realloc;
	e->free = libc.free;
	*min = pool_min;
}

void ps_alloc_gate_quiet(bool quiet)
{
	__atomic_store_n(&gate_quiet, quiet, __ATOMIC_RELAXED);
}

void ps_alloc_open_door(bool mine)
{
	uintptr_t lo = __atomic_load_n(&ps_pool_lo, __ATOMIC_ACQUIRE);
	__atomic_store_n(&ps_door_pool_end, mine && lo ? lo + ps_pool_span : 0, __ATOMIC_RELEASE);
}

void *ps_malloc_sampled(size_t size)
{
	enter_sampled(PS_CALL_MALLOC, size);
	return libc.malloc(size);
}

void *ps_calloc_sampled(size_t n, size_t size)
{
	enter_sampled(PS_CALL_CALLOC, n * size);
	return libc.calloc(n, size);
}

void *ps_realloc_sampled(void *p, size_t size)
{
	enter_sampled(PS_CALL_REALLOC, size);
	return libc.realloc(p, size);
}

void ps_free_uncounted(void *p)
{
	if (ps_pool_contains(p))
		ps_free(p);
	else
		libc.free(p);
}

size_t ps_usable_size(void *p)
{
	if (!p)
		return 0;
	if (ps_pool_contains(p)) {
		size_t n = ps_tcache_on ? ps_tcache_live_size(p) : 0;
		if (n)
			return n;
		return use_je ? psje_sallocx(p, 0) : ps_blocks_size(p);
	}
	return libc.usable ? libc.usable(p) : 0;
}

/* Move p into a fresh allocation of size bytes (crossing the threshold). */
static void *move(void *p, size_t size, void *q)
{
	size_t old = ps_usable_size(p);
	/* A pool address that starts no block: realloc's own message, not free's. */
	if (old == 0 && !use_je && ps_pool_contains(p))
		bad_free("realloc", p);
	memcpy(q, p, old < size ? old : size);
	release(p);
	return q;
}

static void *realloc_common(void *p, size_t size)
{
	if (!p)
		return alloc_flags(size, 0, false);

	bool pooled = ps_pool_contains(p);
	/* From here the placement resizes or frees it: out of the cache's map. */
	if (pooled && ps_tcache_on && ps_tcache_forget(p) < 0)
		bad_free("realloc", p);
	if (size == 0) {
		/* glibc frees and returns NULL. */
		release(p);
		return NULL;
	}
	bool want_pool = size >= pool_min && ps_alloc_pool_ready() &&
			 (pooled || libc.usable);
	void *q;

	if (pooled && want_pool && !use_je) {
		size_t before = 0, after = ps_blocks_resize(p, size, &before);
		if (before == 0)
			bad_free("realloc", p);
		if (after) {
			ps_stats_pool_used((int64_t)after - (int64_t)before);
			note_resize(before, after);
			return p;
		}
		enum ps_pool_fail why = PS_FAIL_NONE;
		q = place_or_purge(size, 0, false, &after, &why);
		if (q) {
			memcpy(q, p, before < size ? before : size);
			ps_blocks_free(p);
			ps_stats_pool_used((int64_t)after - (int64_t)before);
			note_alloc(after);
			note_free(before);
			return q;
		}
		/* The pool cannot: continue in glibc's heap, the reason counted. */
		q = libc.malloc(size);
		if (!q)
			return NULL;
		ps_stats_event(ps_pool_fail_event(why));
		return move(p, size, q);
	}
	if (pooled && want_pool) {
		int saved_errno = errno;
		int64_t before = (int64_t)psje_sallocx(p, 0);
		hook_need = size;
		hook_fail = PS_FAIL_NONE;
		in_je = true;
		q = psje_rallocx(p, size, pool_flags);
		in_je = false;
		hook_need = 0;
		if (q) {
			int64_t after = (int64_t)psje_sallocx(q, 0);
			ps_stats_pool_used(after - before);
			if (q != p) {
				note_alloc((size_t)after);
				note_free((size_t)before);
			} else {
				note_resize((size_t)before, (size_t)after);
			}
			return q;
		}
		errno = saved_errno;
		/* The pool cannot: continue in glibc's heap, the hook's reason counted. */
		enum ps_pool_fail why = hook_fail;
		q = libc.malloc(size);
		if (!q)
			return NULL;
		ps_stats_event(ps_pool_fail_event(why));
		return move(p, size, q);
	}
	if (!pooled && want_pool) {
		q = pool_try(size, 0, false);
		if (q)
			return move(p, size, q);
		/* fall through: grow in glibc's heap */
	}
	if (pooled) {
		q = libc.malloc(size);
		return q ? move(p, size, q) : NULL;
	}
	return libc.realloc(p, size);
}

/* A pooled block realloc returns goes back into the cache's map (pool_try's are there). */
static void *realloc_noted(void *q)
{
	if (q && ps_tcache_on && ps_pool_contains(q) && !ps_tcache_live_size(q))
		ps_tcache_note_live(q, ps_usable_size(q));
	return q;
}

void *ps_realloc(void *p, size_t size)
{
	enter(PS_CALL_REALLOC, size);
	return realloc_noted(realloc_common(p, size));
}

void *ps_reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (!array_total(PS_CALL_REALLOCARRAY, n, size, &total))
		return NULL;
	return realloc_noted(realloc_common(p, total));
}

/* glibc's memalign: round a bad alignment up to a power of two. */
static void *memalign_common(size_t align, size_t size)
{
	if (align <= LIBC_ALIGN)
		return alloc_flags(size, 0, false);
	if (!ps_posix_align(&align, 0)) {
		errno = EINVAL;
		return NULL;
	}
	/* Neither heap can place a block that overflows once aligned. */
	if (size > SIZE_MAX - align) {
		errno = ENOMEM;
		return NULL;
	}
	return alloc_flags(size, align, false);
}

int ps_posix_memalign(void **out, size_t align, size_t size)
{
	enter_small(PS_CALL_POSIX_MEMALIGN, size);
	return ps_posix_memalign_via(memalign_common, out, align, size);
}

void *ps_aligned_alloc(size_t align, size_t size)
{
	enter_small(PS_CALL_ALIGNED_ALLOC, size);
	return memalign_common(align, size);
}

void *ps_memalign(size_t align, size_t size)
{
	enter_small(PS_CALL_MEMALIGN, size);
	return memalign_common(align, size);
}

void *ps_valloc(size_t size)
{
	enter_small(PS_CALL_VALLOC, size);
	return memalign_common(PS_PAGE, size);
}

void *ps_pvalloc(size_t size)
{
	enter_small(PS_CALL_PVALLOC, size);
	size_t rounded;

	if (!ps_posix_pages(size, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	return memalign_common(PS_PAGE, rounded);
}

/*
 * The private jemalloc's view of its settings (see the jemalloc rule in
 * shim/local.mk).  MALLOC_CONF and /etc/malloc.conf configure the program's
 * allocator, whatever that is: a junk or abort_conf:true value meant for it
 * must not reach, or end, the program through our copy.
 */
char *ps_jemalloc_getenv(const char *name);
char *ps_jemalloc_getenv(const char *name)
{
	if (strcmp(name, "MALLOC_CONF") == 0)
		return NULL;
	return secure_getenv(name);
}

/*
 * What the private jemalloc's heap profiler needs from libgcc_s and libm
 * (shim/local.mk renames its references to these).  The profiler is never
 * turned on (MALLOC_CONF does not reach our copy), so none of these is
 * called; they exist so that libpoolshim.so does not link either library,
 * which would cost every process their loading at start (issue 26).
 * Should one ever run, it gets the real function, opened then.
 */
struct _Unwind_Context;
typedef int (*ps_unwind_trace_fn)(struct _Unwind_Context *, void *);

int ps_jemalloc_unwind_backtrace(ps_unwind_trace_fn fn, void *arg);
int ps_jemalloc_unwind_backtrace(ps_unwind_trace_fn fn, void *arg)
{
	static int (*real_fn)(ps_unwind_trace_fn, void *);
	if (!real_fn)
		*(void **)&real_fn = ps_late_sym("libgcc_s.so.1", "_Unwind_Backtrace");
	return real_fn ? real_fn(fn, arg) : 5;     /* _URC_END_OF_STACK */
}

uintptr_t ps_jemalloc_unwind_getip(struct _Unwind_Context *ctx);
uintptr_t ps_jemalloc_unwind_getip(struct _Unwind_Context *ctx)
{
	static uintptr_t (*real_fn)(struct _Unwind_Context *);
	if (!real_fn)
		*(void **)&real_fn = ps_late_sym("libgcc_s.so.1", "_Unwind_GetIP");
	return real_fn ? real_fn(ctx) : 0;
}

#define PS_LATE_MATH(ours, name)                                        \
	double ours(double x);                                          \
	double ours(double x)                                           \
	{                                                               \
		static double (*real_fn)(double);                       \
		if (!real_fn)                                           \
			*(void **)&real_fn = ps_late_sym("libm.so.6", name); \
		return real_fn ? real_fn(x) : x;                        \
	}
PS_LATE_MATH(ps_jemalloc_log, "log")
PS_LATE_MATH(ps_jemalloc_exp, "exp")
PS_LATE_MATH(ps_jemalloc_round, "round")

ssize_t ps_jemalloc_readlink(const char *path, char *buf, size_t len);
ssize_t ps_jemalloc_readlink(const char *path, char *buf, size_t len)
{
	if (strcmp(path, "/etc/malloc.conf") == 0) {
		errno = ENOENT;    /* jemalloc puts its errno back */
		return -1;
	}
	long r = PS_SYSCALL(SYS_readlinkat, AT_FDCWD, path, buf, len);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return (ssize_t)r;
}
