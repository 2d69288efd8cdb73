// SPDX-License-Identifier: MIT
/*
 * Per-CPU caches of freed pooled blocks (see tcache.h): the size map,
 * the slots that hold each CPU's cache, and the rules (LIFO, fit, bound,
 * flush).
 *
 * A call uses the slot of the CPU it runs on (sched_getcpu(), which reads
 * the rseq area glibc registers: a few nanoseconds), under the slot's
 * lock: an exchange on a line that only the threads of that CPU write, so
 * it is contended only when a thread is preempted in the few instructions
 * it holds it, or migrates between reading its CPU and taking the lock
 * (the lock keeps that correct).  A thread flushing every cache (a purge,
 * malloc_trim) takes each slot's lock in turn.  Blocks leave a slot under
 * its lock and are handed to the placement after it is released.
 *
 * The pace (tcache.h): each slot counts its puts and, every window of
 * them, reads the clock once; while its CPU frees slowly, take() and
 * put() pass it by.  A put that read the slot fast just before another
 * thread of the CPU turned it slow may still cache its block there: it
 * waits, never handed out, until the slot is fast again or a flush
 * (every purge flushes every slot).
 *
 * The map: one word per page of the pool, (pages << 1) | CACHED for the
 * page a live or cached block starts at, 0 elsewhere.  A free turns LIVE
 * into CACHED with a compare-and-swap, so of two frees of one block only
 * one wins; the loser is a double free.  Blocks are at least a page and
 * page aligned in both placements (jemalloc's large classes, with no
 * cache-oblivious offset, alloc.c).
 */
#include "core/tcache.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/pool.h"
#include "format/compiler.h"
#include "format/sys.h"

#define CACHED 1u
/* Pages per chunk of the map: 2^16 pages (256 MiB of pool) in 256 KiB. */
#define CHUNK_SHIFT 16
#define CHUNK_PAGES ((size_t)1 << CHUNK_SHIFT)

struct entry {
	uintptr_t p;
	size_t n;
};

/*
 * A slot: the blocks' sizes in pages apart from their addresses, so that
 * the search for a fit reads one or two lines of sizes, newest first.
 */
struct ps_tcache {
	int lock;
	int used;                  /* a block was cached here once: the slot shares the total */
	uint32_t count;            /* [0] the oldest, [count - 1] the newest */
	uint32_t puts;             /* frees this slot was asked to keep: the pace's count */
	int slow;                  /* its CPU frees slower than the pace: the slot is bypassed */
	uint64_t window_ns;        /* when the pace's current window of puts began; 0: not yet */
	size_t bytes;
	uint32_t pages[PS_TCACHE_ENTRIES];
	uintptr_t at[PS_TCACHE_ENTRIES];
} __attribute__((aligned(64)));

/*
 * Slots for CPUs 0 to PS_TCACHE_SLOTS - 1, mapped at the first cached
 * block (a page of address space is touched per few slots used); CPUs
 * above share them, modulo.
 */
#define SLOTS_BYTES (PS_TCACHE_SLOTS * sizeof(struct ps_tcache))

bool ps_tcache_on;
static size_t bound;
static uint64_t pace_ns;        /* 0: the slots are never bypassed */
/* What all caches together may hold (ps_tcache_limit_total), and the slots sharing it. */
static size_t total_cap = SIZE_MAX;
static uint32_t owners;
static struct ps_tcache_backend backend;
static struct ps_tcache *slots;
static uint32_t **map;                   /* chunk pointers, (span / page) >> CHUNK_SHIFT */
static size_t map_chunks;

/*
 * count and bytes change under the slot's lock, and are read without it
 * (a flush skipping empty slots, the report's gauge): relaxed atomics.
 */
static void set_count(struct ps_tcache *t, uint32_t count, size_t bytes)
{
	__atomic_store_n(&t->count, count, __ATOMIC_RELAXED);
	__atomic_store_n(&t->bytes, bytes, __ATOMIC_RELAXED);
}

static void slot_lock(struct ps_tcache *t)
{
	while (__atomic_exchange_n(&t->lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void slot_unlock(struct ps_tcache *t)
{
	__atomic_store_n(&t->lock, 0, __ATOMIC_RELEASE);
}

static void *map_anon(size_t len)
{
	int saved_errno = errno;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	errno = saved_errno;
	return p == MAP_FAILED ? NULL : p;
}

static void unmap(void *p, size_t len)
{
	int saved_errno = errno;
	munmap(p, len);
	errno = saved_errno;
}

/*
 * The map's word for p, or NULL (made if make; NULL when memory is short,
 * or p is not at a page's start: no block starts there).
 */
static uint32_t *word_of(const void *p, bool make)
{
	if ((uintptr_t)p & (PS_PAGE - 1))
		return NULL;
	uintptr_t lo = __atomic_load_n(&ps_pool_lo, __ATOMIC_RELAXED);
	size_t page = ((uintptr_t)p - lo) / PS_PAGE;
	size_t c = page >> CHUNK_SHIFT;
	uint32_t **m = __atomic_load_n(&map, __ATOMIC_ACQUIRE);

	if (!m) {
		if (!make || lo == 0)
			return NULL;
		size_t n = (__atomic_load_n(&ps_pool_span, __ATOMIC_RELAXED) / PS_PAGE + CHUNK_PAGES - 1) >>
			   CHUNK_SHIFT;
		uint32_t **fresh = map_anon(n * sizeof(*fresh));
		if (!fresh)
			return NULL;
		if (!__atomic_compare_exchange_n(&map, &m, fresh, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			unmap(fresh, n * sizeof(*fresh));
		} else {
			m = fresh;
			__atomic_store_n(&map_chunks, n, __ATOMIC_RELEASE);
		}
	}
	if (c >= __atomic_load_n(&map_chunks, __ATOMIC_ACQUIRE))
		return NULL;
	uint32_t *chunk = __atomic_load_n(&m[c], __ATOMIC_ACQUIRE);
	if (!chunk) {
		if (!make)
			return NULL;
		uint32_t *fresh = map_anon(CHUNK_PAGES * sizeof(uint32_t));
		if (!fresh)
			return NULL;
		if (!__atomic_compare_exchange_n(&m[c], &chunk, fresh, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			unmap(fresh, CHUNK_PAGES * sizeof(uint32_t));
		else
			chunk = fresh;
	}
	return &chunk[page & (CHUNK_PAGES - 1)];
}

void ps_tcache_init(size_t bytes, uint64_t pace, const struct ps_tcache_backend *be)
{
	/* Once in a process; again only in the unit tests, over a new pool. */
	if (slots || map)
		ps_tcache_reset_for_tests();
	bound = bytes;
	pace_ns = pace;
	backend = *be;
	__atomic_store_n(&ps_tcache_on, bytes != 0, __ATOMIC_RELEASE);
}

void ps_tcache_limit_total(size_t bytes)
{
	__atomic_store_n(&total_cap, bytes, __ATOMIC_RELAXED);
}

/*
 * A slot's bound now: POOLSHIM_POOL_CACHE, or its share of the total
 * when many CPUs' slots hold blocks (else the caches together would pass
 * the retention, and every free would purge).
 */
static size_t slot_bound(void)
{
	uint32_t k = __atomic_load_n(&owners, __ATOMIC_RELAXED);
	size_t share = __atomic_load_n(&total_cap, __ATOMIC_RELAXED) / (k ? k : 1);
	return share < bound ? share : bound;
}

/*
 * The largest block a cache bounded to lim bytes keeps: an eighth of
 * POOLSHIM_POOL_CACHE, or half the slot's share of the total if less
 * (with many CPUs).  Not an eighth of the share: a cache then keeps no
 * block over 1/16 of the retention (16 MiB by default).
 */
static size_t largest_in(size_t lim)
{
	size_t most = bound / PS_TCACHE_LARGEST;
	return lim / 2 < most ? lim / 2 : most;
}

void ps_tcache_note_live(void *p, size_t n)
{
	/* Blocks of 2^31 pages or more (8 TiB) are not in the map: never cached. */
	if (n / PS_PAGE >= ((size_t)1 << 31) || n % PS_PAGE)
		return;
	uint32_t *w = word_of(p, true);
	if (w)
		__atomic_store_n(w, (uint32_t)(n / PS_PAGE) << 1, __ATOMIC_RELEASE);
}

size_t ps_tcache_live_size(const void *p)
{
	uint32_t *w = word_of(p, false);
	uint32_t v = w ? __atomic_load_n(w, __ATOMIC_ACQUIRE) : 0;
	return v & CACHED ? 0 : (size_t)(v >> 1) * PS_PAGE;
}

int ps_tcache_forget(void *p)
{
	uint32_t *w = word_of(p, false);
	if (!w)
		return 0;
	uint32_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
	while (v && !(v & CACHED)) {
		if (__atomic_compare_exchange_n(w, &v, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return 0;
	}
	return v & CACHED ? -1 : 0;
}

/* Hand blocks taken out of a slot back to the placement (no slot lock held); hot: see release. */
static void give_back(const struct entry *v, uint32_t n, bool hot)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t *w = word_of((void *)v[i].p, false);
		if (w)
			__atomic_store_n(w, 0, __ATOMIC_RELEASE);
		backend.release((void *)v[i].p, v[i].n, hot);
	}
}

/* Empty slot t (its lock held) into v: how many. */
static uint32_t drain(struct ps_tcache *t, struct entry *v)
{
	uint32_t n = t->count;
	for (uint32_t i = 0; i < n; i++)
		v[i] = (struct entry){ t->at[i], (size_t)t->pages[i] * PS_PAGE };
	set_count(t, 0, 0);
	return n;
}

/* The slots, mapped on first use (NULL when that failed: no caching then). */
static struct ps_tcache *all_slots(void)
{
	struct ps_tcache *v = __atomic_load_n(&slots, __ATOMIC_ACQUIRE);
	if (ps_likely(v != NULL))
		return v;
	struct ps_tcache *fresh = map_anon(SLOTS_BYTES);
	if (!fresh)
		return NULL;
	if (!__atomic_compare_exchange_n(&slots, &v, fresh, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		unmap(fresh, SLOTS_BYTES);
		return v;
	}
	return fresh;
}

/* The slot of the CPU this thread runs on; NULL to bypass the cache. */
static struct ps_tcache *my_cache(void)
{
	struct ps_tcache *v = all_slots();
	if (ps_unlikely(v == NULL))
		return NULL;
	int cpu = sched_getcpu();
	struct ps_tcache *t = &v[cpu < 0 ? 0 : (unsigned)cpu % PS_TCACHE_SLOTS];
	if (ps_unlikely(!__atomic_load_n(&t->used, __ATOMIC_RELAXED)) &&
	    !__atomic_exchange_n(&t->used, 1, __ATOMIC_RELAXED))
		__atomic_add_fetch(&owners, 1, __ATOMIC_RELAXED);
	return t;
}

/* Take entry i out of slot t (its lock held), keeping the others' order. */
static void remove_at(struct ps_tcache *t, uint32_t i)
{
	uint32_t after = t->count - i - 1;
	size_t n = (size_t)t->pages[i] * PS_PAGE;

	memmove(&t->pages[i], &t->pages[i + 1], after * sizeof(t->pages[0]));
	memmove(&t->at[i], &t->at[i + 1], after * sizeof(t->at[0]));
	set_count(t, t->count - 1, t->bytes - n);
}

void *ps_tcache_take(size_t size, size_t align, size_t *n)
{
	if (size > bound)
		return NULL;
	if (!__atomic_load_n(&ps_tcache_on, __ATOMIC_RELAXED))
		return NULL;
	struct ps_tcache *t = my_cache();
	if (!t || __atomic_load_n(&t->slow, __ATOMIC_RELAXED))
		return NULL;
	size_t need = backend.good_size ? backend.good_size(size)
					: (size + PS_PAGE - 1) & ~(size_t)(PS_PAGE - 1);
	/* need <= pages <= need + need / FIT, as one unsigned compare. */
	uint32_t lo = (uint32_t)(need / PS_PAGE);
	uint32_t slack = lo / PS_TCACHE_FIT;
	uintptr_t mask = align > PS_PAGE ? align - 1 : 0;
	void *p = NULL;

	slot_lock(t);
	for (uint32_t i = t->count; i-- > 0;) {
		if (t->pages[i] - lo > slack || (t->at[i] & mask))
			continue;
		p = (void *)t->at[i];
		*n = (size_t)t->pages[i] * PS_PAGE;
		remove_at(t, i);
		break;
	}
	slot_unlock(t);
	if (p) {
		uint32_t *w = word_of(p, false);
		__atomic_store_n(w, (uint32_t)(*n / PS_PAGE) << 1, __ATOMIC_RELEASE);
	}
	return p;
}

/* The vDSO's clock: no system call where the clock source allows (the TSC). */
static uint64_t mono_ns(void)
{
	return ps_clock_ns(CLOCK_MONOTONIC);
}

/*
 * Whether slot t is bypassed, counting one more put: every
 * PS_TCACHE_PACE_WINDOW puts the mean time between them is compared with
 * the pace, and a slot that turns slow hands what it holds to the
 * placement (cold: it waited there).  Threads of one CPU race here
 * harmlessly: a window may be counted a put short or long.
 */
static bool paced_out(struct ps_tcache *t)
{
	if (pace_ns == 0)
		return false;
	uint32_t k = __atomic_add_fetch(&t->puts, 1, __ATOMIC_RELAXED);
	if (ps_unlikely(k % PS_TCACHE_PACE_WINDOW == 0)) {
		uint64_t now = mono_ns();
		uint64_t then = __atomic_exchange_n(&t->window_ns, now, __ATOMIC_RELAXED);
		int slow = then != 0 && now - then >= pace_ns * PS_TCACHE_PACE_WINDOW;
		if (__atomic_exchange_n(&t->slow, slow, __ATOMIC_RELAXED) != slow && slow) {
			struct entry v[PS_TCACHE_ENTRIES];
			slot_lock(t);
			uint32_t m = drain(t, v);
			slot_unlock(t);
			give_back(v, m, false);
		}
		return slow;
	}
	if (ps_unlikely(k == 1))
		__atomic_store_n(&t->window_ns, mono_ns(), __ATOMIC_RELAXED);
	return __atomic_load_n(&t->slow, __ATOMIC_RELAXED);
}

bool ps_tcache_cpu_fast(void)
{
	if (!__atomic_load_n(&ps_tcache_on, __ATOMIC_RELAXED))
		return false;
	if (pace_ns == 0)
		return true;
	struct ps_tcache *v = all_slots();
	if (!v)
		return false;
	int cpu = sched_getcpu();
	struct ps_tcache *t = &v[cpu < 0 ? 0 : (unsigned)cpu % PS_TCACHE_SLOTS];
	return __atomic_load_n(&t->puts, __ATOMIC_RELAXED) >= PS_TCACHE_PACE_WINDOW &&
	       !__atomic_load_n(&t->slow, __ATOMIC_RELAXED);
}

int ps_tcache_put(void *p, size_t *n)
{
	uint32_t *w = word_of(p, false);
	uint32_t v = w ? __atomic_load_n(w, __ATOMIC_ACQUIRE) : 0;
	struct entry out[PS_TCACHE_ENTRIES];
	uint32_t nout = 0;

	if (v == 0)
		return 0;
	if (v & CACHED)
		return -1;
	*n = (size_t)(v >> 1) * PS_PAGE;
	size_t lim = slot_bound();
	struct ps_tcache *t = *n <= largest_in(lim) ? my_cache() : NULL;
	bool paced = t && paced_out(t);
	if (!t || paced) {
		/* Too large to cache, no cache here, or this CPU frees slowly: the placement's. */
		if (!__atomic_compare_exchange_n(w, &v, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return -1;
		backend.release(p, *n, true);
		return paced ? 2 : 1;
	}
	if (!__atomic_compare_exchange_n(w, &v, v | CACHED, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return -1;
	slot_lock(t);
	/* Over the bound or full: the oldest go to the placement. */
	uint32_t drop = 0;
	size_t bytes = t->bytes + *n;
	while (drop < t->count && (bytes > lim || t->count - drop >= PS_TCACHE_ENTRIES))
		bytes -= (size_t)t->pages[drop++] * PS_PAGE;
	if (drop) {
		uint32_t keep = t->count - drop;
		for (uint32_t i = 0; i < drop; i++)
			out[i] = (struct entry){ t->at[i], (size_t)t->pages[i] * PS_PAGE };
		memmove(t->pages, t->pages + drop, keep * sizeof(t->pages[0]));
		memmove(t->at, t->at + drop, keep * sizeof(t->at[0]));
		set_count(t, keep, t->bytes);
		nout = drop;
	}
	t->pages[t->count] = (uint32_t)(*n / PS_PAGE);
	t->at[t->count] = (uintptr_t)p;
	set_count(t, t->count + 1, bytes);
	slot_unlock(t);
	give_back(out, nout, false);
	return 1;
}

size_t ps_tcache_flush_all(void)
{
	struct entry v[PS_TCACHE_ENTRIES];
	size_t total = 0;
	struct ps_tcache *all = __atomic_load_n(&slots, __ATOMIC_ACQUIRE);

	if (!__atomic_load_n(&ps_tcache_on, __ATOMIC_RELAXED) || !all)
		return 0;
	for (uint32_t i = 0; i < PS_TCACHE_SLOTS; i++) {
		struct ps_tcache *t = &all[i];
		if (__atomic_load_n(&t->count, __ATOMIC_RELAXED) == 0)
			continue;
		slot_lock(t);
		total += t->bytes;
		uint32_t n = drain(t, v);
		slot_unlock(t);
		give_back(v, n, false);
	}
	return total;
}

static bool slot_trylock(struct ps_tcache *t)
{
	return !__atomic_exchange_n(&t->lock, 1, __ATOMIC_ACQUIRE);
}

size_t ps_tcache_flush_try(void)
{
	size_t total = 0;
	struct ps_tcache *all = __atomic_load_n(&slots, __ATOMIC_ACQUIRE);

	if (!__atomic_load_n(&ps_tcache_on, __ATOMIC_RELAXED) || !all || !backend.release_try)
		return 0;
	for (uint32_t i = 0; i < PS_TCACHE_SLOTS; i++) {
		struct ps_tcache *t = &all[i];
		if (__atomic_load_n(&t->count, __ATOMIC_RELAXED) == 0 || !slot_trylock(t))
			continue;
		/* Oldest first; those the placement cannot take now keep their order. */
		uint32_t kept = 0;
		size_t bytes = t->bytes;
		for (uint32_t k = 0; k < t->count; k++) {
			size_t n = (size_t)t->pages[k] * PS_PAGE;
			uint32_t *w = word_of((void *)t->at[k], false);
			uint32_t was = w ? __atomic_exchange_n(w, 0, __ATOMIC_ACQ_REL) : 0;
			if (backend.release_try((void *)t->at[k], n) == 0) {
				bytes -= n;
				total += n;
				continue;
			}
			if (w)
				__atomic_store_n(w, was, __ATOMIC_RELEASE);
			t->pages[kept] = t->pages[k];
			t->at[kept] = t->at[k];
			kept++;
		}
		set_count(t, kept, bytes);
		slot_unlock(t);
	}
	return total;
}

void ps_tcache_give_newest(size_t size)
{
	if (size <= bound / PS_TCACHE_LARGEST || !__atomic_load_n(&slots, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&ps_tcache_on, __ATOMIC_RELAXED))
		return;
	struct ps_tcache *t = my_cache();
	struct entry e;

	if (!t || !__atomic_load_n(&t->count, __ATOMIC_RELAXED))
		return;
	slot_lock(t);
	uint32_t k = t->count;
	if (k) {
		e = (struct entry){ t->at[k - 1], (size_t)t->pages[k - 1] * PS_PAGE };
		set_count(t, k - 1, t->bytes - e.n);
	}
	slot_unlock(t);
	if (k)
		give_back(&e, 1, true);
}

size_t ps_tcache_largest(void)
{
	return largest_in(slot_bound());
}

size_t ps_tcache_cached_bytes_mine(void)
{
	if (!__atomic_load_n(&slots, __ATOMIC_ACQUIRE))
		return 0;
	struct ps_tcache *t = my_cache();
	return t ? __atomic_load_n(&t->bytes, __ATOMIC_RELAXED) : 0;
}

uint64_t ps_tcache_cached_bytes(void)
{
	uint64_t total = 0;
	struct ps_tcache *all = __atomic_load_n(&slots, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; all && i < PS_TCACHE_SLOTS; i++)
		total += __atomic_load_n(&all[i].bytes, __ATOMIC_RELAXED);
	return total;
}

void ps_tcache_after_fork_child(void)
{
	/*
	 * The slots come along, blocks and all (the child's own copies):
	 * its threads go on using them.  A slot whose lock a thread that
	 * did not come along held was mid-change: its blocks are lost to
	 * the child (they stay CACHED in the map, never handed out).
	 */
	for (uint32_t i = 0; slots && i < PS_TCACHE_SLOTS; i++) {
		struct ps_tcache *t = &slots[i];
		if (t->lock) {
			t->count = 0;
			t->bytes = 0;
			t->lock = 0;
		}
	}
}

void ps_tcache_reset_for_tests(void)
{
	if (slots)
		unmap(slots, SLOTS_BYTES);
	slots = NULL;
	if (map) {
		for (size_t c = 0; c < map_chunks; c++)
			if (map[c])
				unmap(map[c], CHUNK_PAGES * sizeof(uint32_t));
		unmap(map, map_chunks * sizeof(*map));
	}
	map = NULL;
	map_chunks = 0;
	owners = 0;
	total_cap = SIZE_MAX;
	ps_tcache_on = false;
	bound = 0;
	pace_ns = 0;
}
