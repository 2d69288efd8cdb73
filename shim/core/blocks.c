// SPDX-License-Identifier: MIT
/*
 * Pooled blocks placed to the page (see blocks.h): every block, live and
 * free, in a treap ordered by address (lookup by pointer, neighbours for
 * merging), and the free ones also in a treap ordered by size, then
 * address (best fit).  One priority per node serves both trees.
 *
 * Nodes are numbered from 1 (0 is "none") and kept in chunks mapped as
 * the tree grows; freed nodes go on a list for reuse, chunks are never
 * unmapped.  Each operation that may need new nodes reserves them before
 * it changes anything, so a failure to map leaves the trees as they were.
 *
 * A free block being given back to the kernel is BUSY: out of the size
 * tree, neither handed out nor merged until its madvise is done, which
 * runs without the lock.
 *
 * Every tree operation is an arena's (struct arena: its lock, nodes and
 * trees), under that arena's lock.  Footprint: per arena in use, a 32 KiB
 * table of node chunks and 40 KiB chunks of nodes; with several arenas,
 * the owner map, a byte per page of the pool's range in 256 KiB chunks
 * mapped as slabs reach them (touched only where slabs are).
 */
#include "core/blocks.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "format/compiler.h"
#include "format/names.h"
#include "core/pool.h"
#include "format/sys.h"

enum { LIVE, FREE, BUSY };
enum { ADDR, SIZE };            /* the two trees */

struct node {
	uintptr_t start;
	size_t len;
	/*
	 * Children, [tree][side]: in the address tree every block, in the
	 * size tree (size, then address) the FREE ones.  On the spare list,
	 * kid[ADDR][0] is the next spare.
	 */
	uint32_t kid[2][2];
	uint32_t prio;          /* a heap on these keeps both trees balanced, expectedly */
	uint8_t state;
	uint8_t zero;           /* FREE or BUSY: the pages are known to read as zeros */
	uint8_t purged;         /* FREE: given back as far as the pool can since freed (zero implies it) */
	uint8_t clean;          /* LIVE: carved from pages known zero or given back (see tail_of) */
};

#define CHUNK_SHIFT 10                          /* 1024 nodes, 40 KiB */
#define CHUNK_NODES ((uint32_t)1 << CHUNK_SHIFT)
#define CHUNKS 4096                             /* 4 Mi nodes at most */

/*
 * An arena: a lock and the two trees over the slabs it took.  Each
 * thread is bound to one at its first call (round robin), so threads no
 * more numerous than the arenas take their own lock when their cache
 * misses, uncontended; a block is freed into the arena whose slab holds
 * it (the owner map), whichever thread frees it.
 */
struct arena {
	pthread_mutex_t lock;
	uint32_t nchunks;
	uint32_t used_nodes;     /* nodes ever handed out (1..used_nodes) */
	uint32_t spare;          /* list of reusable nodes */
	uint32_t nspare;
	uint32_t root;           /* every block, by address */
	uint32_t sroot;          /* the FREE blocks, by size then address */
	uint32_t rng;
	uintptr_t top_end;       /* the end of the last slab taken */
	uintptr_t busy_start;    /* the block being purged, 0 if none */
	uintptr_t hint;          /* where the block freed last started, until a block is placed there */
	/* The pace of its frees of blocks with a tail (tail_pace): a window's start, its count. */
	uint64_t tail_window_ns;
	uint32_t tail_frees;
	bool tail_fast;          /* the last window's came faster than TAIL_PACE_NS apart */
	struct ps_blocks_info info;
	struct node **chunk;     /* CHUNKS pointers, mapped with the first node */
	/* info as of the last change, for lock-free readers (ps_blocks_get_info) */
	struct ps_blocks_info published __attribute__((aligned(64)));
} __attribute__((aligned(64)));

static struct arena arenas[PS_BLOCKS_ARENAS_MAX];
static bool trimming_in(const struct arena *a);
static uint32_t narenas = 1;    /* ps_blocks_init(); arenas beyond it are never used */
/*
 * Threads bind modulo this many (<= narenas); 0 until the default count is
 * known (bind_count).  Loops over the arenas run to narenas, which never
 * changes after start-up, so a lock taken in each is released in each.
 */
static uint32_t nbind = 1;
static uint32_t next_arena;     /* the next thread's, modulo nbind */
static uint32_t epoch = 1;      /* raised by ps_blocks_reset_for_tests: threads bind again */
static __thread struct arena *mine;
static __thread uint32_t mine_epoch;

static int purging;
static uint64_t *mirror;        /* ps_blocks_set_mirror() */

static struct node nil;         /* node 0: no children */

static inline struct node *N(const struct arena *a, uint32_t i)
{
	return ps_likely(i != 0) ? &a->chunk[(i - 1) >> CHUNK_SHIFT][(i - 1) & (CHUNK_NODES - 1)]
				 : &nil;
}

/* Node i's child on side (0 left, 1 right) in tree tr. */
#define KID(i, tr, side) (N(a, i)->kid[tr][side])

static size_t round_page(size_t v)
{
	return (v + PS_PAGE - 1) & ~(size_t)(PS_PAGE - 1);
}

/*
 * ---- the owner map: a byte per page of the pool's range, the index of
 * the arena whose slab holds the page; 0 (arena 0's, the one a program's
 * first thread takes) wherever nothing was written, so arena 0 writes
 * nothing and a process with one thread never maps the map.  Written when
 * a slab joins another arena, under its lock, before any block in it is
 * handed out; never changed after (slabs stay the pool's), so a lookup
 * needs no lock.  Mapped in chunks as slabs reach them. ----
 */
#define OWNER_SHIFT 18                          /* 2^18 pages (1 GiB of pool) in 256 KiB */
#define OWNER_PAGES ((size_t)1 << OWNER_SHIFT)
static uint8_t **owners;                        /* chunk pointers, mapped whole at the first slab */
static size_t owner_chunks;

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/*
 * The arena that owns the page p is in: arena 0 for a page no other
 * arena's slab holds (in arena 0's slabs, or in none: then no block of
 * arena 0 starts there either).
 */
static struct arena *owner_of(const void *p)
{
	uint8_t **m = __atomic_load_n(&owners, __ATOMIC_ACQUIRE);
	if (ps_likely(m == NULL))
		return &arenas[0];
	uintptr_t lo = __atomic_load_n(&ps_pool_lo, __ATOMIC_RELAXED);
	size_t page = ((uintptr_t)p - lo) / PS_PAGE;
	if ((uintptr_t)p < lo || (page >> OWNER_SHIFT) >= __atomic_load_n(&owner_chunks, __ATOMIC_ACQUIRE))
		return &arenas[0];
	uint8_t *c = __atomic_load_n(&m[page >> OWNER_SHIFT], __ATOMIC_ACQUIRE);
	if (!c)
		return &arenas[0];
	return &arenas[__atomic_load_n(&c[page & (OWNER_PAGES - 1)], __ATOMIC_RELAXED)];
}

/*
 * Mark [start, start + len) as a's (under a's lock; the map and its
 * chunks are made with a compare-and-swap, as two arenas may reach one at
 * once): false when memory for the map is short (the slab is not added).
 */
static bool owner_set(struct arena *a, uintptr_t start, size_t len)
{
	if (a == &arenas[0])
		return true;
	uintptr_t lo = __atomic_load_n(&ps_pool_lo, __ATOMIC_RELAXED);
	uint8_t **m = __atomic_load_n(&owners, __ATOMIC_ACQUIRE);
	if (!m) {
		size_t n = (__atomic_load_n(&ps_pool_span, __ATOMIC_RELAXED) / PS_PAGE + OWNER_PAGES - 1) >>
			   OWNER_SHIFT;
		uint8_t **fresh = map_anon(n * sizeof(*fresh));
		if (!fresh)
			return false;
		size_t expect = 0;
		/* Until owners is set, readers look no further: nothing is marked yet. */
		__atomic_compare_exchange_n(&owner_chunks, &expect, n, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE);
		if (__atomic_compare_exchange_n(&owners, &m, fresh, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			m = fresh;
		else
			munmap(fresh, n * sizeof(*fresh));
	}
	size_t first = (start - lo) / PS_PAGE, last = (start + len - 1 - lo) / PS_PAGE;
	if ((last >> OWNER_SHIFT) >= __atomic_load_n(&owner_chunks, __ATOMIC_ACQUIRE))
		return false;
	for (size_t c = first >> OWNER_SHIFT; c <= last >> OWNER_SHIFT; c++) {
		uint8_t *chunk = __atomic_load_n(&m[c], __ATOMIC_ACQUIRE);
		if (chunk)
			continue;
		uint8_t *fresh = map_anon(OWNER_PAGES);
		if (!fresh)
			return false;
		if (!__atomic_compare_exchange_n(&m[c], &chunk, fresh, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			munmap(fresh, OWNER_PAGES);
	}
	uint8_t id = (uint8_t)(a - arenas);
	for (size_t pg = first; pg <= last; pg++)
		__atomic_store_n(&m[pg >> OWNER_SHIFT][pg & (OWNER_PAGES - 1)], id, __ATOMIC_RELAXED);
	return true;
}

/*
 * Whether threads of more than one arena have come: until then a process
 * places as with one arena (a single-threaded program's footprint does not
 * change with POOLSHIM_POOL_ARENAS).
 */
static inline bool shared(void)
{
	return __atomic_load_n(&next_arena, __ATOMIC_RELAXED) > 1;
}

/* An arena grows by this much at least once it is one of several (see arena_alloc). */
#define ARENA_SLAB ((size_t)8 << 20)

/*
 * The default number of arenas (see PS_BLOCKS_ARENAS_PER_CPU in blocks.h):
 * per CPU this process may run on, by sched_getaffinity (no file to read,
 * no allocation), at most narenas.  Asked when a second thread binds, not
 * at start-up: a program that never has two threads in the pool makes no
 * system call for it (tests/preload/startup_syscalls.sh counts them).
 * Racing threads compute the same value.
 */
static uint32_t default_count(void)
{
	cpu_set_t set;
	int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	uint32_t k = (uint32_t)(cpus > 0 ? cpus : 1) * PS_BLOCKS_ARENAS_PER_CPU;
	return k < narenas ? k : narenas;
}

static uint32_t bind_count(void)
{
	uint32_t n = __atomic_load_n(&nbind, __ATOMIC_RELAXED);
	if (ps_likely(n != 0))
		return n;
	n = default_count();
	__atomic_store_n(&nbind, n, __ATOMIC_RELAXED);
	return n;
}

/*
 * The calling thread's arena: bound at its first call, round robin (a
 * counter shared by all threads, taken once per thread), as jemalloc's
 * threads pick theirs.  One arena: always it, no thread-local state.
 */
static struct arena *my_arena(void)
{
	if (ps_likely(narenas == 1))
		return &arenas[0];
	uint32_t e = __atomic_load_n(&epoch, __ATOMIC_RELAXED);
	if (ps_likely(mine != NULL && mine_epoch == e))
		return mine;
	uint32_t k = __atomic_fetch_add(&next_arena, 1, __ATOMIC_RELAXED);
	uint32_t n = k ? bind_count() : 1;
	if (k == 1) {
		/* Arena 0 publishes by differences from its next change on (publish_counts). */
		pthread_mutex_lock(&arenas[0].lock);
		pthread_mutex_unlock(&arenas[0].lock);
	}
	mine = &arenas[k % n];
	mine_epoch = e;
	return mine;
}

/* Make sure n nodes can be had without failing: true, or false if no chunk could be mapped. */
static bool reserve(struct arena *a, uint32_t n)
{
	if (ps_unlikely(!a->chunk)) {
		void *d = mmap(NULL, CHUNKS * sizeof(*a->chunk), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (d == MAP_FAILED)
			return false;
		a->chunk = d;
		a->info.nodes_mapped += CHUNKS * sizeof(*a->chunk);
		/* Each arena its own priorities, arena 0 the ones there were before arenas. */
		a->rng = 0x9e3779b9u + 0x6d2b79f5u * (uint32_t)(a - arenas);
	}
	while (a->nspare + (a->nchunks * CHUNK_NODES - a->used_nodes) < n) {
		if (a->nchunks == CHUNKS)
			return false;
		void *p = mmap(NULL, CHUNK_NODES * sizeof(struct node), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return false;
		a->chunk[a->nchunks++] = p;
		a->info.nodes_mapped += CHUNK_NODES * sizeof(struct node);
	}
	return true;
}

/* A node (reserved before) for [start, start + len), in neither tree yet. */
static uint32_t node_new(struct arena *a, uintptr_t start, size_t len, int state, bool zero)
{
	uint32_t i;

	if (a->spare) {
		i = a->spare;
		a->spare = KID(i, ADDR, 0);
		a->nspare--;
	} else {
		i = ++a->used_nodes;
	}
	/* xorshift32: the priorities only need to look random. */
	a->rng ^= a->rng << 13;
	a->rng ^= a->rng >> 17;
	a->rng ^= a->rng << 5;
	*N(a, i) = (struct node){ .start = start, .len = len, .prio = a->rng, .state = (uint8_t)state,
			       .zero = zero, .purged = zero };
	return i;
}

static void node_drop(struct arena *a, uint32_t i)
{
	KID(i, ADDR, 0) = a->spare;
	a->spare = i;
	a->nspare++;
}

static uintptr_t end_of(struct arena *a, uint32_t i)
{
	return N(a, i)->start + N(a, i)->len;
}

/*
 * ---- the two treaps, one code: tr says which links and which key ----
 * The address tree orders by start, the size tree by (len, start); every
 * call names the node whose key it goes by.
 */

/* Whether a's key is below b's in tree tr. */
static bool key_below(struct arena *a, int tr, uint32_t p, uint32_t q)
{
	const struct node *x = N(a, p), *y = N(a, q);

	if (tr == SIZE && x->len != y->len)
		return x->len < y->len;
	return x->start < y->start;
}

/* Split t into the nodes below x's key (*l) and the rest (*r). */
static void split(struct arena *a, int tr, uint32_t t, uint32_t x, uint32_t *l, uint32_t *r)
{
	if (!t) {
		*l = *r = 0;
		return;
	}
	if (key_below(a, tr, t, x)) {
		split(a, tr, KID(t, tr, 1), x, &KID(t, tr, 1), r);
		*l = t;
	} else {
		split(a, tr, KID(t, tr, 0), x, l, &KID(t, tr, 0));
		*r = t;
	}
}

/* Join two trees, every key of l below every key of r. */
static uint32_t join(struct arena *a, int tr, uint32_t l, uint32_t r)
{
	if (!l)
		return r;
	if (!r)
		return l;
	if (N(a, l)->prio > N(a, r)->prio) {
		KID(l, tr, 1) = join(a, tr, KID(l, tr, 1), r);
		return l;
	}
	KID(r, tr, 0) = join(a, tr, l, KID(r, tr, 0));
	return r;
}

static uint32_t insert(struct arena *a, int tr, uint32_t t, uint32_t x)
{
	if (!t)
		return x;
	if (N(a, x)->prio > N(a, t)->prio) {
		split(a, tr, t, x, &KID(x, tr, 0), &KID(x, tr, 1));
		return x;
	}
	int side = !key_below(a, tr, x, t);
	KID(t, tr, side) = insert(a, tr, KID(t, tr, side), x);
	return t;
}

/* Take x (it is there) out of t. */
static uint32_t erase(struct arena *a, int tr, uint32_t t, uint32_t x)
{
	if (t == x)
		return join(a, tr, KID(t, tr, 0), KID(t, tr, 1));
	int side = !key_below(a, tr, x, t);
	KID(t, tr, side) = erase(a, tr, KID(t, tr, side), x);
	return t;
}

/* ---- lookups in the address tree ---- */

static uint32_t find(struct arena *a, uintptr_t key)
{
	uint32_t t = a->root;

	while (t && N(a, t)->start != key)
		t = key < N(a, t)->start ? KID(t, ADDR, 0) : KID(t, ADDR, 1);
	return t;
}

/* The node with the largest start below key, or 0. */
static uint32_t below(struct arena *a, uintptr_t key)
{
	uint32_t t = a->root, best = 0;

	while (t) {
		if (N(a, t)->start < key) {
			best = t;
			t = KID(t, ADDR, 1);
		} else {
			t = KID(t, ADDR, 0);
		}
	}
	return best;
}

/*
 * The first node of tree tr whose start (ADDR) or length (SIZE) is at
 * least v, or 0: in the size tree, the smallest block of v bytes or more,
 * the lowest of equals.
 */
static uint32_t first_at_least(struct arena *a, int tr, uint64_t v)
{
	uint32_t t = tr == ADDR ? a->root : a->sroot, best = 0;

	while (t) {
		if ((tr == ADDR ? N(a, t)->start : N(a, t)->len) >= v) {
			best = t;
			t = KID(t, tr, 0);
		} else {
			t = KID(t, tr, 1);
		}
	}
	return best;
}

/* The node with the smallest start at or above key, or 0. */
static uint32_t at_or_above(struct arena *a, uintptr_t key)
{
	return first_at_least(a, ADDR, key);
}

/* The last node of tree tr (the highest block, or the largest free one), or 0. */
static uint32_t last_of(struct arena *a, int tr)
{
	uint32_t t = tr == ADDR ? a->root : a->sroot;

	while (t && KID(t, tr, 1))
		t = KID(t, tr, 1);
	return t;
}

/* x becomes FREE (or changes while FREE): into the size tree after, out before. */
static void free_in(struct arena *a, uint32_t x)
{
	KID(x, SIZE, 0) = KID(x, SIZE, 1) = 0;
	a->sroot = insert(a, SIZE, a->sroot, x);
	if (N(a, x)->zero)
		a->info.free_zero_bytes += N(a, x)->len;
}

static void free_out(struct arena *a, uint32_t x)
{
	a->sroot = erase(a, SIZE, a->sroot, x);
	if (N(a, x)->zero)
		a->info.free_zero_bytes -= N(a, x)->len;
}

/* The smallest FREE block of at least need bytes, the lowest of equals; or 0. */
static uint32_t best_fit(struct arena *a, size_t need)
{
	return first_at_least(a, SIZE, need);
}

static uintptr_t align_up(uintptr_t v, size_t align)
{
	return (v + align - 1) & ~(uintptr_t)(align - 1);
}

/* Whether the FREE block x holds len bytes starting at a multiple of align. */
static bool holds_aligned(struct arena *a, uint32_t x, size_t len, size_t align)
{
	return align_up(N(a, x)->start, align) + len <= end_of(a, x);
}

/* The FREE block after x in the size tree (size, then address), or 0. */
static uint32_t size_next(struct arena *a, uint32_t x)
{
	uint32_t t = a->sroot, best = 0;

	while (t) {
		if (key_below(a, SIZE, x, t)) {
			best = t;
			t = KID(t, SIZE, 0);
		} else {
			t = KID(t, SIZE, 1);
		}
	}
	return best;
}

/*
 * The smallest FREE block that holds len bytes aligned to align, or 0.
 * Any block of len + align - page bytes does, but a smaller one may too:
 * one that starts aligned, as a freed aligned block does.  Asking only
 * for the larger size left every freed aligned block unused (1000
 * posix_memalign of 200000 bytes at 2 MiB, each freed before the next:
 * 2 GB of slabs, glibc 1.3 MB).  So the blocks between the two sizes are
 * tried in order of size, a bounded number of them (a walk each), then
 * the first block of the larger size.
 */
#define ALIGNED_TRIES 32
static uint32_t fit(struct arena *a, size_t len, size_t align)
{
	if (align == PS_PAGE)
		return best_fit(a, len);
	size_t surely = len + (align - PS_PAGE);
	uint32_t x = best_fit(a, len);
	for (int k = 0; x && N(a, x)->len < surely && k < ALIGNED_TRIES; k++, x = size_next(a, x))
		if (holds_aligned(a, x, len, align))
			return x;
	return best_fit(a, surely);
}

/* Under the lock: the free block s, right after x, becomes part of x (in no size tree, either). */
static void absorb(struct arena *a, uint32_t x, uint32_t s)
{
	N(a, x)->len += N(a, s)->len;
	N(a, x)->zero &= N(a, s)->zero;
	N(a, x)->purged &= N(a, s)->purged;
	a->root = erase(a, ADDR, a->root, s);
	node_drop(a, s);
	a->info.free--;
}

/*
 * x (FREE, in no size tree yet) absorbs the FREE blocks right next to
 * it, and the merged block goes into the size tree; the node that holds
 * it.  Known zero only if all parts were.
 */
static uint32_t coalesce(struct arena *a, uint32_t x)
{
	uint32_t p = below(a, N(a, x)->start);

	if (p && N(a, p)->state == FREE && end_of(a, p) == N(a, x)->start) {
		free_out(a, p);
		absorb(a, p, x);
		x = p;
	}
	uint32_t s = at_or_above(a, end_of(a, x));
	if (s && N(a, s)->state == FREE && N(a, s)->start == end_of(a, x)) {
		free_out(a, s);
		absorb(a, x, s);
	}
	free_in(a, x);
	return x;
}

/* Add [start, start + len), a new slab, as free memory (one node reserved). */
static void add_free(struct arena *a, uintptr_t start, size_t len, bool zero)
{
	uint32_t x = node_new(a, start, len, FREE, zero);

	a->root = insert(a, ADDR, a->root, x);
	a->info.free++;
	a->info.free_bytes += len;
	coalesce(a, x);
	if (start + len > a->top_end)
		a->top_end = start + len;
}

/*
 * Carve [at, at + len) out of the FREE block x that holds it (two nodes
 * reserved): at, and whether its pages are known zero.
 */
static uintptr_t carve_at(struct arena *a, uint32_t x, uintptr_t at, size_t len, bool *zero)
{
	struct node *n = N(a, x);
	uintptr_t s = n->start, e = s + n->len;
	bool z = n->zero, purged = n->purged;
	uint32_t live = x;

	*zero = z;
	free_out(a, x);
	a->info.free_bytes -= len;
	a->info.live++;
	a->info.live_bytes += len;
	if (at == s) {
		n->state = LIVE;
		n->len = len;
		a->info.free--;
	} else {
		n->len = at - s;
		free_in(a, x);
		live = node_new(a, at, len, LIVE, false);
		a->root = insert(a, ADDR, a->root, live);
	}
	N(a, live)->clean = z || purged;
	if (at + len < e) {
		uint32_t y = node_new(a, at + len, e - (at + len), FREE, z);
		N(a, y)->purged = purged;
		a->root = insert(a, ADDR, a->root, y);
		free_in(a, y);
		a->info.free++;
	}
	if (a->hint >= at && a->hint < at + len)
		a->hint = 0;
	return at;
}

/* Carve len bytes aligned to align from the start of the FREE block x (see carve_at). */
static uintptr_t carve(struct arena *a, uint32_t x, size_t len, size_t align, bool *zero)
{
	return carve_at(a, x, align_up(N(a, x)->start, align), len, zero);
}

/*
 * The FREE block holding len bytes at a->hint, where the last block freed
 * into a started, or 0.  A program that frees a buffer and asks for the
 * next finds it where the last one was, its lines still in the CPU's
 * caches, as glibc's heap and mimalloc's spans give it back; best fit
 * would place it in whichever free block is smallest, anywhere in the
 * arena (scripts/bench alloc, 2 threads: buffers over 4 MiB overlapped
 * the thread's previous one by 9-16% of their bytes, glibc's and
 * mimalloc's by 26%).  The request is carved at that free block's start
 * (the freed block merged with the free ones below it starts there), not
 * at the hint: carving at the hint left a free block below every buffer
 * placed so, and bench/proxybuf's pool (8 buffers of 1-16 MiB in flight,
 * freed one at a time, each placed by the hint) grew to 140 MiB backed
 * and 137 MiB resident against 109 MiB carved at the block's start; the
 * streaming loop's overlap with the previous buffer is the same either
 * way (44% and 78% for small and large pairs, glibc's 45% and 78%).
 */
static uint32_t at_hint(struct arena *a, size_t len, size_t align)
{
	uintptr_t h = a->hint;
	if (!h || (h & (align - 1)))
		return 0;
	uint32_t x = below(a, h + 1);
	if (!x || N(a, x)->state != FREE || h + len > end_of(a, x))
		return 0;
	return x;
}

/*
 * Whether to carve at the hint without looking for best fit: where the
 * arena's free memory is at least what it has handed out (room is plenty,
 * and where the next buffer lands is what costs).  Else
 * hint_fits_as_well() decides against best fit's block.
 */
static bool hint_plenty(struct arena *a)
{
	return a->info.free_bytes >= a->info.live_bytes;
}

/*
 * With less free than handed out: the hint's block h only if it is about
 * as tight a fit as best fit's x (or best fit found none): carving big
 * free blocks at the hint whatever their size raised the churn
 * benchmark's peak (40 live buffers of 1-24 MiB) from 719 to 818 MiB
 * (glibc 690) and malloc-large's from 525 to 597 (glibc 509); with this
 * rule 703 and 490, and `scripts/bench alloc`'s 2 threads overlap their
 * previous buffer by 19-22% of their bytes against 12-15% by best fit.
 */
#define HINT_SLACK 4
static bool hint_fits_as_well(struct arena *a, uint32_t h, uint32_t x)
{
	return !x || N(a, h)->len <= N(a, x)->len + N(a, x)->len / HINT_SLACK;
}

/* The largest free block of any arena, as published (no lock). */
static uint64_t largest_of_all(void)
{
	uint64_t largest = 0;

	for (uint32_t i = 0; i < narenas; i++) {
		uint64_t l = __atomic_load_n(&arenas[i].published.largest_free, __ATOMIC_RELAXED);
		largest = l > largest ? l : largest;
	}
	return largest;
}

/*
 * Under a's lock, after a change: its counts where readers take them
 * without a lock (ps_blocks_get_info sums them, from any thread or a
 * signal handler; stores to the arena's own line, nothing shared), and
 * the mirror, if any: there each arena adds what changed since it last
 * published, so its sums are exact whatever the order in which arenas
 * publish, and the largest free block of all is taken again only when it
 * may have fallen (this arena's was the largest and shrank).  Summing
 * every arena into totals at each change, or taking the largest of all
 * each time, was 12% of the time of 16 threads in 8 arenas (lines every
 * CPU writes).
 */
static void publish_counts(struct arena *a)
{
	struct ps_blocks_info *pub = &a->published;
	uint64_t *m = __atomic_load_n(&mirror, __ATOMIC_ACQUIRE);
	uint32_t t = last_of(a, SIZE);
	uint64_t largest = t ? N(a, t)->len : 0;
	/* One arena in use: the mirror holds its counts as they are (no atomic sums). */
	bool alone = narenas == 1 || (a == &arenas[0] && !shared());

#define PUB(field, slot)                                                                \
	do {                                                                            \
		uint64_t d = a->info.field - pub->field;                                \
		if (d) {                                                                \
			__atomic_store_n(&pub->field, a->info.field, __ATOMIC_RELAXED); \
			if (m && (slot) && alone)                                       \
				__atomic_store_n(&m[slot], a->info.field, __ATOMIC_RELAXED); \
			else if (m && (slot))                                           \
				__atomic_add_fetch(&m[slot], d, __ATOMIC_RELAXED);     \
		}                                                                       \
	} while (0)
	PUB(live, 0);
	PUB(live_bytes, 0);
	PUB(free, 1);
	PUB(free_bytes, 2);
	PUB(free_zero_bytes, 3);
	PUB(nodes_mapped, 0);
#undef PUB
	uint64_t was = pub->largest_free;
	if (largest != was) {
		__atomic_store_n(&pub->largest_free, largest, __ATOMIC_RELAXED);
		if (m) {
			uint64_t all = __atomic_load_n(&m[4], __ATOMIC_RELAXED);
			if (alone)
				__atomic_store_n(&m[4], largest, __ATOMIC_RELAXED);
			else if (largest > all)
				__atomic_store_n(&m[4], largest, __ATOMIC_RELAXED);
			else if (was >= all)
				__atomic_store_n(&m[4], largest_of_all(), __ATOMIC_RELAXED);
		}
	}
	/*
	 * The thread that binds the second arena passes through arena 0's
	 * lock first (my_arena): arena 0 is past its last store of "alone"
	 * before any other arena adds.
	 */
	if (m && !__atomic_load_n(&m[0], __ATOMIC_RELAXED))
		__atomic_store_n(&m[0], 1, __ATOMIC_RELEASE);
}

void ps_blocks_set_mirror(uint64_t *m)
{
	if (__atomic_load_n(&mirror, __ATOMIC_ACQUIRE) == m)
		return;
	/* With every lock held no arena publishes: the totals, then the differences. */
	for (uint32_t i = 0; i < narenas; i++)
		pthread_mutex_lock(&arenas[i].lock);
	struct ps_blocks_info sum;
	ps_blocks_get_info(&sum);
	__atomic_store_n(&m[1], sum.free, __ATOMIC_RELAXED);
	__atomic_store_n(&m[2], sum.free_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&m[3], sum.free_zero_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&m[4], sum.largest_free, __ATOMIC_RELAXED);
	__atomic_store_n(&m[0], 1, __ATOMIC_RELEASE);
	__atomic_store_n(&mirror, m, __ATOMIC_RELEASE);
	for (uint32_t i = narenas; i-- > 0;)
		pthread_mutex_unlock(&arenas[i].lock);
}

unsigned ps_blocks_init(unsigned k)
{
	if (k == 0) {
		/* The default: counted when a second thread binds (bind_count). */
		narenas = PS_BLOCKS_ARENAS_DEFAULT_MAX;
		nbind = 0;
	} else {
		narenas = k > PS_BLOCKS_ARENAS_MAX ? PS_BLOCKS_ARENAS_MAX : k;
		nbind = narenas;
	}
	__atomic_add_fetch(&epoch, 1, __ATOMIC_RELAXED);
	return narenas;
}

unsigned ps_blocks_arenas(void)
{
	return narenas == 1 ? 1 : bind_count();
}

int ps_blocks_arena_of(const void *p)
{
	return ps_pool_slab_of(p) < 0 ? -1 : (int)(owner_of(p) - arenas);
}

/*
 * Under a's lock: a block for the request from a's free blocks, or from a
 * new slab (when grow); 0 with *fail set.  See ps_blocks_alloc.
 */
static uintptr_t arena_alloc(struct arena *a, size_t len, size_t align, bool grow, bool *was_zero,
			     enum ps_pool_fail *fail)
{
	bool extend = true;

	for (int tries = 0;; tries++) {
		if (!reserve(a, 3)) {
			*fail = PS_FAIL_NO_MEMORY;
			return 0;
		}
		uint32_t h = at_hint(a, len, align);
		/*
		 * While tails are given back, at the hint itself: the block
		 * freed there kept its first pages, what the next buffer
		 * writes first (bench/proxybuf: 0.62 s of CPU against 0.83 at
		 * its free block's start, where the pages had gone back).
		 */
		if (h && trimming_in(a))
			return carve_at(a, h, a->hint, len, was_zero);
		if (h && hint_plenty(a))
			return carve(a, h, len, align, was_zero);
		uint32_t x = fit(a, len, align);
		if (h && hint_fits_as_well(a, h, x))
			return carve(a, h, len, align, was_zero);
		if (x)
			return carve(a, x, len, align, was_zero);
		if (!grow)
			return 0;       /* no fit: *fail stays PS_FAIL_NONE */
		if (tries == 4) {
			/* Others took each new slab first: rare; the request falls back. */
			*fail = PS_FAIL_POOL_FULL;
			return 0;
		}
		/*
		 * A new slab, right after the last one, so a free block at the
		 * top of the pool needs only the rest, and the room that
		 * alignment leaves in front of the block becomes a free block
		 * of the same run (merged with the ones around it), not a gap
		 * that belongs to no block and splits the run.  At least an
		 * eighth of the block is taken, the rest left free (mapped,
		 * not touched), as a block grown in place takes
		 * (ps_blocks_resize): requests a page larger each time would
		 * otherwise take a slab each.  At the cap, only the rest.  A
		 * first slab, or an alignment that would leave more than a
		 * unit in front, gets a slab aligned itself: the block starts
		 * it, and the range skipped is no slab at all (not backed:
		 * with hugetlb pages it would hold them for nothing).  With
		 * several arenas, only an arena whose last slab is the pool's
		 * last extends it: another's slab lies between otherwise.
		 */
		size_t want = len, need = len, slab_align = align;
		uint32_t t = last_of(a, ADDR);
		bool top_free = t && N(a, t)->state == FREE && end_of(a, t) == a->top_end;
		uintptr_t at = align_up(top_free ? N(a, t)->start : a->top_end, align);
		if (extend && a->top_end && at <= a->top_end + PS_UNIT &&
		    (!shared() || ps_pool_next() == a->top_end)) {
			if (at + len <= a->top_end) {
				/* The top block holds it (the bounded search missed it). */
				return carve(a, t, len, align, was_zero);
			}
			need = at + len - a->top_end;
			size_t step = round_page(len / 8 < PS_SLAB_MAX / 16 ? len / 8 : PS_SLAB_MAX / 16);
			want = need > step ? need : step;
			slab_align = PS_PAGE;
		}
		/*
		 * Threads in several arenas take slabs in turn, so an arena's
		 * slabs rarely follow each other and its free blocks cannot
		 * merge across them: an arena grows by ARENA_SLAB at least, the
		 * rest left free (mapped, not touched) for its next requests.
		 */
		if (shared() && want < ARENA_SLAB)
			want = ARENA_SLAB;
		pthread_mutex_unlock(&a->lock);
		bool zeroed = false;
		void *s = ps_pool_take(want, slab_align, need, &zeroed, fail);
		if (!s && want > need && *fail == PS_FAIL_POOL_FULL)
			s = ps_pool_take(want = need, slab_align, need, &zeroed, fail);
		pthread_mutex_lock(&a->lock);
		if (!s)
			return 0;
		if (!reserve(a, 3) || !owner_set(a, (uintptr_t)s, round_page(want))) {
			/* The slab stays the pool's, unused: nothing to put it in. */
			*fail = PS_FAIL_NO_MEMORY;
			return 0;
		}
		add_free(a, (uintptr_t)s, round_page(want), zeroed);
		x = below(a, (uintptr_t)s + 1);
		if (holds_aligned(a, x, len, align))
			return carve(a, x, len, align, was_zero);
		/*
		 * Raced for the top, or the slab did not follow it (the small
		 * region closed): next time one aligned itself.
		 */
		extend = false;
	}
}

/*
 * Under no lock: a block from another arena's free blocks, trying only
 * the arenas whose published largest free block is large enough (one
 * lock at a time); 0 if none had one.
 */
static uintptr_t steal(struct arena *a, size_t len, size_t align, bool *was_zero)
{
	for (uint32_t i = 1; i < narenas; i++) {
		struct arena *b = &arenas[(uint32_t)(a - arenas + i) % narenas];
		enum ps_pool_fail f = PS_FAIL_NONE;
		if (__atomic_load_n(&b->published.largest_free, __ATOMIC_RELAXED) < len)
			continue;
		pthread_mutex_lock(&b->lock);
		uintptr_t at = arena_alloc(b, len, align, false, was_zero, &f);
		publish_counts(b);
		pthread_mutex_unlock(&b->lock);
		if (at)
			return at;
	}
	return 0;
}

void *ps_blocks_alloc(size_t size, size_t align, bool zero, enum ps_pool_fail *why)
{
	int saved_errno = errno;
	enum ps_pool_fail fail = PS_FAIL_NONE;
	uintptr_t at = 0;
	bool was_zero = false;

	if (align < PS_PAGE)
		align = PS_PAGE;
	if (size > PS_SLAB_MAX || align > PS_SLAB_MAX) {
		*why = PS_FAIL_TOO_LARGE;
		return NULL;
	}
	size_t len = round_page(size ? size : 1);
	struct arena *a = my_arena();
	bool several = shared();

	pthread_mutex_lock(&a->lock);
	at = arena_alloc(a, len, align, !several, &was_zero, &fail);
	if (!at && several && fail == PS_FAIL_NONE) {
		/*
		 * No free block of its own holds it.  A new slab costs the
		 * kernel's zeroing of every page the program then touches; a
		 * free block of another arena costs taking its lock (once,
		 * and only where its published largest free block fits): that
		 * first, so that the pool grows only when no arena holds the
		 * request.  Growing first, arenas of 16 threads took 2.4 times
		 * the memory of one tree, and zeroing it was half their time
		 * in a 1 s run; taking from arenas whose lock was free at that
		 * moment only, still 1.6 times (16 threads, every page
		 * touched), waiting for the lock 1.3 times.
		 */
		pthread_mutex_unlock(&a->lock);
		at = steal(a, len, align, &was_zero);
		pthread_mutex_lock(&a->lock);
		if (!at)
			at = arena_alloc(a, len, align, true, &was_zero, &fail);
	}
	publish_counts(a);
	pthread_mutex_unlock(&a->lock);
	/*
	 * The pool is at its cap: any arena's free blocks may hold it, as the
	 * one tree held every free block before there were arenas.  The
	 * block stays the other arena's.
	 */
	if (!at && fail == PS_FAIL_POOL_FULL && narenas > 1 &&
	    (at = steal(a, len, align, &was_zero)) != 0)
		fail = PS_FAIL_NONE;
	errno = saved_errno;
	*why = fail;
	if (!at)
		return NULL;
	if (zero && !was_zero)
		memset((void *)at, 0, len);
	return (void *)at;
}

/*
 * Under a's lock: free the block at p, its size (0 if none is live there);
 * the arena's next request goes where it lay if hint.
 */
static size_t free_locked(struct arena *a, void *p, bool hint)
{
	uint32_t x = find(a, (uintptr_t)p);
	size_t len = 0;
	if (x && N(a, x)->state == LIVE) {
		len = N(a, x)->len;
		N(a, x)->state = FREE;
		N(a, x)->zero = N(a, x)->purged = false;
		a->info.live--;
		a->info.live_bytes -= len;
		a->info.free++;
		a->info.free_bytes += len;
		coalesce(a, x);
		if (hint)
			a->hint = (uintptr_t)p;
	}
	publish_counts(a);
	return len;
}

static size_t free_with(void *p, bool hint)
{
	struct arena *a = owner_of(p);

	pthread_mutex_lock(&a->lock);
	size_t len = free_locked(a, p, hint);
	pthread_mutex_unlock(&a->lock);
	return len;
}

size_t ps_blocks_free(void *p)
{
	return free_with(p, true);
}

/*
 * ---- unwritten tails (see ps_blocks_set_tails in blocks.h) ----
 */
static int tail_mode = PS_TAILS_KEEP;
static size_t tail_keep;
/*
 * The last 8 tails looked at, newest in bit 0: set where three quarters were
 * written.  A process starts with three old votes for written: the first
 * two tails found unwritten start trimming (bench/proxybuf with seven
 * needed, its pool grown meanwhile: 45 MiB peak RSS against 39).
 */
#define TAIL_FIRST 0xe0u
static uint32_t tail_votes = TAIL_FIRST;
static bool tail_trim;          /* AUTO's choice, by the votes */
static uint32_t tail_looks;     /* hot frees of blocks not carved clean: one in TAIL_EVERY is looked at */
#define TAIL_VOTES 0xffu
#define TAIL_EVERY 8
#define TAIL_SPACING_NS 1000000ull
#define TAIL_PACE_WINDOW 64
#define TAIL_PACE_NS 20000ull
static uint64_t tail_pace_ns = TAIL_PACE_NS;
static uint64_t tail_spacing = TAIL_SPACING_NS;
static uint64_t tail_next;      /* the coarse clock's ns before which no look (look_due) */
/*
 * Trimming starts when at most TAIL_START of the last 8 tails were
 * written and stops when TAIL_STOP were.  While tails go back, a tail can
 * hold the kept first pages of blocks freed before, and on THP the whole
 * 2 MiB units that writes to blocks too small to trim (or kept in a CPU's
 * cache) made resident, so it reads written now and then: bench/proxybuf
 * beside `make check` read 4 of 8 written in 3 runs of 80 with 4 and half
 * the tail resident as the rule, left trimming, and with no block carved
 * clean again never came back (115 MiB).  A tail is written when three
 * quarters of it are resident, and 6 of 8 stop trimming.
 */
#define TAIL_START 1
#define TAIL_STOP 6
/*
 * A block at least this many times keep (and 256 KiB) has a tail worth
 * looking at and giving back (bench/proxybuf with POOLSHIM_POOL_TAILS=trim:
 * 78 MiB peak RSS with 4, 39 with 2, 37 with 1 at a higher CPU cost).
 */
#define TAIL_MIN_KEEPS 2
#define TAIL_MIN ((size_t)256 << 10)
/* A tail looked at spans 1 MiB at least: a few pages decide nothing. */
#define TAIL_LOOK_MIN ((uintptr_t)1 << 20)
/* mincore's vector, on the stack: 4 MiB of tail a call, the first 16 MiB looked at. */
#define TAIL_VEC 1024
#define TAIL_CALLS 4

void ps_blocks_set_tails(int mode, size_t keep)
{
	tail_mode = mode;
	tail_keep = round_page(keep);
	__atomic_store_n(&tail_votes, TAIL_FIRST, __ATOMIC_RELAXED);
	__atomic_store_n(&tail_trim, false, __ATOMIC_RELAXED);
}

/* Whether the votes (or TRIM) say tails go back, the pace aside. */
static bool trimming_votes(void)
{
	if (ps_likely(tail_mode == PS_TAILS_KEEP))
		return false;
	return tail_mode == PS_TAILS_TRIM || __atomic_load_n(&tail_trim, __ATOMIC_RELAXED);
}

/* Whether a's frees give tails back now: the votes, and (AUTO) a's frees not fast. */
static bool trimming_in(const struct arena *a)
{
	return trimming_votes() &&
	       (tail_mode == PS_TAILS_TRIM || !__atomic_load_n(&a->tail_fast, __ATOMIC_RELAXED));
}

bool ps_blocks_trimming(void)
{
	/* The calling thread's arena if it has one (asking binds no thread). */
	struct arena *a = &arenas[0];
	if (narenas > 1 && mine != NULL && mine_epoch == __atomic_load_n(&epoch, __ATOMIC_RELAXED))
		a = mine;
	return trimming_in(a);
}

/*
 * Under a's lock, at a free of a block with a tail: count it, and every
 * TAIL_PACE_WINDOW read the clock; a window of such frees closer than
 * TAIL_PACE_NS apart on average makes a fast (no look, no tail given
 * back) until a window is slower.  A tail given back costs a system call
 * and the refaults of whatever the program writes past the kept bytes:
 * nothing beside a buffer that takes a hundred microseconds, ruinous
 * beside the threads benchmark's steps (0.1-2 us; its one-byte rows'
 * tails are unwritten).  The CPUs' caches' pace decides first where they
 * are on (alloc.c): this one counts for a program without them, and for
 * the frees too large for them.
 */
static void tail_pace(struct arena *a)
{
	if (++a->tail_frees % TAIL_PACE_WINDOW != 0)
		return;
	uint64_t now = ps_clock_ns(CLOCK_MONOTONIC);
	uint64_t then = a->tail_window_ns;
	a->tail_window_ns = now;
	uint64_t pace = __atomic_load_n(&tail_pace_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&a->tail_fast, then != 0 && now - then < pace * TAIL_PACE_WINDOW, __ATOMIC_RELAXED);
}

/* A tail looked at: written (three quarters resident) or not.  Racing frees may lose a vote. */
static void tail_vote(bool written)
{
	uint32_t v = (__atomic_load_n(&tail_votes, __ATOMIC_RELAXED) << 1 | written) & TAIL_VOTES;
	int n = __builtin_popcount(v);

	__atomic_store_n(&tail_votes, v, __ATOMIC_RELAXED);
	if (n <= TAIL_START)
		__atomic_store_n(&tail_trim, true, __ATOMIC_RELAXED);
	else if (n >= TAIL_STOP)
		__atomic_store_n(&tail_trim, false, __ATOMIC_RELAXED);
}

/*
 * Whether the program wrote three quarters of the pages of [from, to) (page
 * aligned), as far as the first TAIL_CALLS x TAIL_VEC pages say: 1 or 0,
 * -1 if mincore failed.  Resident is written here: the pool never reads
 * a block's pages, and a block carved from pages known zero had none.
 */
static int tail_written(uintptr_t from, uintptr_t to)
{
	unsigned char vec[TAIL_VEC];
	size_t pages = 0, resident = 0;

	for (int c = 0; c < TAIL_CALLS && from < to; c++) {
		size_t n = (to - from) / PS_PAGE;
		if (n > TAIL_VEC)
			n = TAIL_VEC;
		if (PS_SYSCALL(SYS_mincore, from, n * PS_PAGE, vec) != 0)
			return -1;
		for (size_t i = 0; i < n; i++)
			resident += vec[i] & 1;
		pages += n;
		from += n * PS_PAGE;
	}
	return pages ? resident * 4 >= pages * 3 : -1;
}

/*
 * Whether to look at the tail of a block not carved clean: one free in
 * TAIL_EVERY, and no sooner than tail_spacing after the last such look.
 * The threads benchmark frees 200,000 blocks a second too large for the
 * caches; a look at one in 8 (mincore, 1-5 us) cost its one-thread row
 * about a tenth of its steps.  The coarse clock (the vDSO's, a tick's
 * resolution) is read only by the one free in TAIL_EVERY.
 */
static bool look_due(void)
{
	if (__atomic_add_fetch(&tail_looks, 1, __ATOMIC_RELAXED) % TAIL_EVERY != 0)
		return false;
	uint64_t spacing = __atomic_load_n(&tail_spacing, __ATOMIC_RELAXED);
	if (spacing == 0)
		return true;
	uint64_t now = ps_clock_ns(CLOCK_MONOTONIC_COARSE);
	uint64_t next = __atomic_load_n(&tail_next, __ATOMIC_RELAXED);
	return now >= next && __atomic_compare_exchange_n(&tail_next, &next, now + spacing, false,
							   __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void ps_blocks_tail_timing_for_tests(uint64_t spacing_ns, uint64_t pace_ns)
{
	__atomic_store_n(&tail_spacing, spacing_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&tail_next, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&tail_pace_ns, pace_ns, __ATOMIC_RELAXED);
}

/* Whether a block of len bytes has a tail to look at or give back. */
static bool has_tail(size_t len)
{
	return len >= TAIL_MIN && len >= TAIL_MIN_KEEPS * tail_keep;
}

/*
 * Before the live block [p, p + len) is freed (it is still the caller's:
 * nothing else touches it), under no lock: look at its tail if look, and
 * give it back as the mode says; true if it was given back.  clean: the
 * block was carved from pages known zero, what is resident the program
 * wrote; elsewhere a resident page may be one a block placed there before
 * left (as the freed blocks' kept first pages are while trimming), so
 * outside trimming such a tail votes only when unwritten.
 */
static bool tail_of(struct arena *a, void *p, size_t len, bool clean, bool look)
{
	uintptr_t from = (uintptr_t)p + tail_keep, to = (uintptr_t)p + len, at = from;
	struct ps_pool_range r;
	ps_pool_range_of(p, len, &r);
	/* hugetlb pages are never given back (ps_pool_purge): nothing to do. */
	if (r.first < 0 || r.backing == PS_BACK_HUGETLB)
		return false;
	/*
	 * On THP, looked at from a 2 MiB boundary: a page written before it
	 * makes its whole unit resident.
	 */
	if (r.backing == PS_BACK_THP)
		at = (from + PS_UNIT - 1) & ~(uintptr_t)(PS_UNIT - 1);
	bool trim = trimming_in(a);
	if (look && at + TAIL_LOOK_MIN <= to) {
		int w = tail_written(at, to);
		if (w == 0 || (w == 1 && (clean || trim))) {
			tail_vote(w == 1);
			trim = trimming_in(a);
		}
	}
	return trim && ps_pool_give_back(from, to - from) != 0;
}

size_t ps_blocks_free_tail(void *p, bool hot, bool slow, bool *trimmed)
{
	*trimmed = false;
	if (ps_likely(tail_mode == PS_TAILS_KEEP) || (tail_mode == PS_TAILS_AUTO && !slow))
		return free_with(p, hot);
	struct arena *a = owner_of(p);
	pthread_mutex_lock(&a->lock);
	uint32_t x = find(a, (uintptr_t)p);
	bool live = x && N(a, x)->state == LIVE;
	size_t len = live ? N(a, x)->len : 0;
	bool clean = live && N(a, x)->clean;
	/*
	 * AUTO looks at the tails of hot frees only (a block that waited in
	 * a CPU's cache is given back as the mode says): each block carved
	 * clean, one in TAIL_EVERY of the others.
	 */
	bool tail = live && has_tail(len);
	if (tail && tail_mode == PS_TAILS_AUTO)
		tail_pace(a);
	bool look = tail && tail_mode == PS_TAILS_AUTO && hot && !a->tail_fast && (clean || look_due());
	if (!tail || (!look && !trimming_in(a))) {
		/* Nothing to do with the tail: one lock, as ps_blocks_free(). */
		size_t n = free_locked(a, p, hot);
		pthread_mutex_unlock(&a->lock);
		return n;
	}
	pthread_mutex_unlock(&a->lock);
	*trimmed = tail_of(a, p, len, clean, look);
	return free_with(p, hot);
}

size_t ps_blocks_free_cold(void *p)
{
	return free_with(p, false);
}

ssize_t ps_blocks_free_try(void *p)
{
	struct arena *a = owner_of(p);

	if (pthread_mutex_trylock(&a->lock) != 0)
		return -EBUSY;
	size_t len = free_locked(a, p, false);
	pthread_mutex_unlock(&a->lock);
	return (ssize_t)len;
}

size_t ps_blocks_size(const void *p)
{
	struct arena *a = owner_of(p);

	pthread_mutex_lock(&a->lock);
	uint32_t x = find(a, (uintptr_t)p);
	size_t len = x && N(a, x)->state == LIVE ? N(a, x)->len : 0;
	pthread_mutex_unlock(&a->lock);
	return len;
}

size_t ps_blocks_resize(void *p, size_t size, size_t *was)
{
	size_t len = round_page(size ? size : 1);
	int saved_errno = errno;   /* reserve()'s mmap may fail */
	struct arena *a = owner_of(p);

	pthread_mutex_lock(&a->lock);
	uint32_t x = find(a, (uintptr_t)p);
	*was = x && N(a, x)->state == LIVE ? N(a, x)->len : 0;
	if (!*was || size > PS_SLAB_MAX || !reserve(a, 1)) {
		pthread_mutex_unlock(&a->lock);
		errno = saved_errno;
		return 0;
	}
	size_t old = *was;
	uintptr_t end = end_of(a, x);
	uint32_t s = at_or_above(a, end);
	bool s_free = s && N(a, s)->state == FREE && N(a, s)->start == end;

	if (len < old) {
		/* The tail becomes free, on its own or joined to the free block above. */
		size_t tail = old - len;
		N(a, x)->len = len;
		if (s_free) {
			/* Moving s's start down keeps the order: nothing lies between. */
			free_out(a, s);
			N(a, s)->start -= tail;
			N(a, s)->len += tail;
			N(a, s)->zero = N(a, s)->purged = false;
			free_in(a, s);
		} else {
			uint32_t y = node_new(a, end - tail, tail, FREE, false);
			a->root = insert(a, ADDR, a->root, y);
			free_in(a, y);
			a->info.free++;
		}
		a->info.live_bytes -= tail;
		a->info.free_bytes += tail;
	} else if (len > old) {
		size_t more = len - old;
		size_t room = s_free ? N(a, s)->len : 0;
		if (room < more && (s_free ? end_of(a, s) : end) == a->top_end &&
		    (!shared() || ps_pool_next() == a->top_end)) {
			/*
			 * The block (and the free one after it) ends the pool:
			 * a new slab right after lets it grow where it is, with
			 * no copy (glibc's mremap of a mapped chunk does not
			 * copy either).
			 */
			size_t need = more - room;
			/*
			 * A buffer grown in small steps would take a slab each
			 * time, and slabs are numbered (PS_MAX_SLABS): an eighth
			 * of the block more each time, left free (mapped, not
			 * touched), for its next steps.
			 */
			size_t step = round_page(old / 8 < PS_SLAB_MAX / 16 ? old / 8 : PS_SLAB_MAX / 16);
			size_t want = need > step ? need : step;
			enum ps_pool_fail why;
			bool zeroed = false;
			pthread_mutex_unlock(&a->lock);
			void *slab = ps_pool_take(want, PS_PAGE, need, &zeroed, &why);
			/* At the cap, only what it needs. */
			if (!slab && want > need && why == PS_FAIL_POOL_FULL)
				slab = ps_pool_take(want = need, PS_PAGE, need, &zeroed, &why);
			pthread_mutex_lock(&a->lock);
			if (slab && reserve(a, 1) && owner_set(a, (uintptr_t)slab, round_page(want)))
				add_free(a, (uintptr_t)slab, round_page(want), zeroed);
			/* Whatever happened meanwhile, look again. */
			s = at_or_above(a, end);
			s_free = s && N(a, s)->state == FREE && N(a, s)->start == end;
			room = s_free ? N(a, s)->len : 0;
		}
		if (room < more) {
			publish_counts(a);
			pthread_mutex_unlock(&a->lock);
			errno = saved_errno;
			return 0;
		}
		N(a, x)->len = len;
		N(a, x)->clean = false;
		free_out(a, s);
		if (N(a, s)->len == more) {
			a->root = erase(a, ADDR, a->root, s);
			node_drop(a, s);
			a->info.free--;
		} else {
			N(a, s)->start += more;
			N(a, s)->len -= more;
			free_in(a, s);
		}
		a->info.live_bytes += more;
		a->info.free_bytes -= more;
	}
	publish_counts(a);
	pthread_mutex_unlock(&a->lock);
	errno = saved_errno;
	return len;
}

/*
 * The first FREE block at or above key not given back since it was freed
 * (known zero blocks have nothing to give), or 0.  A block given back in
 * part (THP units it covers only partly, hugetlb units) is not tried
 * again until it merges with a freed one: each purge gave its whole units
 * back again, and counted them again (malloc_trim said memory was released
 * each time, and the report's total passed the pool's size).
 */
static uint32_t next_dirty(struct arena *a, uintptr_t key)
{
	for (uint32_t t = at_or_above(a, key); t; t = at_or_above(a, end_of(a, t)))
		if (N(a, t)->state == FREE && !N(a, t)->purged)
			return t;
	return 0;
}

/* Under a's lock: give back each dirty free block of a, one at a time without the lock.  Bytes. */
static size_t purge_arena(struct arena *a)
{
	size_t total = 0;
	uintptr_t cursor = 0;

	for (uint32_t x; (x = next_dirty(a, cursor)) != 0;) {
		uintptr_t s = N(a, x)->start;
		size_t len = N(a, x)->len;
		free_out(a, x);
		N(a, x)->state = BUSY;
		a->busy_start = s;
		publish_counts(a);
		pthread_mutex_unlock(&a->lock);
		bool zeroed = ps_pool_purge((void *)s, len) == 0;
		pthread_mutex_lock(&a->lock);
		/* Nobody hands out, merges or frees a BUSY block: x is as it was. */
		N(a, x)->state = FREE;
		N(a, x)->zero = zeroed;
		N(a, x)->purged = true;
		a->busy_start = 0;
		if (zeroed)
			total += len;
		coalesce(a, x);
		cursor = s + len;
	}
	publish_counts(a);
	return total;
}

/*
 * The purge, arena after arena; with try, only the arenas whose lock is
 * free now: -EAGAIN if some were busy and the others gave memory back
 * (*out counts it), -EBUSY if some were busy and nothing was given back
 * (the arenas not in use count as free).  0 else.
 */
static int purge(bool try, size_t *out)
{
	int idle = 0;
	uint32_t busy = 0;
	size_t total = 0;

	*out = 0;
	if (!__atomic_compare_exchange_n(&purging, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return try ? -EBUSY : 0;
	for (uint32_t i = 0; i < narenas; i++) {
		struct arena *a = &arenas[i];
		if (!try) {
			pthread_mutex_lock(&a->lock);
		} else if (pthread_mutex_trylock(&a->lock) != 0) {
			busy++;
			continue;
		}
		total += purge_arena(a);
		pthread_mutex_unlock(&a->lock);
	}
	__atomic_store_n(&purging, 0, __ATOMIC_RELEASE);
	*out = total;
	return busy == 0 ? 0 : total ? -EAGAIN : -EBUSY;
}

size_t ps_blocks_purge(void)
{
	size_t total;

	purge(false, &total);
	return total;
}

int ps_blocks_purge_try(size_t *total)
{
	return purge(true, total);
}

void ps_blocks_get_info(struct ps_blocks_info *out)
{
	*out = (struct ps_blocks_info){ 0 };
	for (uint32_t i = 0; i < narenas; i++) {
		const struct ps_blocks_info *pub = &arenas[i].published;
#define ADD(field) out->field += __atomic_load_n(&pub->field, __ATOMIC_RELAXED)
		ADD(live);
		ADD(live_bytes);
		ADD(free);
		ADD(free_bytes);
		ADD(free_zero_bytes);
		ADD(nodes_mapped);
#undef ADD
	}
	out->largest_free = largest_of_all();
	/* Threads bound so far, one arena each up to the count (my_arena's round robin). */
	uint32_t k = __atomic_load_n(&next_arena, __ATOMIC_RELAXED);
	uint32_t n = narenas == 1 ? 1 : __atomic_load_n(&nbind, __ATOMIC_RELAXED);
	out->arenas_max = n;
	out->arenas_used = k <= 1 || n == 0 ? 1 : k < n ? k : n;
}

uint64_t ps_blocks_largest_free(void)
{
	return largest_of_all();
}

/* The walk behind ps_blocks_check(): the subtree's facts, or false at the first fault. */
struct walk {
	uint64_t free_nodes, sized, zero_bytes;
	uint32_t last_sized;     /* the size tree's node before, in order */
	uintptr_t last_end;
	int last_state;
	bool any;
	struct ps_blocks_info seen;
	const char *fault;
	uintptr_t where;
};

static bool walk(struct arena *a, uint32_t t, uint32_t depth, struct walk *w)
{
	if (!t)
		return true;
	struct node *n = N(a, t);
	if (depth > 4096) {
		w->fault = "the tree is deeper than 4096";
		w->where = n->start;
		return false;
	}
	if ((n->kid[ADDR][0] && N(a, n->kid[ADDR][0])->prio > n->prio) || (n->kid[ADDR][1] && N(a, n->kid[ADDR][1])->prio > n->prio)) {
		w->fault = "a child outranks its parent";
		w->where = n->start;
		return false;
	}
	if (!walk(a, n->kid[ADDR][0], depth + 1, w))
		return false;
	w->where = n->start;
	if (n->len == 0 || n->len % PS_PAGE || n->start % PS_PAGE || n->state > BUSY) {
		w->fault = "a block that is not whole pages";
		return false;
	}
	if (w->any && n->start < w->last_end) {
		w->fault = "blocks overlap or are out of order";
		return false;
	}
	if (w->any && n->start == w->last_end && n->state == FREE && w->last_state == FREE) {
		w->fault = "two free neighbours were not merged";
		return false;
	}
	if (w->any && n->start > w->last_end && ps_pool_slab_of((void *)w->last_end) >= 0 &&
	    owner_of((void *)w->last_end) == a) {
		w->fault = "slab memory between two blocks belongs to neither";
		w->where = w->last_end;
		return false;
	}
	if (!ps_pool_within_slabs((void *)n->start, n->len)) {
		w->fault = "a block outside the pool's slabs";
		return false;
	}
	if (owner_of((void *)n->start) != a || owner_of((void *)(n->start + n->len - 1)) != a) {
		w->fault = "a block in another arena's slab";
		return false;
	}
	w->any = true;
	w->last_end = n->start + n->len;
	w->last_state = n->state;
	if (n->state == LIVE) {
		w->seen.live++;
		w->seen.live_bytes += n->len;
	} else {
		w->seen.free++;
		w->seen.free_bytes += n->len;
		w->free_nodes += n->state == FREE;
	}
	return walk(a, n->kid[ADDR][1], depth + 1, w);
}

/* The size tree: in order of (len, start), FREE nodes only, each once. */
static bool swalk(struct arena *a, uint32_t t, uint32_t depth, struct walk *w)
{
	if (!t)
		return true;
	struct node *n = N(a, t);
	w->where = n->start;
	if (depth > 4096 || (n->kid[SIZE][0] && N(a, n->kid[SIZE][0])->prio > n->prio) ||
	    (n->kid[SIZE][1] && N(a, n->kid[SIZE][1])->prio > n->prio)) {
		w->fault = "the size tree is out of shape";
		return false;
	}
	if (!swalk(a, n->kid[SIZE][0], depth + 1, w))
		return false;
	w->where = n->start;
	if (n->state != FREE || find(a, n->start) != t) {
		w->fault = "the size tree holds a block that is not free";
		return false;
	}
	if (w->sized && !key_below(a, SIZE, w->last_sized, t)) {
		w->fault = "the size tree is out of order";
		return false;
	}
	w->sized++;
	w->zero_bytes += n->zero ? n->len : 0;
	w->last_sized = t;
	return swalk(a, n->kid[SIZE][1], depth + 1, w);
}

/* One arena's trees against its counts: true, or false with w->fault set. */
static bool check_arena(struct arena *a, struct walk *w)
{
	if (!walk(a, a->root, 0, w) || !swalk(a, a->sroot, 0, w))
		return false;
	if (w->zero_bytes != a->info.free_zero_bytes) {
		w->fault = "the free bytes known zero disagree with the tree";
		w->where = 0;
		return false;
	}
	if (w->sized != w->free_nodes) {
		w->fault = "the size tree misses free blocks";
		w->where = 0;
		return false;
	}
	if (w->seen.live != a->info.live || w->seen.live_bytes != a->info.live_bytes ||
	    w->seen.free != a->info.free || w->seen.free_bytes != a->info.free_bytes) {
		w->fault = "the counts disagree with the tree";
		w->where = 0;
		return false;
	}
	return true;
}

int ps_blocks_check(void)
{
	struct walk w = { 0 };
	uint64_t block_bytes = 0;
	bool ok = true;

	for (uint32_t i = 0; i < narenas; i++)
		pthread_mutex_lock(&arenas[i].lock);
	for (uint32_t i = 0; ok && i < narenas; i++) {
		w = (struct walk){ 0 };
		ok = check_arena(&arenas[i], &w);
		block_bytes += arenas[i].info.live_bytes + arenas[i].info.free_bytes;
	}
	if (ok) {
		/* Every byte of every slab is in some block: none is lost to the pool. */
		uint64_t slab_bytes = 0;
		struct ps_slab sl;
		for (int i = 0; ps_pool_slab(i, &sl); i++)
			slab_bytes += sl.len;
		if (slab_bytes != block_bytes) {
			ok = false;
			w.fault = "the slabs hold memory that is in no block";
			w.where = 0;
		}
	}
	for (uint32_t i = narenas; i-- > 0;)
		pthread_mutex_unlock(&arenas[i].lock);
	if (ok)
		return 0;
	fprintf(stderr, "poolshim blocks: %s (at %#lx)\n", w.fault, (unsigned long)w.where);
	return -EUCLEAN;
}

void ps_blocks_atfork_prepare(void)
{
	for (uint32_t i = 0; i < narenas; i++)
		pthread_mutex_lock(&arenas[i].lock);
}

void ps_blocks_atfork_parent(void)
{
	for (uint32_t i = narenas; i-- > 0;)
		pthread_mutex_unlock(&arenas[i].lock);
}

void ps_blocks_atfork_child(void)
{
	for (uint32_t i = 0; i < narenas; i++) {
		struct arena *a = &arenas[i];
		/* A purge in another thread did not come along: its block is free again. */
		if (a->busy_start) {
			uint32_t x = find(a, a->busy_start);
			N(a, x)->state = FREE;
			N(a, x)->zero = N(a, x)->purged = false;
			a->busy_start = 0;
			coalesce(a, x);
			publish_counts(a);
		}
	}
	__atomic_store_n(&purging, 0, __ATOMIC_RELAXED);
	for (uint32_t i = narenas; i-- > 0;)
		pthread_mutex_unlock(&arenas[i].lock);
}

void ps_blocks_reset_for_tests(void)
{
	for (uint32_t i = 0; i < PS_BLOCKS_ARENAS_MAX; i++) {
		struct arena *a = &arenas[i];
		for (uint32_t c = 0; c < a->nchunks; c++)
			munmap(a->chunk[c], CHUNK_NODES * sizeof(struct node));
		if (a->chunk)
			munmap(a->chunk, CHUNKS * sizeof(*a->chunk));
		memset(a, 0, sizeof(*a));
		pthread_mutex_init(&a->lock, NULL);
	}
	if (owners) {
		for (size_t c = 0; c < owner_chunks; c++)
			if (owners[c])
				munmap(owners[c], OWNER_PAGES);
		munmap(owners, owner_chunks * sizeof(*owners));
	}
	owners = NULL;
	owner_chunks = 0;
	narenas = 1;
	nbind = 1;
	next_arena = 0;
	epoch++;
	mirror = NULL;
	purging = 0;
	ps_blocks_set_tails(PS_TAILS_KEEP, 0);
	tail_looks = 0;
	tail_spacing = TAIL_SPACING_NS;
	tail_next = 0;
	tail_pace_ns = TAIL_PACE_NS;
}

void ps_blocks_hold_for_tests(unsigned i, bool hold)
{
	if (hold)
		pthread_mutex_lock(&arenas[i].lock);
	else
		pthread_mutex_unlock(&arenas[i].lock);
}
