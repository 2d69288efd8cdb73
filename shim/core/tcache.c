// SPDX-License-Identifier: MIT
/*
 * Per-thread caches of freed pooled blocks (see tcache.h): the size map,
 * the slots that hold each thread's cache, and the rules (LIFO, fit,
 * bound, flush).
 *
 * Each slot has a lock of its own, taken by its thread around every
 * change (an uncontended exchange on a line no other thread writes) and
 * by a thread flushing every cache (a purge, malloc_trim): so a purge
 * reaches the blocks of idle threads too, and no lock is shared by all
 * threads on the common path.  Blocks leave a slot under its lock and are
 * handed to the placement after it is released.
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

enum { SLOT_FREE, SLOT_OWNED, SLOT_ORPHAN };

struct ps_tcache {
	int lock;
	int state;
	uint32_t count;            /* e[0] the oldest, e[count - 1] the newest */
	size_t bytes;
	struct entry e[PS_TCACHE_ENTRIES];
} __attribute__((aligned(64)));

/* Slots come in mappings of this size, linked, never unmapped. */
#define SLAB_BYTES ((size_t)64 << 10)
struct slot_slab {
	struct slot_slab *next;
	uint32_t nslots;
	struct ps_tcache slot[];
};

bool ps_tcache_on;
void (*ps_tcache_on_claim)(void);
static size_t bound;
/* What all caches together may hold (ps_tcache_limit_total), and the threads sharing it. */
static size_t total_cap = SIZE_MAX;
static uint32_t owners;
static struct ps_tcache_backend backend;
static struct slot_slab *slabs;          /* the list, pushed at its head */
static uint32_t **map;                   /* chunk pointers, (span / page) >> CHUNK_SHIFT */
static size_t map_chunks;
static int orphans;                      /* a fork child has slots of threads gone */

static __thread struct ps_tcache *mine;
/* This thread gave its cache up (its exit), or is claiming one now. */
static __thread bool bypass;

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

void ps_tcache_init(size_t bytes, const struct ps_tcache_backend *be)
{
	/* Once in a process; again only in the unit tests, over a new pool. */
	if (slabs || map)
		ps_tcache_reset_for_tests();
	bound = bytes;
	backend = *be;
	__atomic_store_n(&ps_tcache_on, bytes != 0, __ATOMIC_RELEASE);
}

void ps_tcache_limit_total(size_t bytes)
{
	__atomic_store_n(&total_cap, bytes, __ATOMIC_RELAXED);
}

/*
 * This thread's bound now: POOLSHIM_POOL_CACHE, or its share of the total
 * when many threads hold caches (else their caches together would pass
 * the retention, and every free would purge).
 */
static size_t thread_bound(void)
{
	uint32_t k = __atomic_load_n(&owners, __ATOMIC_RELAXED);
	size_t share = __atomic_load_n(&total_cap, __ATOMIC_RELAXED) / (k ? k : 1);
	return share < bound ? share : bound;
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

/* Hand blocks taken out of a slot back to the placement (no slot lock held). */
static void give_back(const struct entry *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t *w = word_of((void *)v[i].p, false);
		if (w)
			__atomic_store_n(w, 0, __ATOMIC_RELEASE);
		backend.release((void *)v[i].p, v[i].n);
	}
}

/* Empty slot t (its lock held) into v: how many. */
static uint32_t drain(struct ps_tcache *t, struct entry *v)
{
	uint32_t n = t->count;
	memcpy(v, t->e, n * sizeof(*v));
	set_count(t, 0, 0);
	return n;
}

/* Flush the slots a fork left without their threads; they are free again. */
static void flush_orphans(void)
{
	struct entry v[PS_TCACHE_ENTRIES];

	if (!__atomic_exchange_n(&orphans, 0, __ATOMIC_ACQ_REL))
		return;
	for (struct slot_slab *s = __atomic_load_n(&slabs, __ATOMIC_ACQUIRE); s; s = s->next) {
		for (uint32_t i = 0; i < s->nslots; i++) {
			struct ps_tcache *t = &s->slot[i];
			if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != SLOT_ORPHAN)
				continue;
			slot_lock(t);
			uint32_t n = drain(t, v);
			__atomic_store_n(&t->state, SLOT_FREE, __ATOMIC_RELEASE);
			slot_unlock(t);
			give_back(v, n);
		}
	}
}

/* A free slot for this thread (a new mapping of them if none), or NULL. */
static struct ps_tcache *claim(void)
{
	for (struct slot_slab *s = __atomic_load_n(&slabs, __ATOMIC_ACQUIRE); s; s = s->next) {
		for (uint32_t i = 0; i < s->nslots; i++) {
			int f = SLOT_FREE;
			if (__atomic_compare_exchange_n(&s->slot[i].state, &f, SLOT_OWNED, false,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				return &s->slot[i];
		}
	}
	struct slot_slab *s = map_anon(SLAB_BYTES);
	if (!s)
		return NULL;
	s->nslots = (uint32_t)((SLAB_BYTES - offsetof(struct slot_slab, slot)) / sizeof(struct ps_tcache));
	s->slot[0].state = SLOT_OWNED;
	s->next = __atomic_load_n(&slabs, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&slabs, &s->next, s, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	return &s->slot[0];
}

/* This thread's cache, claimed on first use; NULL to bypass it. */
static struct ps_tcache *my_cache(void)
{
	struct ps_tcache *t = mine;
	if (ps_likely(t != NULL))
		return t;
	if (bypass || !__atomic_load_n(&ps_tcache_on, __ATOMIC_RELAXED))
		return NULL;
	bypass = true;             /* the claim may allocate (the exit hook): not through here */
	t = claim();
	if (t) {
		__atomic_add_fetch(&owners, 1, __ATOMIC_RELAXED);
		void (*hook)(void) = ps_tcache_on_claim;
		if (hook)
			hook();
	}
	mine = t;
	bypass = false;
	return t;
}

bool ps_tcache_claimed(void)
{
	return mine != NULL;
}

void *ps_tcache_take(size_t size, size_t align, size_t *n)
{
	if (size > bound)
		return NULL;
	struct ps_tcache *t = my_cache();
	if (!t)
		return NULL;
	if (ps_unlikely(__atomic_load_n(&orphans, __ATOMIC_RELAXED)))
		flush_orphans();
	size_t need = backend.good_size ? backend.good_size(size)
					: (size + PS_PAGE - 1) & ~(PS_PAGE - 1);
	size_t most = need + need / PS_TCACHE_FIT;
	uintptr_t mask = align > PS_PAGE ? align - 1 : 0;
	void *p = NULL;

	slot_lock(t);
	for (uint32_t i = t->count; i-- > 0;) {
		struct entry *e = &t->e[i];
		if (e->n < need || e->n > most || (e->p & mask))
			continue;
		p = (void *)e->p;
		*n = e->n;
		memmove(e, e + 1, (t->count - i - 1) * sizeof(*e));
		set_count(t, t->count - 1, t->bytes - *n);
		break;
	}
	slot_unlock(t);
	if (p) {
		uint32_t *w = word_of(p, false);
		__atomic_store_n(w, (uint32_t)(*n / PS_PAGE) << 1, __ATOMIC_RELEASE);
	}
	return p;
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
	size_t lim = thread_bound();
	struct ps_tcache *t = *n <= lim / PS_TCACHE_LARGEST ? my_cache() : NULL;
	if (!t) {
		/* Too large to cache, or no cache here: the placement's, as before. */
		if (!__atomic_compare_exchange_n(w, &v, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return -1;
		backend.release(p, *n);
		return 1;
	}
	if (!__atomic_compare_exchange_n(w, &v, v | CACHED, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return -1;
	if (ps_unlikely(__atomic_load_n(&orphans, __ATOMIC_RELAXED)))
		flush_orphans();
	slot_lock(t);
	/* Over the bound or full: the oldest go to the placement. */
	uint32_t drop = 0;
	size_t bytes = t->bytes + *n;
	while (drop < t->count && (bytes > lim || t->count - drop >= PS_TCACHE_ENTRIES))
		bytes -= t->e[drop++].n;
	if (drop) {
		memcpy(out, t->e, drop * sizeof(*out));
		memmove(t->e, t->e + drop, (t->count - drop) * sizeof(*out));
		set_count(t, t->count - drop, t->bytes);
		nout = drop;
	}
	t->e[t->count].p = (uintptr_t)p;
	t->e[t->count].n = *n;
	set_count(t, t->count + 1, bytes);
	slot_unlock(t);
	give_back(out, nout);
	return 1;
}

size_t ps_tcache_flush_all(void)
{
	struct entry v[PS_TCACHE_ENTRIES];
	size_t total = 0;

	if (!__atomic_load_n(&ps_tcache_on, __ATOMIC_RELAXED))
		return 0;
	flush_orphans();
	for (struct slot_slab *s = __atomic_load_n(&slabs, __ATOMIC_ACQUIRE); s; s = s->next) {
		for (uint32_t i = 0; i < s->nslots; i++) {
			struct ps_tcache *t = &s->slot[i];
			if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == SLOT_FREE ||
			    __atomic_load_n(&t->count, __ATOMIC_RELAXED) == 0)
				continue;
			slot_lock(t);
			total += t->bytes;
			uint32_t n = drain(t, v);
			slot_unlock(t);
			give_back(v, n);
		}
	}
	return total;
}

void ps_tcache_thread_exit(void)
{
	struct entry v[PS_TCACHE_ENTRIES];
	struct ps_tcache *t = mine;

	bypass = true;
	if (!t)
		return;
	mine = NULL;
	__atomic_sub_fetch(&owners, 1, __ATOMIC_RELAXED);
	slot_lock(t);
	uint32_t n = drain(t, v);
	__atomic_store_n(&t->state, SLOT_FREE, __ATOMIC_RELEASE);
	slot_unlock(t);
	give_back(v, n);
}

size_t ps_tcache_largest(void)
{
	return thread_bound() / PS_TCACHE_LARGEST;
}

size_t ps_tcache_cached_bytes_mine(void)
{
	struct ps_tcache *t = mine;
	return t ? __atomic_load_n(&t->bytes, __ATOMIC_RELAXED) : 0;
}

uint64_t ps_tcache_cached_bytes(void)
{
	uint64_t total = 0;

	for (struct slot_slab *s = __atomic_load_n(&slabs, __ATOMIC_ACQUIRE); s; s = s->next)
		for (uint32_t i = 0; i < s->nslots; i++)
			total += __atomic_load_n(&s->slot[i].bytes, __ATOMIC_RELAXED);
	return total;
}

void ps_tcache_after_fork_child(void)
{
	bool any = false;

	for (struct slot_slab *s = slabs; s; s = s->next) {
		for (uint32_t i = 0; i < s->nslots; i++) {
			struct ps_tcache *t = &s->slot[i];
			if (t == mine || t->state == SLOT_FREE)
				continue;
			if (t->lock) {
				/* Mid-change in a thread that is gone: its blocks are lost to us. */
				t->count = 0;
				t->bytes = 0;
				t->lock = 0;
			}
			t->state = SLOT_ORPHAN;
			owners--;
			any = true;
		}
	}
	if (mine)
		mine->lock = 0;    /* this thread held none at fork; a signal handler's fork aside */
	if (any)
		__atomic_store_n(&orphans, 1, __ATOMIC_RELEASE);
}

void ps_tcache_reset_for_tests(void)
{
	for (struct slot_slab *s = slabs, *next; s; s = next) {
		next = s->next;
		unmap(s, SLAB_BYTES);
	}
	slabs = NULL;
	if (map) {
		for (size_t c = 0; c < map_chunks; c++)
			if (map[c])
				unmap(map[c], CHUNK_PAGES * sizeof(uint32_t));
		unmap(map, map_chunks * sizeof(*map));
	}
	map = NULL;
	map_chunks = 0;
	mine = NULL;
	bypass = false;
	orphans = 0;
	owners = 0;
	total_cap = SIZE_MAX;
	ps_tcache_on = false;
	bound = 0;
}
