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
 */
#include "core/blocks.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "format/compiler.h"
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
};

#define CHUNK_SHIFT 10                          /* 1024 nodes, 40 KiB */
#define CHUNK_NODES ((uint32_t)1 << CHUNK_SHIFT)
#define CHUNKS 4096                             /* 4 Mi nodes at most */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct node *chunk[CHUNKS];
static uint32_t nchunks;
static uint32_t used_nodes;     /* nodes ever handed out (1..used_nodes) */
static uint32_t spare;          /* list of reusable nodes */
static uint32_t nspare;
static uint32_t root;           /* every block, by address */
static uint32_t sroot;          /* the FREE blocks, by size then address */
static uint32_t rng = 0x9e3779b9u;
static uintptr_t top_end;       /* the end of the last slab taken */
static struct ps_blocks_info info;
static int purging;
static uintptr_t busy_start;    /* the block being purged, 0 if none */
static uint64_t *mirror;        /* ps_blocks_set_mirror() */
static struct ps_blocks_info published;   /* info as of the last change, for lock-free readers */

static struct node nil;         /* node 0: no children */

static inline struct node *N(uint32_t i)
{
	return ps_likely(i != 0) ? &chunk[(i - 1) >> CHUNK_SHIFT][(i - 1) & (CHUNK_NODES - 1)]
				 : &nil;
}

/* Node i's child on side (0 left, 1 right) in tree tr. */
#define KID(i, tr, side) (N(i)->kid[tr][side])

static size_t round_page(size_t v)
{
	return (v + PS_PAGE - 1) & ~(size_t)(PS_PAGE - 1);
}

/* Make sure n nodes can be had without failing: true, or false if no chunk could be mapped. */
static bool reserve(uint32_t n)
{
	while (nspare + (nchunks * CHUNK_NODES - used_nodes) < n) {
		if (nchunks == CHUNKS)
			return false;
		void *p = mmap(NULL, CHUNK_NODES * sizeof(struct node), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return false;
		chunk[nchunks++] = p;
		info.nodes_mapped += CHUNK_NODES * sizeof(struct node);
	}
	return true;
}

/* A node (reserved before) for [start, start + len), in neither tree yet. */
static uint32_t node_new(uintptr_t start, size_t len, int state, bool zero)
{
	uint32_t i;

	if (spare) {
		i = spare;
		spare = KID(i, ADDR, 0);
		nspare--;
	} else {
		i = ++used_nodes;
	}
	/* xorshift32: the priorities only need to look random. */
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	*N(i) = (struct node){ .start = start, .len = len, .prio = rng, .state = (uint8_t)state,
			       .zero = zero, .purged = zero };
	return i;
}

static void node_drop(uint32_t i)
{
	KID(i, ADDR, 0) = spare;
	spare = i;
	nspare++;
}

static uintptr_t end_of(uint32_t i)
{
	return N(i)->start + N(i)->len;
}

/*
 * ---- the two treaps, one code: tr says which links and which key ----
 * The address tree orders by start, the size tree by (len, start); every
 * call names the node whose key it goes by.
 */

/* Whether a's key is below b's in tree tr. */
static bool key_below(int tr, uint32_t a, uint32_t b)
{
	const struct node *x = N(a), *y = N(b);

	if (tr == SIZE && x->len != y->len)
		return x->len < y->len;
	return x->start < y->start;
}

/* Split t into the nodes below x's key (*l) and the rest (*r). */
static void split(int tr, uint32_t t, uint32_t x, uint32_t *l, uint32_t *r)
{
	if (!t) {
		*l = *r = 0;
		return;
	}
	if (key_below(tr, t, x)) {
		split(tr, KID(t, tr, 1), x, &KID(t, tr, 1), r);
		*l = t;
	} else {
		split(tr, KID(t, tr, 0), x, l, &KID(t, tr, 0));
		*r = t;
	}
}

/* Join two trees, every key of a below every key of b. */
static uint32_t join(int tr, uint32_t a, uint32_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (N(a)->prio > N(b)->prio) {
		KID(a, tr, 1) = join(tr, KID(a, tr, 1), b);
		return a;
	}
	KID(b, tr, 0) = join(tr, a, KID(b, tr, 0));
	return b;
}

static uint32_t insert(int tr, uint32_t t, uint32_t x)
{
	if (!t)
		return x;
	if (N(x)->prio > N(t)->prio) {
		split(tr, t, x, &KID(x, tr, 0), &KID(x, tr, 1));
		return x;
	}
	int side = !key_below(tr, x, t);
	KID(t, tr, side) = insert(tr, KID(t, tr, side), x);
	return t;
}

/* Take x (it is there) out of t. */
static uint32_t erase(int tr, uint32_t t, uint32_t x)
{
	if (t == x)
		return join(tr, KID(t, tr, 0), KID(t, tr, 1));
	int side = !key_below(tr, x, t);
	KID(t, tr, side) = erase(tr, KID(t, tr, side), x);
	return t;
}

/* ---- lookups in the address tree ---- */

static uint32_t find(uintptr_t key)
{
	uint32_t t = root;

	while (t && N(t)->start != key)
		t = key < N(t)->start ? KID(t, ADDR, 0) : KID(t, ADDR, 1);
	return t;
}

/* The node with the largest start below key, or 0. */
static uint32_t below(uintptr_t key)
{
	uint32_t t = root, best = 0;

	while (t) {
		if (N(t)->start < key) {
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
static uint32_t first_at_least(int tr, uint64_t v)
{
	uint32_t t = tr == ADDR ? root : sroot, best = 0;

	while (t) {
		if ((tr == ADDR ? N(t)->start : N(t)->len) >= v) {
			best = t;
			t = KID(t, tr, 0);
		} else {
			t = KID(t, tr, 1);
		}
	}
	return best;
}

/* The node with the smallest start at or above key, or 0. */
static uint32_t at_or_above(uintptr_t key)
{
	return first_at_least(ADDR, key);
}

/* The last node of tree tr (the highest block, or the largest free one), or 0. */
static uint32_t last_of(int tr)
{
	uint32_t t = tr == ADDR ? root : sroot;

	while (t && KID(t, tr, 1))
		t = KID(t, tr, 1);
	return t;
}

/* x becomes FREE (or changes while FREE): into the size tree after, out before. */
static void free_in(uint32_t x)
{
	KID(x, SIZE, 0) = KID(x, SIZE, 1) = 0;
	sroot = insert(SIZE, sroot, x);
	if (N(x)->zero)
		info.free_zero_bytes += N(x)->len;
}

static void free_out(uint32_t x)
{
	sroot = erase(SIZE, sroot, x);
	if (N(x)->zero)
		info.free_zero_bytes -= N(x)->len;
}

/* The smallest FREE block of at least need bytes, the lowest of equals; or 0. */
static uint32_t best_fit(size_t need)
{
	return first_at_least(SIZE, need);
}

static uintptr_t align_up(uintptr_t v, size_t align)
{
	return (v + align - 1) & ~(uintptr_t)(align - 1);
}

/* Whether the FREE block x holds len bytes starting at a multiple of align. */
static bool holds_aligned(uint32_t x, size_t len, size_t align)
{
	return align_up(N(x)->start, align) + len <= end_of(x);
}

/* The FREE block after x in the size tree (size, then address), or 0. */
static uint32_t size_next(uint32_t x)
{
	uint32_t t = sroot, best = 0;

	while (t) {
		if (key_below(SIZE, x, t)) {
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
static uint32_t fit(size_t len, size_t align)
{
	if (align == PS_PAGE)
		return best_fit(len);
	size_t surely = len + (align - PS_PAGE);
	uint32_t x = best_fit(len);
	for (int k = 0; x && N(x)->len < surely && k < ALIGNED_TRIES; k++, x = size_next(x))
		if (holds_aligned(x, len, align))
			return x;
	return best_fit(surely);
}

/* Under the lock: the free block s, right after x, becomes part of x (in no size tree, either). */
static void absorb(uint32_t x, uint32_t s)
{
	N(x)->len += N(s)->len;
	N(x)->zero &= N(s)->zero;
	N(x)->purged &= N(s)->purged;
	root = erase(ADDR, root, s);
	node_drop(s);
	info.free--;
}

/*
 * x (FREE, in no size tree yet) absorbs the FREE blocks right next to
 * it, and the merged block goes into the size tree; the node that holds
 * it.  Known zero only if all parts were.
 */
static uint32_t coalesce(uint32_t x)
{
	uint32_t p = below(N(x)->start);

	if (p && N(p)->state == FREE && end_of(p) == N(x)->start) {
		free_out(p);
		absorb(p, x);
		x = p;
	}
	uint32_t s = at_or_above(end_of(x));
	if (s && N(s)->state == FREE && N(s)->start == end_of(x)) {
		free_out(s);
		absorb(x, s);
	}
	free_in(x);
	return x;
}

/* Add [start, start + len), a new slab, as free memory (one node reserved). */
static void add_free(uintptr_t start, size_t len, bool zero)
{
	uint32_t x = node_new(start, len, FREE, zero);

	root = insert(ADDR, root, x);
	info.free++;
	info.free_bytes += len;
	coalesce(x);
	if (start + len > top_end)
		top_end = start + len;
}

/*
 * Carve len bytes aligned to align out of the FREE block x (two nodes
 * reserved): the block's address, and whether its pages are known zero.
 */
static uintptr_t carve(uint32_t x, size_t len, size_t align, bool *zero)
{
	struct node *n = N(x);
	uintptr_t s = n->start, e = s + n->len;
	uintptr_t a = (s + align - 1) & ~(uintptr_t)(align - 1);
	bool z = n->zero, purged = n->purged;

	*zero = z;
	free_out(x);
	info.free_bytes -= len;
	info.live++;
	info.live_bytes += len;
	if (a == s) {
		n->state = LIVE;
		n->len = len;
		info.free--;
	} else {
		n->len = a - s;
		free_in(x);
		root = insert(ADDR, root, node_new(a, len, LIVE, false));
	}
	if (a + len < e) {
		uint32_t y = node_new(a + len, e - (a + len), FREE, z);
		N(y)->purged = purged;
		root = insert(ADDR, root, y);
		free_in(y);
		info.free++;
	}
	return a;
}

/*
 * Under the lock, after a change: the counts where readers take them
 * without it (ps_blocks_get_info, from any thread or a signal handler),
 * and in the mirror, if any.
 */
#define PUB(field, v) __atomic_store_n(&published.field, (v), __ATOMIC_RELAXED)
static void publish_counts(void)
{
	uint32_t t = last_of(SIZE);
	uint64_t largest = t ? N(t)->len : 0;

	PUB(live, info.live);
	PUB(live_bytes, info.live_bytes);
	PUB(free, info.free);
	PUB(free_bytes, info.free_bytes);
	PUB(free_zero_bytes, info.free_zero_bytes);
	PUB(largest_free, largest);
	PUB(nodes_mapped, info.nodes_mapped);
	uint64_t *m = __atomic_load_n(&mirror, __ATOMIC_ACQUIRE);
	if (!m)
		return;
	__atomic_store_n(&m[1], info.free, __ATOMIC_RELAXED);
	__atomic_store_n(&m[2], info.free_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&m[3], info.free_zero_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&m[4], largest, __ATOMIC_RELAXED);
	__atomic_store_n(&m[0], 1, __ATOMIC_RELEASE);
}
#undef PUB

void ps_blocks_set_mirror(uint64_t *m)
{
	if (__atomic_load_n(&mirror, __ATOMIC_ACQUIRE) == m)
		return;
	pthread_mutex_lock(&lock);
	__atomic_store_n(&mirror, m, __ATOMIC_RELEASE);
	publish_counts();
	pthread_mutex_unlock(&lock);
}

void *ps_blocks_alloc(size_t size, size_t align, bool zero, enum ps_pool_fail *why)
{
	int saved_errno = errno;
	enum ps_pool_fail fail = PS_FAIL_NONE;
	uintptr_t a = 0;
	bool was_zero = false;

	if (align < PS_PAGE)
		align = PS_PAGE;
	if (size > PS_SLAB_MAX || align > PS_SLAB_MAX) {
		*why = PS_FAIL_TOO_LARGE;
		return NULL;
	}
	size_t len = round_page(size ? size : 1);
	bool extend = true;

	pthread_mutex_lock(&lock);
	for (int tries = 0;; tries++) {
		if (!reserve(3)) {
			fail = PS_FAIL_NO_MEMORY;
			break;
		}
		uint32_t x = fit(len, align);
		if (x) {
			a = carve(x, len, align, &was_zero);
			break;
		}
		if (tries == 4) {
			/* Others took each new slab first: rare; the request falls back. */
			fail = PS_FAIL_POOL_FULL;
			break;
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
		 * with hugetlb pages it would hold them for nothing).
		 */
		size_t want = len, need = len, slab_align = align;
		uint32_t t = last_of(ADDR);
		bool top_free = t && N(t)->state == FREE && end_of(t) == top_end;
		uintptr_t at = align_up(top_free ? N(t)->start : top_end, align);
		if (extend && top_end && at <= top_end + PS_UNIT) {
			if (at + len <= top_end) {
				/* The top block holds it (the bounded search missed it). */
				a = carve(t, len, align, &was_zero);
				break;
			}
			need = at + len - top_end;
			size_t step = round_page(len / 8 < PS_SLAB_MAX / 16 ? len / 8 : PS_SLAB_MAX / 16);
			want = need > step ? need : step;
			slab_align = PS_PAGE;
		}
		pthread_mutex_unlock(&lock);
		bool zeroed = false;
		void *s = ps_pool_take(want, slab_align, need, &zeroed, &fail);
		if (!s && want > need && fail == PS_FAIL_POOL_FULL)
			s = ps_pool_take(want = need, slab_align, need, &zeroed, &fail);
		pthread_mutex_lock(&lock);
		if (!s)
			break;
		if (!reserve(3)) {
			/* The slab stays the pool's, unused: nothing to put it in. */
			fail = PS_FAIL_NO_MEMORY;
			break;
		}
		add_free((uintptr_t)s, round_page(want), zeroed);
		x = below((uintptr_t)s + 1);
		if (holds_aligned(x, len, align)) {
			a = carve(x, len, align, &was_zero);
			break;
		}
		/*
		 * Raced for the top, or the slab did not follow it (the small
		 * region closed): next time one aligned itself.
		 */
		extend = false;
	}
	publish_counts();
	pthread_mutex_unlock(&lock);
	errno = saved_errno;
	*why = fail;
	if (!a)
		return NULL;
	if (zero && !was_zero)
		memset((void *)a, 0, len);
	return (void *)a;
}

/* Under the lock: free the block at p, its size (0 if none is live there). */
static size_t free_locked(void *p)
{
	uint32_t x = find((uintptr_t)p);
	size_t len = 0;
	if (x && N(x)->state == LIVE) {
		len = N(x)->len;
		N(x)->state = FREE;
		N(x)->zero = N(x)->purged = false;
		info.live--;
		info.live_bytes -= len;
		info.free++;
		info.free_bytes += len;
		coalesce(x);
	}
	publish_counts();
	return len;
}

size_t ps_blocks_free(void *p)
{
	pthread_mutex_lock(&lock);
	size_t len = free_locked(p);
	pthread_mutex_unlock(&lock);
	return len;
}

ssize_t ps_blocks_free_try(void *p)
{
	if (pthread_mutex_trylock(&lock) != 0)
		return -EBUSY;
	size_t len = free_locked(p);
	pthread_mutex_unlock(&lock);
	return (ssize_t)len;
}

size_t ps_blocks_size(const void *p)
{
	pthread_mutex_lock(&lock);
	uint32_t x = find((uintptr_t)p);
	size_t len = x && N(x)->state == LIVE ? N(x)->len : 0;
	pthread_mutex_unlock(&lock);
	return len;
}

size_t ps_blocks_resize(void *p, size_t size, size_t *was)
{
	size_t len = round_page(size ? size : 1);
	int saved_errno = errno;   /* reserve()'s mmap may fail */

	pthread_mutex_lock(&lock);
	uint32_t x = find((uintptr_t)p);
	*was = x && N(x)->state == LIVE ? N(x)->len : 0;
	if (!*was || size > PS_SLAB_MAX || !reserve(1)) {
		pthread_mutex_unlock(&lock);
		errno = saved_errno;
		return 0;
	}
	size_t old = *was;
	uintptr_t end = end_of(x);
	uint32_t s = at_or_above(end);
	bool s_free = s && N(s)->state == FREE && N(s)->start == end;

	if (len < old) {
		/* The tail becomes free, on its own or joined to the free block above. */
		size_t tail = old - len;
		N(x)->len = len;
		if (s_free) {
			/* Moving s's start down keeps the order: nothing lies between. */
			free_out(s);
			N(s)->start -= tail;
			N(s)->len += tail;
			N(s)->zero = N(s)->purged = false;
			free_in(s);
		} else {
			uint32_t y = node_new(end - tail, tail, FREE, false);
			root = insert(ADDR, root, y);
			free_in(y);
			info.free++;
		}
		info.live_bytes -= tail;
		info.free_bytes += tail;
	} else if (len > old) {
		size_t more = len - old;
		size_t room = s_free ? N(s)->len : 0;
		if (room < more && (s_free ? end_of(s) : end) == top_end) {
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
			 * touched) for its next steps.
			 */
			size_t step = round_page(old / 8 < PS_SLAB_MAX / 16 ? old / 8 : PS_SLAB_MAX / 16);
			size_t want = need > step ? need : step;
			enum ps_pool_fail why;
			bool zeroed = false;
			pthread_mutex_unlock(&lock);
			void *slab = ps_pool_take(want, PS_PAGE, need, &zeroed, &why);
			/* At the cap, only what it needs. */
			if (!slab && want > need && why == PS_FAIL_POOL_FULL)
				slab = ps_pool_take(want = need, PS_PAGE, need, &zeroed, &why);
			pthread_mutex_lock(&lock);
			if (slab && reserve(1))
				add_free((uintptr_t)slab, round_page(want), zeroed);
			/* Whatever happened meanwhile, look again. */
			s = at_or_above(end);
			s_free = s && N(s)->state == FREE && N(s)->start == end;
			room = s_free ? N(s)->len : 0;
		}
		if (room < more) {
			publish_counts();
			pthread_mutex_unlock(&lock);
			errno = saved_errno;
			return 0;
		}
		N(x)->len = len;
		free_out(s);
		if (N(s)->len == more) {
			root = erase(ADDR, root, s);
			node_drop(s);
			info.free--;
		} else {
			N(s)->start += more;
			N(s)->len -= more;
			free_in(s);
		}
		info.live_bytes += more;
		info.free_bytes -= more;
	}
	publish_counts();
	pthread_mutex_unlock(&lock);
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
static uint32_t next_dirty(uintptr_t key)
{
	for (uint32_t t = at_or_above(key); t; t = at_or_above(end_of(t)))
		if (N(t)->state == FREE && !N(t)->purged)
			return t;
	return 0;
}

/* The purge; with try, only if the lock is free now (-EBUSY else).  0. */
static int purge(bool try, size_t *out)
{
	int idle = 0;
	size_t total = 0;
	uintptr_t cursor = 0;

	*out = 0;
	if (!__atomic_compare_exchange_n(&purging, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return try ? -EBUSY : 0;
	if (try) {
		if (pthread_mutex_trylock(&lock) != 0) {
			__atomic_store_n(&purging, 0, __ATOMIC_RELEASE);
			return -EBUSY;
		}
	} else {
		pthread_mutex_lock(&lock);
	}
	for (uint32_t x; (x = next_dirty(cursor)) != 0;) {
		uintptr_t s = N(x)->start;
		size_t len = N(x)->len;
		free_out(x);
		N(x)->state = BUSY;
		busy_start = s;
		publish_counts();
		pthread_mutex_unlock(&lock);
		bool zeroed = ps_pool_purge((void *)s, len) == 0;
		pthread_mutex_lock(&lock);
		/* Nobody hands out, merges or frees a BUSY block: x is as it was. */
		N(x)->state = FREE;
		N(x)->zero = zeroed;
		N(x)->purged = true;
		busy_start = 0;
		if (zeroed)
			total += len;
		coalesce(x);
		cursor = s + len;
	}
	publish_counts();
	pthread_mutex_unlock(&lock);
	__atomic_store_n(&purging, 0, __ATOMIC_RELEASE);
	*out = total;
	return 0;
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
#define GET(field) out->field = __atomic_load_n(&published.field, __ATOMIC_RELAXED)
	GET(live);
	GET(live_bytes);
	GET(free);
	GET(free_bytes);
	GET(free_zero_bytes);
	GET(largest_free);
	GET(nodes_mapped);
#undef GET
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

static bool walk(uint32_t t, uint32_t depth, struct walk *w)
{
	if (!t)
		return true;
	struct node *n = N(t);
	if (depth > 4096) {
		w->fault = "the tree is deeper than 4096";
		w->where = n->start;
		return false;
	}
	if ((n->kid[ADDR][0] && N(n->kid[ADDR][0])->prio > n->prio) || (n->kid[ADDR][1] && N(n->kid[ADDR][1])->prio > n->prio)) {
		w->fault = "a child outranks its parent";
		w->where = n->start;
		return false;
	}
	if (!walk(n->kid[ADDR][0], depth + 1, w))
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
	if (w->any && n->start > w->last_end && ps_pool_slab_of((void *)w->last_end) >= 0) {
		w->fault = "slab memory between two blocks belongs to neither";
		w->where = w->last_end;
		return false;
	}
	if (!ps_pool_within_slabs((void *)n->start, n->len)) {
		w->fault = "a block outside the pool's slabs";
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
	return walk(n->kid[ADDR][1], depth + 1, w);
}

/* The size tree: in order of (len, start), FREE nodes only, each once. */
static bool swalk(uint32_t t, uint32_t depth, struct walk *w)
{
	if (!t)
		return true;
	struct node *n = N(t);
	w->where = n->start;
	if (depth > 4096 || (n->kid[SIZE][0] && N(n->kid[SIZE][0])->prio > n->prio) ||
	    (n->kid[SIZE][1] && N(n->kid[SIZE][1])->prio > n->prio)) {
		w->fault = "the size tree is out of shape";
		return false;
	}
	if (!swalk(n->kid[SIZE][0], depth + 1, w))
		return false;
	w->where = n->start;
	if (n->state != FREE || find(n->start) != t) {
		w->fault = "the size tree holds a block that is not free";
		return false;
	}
	if (w->sized && !key_below(SIZE, w->last_sized, t)) {
		w->fault = "the size tree is out of order";
		return false;
	}
	w->sized++;
	w->zero_bytes += n->zero ? n->len : 0;
	w->last_sized = t;
	return swalk(n->kid[SIZE][1], depth + 1, w);
}

int ps_blocks_check(void)
{
	struct walk w = { 0 };

	pthread_mutex_lock(&lock);
	bool ok = walk(root, 0, &w) && swalk(sroot, 0, &w);
	if (ok && w.zero_bytes != info.free_zero_bytes) {
		ok = false;
		w.fault = "the free bytes known zero disagree with the tree";
		w.where = 0;
	}
	if (ok) {
		/* Every byte of every slab is in some block: none is lost to the pool. */
		uint64_t slab_bytes = 0;
		struct ps_slab sl;
		for (int i = 0; ps_pool_slab(i, &sl); i++)
			slab_bytes += sl.len;
		if (slab_bytes != info.live_bytes + info.free_bytes) {
			ok = false;
			w.fault = "the slabs hold memory that is in no block";
			w.where = 0;
		}
	}
	if (ok && w.sized != w.free_nodes) {
		ok = false;
		w.fault = "the size tree misses free blocks";
		w.where = 0;
	}
	if (ok && (w.seen.live != info.live || w.seen.live_bytes != info.live_bytes ||
		   w.seen.free != info.free || w.seen.free_bytes != info.free_bytes)) {
		ok = false;
		w.fault = "the counts disagree with the tree";
		w.where = 0;
	}
	pthread_mutex_unlock(&lock);
	if (ok)
		return 0;
	fprintf(stderr, "poolshim blocks: %s (at %#lx)\n", w.fault, (unsigned long)w.where);
	return -EUCLEAN;
}

void ps_blocks_atfork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

void ps_blocks_atfork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

void ps_blocks_atfork_child(void)
{
	/* A purge in another thread did not come along: its block is free again. */
	if (busy_start) {
		uint32_t x = find(busy_start);
		N(x)->state = FREE;
		N(x)->zero = N(x)->purged = false;
		busy_start = 0;
		coalesce(x);
		publish_counts();
	}
	__atomic_store_n(&purging, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
}

void ps_blocks_reset_for_tests(void)
{
	for (uint32_t i = 0; i < nchunks; i++)
		munmap(chunk[i], CHUNK_NODES * sizeof(struct node));
	memset(chunk, 0, sizeof(chunk));
	nchunks = used_nodes = spare = nspare = root = sroot = 0;
	top_end = busy_start = 0;
	mirror = NULL;
	memset(&published, 0, sizeof(published));
	info = (struct ps_blocks_info){ 0 };
	purging = 0;
}
