// SPDX-License-Identifier: MIT
/*
 * tcache.c, the per-CPU cache of freed pooled blocks, through the
 * allocator (alloc.c) with no preload: the block freed last is the next
 * one given (LIFO), the fit rule, alignment, the bound, the flushes
 * (malloc_trim, a failed request), a block freed by a thread that exited
 * serving the next thread on that CPU, calloc of a dirty cached block,
 * malloc_usable_size, and a second free of a cached block.  Each test
 * pins itself (and the threads it starts) to the CPU it runs on, so that
 * every call meets the same cache.  Each fails with POOLSHIM_POOL_CACHE=0
 * (the pool then hands out the lowest best fit, and frees go straight to
 * the placement).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/blocks.h"
#include "core/pool.h"
#include "core/tcache.h"
#include "format/config.h"
#include "suites.h"

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)

/* This thread, and those it starts, on the CPU it runs on now: one cache for all. */
static void pin_cpu(void)
{
	cpu_set_t one;
	int cpu = sched_getcpu();

	CPU_ZERO(&one);
	CPU_SET(cpu < 0 ? 0 : cpu, &one);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
}

/*
 * The pool afresh with a cache of `cache` bytes a CPU, placed by
 * allocator, bypassed when frees come more than pace_us apart (0: never,
 * as every test but test_pace: their calls may be slow under a sanitizer).
 */
static void setup_pace(size_t cache, int allocator, uint64_t retain, uint64_t pace_us)
{
	struct ps_config cfg;

	pin_cpu();
	ps_config_defaults(&cfg);
	cfg.pool_allocator = (enum ps_pool_allocator)allocator;
	cfg.hugepages = PS_HUGE_NONE;
	cfg.pool_size = 256 * MB;
	cfg.pool_cache = cache;
	cfg.pool_cache_pace_us = pace_us;
	cfg.pool_decay_ms = 0;
	cfg.pool_retain = retain;
	/* The caches alone: no block's tail given back. */
	cfg.pool_tails = PS_TAILS_KEEP;
	pst_pool_forget();
	ck_assert_int_eq(ps_alloc_init(&cfg), 0);
}

static void setup_retain(size_t cache, int allocator, uint64_t retain)
{
	setup_pace(cache, allocator, retain, 0);
}

static void setup(size_t cache, int allocator)
{
	setup_retain(cache, allocator, 256 * MB);
}

/* The block freed last is the next one handed out, in both placements. */
START_TEST(test_lifo)
{
	setup(32 * MB, _i);
	char *a = ps_malloc(1 * MB);
	char *b = ps_malloc(1 * MB);
	char *c = ps_malloc(1 * MB);
	ck_assert(ps_pool_contains(a) && ps_pool_contains(b) && ps_pool_contains(c));
	ps_free(a);
	ps_free(c);
	ps_free(b);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 3 * MB);
	ck_assert_ptr_eq(ps_malloc(1 * MB), b);
	ck_assert_ptr_eq(ps_malloc(1 * MB), c);
	ck_assert_ptr_eq(ps_malloc(1 * MB), a);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 0);
}
END_TEST

/*
 * A cached block of n bytes serves requests of n/2 to n bytes (a hit
 * wastes at most half of the block), and malloc_usable_size says n.
 */
START_TEST(test_fit)
{
	setup(32 * MB, PS_POOL_ALLOC_PAGES);
	char *x = ps_malloc(1 * MB);
	char *keep = ps_malloc(64 * KB);    /* x cannot grow or merge upwards */
	ps_free(x);
	char *small = ps_malloc(MB / 2 - 4 * KB);      /* under half of x: not x */
	ck_assert_ptr_ne(small, x);
	char *big = ps_malloc(1 * MB + 1);             /* more than x: not x */
	ck_assert_ptr_ne(big, x);
	char *fits = ps_malloc(MB / 2);                 /* x with half to spare */
	ck_assert_ptr_eq(fits, x);
	ck_assert_uint_eq(ps_usable_size(fits), 1 * MB);
	memset(fits, 1, ps_usable_size(fits));
	ps_free(fits);
	ps_free(small);
	ps_free(big);
	ps_free(keep);
}
END_TEST

/* A cached block serves an aligned request only if it starts aligned. */
START_TEST(test_align)
{
	setup(32 * MB, PS_POOL_ALLOC_PAGES);
	char *a = ps_malloc(1 * MB);
	char *b = ps_malloc(1 * MB);
	/* The one of the two that does not start on 2 MiB. */
	char *odd = ((uintptr_t)a & (2 * MB - 1)) ? a : b;
	char *other = odd == a ? b : a;
	ps_free(other);
	ps_free(odd);
	void *p = NULL;
	ck_assert_int_eq(ps_posix_memalign(&p, 2 * MB, 1 * MB), 0);
	ck_assert_ptr_ne(p, odd);
	ck_assert_uint_eq((uintptr_t)p & (2 * MB - 1), 0);
	/* Page alignment: any cached block will do, the newest first. */
	ck_assert_ptr_eq(ps_memalign(4096, 1 * MB), odd);
}
END_TEST

/*
 * Past the bound, the oldest cached blocks go back to the placement; a
 * block over an eighth of the bound is never cached.
 */
START_TEST(test_bound)
{
	setup(8 * MB, PS_POOL_ALLOC_PAGES);
	char *b[9];
	for (int i = 0; i < 9; i++)
		b[i] = ps_malloc(1 * MB);
	char *big = ps_malloc(1 * MB + 4 * KB);
	for (int i = 0; i < 8; i++)
		ps_free(b[i]);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 8 * MB);
	ps_free(b[8]);                       /* b[0], the oldest, goes back */
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 8 * MB);
	ps_free(big);                        /* over an eighth of the bound: not cached */
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 8 * MB);
	struct ps_blocks_info bi;
	ck_assert(ps_alloc_blocks_info(&bi));
	ck_assert_uint_eq(bi.live_bytes, 8 * MB);          /* b[1..8], cached */
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_ptr_eq(ps_malloc(1 * MB), b[8]);
	ck_assert_ptr_eq(ps_malloc(1 * MB), b[7]);
}
END_TEST

/*
 * A request larger than any block the cache keeps: the block this CPU
 * cached last goes back to the placement first, and the request is
 * placed where it lay when the free memory there holds it, not in the
 * block best fit would pick (a 2 MiB hole) nor where the last block
 * freed to the placement lay.
 */
START_TEST(test_large_after_cached)
{
	setup(8 * MB, PS_POOL_ALLOC_PAGES);  /* blocks of 1 MiB at most are cached */
	char *u = ps_malloc(2 * MB), *g1 = ps_malloc(64 * KB);
	char *s = ps_malloc(1 * MB), *t = ps_malloc(3 * MB), *g2 = ps_malloc(64 * KB);
	ps_free(u);                          /* the placement's: a 2 MiB hole */
	ps_free(t);                          /* the placement's: 3 MiB after s */
	ps_free(s);                          /* cached */
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 1 * MB);
	char *p = ps_malloc(2 * MB);
	ck_assert_ptr_eq(p, s);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 0);
	ck_assert_int_eq(ps_blocks_check(), 0);
	ps_free(p);
	ps_free(g1);
	ps_free(g2);
}
END_TEST

/*
 * A request larger than any block the cache keeps, that no free block of
 * the placement holds, has the cache flushed first: the pool does not
 * grow while the cache sits on memory.
 */
START_TEST(test_grow_flushes)
{
	setup(32 * MB, PS_POOL_ALLOC_PAGES);
	char *a = ps_malloc(1 * MB);
	ps_free(a);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 1 * MB);
	struct ps_blocks_info bi;
	ck_assert(ps_alloc_blocks_info(&bi));
	ck_assert_uint_lt(bi.largest_free, 8 * MB);
	char *big = ps_malloc(8 * MB);
	ck_assert(ps_pool_contains(big));
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 0);
	/* One within the cache's reach keeps it. */
	char *c = ps_malloc(1 * MB);
	ps_free(c);
	char *d = ps_malloc(2 * MB);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 1 * MB);
	ps_free(d);
	ps_free(big);
}
END_TEST

/* malloc_trim flushes every cache into the placement. */
START_TEST(test_flush)
{
	setup(32 * MB, PS_POOL_ALLOC_PAGES);
	char *a = ps_malloc(1 * MB);
	char *b = ps_malloc(2 * MB);
	ps_free(a);
	ps_free(b);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 3 * MB);
	ps_alloc_trim(0);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 0);
	struct ps_blocks_info bi;
	ck_assert(ps_alloc_blocks_info(&bi));
	ck_assert_uint_eq(bi.live, 0);
	ck_assert_uint_eq(bi.free_bytes, 3 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST

/*
 * A block freed by a thread that has exited serves the next request on
 * that CPU, and a flush reaches it: nothing is stranded with the thread.
 */
static void *free_then_exit(void *p)
{
	ps_free(p);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 1 * MB);
	return NULL;
}

START_TEST(test_other_thread)
{
	setup(32 * MB, PS_POOL_ALLOC_PAGES);
	char *a = ps_malloc(1 * MB);
	char *b = ps_malloc(1 * MB);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, free_then_exit, a), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 1 * MB);
	ck_assert_ptr_eq(ps_malloc(1 * MB), a);
	ck_assert_int_eq(pthread_create(&t, NULL, free_then_exit, b), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(ps_tcache_flush_all(), 1 * MB);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 0);
	struct ps_blocks_info bi;
	ck_assert(ps_alloc_blocks_info(&bi));
	ck_assert_uint_eq(bi.live, 1);
}
END_TEST

/* A cached block is dirty: calloc that takes it zeroes it. */
START_TEST(test_calloc_dirty)
{
	setup(32 * MB, PS_POOL_ALLOC_PAGES);
	char *a = ps_malloc(1 * MB);
	memset(a, 0x5a, 1 * MB);
	ps_free(a);
	char *z = ps_calloc(1, 1 * MB);
	ck_assert_ptr_eq(z, a);
	for (size_t i = 0; i < 1 * MB; i++)
		if (z[i])
			ck_abort_msg("calloc left a non-zero byte at %zu", i);
}
END_TEST

/* A second free of a block in a cache is a double free: the process ends. */
START_TEST(test_double_free)
{
	setup(32 * MB, PS_POOL_ALLOC_PAGES);
	char *a = ps_malloc(1 * MB);
	ps_free(a);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 1 * MB);
	ps_free(a);
}
END_TEST

/* A refused request flushes the caches and is tried again before glibc's heap. */
START_TEST(test_full_flushes)
{
	struct ps_config cfg;

	pin_cpu();
	ps_config_defaults(&cfg);
	cfg.hugepages = PS_HUGE_NONE;
	cfg.pool_size = 64 * MB;
	cfg.pool_cache = 1024 * MB;
	cfg.pool_cache_pace_us = 0;
	cfg.pool_retain = 2048 * MB;
	cfg.pool_decay_ms = 0;
	pst_pool_forget();
	ck_assert_int_eq(ps_alloc_init(&cfg), 0);
	char *a = ps_malloc(24 * MB);
	char *b = ps_malloc(24 * MB);
	ck_assert(ps_pool_contains(a) && ps_pool_contains(b));
	/* Written, so resident: the cap counts what the pool holds resident. */
	memset(a, 1, 24 * MB);
	memset(b, 1, 24 * MB);
	ps_free(a);
	ps_free(b);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 48 * MB);
	/* The pool's 64 MiB hold no 48 MiB block beside the cached two. */
	char *c = ps_malloc(48 * MB);
	ck_assert(ps_pool_contains(c));
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 0);
	ck_assert_ptr_eq(c, a);
}
END_TEST

/* Spin until us microseconds have passed (the pace counts wall time between frees). */
static void spin_us(uint64_t us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)b.tv_nsec -
		       (uint64_t)a.tv_nsec < us * 1000);
}

/*
 * One round of a program that frees a 1 MiB buffer and asks for 448 KiB,
 * frees that and asks for 1 MiB, spinning gap_us after each free: whether
 * the 448 KiB request landed where the 1 MiB buffer lay (*a, the 1 MiB
 * buffer, is replaced by the next one).  Through the cache it never does
 * (each size finds its own cached block: 1 MiB is over twice 448 KiB);
 * through the placement it does (the freed block is the hint, and free
 * memory is plenty).
 */
static bool pace_round(char **a, uint64_t gap_us)
{
	char *was = *a;
	ps_free(was);
	spin_us(gap_us);
	char *b = ps_malloc(448 * KB);
	ck_assert(ps_pool_contains(b));
	ps_free(b);
	spin_us(gap_us);
	*a = ps_malloc(1 * MB);
	ck_assert(ps_pool_contains(*a));
	return b == was;
}

/*
 * A CPU whose frees come further apart than the pace has its cache
 * bypassed, after a window of PS_TCACHE_PACE_WINDOW frees, and what the
 * cache held goes back to the placement; frees close together turn it
 * back on.  Fails without the pace (the slow rounds go through the cache).
 */
START_TEST(test_pace)
{
	const uint64_t pace = 200;     /* us: a slow round spins 2x that, a fast one not at all */
	setup_pace(32 * MB, PS_POOL_ALLOC_PAGES, 256 * MB, pace);
	char *a = ps_malloc(1 * MB);
	int rounds = 0;

	/* Fast: the cache serves, the first window and the next. */
	for (int i = 0; i < PS_TCACHE_PACE_WINDOW; i++)
		ck_assert(!pace_round(&a, 0));
	ck_assert_uint_gt(ps_tcache_cached_bytes(), 0);
	/* Slow: within two windows of frees the placement serves, and the cache is empty. */
	while (!pace_round(&a, 2 * pace))
		ck_assert_int_lt(++rounds, PS_TCACHE_PACE_WINDOW);
	ck_assert_uint_eq(ps_tcache_cached_bytes(), 0);
	ck_assert(pace_round(&a, 2 * pace));
	/*
	 * Fast again: the cache back within a window (a few, on a machine
	 * busy enough to stretch 256 frees past 51 ms).
	 */
	rounds = 0;
	while (pace_round(&a, 0))
		ck_assert_int_lt(++rounds, 16 * PS_TCACHE_PACE_WINDOW);
	ck_assert(!pace_round(&a, 0));
	ps_free(a);
}
END_TEST

Suite *suite_tcache(void)
{
	Suite *s = suite_create("tcache");
	TCase *tc = tcase_create("tcache");

	tcase_add_loop_test(tc, test_lifo, 0, PS_POOL_ALLOC__COUNT);
	tcase_add_test(tc, test_fit);
	tcase_add_test(tc, test_align);
	tcase_add_test(tc, test_bound);
	tcase_add_test(tc, test_large_after_cached);
	tcase_add_test(tc, test_grow_flushes);
	tcase_add_test(tc, test_flush);
	tcase_add_test(tc, test_other_thread);
	tcase_add_test(tc, test_calloc_dirty);
	tcase_add_test_raise_signal(tc, test_double_free, SIGABRT);
	tcase_add_test(tc, test_full_flushes);
	tcase_add_test(tc, test_pace);
	suite_add_tcase(s, tc);
	return s;
}
