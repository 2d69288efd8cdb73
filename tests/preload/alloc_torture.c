// SPDX-License-Identifier: MIT
/*
 * alloc_torture: proves, through the public malloc API only, that whatever
 * places blocks (glibc, the pool's jemalloc arena, a page allocator) hands
 * out memory that is right.  Threads run seeded random sequences over a
 * table of slots: malloc, calloc, realloc (grow, shrink, across the pool
 * threshold both ways, to 0), posix_memalign, aligned_alloc, memalign,
 * valloc, pvalloc, free, malloc_usable_size, now and then malloc_trim, a
 * fork whose child checks, frees and allocates while the other threads run,
 * a worker thread that exits and hands its blocks to a new thread, and
 * blocks handed to another thread that checks and frees or keeps them.
 * Sizes are log-uniform from 1 byte to 32 MiB (the large end thinned so
 * that the run stays short), with extra weight on page, threshold and
 * 2 MiB edges.  Every live block
 * holds a pattern from its own key over all the bytes it owns, checked in
 * full before each free and realloc (realloc keeps the smaller size's
 * bytes), sampled while live, and checked in full when everything is freed
 * at the end; calloc reads zero; usable size covers the request and never
 * changes; alignment is honoured; no two live blocks' usable ranges meet
 * (all threads' blocks sorted, periodically and at the end).  A block's
 * owner is never trusted: pooled or not, the same checks apply, so a purge
 * of live memory, a block handed out twice or a wrong usable size breaks a
 * check.  The program does not link the shim; when it is preloaded,
 * poolshim_is_pooled (dlsym) says how many large blocks the pool served.
 *
 *   alloc_torture [torture] SEED [THREADS [OPS]]   (defaults 4 threads, 8000 ops each)
 *       "torture ok seed=S ..." with counts, exit 0; on a failed check one
 *       line naming it, the seed and the command to rerun, exit 1.  The
 *       same seed repeats each thread's choices; the threads' interleaving
 *       (and so which blocks change hands) varies between runs.
 *   alloc_torture churn SEED [N [ROUNDS]]          (defaults 40, 3000)
 *       N live buffers of 1-24 MiB, each written whole, one replaced at a
 *       random slot ROUNDS times: "churn peak=K" (VmHWM, KiB).  For
 *       measurements only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memalign, valloc, pvalloc, malloc_usable_size, RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc_status.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define MAX_SIZE (32 * MiB)
#define POOL_MIN (64 * KiB)             /* POOLSHIM_POOL_MIN's default */
#define SLOTS 48                        /* per thread */
#define LIVE_MAX (40 * MiB)             /* per thread: above it, the next op frees */
#define XCHG 8                          /* blocks in transit between threads */
#define MAX_THREADS 64
#define CHECK_EVERY 400                 /* ops between checks of all threads' blocks */
#define TRIM_EVERY 1000                 /* ops between malloc_trim calls, per thread */
#define EXIT_EVERY 1500                 /* ops after which a worker's thread hands on and exits */
#define FORK_EVERY 2500                 /* ops between forks, per thread */
#define STEP 0x9E3779B97F4A7C15ULL

typedef uint64_t __attribute__((may_alias)) word_t;

struct block {
	unsigned char *p;
	size_t req;     /* bytes asked for */
	size_t usable;  /* malloc_usable_size when it was made */
	size_t align;   /* alignment asked for */
	size_t len;     /* bytes holding the pattern: req, or usable when tail is set */
	uint64_t key;   /* the pattern's seed */
	int from;       /* thread that handed it over (exchange only) */
	const char *how;/* the call that made it, for messages */
};

struct counts {
	long mallocs, callocs, reallocs, aligned, frees, usable, samples;
	long handed, adopted, large, pooled, scans, trims, exits, forks;
	unsigned long long checked;     /* bytes compared */
};

struct worker {
	pthread_mutex_t lock;           /* held for each op; scan() takes all */
	struct block slot[SLOTS];
	size_t live;
	uint64_t rng;
	int id;
	long op;
	struct counts c;
	pthread_t th;                   /* the thread doing its ops now */
};

static unsigned long long seed;
static int nthreads = 4;
static long nops = 8000;
static struct worker workers[MAX_THREADS];
static pthread_mutex_t xchg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block xchg[XCHG];
static int (*is_pooled)(const void *);
static int failed;

static void fail(const struct worker *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void fail(const struct worker *w, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	/* The first failure speaks; a thread failing after it waits for the exit. */
	if (__atomic_exchange_n(&failed, 1, __ATOMIC_ACQ_REL))
		for (;;)
			pause();
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Other threads still run: no exit handlers, no report. */
	fprintf(stderr, "alloc_torture: FAIL seed=%llu thread=%d op=%ld: %s\n"
		"alloc_torture: rerun: alloc_torture %llu %d %ld\n",
		seed, w ? w->id : -1, w ? w->op : -1L, msg, seed, nthreads, nops);
	_exit(1);
}

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += STEP);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static size_t below(uint64_t *s, size_t n)
{
	return (size_t)(next(s) % n);
}

/* The pattern: byte o of a block holds byte o % 8 of key + (o / 8) * STEP. */
static unsigned char byte_at(uint64_t key, size_t o)
{
	uint64_t v = key + (uint64_t)(o / 8) * STEP;
	unsigned char b[8];
	memcpy(b, &v, 8);
	return b[o % 8];
}

/* Write the pattern over [from, to) of p (p is at least 8-byte aligned). */
static void fill(unsigned char *p, size_t from, size_t to, uint64_t key)
{
	size_t o = from;

	for (; o < to && (o & 7); o++)
		p[o] = byte_at(key, o);
	size_t nw = (to - o) / 8;
	word_t *w = (word_t *)(p + o);
	uint64_t v = key + (uint64_t)(o / 8) * STEP;
	for (size_t k = 0; k < nw; k++, v += STEP)
		w[k] = v;
	for (o += nw * 8; o < to; o++)
		p[o] = byte_at(key, o);
}

/* The first offset in [from, to) that does not hold the pattern, or SIZE_MAX. */
static size_t find_bad(const unsigned char *p, size_t from, size_t to, uint64_t key)
{
	size_t o = from;

	for (; o < to && (o & 7); o++)
		if (p[o] != byte_at(key, o))
			return o;
	size_t nw = (to - o) / 8;
	const word_t *w = (const word_t *)(p + o);
	uint64_t v = key + (uint64_t)(o / 8) * STEP;
	for (size_t k = 0; k < nw; k++, v += STEP)
		if (w[k] != v) {
			for (o += k * 8;; o++)
				if (p[o] != byte_at(key, o))
					return o;
		}
	for (o += nw * 8; o < to; o++)
		if (p[o] != byte_at(key, o))
			return o;
	return SIZE_MAX;
}

static void check_range(struct worker *w, const struct block *b, size_t from, size_t to,
			const char *when)
{
	if (to > b->len)
		to = b->len;
	if (from >= to)
		return;
	size_t o = find_bad(b->p, from, to, b->key);
	if (w)
		w->c.checked += to - from;
	if (o != SIZE_MAX) {
		size_t e = o;
		while (e < to && b->p[e] != byte_at(b->key, e))
			e++;
		fail(w, "%s: block %p (%s, %zu bytes, usable %zu, align %zu, pooled %d) "
		     "lost its pattern at offset %zu (page +%zu): 0x%02x, expected 0x%02x; "
		     "%zu wrong bytes in a row",
		     when, (void *)b->p, b->how, b->req, b->usable, b->align,
		     is_pooled ? is_pooled(b->p) : 0, o, o & 4095, b->p[o],
		     byte_at(b->key, o), e - o);
	}
}

static void check_all(struct worker *w, const struct block *b, const char *when)
{
	check_range(w, b, 0, b->len, when);
}

/*
 * Sizes: one in six from the edges (pages, the pool threshold, 1 and
 * 2 MiB); the rest log-uniform over 1 byte to 32 MiB (an octave, then a
 * size within it), where a draw above 1 MiB stands with probability 1/16
 * only (each such block costs as much checking as thousands of small ones).
 */
static size_t pick_size(uint64_t *r)
{
	static const size_t edge[] = {
		1, 8, 16, 17, 4095, 4096, 4097, 8191, 8192, 65535, 65536, 65537,
		131072, MiB - 1, MiB, MiB + 1, 2 * MiB - 1, 2 * MiB, 2 * MiB + 1, 4 * MiB + 4096,
	};

	if (below(r, 6) == 0)
		return edge[below(r, sizeof(edge) / sizeof(edge[0]))];
	for (;;) {
		/* an octave 2^k (k uniform over 0..24), then uniform within it */
		size_t k = below(r, 25);
		size_t n = ((size_t)1 << k) + below(r, (size_t)1 << k);
		if (n <= MiB || below(r, 16) == 0)
			return n;
	}
}

static void note_large(struct worker *w, const struct block *b)
{
	if (b->req < POOL_MIN)
		return;
	w->c.large++;
	if (is_pooled && is_pooled(b->p))
		w->c.pooled++;
}

/* Checks every new block gets, then its pattern (over usable bytes one time in four). */
static void settle(struct worker *w, struct block *b, size_t keep, int zeroed)
{
	const size_t min_align = _Alignof(max_align_t);

	b->usable = malloc_usable_size(b->p);
	if (b->usable < b->req)
		fail(w, "%s(%zu) = %p: usable size %zu below the request", b->how, b->req,
		     (void *)b->p, b->usable);
	if ((uintptr_t)b->p % b->align || (uintptr_t)b->p % min_align)
		fail(w, "%s(%zu, align %zu) = %p: misaligned", b->how, b->req, b->align,
		     (void *)b->p);
	if (zeroed) {
		const word_t *q = (const word_t *)b->p;
		size_t i, nw = b->req / 8;
		for (i = 0; i < nw && q[i] == 0; i++)
			;
		for (i *= 8; i < b->req && b->p[i] == 0; i++)
			;
		w->c.checked += b->req;
		if (i < b->req)
			fail(w, "calloc(%zu) = %p: byte %zu (page +%zu) is 0x%02x, not zero", b->req,
			     (void *)b->p, i, i & 4095, b->p[i]);
	}
	b->len = below(&w->rng, 4) == 0 ? b->usable : b->req;
	fill(b->p, keep, b->len, b->key);
	note_large(w, b);
}

static void drop(struct worker *w, struct block *b, const char *why)
{
	if (!b->p)
		return;
	check_all(w, b, why);
	w->live -= b->req;
	free(b->p);
	w->c.frees++;
	b->p = NULL;
}

/* A new block in b (empty) from one of the allocating calls. */
static void make(struct worker *w, struct block *b, int kind)
{
	size_t n = pick_size(&w->rng);
	size_t align = 16UL << below(&w->rng, 18);      /* 16 .. 2 MiB */
	int zeroed = 0;
	void *p = NULL;

	b->align = 1;
	errno = 0;
	switch (kind) {
	case 0:
		p = malloc(n);
		b->how = "malloc";
		w->c.mallocs++;
		break;
	case 1: {
		/* calloc as n elements of m bytes, or one of n */
		size_t m = n % 3 == 0 ? 3 : 1;
		n -= n % m;
		n = n ? n : m;
		p = calloc(n / m, m);
		b->how = "calloc";
		zeroed = 1;
		w->c.callocs++;
		break;
	}
	default:
		w->c.aligned++;
		switch (below(&w->rng, 5)) {
		case 0: {
			int rc = posix_memalign(&p, align, n);
			if (rc) {
				errno = rc;
				p = NULL;
			}
			b->how = "posix_memalign";
			break;
		}
		case 1:
			p = aligned_alloc(align, n);
			b->how = "aligned_alloc";
			break;
		case 2:
			p = memalign(align, n);
			b->how = "memalign";
			break;
		case 3:
			p = valloc(n);
			align = 4096;
			b->how = "valloc";
			break;
		default:
			p = pvalloc(n);
			align = 4096;
			n = (n + 4095) & ~(size_t)4095;
			b->how = "pvalloc";
			break;
		}
		b->align = align;
	}
	if (!p)
		fail(w, "%s(%zu, align %zu) returned NULL: %s", b->how, n, b->align, strerror(errno));
	b->p = p;
	b->req = n;
	b->key = next(&w->rng);
	w->live += n;
	settle(w, b, 0, zeroed);
}

/* The new size for a realloc of b. */
static size_t realloc_size(struct worker *w, const struct block *b)
{
	size_t n = b->req;

	switch (below(&w->rng, 10)) {
	case 0:
	case 1:
		return pick_size(&w->rng);
	case 2:
	case 3:
		n = n * (2 + below(&w->rng, 3)) + below(&w->rng, 4096);
		return n > MAX_SIZE / 4 ? pick_size(&w->rng) : n;
	case 4:
	case 5:
		n /= 1 + below(&w->rng, 8);
		return n ? n : 1;
	case 6:
	case 7:
		/* across the threshold, whichever way b is */
		if (n < POOL_MIN)
			return below(&w->rng, 3) == 0 ? POOL_MIN : POOL_MIN + below(&w->rng, 3 * POOL_MIN);
		return below(&w->rng, 3) == 0 ? POOL_MIN - 1 : 1 + below(&w->rng, POOL_MIN - 1);
	case 8:
		return n + 1 - below(&w->rng, 3);       /* n + 1, n, n - 1 */
	default:
		return 0;
	}
}

static void do_realloc(struct worker *w, struct block *b)
{
	w->c.reallocs++;
	if (!b->p) {
		size_t n = pick_size(&w->rng);
		void *p = realloc(NULL, n);
		if (!p)
			fail(w, "realloc(NULL, %zu) returned NULL: %s", n, strerror(errno));
		*b = (struct block){ .p = p, .req = n, .align = 1, .key = next(&w->rng),
				     .how = "realloc(NULL)" };
		w->live += n;
		settle(w, b, 0, 0);
		return;
	}
	size_t n = realloc_size(w, b);
	check_all(w, b, "before realloc");
	if (n == 0 && b->req == 0)
		n = 1;
	errno = 0;
	void *p = realloc(b->p, n);
	if (n == 0) {
		/* glibc frees and returns NULL; a libc that returns a block keeps it */
		w->live -= b->req;
		if (p == NULL) {
			b->p = NULL;
			w->c.frees++;
			return;
		}
		b->p = p;
		b->req = b->len = 0;
		b->usable = malloc_usable_size(p);
		return;
	}
	if (!p)
		fail(w, "realloc(%p, %zu) of a %zu-byte block returned NULL: %s", (void *)b->p, n,
		     b->req, strerror(errno));
	size_t keep = n < b->req ? n : b->req;
	size_t old = b->req;
	w->live += n - old;
	b->p = p;
	b->req = n;
	b->len = keep;
	b->align = 1;
	check_range(w, b, 0, keep, "after realloc");
	b->how = n >= old ? "realloc up" : "realloc down";
	settle(w, b, keep, 0);
}

/* Hand b over to whichever other thread takes it next. */
static void hand(struct worker *w, struct block *b)
{
	pthread_mutex_lock(&xchg_lock);
	for (int i = 0; i < XCHG; i++)
		if (!xchg[i].p) {
			xchg[i] = *b;
			xchg[i].from = w->id;
			w->live -= b->req;
			b->p = NULL;
			w->c.handed++;
			break;
		}
	pthread_mutex_unlock(&xchg_lock);
}

/* Take a block another thread handed over: check it, then free it or keep it in b. */
static void adopt(struct worker *w, struct block *b)
{
	struct block t = { 0 };

	pthread_mutex_lock(&xchg_lock);
	for (int i = 0; i < XCHG; i++)
		if (xchg[i].p && xchg[i].from != w->id) {
			t = xchg[i];
			xchg[i].p = NULL;
			break;
		}
	pthread_mutex_unlock(&xchg_lock);
	if (!t.p)
		return;
	w->c.adopted++;
	w->live += t.req;
	if (below(&w->rng, 2)) {
		drop(w, &t, "freed by another thread");
		return;
	}
	check_all(w, &t, "adopted from another thread");
	drop(w, b, "before free");
	*b = t;
}

static int by_address(const void *a, const void *b)
{
	const struct block *x = a, *y = b;
	return x->p < y->p ? -1 : x->p > y->p;
}

/*
 * All threads' live blocks and those in transit, with every table locked:
 * sorted by address, no block's usable range reaches the next block; and
 * each block's head, tail and one random stretch still hold its pattern.
 */
static void scan(struct worker *w, uint64_t *r)
{
	static struct block all[MAX_THREADS * SLOTS + XCHG];
	static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
	size_t n = 0;

	pthread_mutex_lock(&scan_lock);
	for (int t = 0; t < nthreads; t++)
		pthread_mutex_lock(&workers[t].lock);
	pthread_mutex_lock(&xchg_lock);
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < SLOTS; i++)
			if (workers[t].slot[i].p)
				all[n++] = workers[t].slot[i];
	for (int i = 0; i < XCHG; i++)
		if (xchg[i].p)
			all[n++] = xchg[i];
	qsort(all, n, sizeof(all[0]), by_address);
	for (size_t i = 0; i < n; i++) {
		const struct block *b = &all[i];
		if (i + 1 < n && (uintptr_t)b->p + b->usable > (uintptr_t)all[i + 1].p)
			fail(w, "live blocks overlap: %p (%s, %zu bytes, usable %zu) reaches %p (%s, %zu bytes)",
			     (void *)b->p, b->how, b->req, b->usable, (void *)all[i + 1].p,
			     all[i + 1].how, all[i + 1].req);
		if (malloc_usable_size(b->p) != b->usable)
			fail(w, "usable size of live block %p (%s, %zu bytes) changed from %zu to %zu",
			     (void *)b->p, b->how, b->req, b->usable, malloc_usable_size(b->p));
		check_range(w, b, 0, 256, "scan (head)");
		if (b->len > 256)
			check_range(w, b, b->len - 256, b->len, "scan (tail)");
		if (b->len > 4096) {
			size_t at = below(r, b->len - 4096);
			check_range(w, b, at, at + 4096, "scan (middle)");
		}
	}
	pthread_mutex_unlock(&xchg_lock);
	for (int t = nthreads - 1; t >= 0; t--)
		pthread_mutex_unlock(&workers[t].lock);
	if (w)
		w->c.scans++;
	pthread_mutex_unlock(&scan_lock);
}

/*
 * In a child forked while the other workers run: this worker's blocks
 * (its lock held, so they are whole) are checked and half of them freed,
 * then new large blocks made, filled, checked and freed, and malloc_trim
 * called; the blocks the other threads held or cached stay as they were.
 * Exit 0 if every check held.
 */
static void in_child(struct worker *w)
{
	for (int i = 0; i < SLOTS; i++) {
		if (w->slot[i].p)
			check_all(w, &w->slot[i], "in a fork child");
		if (w->slot[i].p && (i & 1))
			drop(w, &w->slot[i], "in a fork child");
	}
	for (int round = 0; round < 40; round++) {
		struct block *b = &w->slot[2 * below(&w->rng, SLOTS / 2) + 1];
		drop(w, b, "in a fork child");
		make(w, b, (int)below(&w->rng, 3));
		if (b->p)
			check_all(w, b, "made in a fork child");
		if (round % 3 == 0)
			drop(w, b, "in a fork child");
	}
	malloc_trim(0);
	for (int i = 0; i < SLOTS; i++)
		drop(w, &w->slot[i], "at a fork child's end");
	_exit(failed ? 1 : 0);
}

/* Fork with the other workers running: the child works on (in_child). */
static void fork_check(struct worker *w)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return;
	if (pid == 0)
		in_child(w);
	w->c.forks++;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail(w, "a fork child failed (status %#x)", st);
}

static void *run(void *arg);

/*
 * A worker's thread exits and a new one takes its slots over: blocks this
 * thread freed (and any cache of them) must survive its exit.
 */
static int hand_on(struct worker *w)
{
	pthread_t next_th;

	w->c.exits++;
	w->op++;
	pthread_mutex_lock(&w->lock);
	int rc = pthread_create(&next_th, NULL, run, w);
	if (rc == 0)
		w->th = next_th;
	pthread_mutex_unlock(&w->lock);
	return rc;
}

static void *run(void *arg)
{
	struct worker *w = arg;

	for (; w->op < nops; w->op++) {
		if (w->op % EXIT_EVERY == EXIT_EVERY - 1 && hand_on(w) == 0)
			return NULL;
		if (w->op % FORK_EVERY == FORK_EVERY / 3) {
			pthread_mutex_lock(&w->lock);
			fork_check(w);
			pthread_mutex_unlock(&w->lock);
		}
		if (w->op % CHECK_EVERY == CHECK_EVERY - 1)
			scan(w, &w->rng);
		/* Now and then all free memory given back at once, live blocks beside it. */
		if (w->op % TRIM_EVERY == TRIM_EVERY / 2) {
			malloc_trim(0);
			w->c.trims++;
		}
		pthread_mutex_lock(&w->lock);
		struct block *b = &w->slot[below(&w->rng, SLOTS)];
		unsigned k = (unsigned)below(&w->rng, 100);
		if (w->live > LIVE_MAX) {
			/* Over budget: free the slot's block, or the first one found. */
			for (int i = 0; !b->p && i < SLOTS; i++)
				b = &w->slot[i];
			k = 60;
		}
		if (k < 22) {                   /* malloc */
			drop(w, b, "before free");
			make(w, b, 0);
		} else if (k < 30) {            /* calloc */
			drop(w, b, "before free");
			make(w, b, 1);
		} else if (k < 48) {
			do_realloc(w, b);
		} else if (k < 60) {            /* the aligned calls */
			drop(w, b, "before free");
			make(w, b, 2);
		} else if (k < 80) {
			drop(w, b, "before free");
		} else if (k < 86) {
			w->c.usable++;
			if (!b->p && malloc_usable_size(NULL) != 0)
				fail(w, "malloc_usable_size(NULL) = %zu, not 0", malloc_usable_size(NULL));
			if (b->p && malloc_usable_size(b->p) != b->usable)
				fail(w, "usable size of live block %p (%s, %zu bytes) changed from %zu to %zu",
				     (void *)b->p, b->how, b->req, b->usable,
				     malloc_usable_size(b->p));
		} else if (k < 92) {
			w->c.samples++;
			if (b->p)
				check_all(w, b, "sample");
		} else if (k < 95) {
			if (b->p)
				hand(w, b);
		} else {
			adopt(w, b);
		}
		pthread_mutex_unlock(&w->lock);
	}
	return NULL;
}

static int torture(void)
{
	struct counts t = { 0 };
	uint64_t r = seed ^ 0x5EED;

	for (int i = 0; i < nthreads; i++) {
		struct worker *w = &workers[i];
		pthread_mutex_init(&w->lock, NULL);
		w->id = i;
		w->rng = seed * 0x100000001B3ULL + (uint64_t)i * 0xD1B54A32D192ED03ULL;
		next(&w->rng);
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_t th;
		/* Under the lock: the thread may hand on (set th) as soon as it runs. */
		pthread_mutex_lock(&workers[i].lock);
		int rc = pthread_create(&th, NULL, run, &workers[i]);
		workers[i].th = th;
		pthread_mutex_unlock(&workers[i].lock);
		if (rc) {
			fprintf(stderr, "alloc_torture: pthread_create: %s\n", strerror(rc));
			return 2;
		}
	}
	/*
	 * Each worker's threads in turn: each names its successor before it
	 * exits (the two are alive at once, so their ids differ), and the last
	 * one is the one still named once joined.
	 */
	for (int i = 0; i < nthreads; i++) {
		pthread_t joined;
		memset(&joined, 0, sizeof(joined));
		for (int have = 0;; have = 1) {
			pthread_mutex_lock(&workers[i].lock);
			pthread_t th = workers[i].th;
			pthread_mutex_unlock(&workers[i].lock);
			if (have && pthread_equal(th, joined))
				break;
			pthread_join(th, NULL);
			joined = th;
		}
	}
	/* The end: one last scan, then every block checked in full and freed. */
	scan(NULL, &r);
	for (int i = 0; i < nthreads; i++) {
		struct worker *w = &workers[i];
		w->op = nops;
		for (int s = 0; s < SLOTS; s++)
			drop(w, &w->slot[s], "at the end");
		for (int x = i; x < XCHG; x += nthreads)
			drop(w, &xchg[x], "at the end (in transit)");
	}
	for (int i = 0; i < nthreads; i++) {
		const struct counts *c = &workers[i].c;
		t.mallocs += c->mallocs;
		t.callocs += c->callocs;
		t.reallocs += c->reallocs;
		t.aligned += c->aligned;
		t.frees += c->frees;
		t.usable += c->usable;
		t.samples += c->samples;
		t.handed += c->handed;
		t.adopted += c->adopted;
		t.large += c->large;
		t.pooled += c->pooled;
		t.scans += c->scans;
		t.trims += c->trims;
		t.exits += c->exits;
		t.forks += c->forks;
		t.checked += c->checked;
	}
	printf("torture ok seed=%llu threads=%d ops=%ld malloc=%ld calloc=%ld realloc=%ld "
	       "aligned=%ld free=%ld usable=%ld samples=%ld handed=%ld adopted=%ld scans=%ld "
	       "trims=%ld exits=%ld forks=%ld large=%ld pooled=%ld checked_mib=%llu shim=%d\n",
	       seed, nthreads, nops, t.mallocs, t.callocs, t.reallocs, t.aligned, t.frees,
	       t.usable, t.samples, t.handed, t.adopted, t.scans, t.trims, t.exits, t.forks,
	       t.large, t.pooled,
	       t.checked >> 20, is_pooled != NULL);
	return 0;
}

/* N live buffers of 1-24 MiB written whole, one replaced at random ROUNDS times. */
static int churn(int n, long rounds)
{
	uint64_t r = seed;
	void **bufs = calloc((size_t)n, sizeof(*bufs));

	if (!bufs)
		return 2;
	for (long i = -n; i < rounds; i++) {
		size_t at = i < 0 ? (size_t)(i + n) : below(&r, (size_t)n);
		size_t want = MiB + below(&r, 23 * MiB + 1);
		free(bufs[at]);
		bufs[at] = malloc(want);
		if (!bufs[at]) {
			fprintf(stderr, "alloc_torture: churn: malloc(%zu) failed\n", want);
			return 1;
		}
		memset(bufs[at], (int)(i & 0xff), want);
	}
	printf("churn peak=%ld\n", status_kib("VmHWM"));
	for (int i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: alloc_torture [torture] SEED [THREADS [OPS]]\n"
			"       alloc_torture churn SEED [N [ROUNDS]]\n");
	return 2;
}

int main(int argc, char **argv)
{
	int a = 1;
	int mode_churn = 0;
	void *sym = dlsym(RTLD_DEFAULT, "poolshim_is_pooled");

	memcpy(&is_pooled, &sym, sizeof(sym));
	if (a < argc && strcmp(argv[a], "churn") == 0) {
		mode_churn = 1;
		a++;
	} else if (a < argc && strcmp(argv[a], "torture") == 0) {
		a++;
	}
	if (a >= argc)
		return usage();
	seed = strtoull(argv[a++], NULL, 0);
	if (mode_churn) {
		int n = a < argc ? atoi(argv[a++]) : 40;
		long rounds = a < argc ? atol(argv[a++]) : 3000;
		return n > 0 && rounds >= 0 ? churn(n, rounds) : usage();
	}
	if (a < argc)
		nthreads = atoi(argv[a++]);
	if (a < argc)
		nops = atol(argv[a++]);
	if (nthreads < 1 || nthreads > MAX_THREADS || nops < 0)
		return usage();
	return torture();
}
