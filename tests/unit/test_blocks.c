// SPDX-License-Identifier: MIT
/*
 * blocks.c, the pool's page-exact placement, without preloading: sizes to
 * the page, best fit, merging, growth at the top, in-place resizing,
 * zero tracking and purging, and a long random run checked against a
 * model of the live blocks and the tree's own invariants after each step.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "core/blocks.h"
#include "format/config.h"
#include "format/names.h"
#include "core/pool.h"
#include "suites.h"

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)


static char *get(size_t size)
{
	enum ps_pool_fail why = PS_FAIL__COUNT;
	char *p = ps_blocks_alloc(size, 0, false, &why);
	ck_assert_msg(p != NULL, "no block of %zu bytes (why %d)", size, (int)why);
	ck_assert_int_eq(why, PS_FAIL_NONE);
	ck_assert_int_eq(ps_blocks_check(), 0);
	return p;
}

static void put(void *p)
{
	ck_assert_uint_gt(ps_blocks_free(p), 0);
	ck_assert_int_eq(ps_blocks_check(), 0);
}

/* A free that leaves no hint (as a block flushed from a cache). */
static void put_cold(void *p)
{
	ck_assert_uint_gt(ps_blocks_free_cold(p), 0);
	ck_assert_int_eq(ps_blocks_check(), 0);
}

/* Free the n blocks a test still holds: none may be left live after. */
static void put_all(char *const *v, int n)
{
	struct ps_blocks_info info;

	for (int i = 0; i < n; i++)
		put(v[i]);
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live, 0);
}

/* A block is the request rounded to the page, no size class. */
START_TEST(test_page_exact)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(9 * MB + 1);
	ck_assert_uint_eq(ps_blocks_size(a), 9 * MB + 4 * KB);
	char *b = get(64 * KB);
	ck_assert_ptr_eq(b, a + 9 * MB + 4 * KB);
	ck_assert_uint_eq(ps_blocks_size(b), 64 * KB);
	ck_assert_uint_eq(ps_blocks_size(b + 4096), 0);   /* not a block's start */
	struct ps_blocks_info info;
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live, 2);
	ck_assert_uint_eq(info.live_bytes, 9 * MB + 68 * KB);
	put(a);
	put(b);
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live, 0);
	ck_assert_uint_eq(info.free, 1);                  /* merged into one */
	ck_assert_uint_eq(info.largest_free, 9 * MB + 68 * KB);
}
END_TEST

/*
 * The smallest free block that fits, the lowest of equals; freed
 * neighbours merge, across slabs too.
 */
START_TEST(test_best_fit_and_merge)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(MB), *b = get(MB), *c = get(MB), *d = get(MB);
	struct ps_pool_info pi;
	ps_pool_get_info(&pi);
	ck_assert_uint_eq(pi.slabs, 4);   /* each took memory of its own */
	put_cold(a);
	put_cold(c);
	/* Both fit 512 KiB: the lower wins, and the rest of it stays free. */
	char *e = get(512 * KB);
	ck_assert_ptr_eq(e, a);
	char *f = get(768 * KB);
	ck_assert_ptr_eq(f, c);                           /* a's rest is too small */
	put(b);                                           /* a's rest + b merge */
	char *g = get(MB + 512 * KB);
	ck_assert_ptr_eq(g, a + 512 * KB);
	int slabs = ps_pool_nslabs();
	put(e);
	put(f);
	put(g);
	put(d);
	/* All four slabs' memory is one free block now: 4 MiB fit, no new slab. */
	char *h = get(4 * MB);
	ck_assert_ptr_eq(h, a);
	ck_assert_int_eq(ps_pool_nslabs(), slabs);
	memset(h, 1, 4 * MB);
	ck_assert_uint_eq(ps_blocks_free(d), 0);          /* inside h: not a block */
	put(h);
	ck_assert_uint_eq(ps_blocks_free(h), 0);          /* freed twice */
	ck_assert_uint_eq(ps_blocks_free((char *)ps_pool_lo - 4096), 0);
	/* A 2 MiB hole above a 3 MiB one (h's memory, merged): 2 MiB goes to the hole it fills. */
	char *i = get(3 * MB), *j = get(MB), *k = get(2 * MB), *l = get(MB);
	put(i);
	put(k);
	ck_assert_ptr_eq(get(2 * MB), k);
	ck_assert_ptr_eq(get(3 * MB), i);
	put(i);
	put(j);
	put(k);
	put(l);
}
END_TEST

/*
 * The next request goes where the block freed last lay, if that free
 * memory holds it, while the arena has as much free as it handed out;
 * with less free than handed out, only if that block is about as tight a
 * fit as best fit's (within a quarter), and a cold free leaves no hint.
 */
START_TEST(test_hint)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	/* Plenty free: the hint, wherever best fit would go. */
	char *a = get(256 * KB), *g1 = get(64 * KB), *b = get(MB), *g2 = get(64 * KB);
	put_cold(a);
	put(b);
	ck_assert_ptr_eq(get(200 * KB), b);         /* best fit: a's 256 KiB */
	char *c = get(200 * KB);
	ck_assert_ptr_eq(c, a);                     /* the hint is used once: best fit again */
	put(c);
	put(b);
	put(g1);
	put(g2);
	/* Less free than handed out: the hint only if about as tight as best fit. */
	char *big = get(16 * MB);
	char *x = get(256 * KB), *g3 = get(64 * KB), *y = get(300 * KB), *g4 = get(64 * KB);
	char *z = get(MB), *g5 = get(64 * KB);
	put_cold(x);
	put(y);
	char *t = get(200 * KB);
	ck_assert_ptr_eq(t, y);                     /* 300 KiB against best fit's 256 */
	put_cold(t);
	put(z);
	t = get(200 * KB);
	ck_assert_ptr_eq(t, x);                     /* 1 MiB against 256 KiB: best fit */
	put(t);
	put_all((char *[]){ big, g3, g4, g5 }, 4);
}
END_TEST

/*
 * The hint's free block is carved from its start: the block freed last
 * merged with a free block below it, and the next request starts where
 * that one did, not at the hint (which left a free block below every
 * buffer placed so: a proxy's pool grew 28% larger).
 */
START_TEST(test_hint_block_start)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(256 * KB), *b = get(MB), *g = get(64 * KB);
	ck_assert_ptr_eq(b, a + 256 * KB);
	ck_assert_ptr_eq(g, b + MB);
	put_cold(a);
	put(b);                                     /* one free block from a to g, the hint at b */
	char *c = get(200 * KB);
	ck_assert_ptr_eq(c, a);
	char *d = get(200 * KB);                    /* the hint still inside: right after c */
	ck_assert_ptr_eq(d, a + 200 * KB);
	put(c);
	put(d);
	put(g);
	struct ps_blocks_info info;
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live, 0);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST


/* Resident pages of [p, p + len), by mincore. */
static size_t resident(const char *p, size_t len)
{
	static unsigned char vec[4096];
	size_t n = len / 4096, r = 0;
	ck_assert_uint_le(n, sizeof(vec));
	ck_assert_int_eq(mincore((void *)p, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		r += vec[i] & 1;
	return r;
}

/* A free that may give back the block's tail: whether it did. */
static bool put_tail(void *p)
{
	bool trimmed = false;
	ck_assert_uint_gt(ps_blocks_free_tail(p, true, true, &trimmed), 0);
	ck_assert_int_eq(ps_blocks_check(), 0);
	return trimmed;
}

/*
 * POOLSHIM_POOL_TAILS=trim: a freed block keeps its first keep bytes
 * resident and gives back the rest, and the next request goes where it
 * started; keep (the tests' default) gives nothing back.  Blocks under
 * twice keep are left alone.
 */
START_TEST(test_tails_trim)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(MB), *g = get(64 * KB);
	memset(a, 1, MB);
	ck_assert(!put_tail(a));                    /* keep: nothing given back */
	ck_assert_uint_eq(resident(a, MB), 256);
	ck_assert_ptr_eq(get(MB), a);
	memset(a, 2, MB);
	ps_blocks_set_tails(PS_TAILS_TRIM, 64 * KB);
	ck_assert(ps_blocks_trimming());
	ck_assert(put_tail(a));
	ck_assert_uint_eq(resident(a, 64 * KB), 16);
	ck_assert_uint_eq(resident(a + 64 * KB, MB - 64 * KB), 0);
	ck_assert_int_eq(a[0], 2);                  /* kept, as written */
	ck_assert_int_eq(a[64 * KB], 0);            /* given back: reads as zeros */
	/* The next request where the block freed last started, though a smaller free block fits. */
	char *b = get(512 * KB), *g2 = get(64 * KB), *c = get(256 * KB), *g3 = get(64 * KB);
	ck_assert_ptr_eq(b, a);
	memset(c, 3, 256 * KB);
	put_cold(c);
	memset(b, 4, 512 * KB);
	ck_assert(put_tail(b));
	char *d = get(200 * KB);
	ck_assert_ptr_eq(d, b);                     /* not c, the tighter fit */
	/* Too small to have a tail: 100 KiB under twice keep. */
	ps_blocks_set_tails(PS_TAILS_TRIM, 64 * KB);
	memset(d, 5, 100 * KB);
	ck_assert(!put_tail(d));
	put_all((char *[]){ g, g2, g3 }, 3);
}
END_TEST

/*
 * POOLSHIM_POOL_TAILS=auto: blocks carved from fresh pages and freed with
 * their tails unwritten start trimming; blocks freed with their tails
 * written (three quarters resident) stop it once 6 of the last 8 looked
 * at (one free in 8 of the blocks not carved clean) were.  A block freed with its tail written
 * while not trimming keeps it; unwritten tails start trimming again.
 */
START_TEST(test_tails_auto)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ps_blocks_set_tails(PS_TAILS_AUTO, 64 * KB);
	ps_blocks_tail_timing_for_tests(0, 0);
	char *f = get(2 * MB), *a = get(2 * MB), *b = get(2 * MB), *c = get(2 * MB), *g = get(64 * KB);
	memset(f, 1, 2 * MB);
	ck_assert(!put_tail(f));                    /* written: a vote for keeping */
	ck_assert_uint_eq(resident(f, 2 * MB), 512);
	ck_assert(!ps_blocks_trimming());
	/* The votes, newest last: 3 old ones for written (a process's start), f's written. */
	memset(a, 1, 4 * KB);
	ck_assert(!put_tail(a));                    /* 2 of the last 8 written: not yet */
	ck_assert(!ps_blocks_trimming());
	memset(b, 1, 4 * KB);
	ck_assert(put_tail(b));                     /* 1: trimming, this one given back too */
	ck_assert(ps_blocks_trimming());
	memset(c, 1, 4 * KB);
	ck_assert(put_tail(c));
	ck_assert_uint_eq(resident(c, 2 * MB), 1);
	int frees = 0;
	while (ps_blocks_trimming() && frees < 100) {
		char *p = get(2 * MB);
		memset(p, 2, 2 * MB);
		put_tail(p);
		frees++;
	}
	ck_assert(!ps_blocks_trimming());
	/* 6 votes for written (f's may still count), one free in 8 looked at. */
	ck_assert_int_ge(frees, 5 * 8);
	ck_assert_int_le(frees, 6 * 8);
	char *p = get(2 * MB);
	memset(p, 3, 2 * MB);
	ck_assert(!put_tail(p));
	ck_assert_uint_eq(resident(p, 2 * MB), 512);
	/*
	 * Given back (the decay's purge): the next block is carved clean, and
	 * the next ones' unwritten tails count, one in 8: trimming again.
	 */
	ps_blocks_purge();
	frees = 0;
	while (!ps_blocks_trimming() && frees < 100) {
		char *q = get(2 * MB);
		memset(q, 4, 4 * KB);
		put_tail(q);
		frees++;
	}
	ck_assert(ps_blocks_trimming());
	ck_assert_int_le(frees, 7 * 8);             /* 7 votes at most shift the written ones out */
	put(g);
}
END_TEST

/*
 * Outside trimming, a block not carved clean (freed before, never
 * written) is looked at one free in 8, and its unwritten tail counts; a
 * written one does not (its pages may be another block's).
 */
START_TEST(test_tails_auto_unclean)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ps_blocks_set_tails(PS_TAILS_AUTO, 64 * KB);
	ps_blocks_tail_timing_for_tests(0, 0);
	char *a = get(2 * MB), *g = get(64 * KB);
	put_cold(a);                                /* free, not known zero, never written */
	int frees = 0;
	while (!ps_blocks_trimming() && frees < 100) {
		char *q = get(2 * MB);
		ck_assert_ptr_eq(q, a);
		memset(q, 1, 4 * KB);
		/* Given back only by the free whose look starts trimming. */
		ck_assert(put_tail(q) == ps_blocks_trimming());
		frees++;
	}
	/* The start's 3 votes for written: 2 unwritten leave one, one free in 8 looked at. */
	ck_assert(ps_blocks_trimming());
	ck_assert_int_gt(frees, 8);
	ck_assert_int_le(frees, 2 * 8);
	/* Written tails of blocks not carved clean: no vote outside trimming. */
	ps_blocks_set_tails(PS_TAILS_AUTO, 64 * KB);
	for (int i = 0; i < 64; i++) {
		char *q = get(2 * MB);
		memset(q, 2, 2 * MB);
		ck_assert(!put_tail(q));
		ck_assert(!ps_blocks_trimming());
	}
	put(g);
}
END_TEST

/*
 * Looks at blocks not carved clean come a spacing apart at least (1 ms by
 * default): with 10 s, 100 frees whose tails are unwritten make one look,
 * one vote, and do not start trimming (two are needed).
 */
START_TEST(test_tails_spacing)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ps_blocks_set_tails(PS_TAILS_AUTO, 64 * KB);
	ps_blocks_tail_timing_for_tests(10ull * 1000000000u, 0);
	char *a = get(2 * MB), *g = get(64 * KB);
	put_cold(a);
	for (int i = 0; i < 100; i++) {
		char *q = get(2 * MB);
		memset(q, 1, 4 * KB);
		ck_assert(!put_tail(q));
	}
	ck_assert(!ps_blocks_trimming());
	ps_blocks_tail_timing_for_tests(0, 0);        /* the next looks come: trimming */
	for (int i = 0; i < 16; i++) {
		char *q = get(2 * MB);
		memset(q, 1, 4 * KB);
		put_tail(q);
	}
	ck_assert(ps_blocks_trimming());
	put(g);
}
END_TEST

/*
 * AUTO gives no tail back in an arena whose frees of blocks with a tail
 * come faster than the pace (20 us; here 1 s, so that any loop is fast):
 * from the second window of 64 such frees on, trimming stops there, and a
 * slower window turns it on again.  A free its caller calls fast gives
 * nothing back.
 */
START_TEST(test_tails_pace)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ps_blocks_set_tails(PS_TAILS_AUTO, 64 * KB);
	ps_blocks_tail_timing_for_tests(0, 1000000000u);
	char *c[3], *g = get(64 * KB);
	for (int i = 0; i < 3; i++)
		c[i] = get(2 * MB);
	for (int i = 0; i < 3; i++) {
		memset(c[i], 1, 4 * KB);
		put_tail(c[i]);
	}
	ck_assert(ps_blocks_trimming());            /* two clean, unwritten tails */
	int trimmed = 0, frees;
	for (frees = 3; frees < 128 + 8; frees++) {
		char *q = get(2 * MB);
		memset(q, 1, 4 * KB);
		trimmed += put_tail(q);
	}
	ck_assert(!ps_blocks_trimming());           /* the window at 128 was fast */
	ck_assert_int_ge(trimmed, 128 - 3 - 1);
	ck_assert_int_le(trimmed, 128 - 3);
	char *q = get(2 * MB);
	memset(q, 1, 4 * KB);
	ck_assert(!put_tail(q));
	ps_blocks_tail_timing_for_tests(0, 0);      /* no pace: the next window is slow */
	for (int i = 0; i < 64 && !ps_blocks_trimming(); i++) {
		q = get(2 * MB);
		memset(q, 1, 4 * KB);
		put_tail(q);
	}
	ck_assert(ps_blocks_trimming());
	/* A free from a CPU that frees fast (the caches' pace, alloc.c): no tail given back. */
	q = get(2 * MB);
	memset(q, 1, 2 * MB);
	bool given = true;
	ck_assert_uint_gt(ps_blocks_free_tail(q, true, false, &given), 0);
	ck_assert(!given);
	ck_assert_uint_eq(resident(q, 2 * MB), 512);
	put(g);
}
END_TEST

/* A request larger than the free block at the top takes only the rest as a new slab. */
START_TEST(test_grow_at_top)
{
	struct ps_pool_info before, after;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(4 * MB);
	char *b = get(2 * MB);
	put(b);
	ps_pool_get_info(&before);
	char *c = get(5 * MB);
	ps_pool_get_info(&after);
	ck_assert_ptr_eq(c, b);
	ck_assert_uint_eq(after.slabs, before.slabs + 1);
	ck_assert_uint_eq(after.backed - before.backed, 4 * MB);   /* 3 MiB more, whole units */
	memset(c, 2, 5 * MB);
	put(a);
	put(c);
}
END_TEST

/*
 * A request a page larger each time than the free block at the top (a
 * buffer sized to a growing input, taken and freed) takes a slab per
 * eighth of its size, not one per request: slabs are numbered
 * (PS_MAX_SLABS), and a pool out of numbers takes no new memory.
 */
START_TEST(test_grow_at_top_steps)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *keep = get(MB);
	struct ps_pool_info pi;
	ps_pool_get_info(&pi);
	uint64_t slabs = pi.slabs;
	for (size_t n = MB + 4 * KB; n <= 2 * MB; n += 4 * KB) {
		char *p = get(n);
		p[n - 1] = 1;
		put(p);
	}
	ps_pool_get_info(&pi);
	ck_assert_uint_le(pi.slabs, slabs + 8);
	put(keep);
}
END_TEST

/* Alignment: the block starts aligned; the gap before it stays free. */
START_TEST(test_aligned)
{
	enum ps_pool_fail why;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(12 * KB);
	/* A new slab is aligned itself: the block starts it. */
	char *b = ps_blocks_alloc(100 * KB, 2 * MB, false, &why);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq((uintptr_t)b % (2 * MB), 0);
	ck_assert_int_eq(ps_pool_slab_of(b), ps_pool_nslabs() - 1);
	ck_assert_int_eq(ps_blocks_check(), 0);
	/* Inside a free block, the room below the aligned start stays free. */
	char *big = get(8 * MB);
	put(big);
	char *c = ps_blocks_alloc(64 * KB, 4 * MB, false, &why);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq((uintptr_t)c % (4 * MB), 0);
	ck_assert((uintptr_t)c >= (uintptr_t)big && (uintptr_t)c < (uintptr_t)big + 4 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	if (c > big)
		ck_assert_ptr_eq(get(4 * KB), big);
	put(a);
	put(b);
	put(c);
	ck_assert_ptr_null(ps_blocks_alloc((size_t)2 << 30, 0, false, &why));
	ck_assert_int_eq(why, PS_FAIL_TOO_LARGE);
	ck_assert_ptr_null(ps_blocks_alloc(SIZE_MAX, 0, false, &why));
	ck_assert_int_eq(why, PS_FAIL_TOO_LARGE);
}
END_TEST

/*
 * Aligned requests reuse freed blocks: a block freed at an aligned address
 * serves the next request of that alignment, though it is smaller than the
 * request plus its alignment (1000 posix_memalign of 200000 bytes at
 * 2 MiB, each freed before the next, took a slab each: 2 GB).
 */
START_TEST(test_aligned_reuse)
{
	static const size_t aligns[] = { 8 * KB, 64 * KB, 2 * MB, 4 * MB };
	enum ps_pool_fail why;
	struct ps_pool_info before, after;

	for (size_t k = 0; k < sizeof(aligns) / sizeof(aligns[0]); k++) {
		pst_pool_setup(PS_HUGE_NONE, 256 * MB);
		char *keep = get(3 * MB);
		char *first = NULL;
		for (int i = 0; i < 200; i++) {
			char *p = ps_blocks_alloc(200000, aligns[k], false, &why);
			ck_assert_ptr_nonnull(p);
			ck_assert_uint_eq((uintptr_t)p % aligns[k], 0);
			memset(p, i, 200000);
			if (i == 0) {
				first = p;
				ps_pool_get_info(&before);
			}
			ck_assert_msg(p == first, "alignment %zu: round %d took a new block", aligns[k], i);
			put(p);
		}
		ps_pool_get_info(&after);
		ck_assert_uint_eq(after.slabs, before.slabs);
		ck_assert_uint_eq(after.backed, before.backed);
		put(keep);
	}
}
END_TEST

/*
 * A free block that holds an aligned range of the request's size, but is
 * smaller than the request plus its alignment, serves it: the rooms in
 * front and behind stay free.
 */
START_TEST(test_aligned_inside_free)
{
	enum ps_pool_fail why;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(3 * MB);
	char *mid = get(2 * MB);
	char *c = get(3 * MB);
	int slabs = ps_pool_nslabs();
	put(mid);
	/* 2 MiB free at 3 MiB: 1 MiB aligned to 2 MiB fits at 4 MiB, though 2 < 1 + 2 - 4 KiB. */
	char *p = ps_blocks_alloc(MB, 2 * MB, false, &why);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % (2 * MB), 0);
	ck_assert(p > mid && p + MB <= mid + 2 * MB);
	ck_assert_int_eq(ps_pool_nslabs(), slabs);
	ck_assert_int_eq(ps_blocks_check(), 0);
	/* The rooms around it serve page-aligned requests. */
	ck_assert_ptr_eq(get((size_t)(p - mid)), mid);
	put(p);
	put(a);
	put(c);
}
END_TEST

/*
 * An aligned request at the top of the pool, above a live block, takes a
 * slab that follows the last one: the room in front of the block is a
 * free block of the same run, not a gap between runs that belongs to no
 * block, and freed it merges with the rest.
 */
START_TEST(test_aligned_no_gap)
{
	enum ps_pool_fail why;
	struct ps_blocks_info info;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(3 * MB);
	char *b = ps_blocks_alloc(100 * KB, 2 * MB, false, &why);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq((uintptr_t)b % (2 * MB), 0);
	ck_assert(ps_pool_within_slabs(a, (size_t)(b - a) + 100 * KB));
	ck_assert_int_eq(ps_blocks_check(), 0);
	/* The room between a and b is a free block: a request fits in it. */
	char *c = get((size_t)(b - a) - 3 * MB);
	ck_assert_ptr_eq(c, a + 3 * MB);
	put(c);
	put(a);
	put(b);
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.free, 1);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST

/*
 * A new slab aligned far past the last one backs only the units it lies
 * in: the gap below it is no slab (no block can use it), so it stays
 * reserved, not mapped (with hugetlb pages it would hold them).
 */
START_TEST(test_aligned_gap_unbacked)
{
	enum ps_pool_fail why;
	struct ps_pool_info before, after;

	pst_pool_setup(PS_HUGE_NONE, 2048 * MB);
	char *a = get(3 * MB);
	ps_pool_get_info(&before);
	char *b = ps_blocks_alloc(3 * MB, 256 * MB, false, &why);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq((uintptr_t)b % (256 * MB), 0);
	memset(b, 1, 3 * MB);
	ps_pool_get_info(&after);
	ck_assert_uint_le(after.backed - before.backed, 4 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	put(a);
	put(b);
	ck_assert_uint_eq(ps_blocks_purge(), 6 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST

/* Resizing in place: shrink frees the tail, growth takes the free block above. */
START_TEST(test_resize)
{
	size_t old;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(2 * MB);
	char *b = get(MB);
	memset(a, 3, 2 * MB);
	ck_assert_uint_eq(ps_blocks_resize(a, MB + 1, &old), MB + 4 * KB);
	ck_assert_uint_eq(old, 2 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_int_eq(a[MB], 3);
	/* The tail is free: a 1 MiB - 4 KiB block fits there. */
	char *c = get(MB - 4 * KB);
	ck_assert_ptr_eq(c, a + MB + 4 * KB);
	put(c);
	/* Grow back into it; past it, b is in the way. */
	ck_assert_uint_eq(ps_blocks_resize(a, 2 * MB, &old), 2 * MB);
	ck_assert_uint_eq(old, MB + 4 * KB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_uint_eq(ps_blocks_resize(a, 2 * MB + 1, &old), 0);
	ck_assert_uint_eq(old, 2 * MB);
	ck_assert_uint_eq(ps_blocks_size(a), 2 * MB);
	/* Shrinking next to a free block grows that block downwards. */
	put(b);
	ck_assert_uint_eq(ps_blocks_resize(a, 64 * KB, &old), 64 * KB);
	struct ps_blocks_info info;
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.free, 1);
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_uint_eq(ps_blocks_resize(a + 4096, 64 * KB, &old), 0);
	ck_assert_uint_eq(old, 0);
	/* At the top of the pool a block grows in place into a new slab. */
	char *t = get(MB);
	memset(t, 4, MB);
	struct ps_pool_info pi;
	ps_pool_get_info(&pi);
	uint64_t slabs = pi.slabs;
	ck_assert_uint_eq(ps_blocks_resize(t, 6 * MB, &old), 6 * MB);
	ps_pool_get_info(&pi);
	ck_assert_uint_eq(pi.slabs, slabs + 1);
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_int_eq(t[MB - 1], 4);
	memset(t, 5, 6 * MB);
	/* Grown a page at a time, it takes a slab per eighth of its size, not per step. */
	slabs = pi.slabs;
	for (size_t n = 6 * MB + 4 * KB; n <= 7 * MB; n += 4 * KB)
		ck_assert_uint_eq(ps_blocks_resize(t, n, &old), n);
	ps_pool_get_info(&pi);
	ck_assert_uint_le(pi.slabs, slabs + 2);
	ck_assert_int_eq(ps_blocks_check(), 0);
	put(a);
	put(t);
}
END_TEST

/* The process's address space now, in bytes (VmSize), or 0. */
static rlim_t vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (rlim_t)kb << 10;
}

/*
 * When the tree cannot grow (its next chunk of nodes cannot be mapped), a
 * resize fails and leaves the block and errno as they were: realloc then
 * moves the block, and a call that succeeds does not change errno.
 */
START_TEST(test_resize_no_nodes)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return;   /* the sanitizer's own mappings need an address space without a limit */
#endif
	enum { N = 600 };
	static char *b[N];
	struct ps_blocks_info info;
	size_t old;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	for (int i = 0; i < N; i++)
		b[i] = get(8 * KB);
	ps_blocks_get_info(&info);
	/* One chunk of nodes so far (1024, blocks.c): use up what it has left, a free tail per shrink. */
	ck_assert_uint_lt(info.live + info.free, 1024);
	uint64_t left = 1024 - (info.live + info.free);
	int i = 0;
	for (; left > 0 && i < N - 1; i++, left--)
		ck_assert_uint_eq(ps_blocks_resize(b[i], 4 * KB, &old), 4 * KB);
	ck_assert_uint_eq(left, 0);
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live + info.free, 1024);

	struct rlimit was, now;
	ck_assert_int_eq(getrlimit(RLIMIT_AS, &was), 0);
	now = was;
	now.rlim_cur = vm_size();
	ck_assert_uint_gt(now.rlim_cur, 0);
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &now), 0);
	errno = EILSEQ;
	size_t r = ps_blocks_resize(b[i], 4 * KB, &old);
	int e = errno;
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &was), 0);
	ck_assert_uint_eq(r, 0);
	ck_assert_uint_eq(old, 8 * KB);
	ck_assert_int_eq(e, EILSEQ);
	ck_assert_uint_eq(ps_blocks_size(b[i]), 8 * KB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	/* With room again, the same shrink works. */
	ck_assert_uint_eq(ps_blocks_resize(b[i], 4 * KB, &old), 4 * KB);
	for (i = 0; i < N; i++)
		put(b[i]);
}
END_TEST

/* Zero is known for fresh and purged pages; a reused block is zeroed on request. */
START_TEST(test_zero_and_purge)
{
	enum ps_pool_fail why;
	struct ps_pool_info pool;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = ps_blocks_alloc(MB, 0, true, &why);
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a[0] | a[MB - 1], 0);
	memset(a, 0x77, MB);
	char *keep = get(MB);
	memset(keep, 0x66, MB);
	put(a);
	char *b = ps_blocks_alloc(MB, 0, true, &why);
	ck_assert_ptr_eq(b, a);
	for (size_t i = 0; i < MB; i += 512)
		ck_assert_int_eq(b[i], 0);
	memset(b, 0x55, MB);
	put(b);
	ps_pool_get_info(&pool);
	uint64_t purged = pool.purged;
	struct ps_blocks_info bi;
	ps_blocks_get_info(&bi);
	uint64_t zero_before = bi.free_zero_bytes;
	ck_assert_uint_eq(ps_blocks_purge(), MB);
	ps_blocks_get_info(&bi);
	ck_assert_uint_eq(bi.free_zero_bytes, zero_before + MB);
	ps_pool_get_info(&pool);
	ck_assert_uint_eq(pool.purged - purged, MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	/* Purged: reads as zeros; the live block beside it is untouched. */
	char *c = get(MB);
	ck_assert_ptr_eq(c, a);
	ck_assert_int_eq(c[4096], 0);
	ck_assert_int_eq(keep[0], 0x66);
	ck_assert_int_eq(keep[MB - 1], 0x66);
	put(c);
	put(keep);
	/* Nothing dirty is left after a second purge; a third finds nothing. */
	ck_assert_uint_eq(ps_blocks_purge(), 2 * MB);
	ck_assert_uint_eq(ps_blocks_purge(), 0);
}
END_TEST

/*
 * The purge a door's poll runs (possibly in a signal handler) gives up
 * while the trees' lock is held, and purges as the plain one does when it
 * is free.
 */
START_TEST(test_purge_try)
{
	size_t total = 1;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	char *a = get(2 * MB);
	char *keep = get(MB);
	memset(a, 1, 2 * MB);
	put(a);
	ps_blocks_atfork_prepare();   /* takes the lock, as a thread inside the blocks holds it */
	ck_assert_int_eq(ps_blocks_purge_try(&total), -EBUSY);
	ck_assert_uint_eq(total, 0);
	ps_blocks_atfork_parent();
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_int_eq(ps_blocks_purge_try(&total), 0);
	ck_assert_uint_eq(total, 2 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_int_eq(ps_blocks_purge_try(&total), 0);
	ck_assert_uint_eq(total, 0);
	put(keep);
}
END_TEST

/*
 * At the pool's size, a block at the top still grows in place by what it
 * needs, without the eighth more it takes when there is room; so does a
 * request larger than the free block at the top.
 */
START_TEST(test_grow_at_cap)
{
	size_t old;

	pst_pool_setup(PS_HUGE_NONE, 44 * MB);
	char *a = get(40 * MB);
	memset(a, 1, 40 * MB);
	ck_assert_uint_eq(ps_blocks_resize(a, 41 * MB, &old), 41 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	put(a);
	/* 41 MiB free at the top: 42 MiB needs 1 MiB more, 5 with an eighth. */
	char *b = get(42 * MB);
	ck_assert_ptr_eq(b, a);
	put(b);
}
END_TEST

/*
 * A free block given back only in part (with THP, the units it covers in
 * part stay) is not given back again at each purge: that counted its
 * whole units again every time.  Merged with a freed neighbour, it is.
 */
START_TEST(test_purge_partial_once)
{
	struct ps_pool_info pool;
	struct ps_slab slab;

	pst_pool_setup(PS_HUGE_THP, 256 * MB);
	char *keep = get(MB);
	char *a = get(5 * MB);
	memset(keep, 1, MB);
	memset(a, 2, 5 * MB);
	put(a);
	ck_assert(ps_pool_slab(ps_pool_slab_of(a), &slab));
	ps_blocks_purge();
	ps_pool_get_info(&pool);
	uint64_t purged = pool.purged;
	if (slab.backing == PS_BACK_THP)
		ck_assert_uint_gt(purged, 0);   /* its whole units */
	ck_assert_uint_eq(ps_blocks_purge(), 0);
	ck_assert_uint_eq(ps_blocks_purge(), 0);
	ps_pool_get_info(&pool);
	ck_assert_uint_eq(pool.purged, purged);
	ck_assert_int_eq(ps_blocks_check(), 0);
	ck_assert_int_eq(keep[0], 1);
	put(keep);
	ck_assert_uint_gt(ps_blocks_purge(), 0);
	ps_pool_get_info(&pool);
	ck_assert_uint_gt(pool.purged, purged);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST

/* At the pool's size the request fails with its reason, and nothing is lost. */
START_TEST(test_full)
{
	enum ps_pool_fail why;

	pst_pool_setup(PS_HUGE_NONE, 8 * MB);
	char *a = get(6 * MB);
	memset(a, 1, 6 * MB);   /* the cap counts what is resident */
	ck_assert_ptr_null(ps_blocks_alloc(4 * MB, 0, false, &why));
	ck_assert_int_eq(why, PS_FAIL_POOL_FULL);
	ck_assert_int_eq(ps_blocks_check(), 0);
	char *b = get(2 * MB);
	put(a);
	put(b);
	ck_assert_ptr_nonnull(ps_blocks_alloc(8 * MB, 0, false, &why));
}
END_TEST

/*
 * A long random run against a model: each live block's first and last
 * bytes carry its number, blocks never overlap, the tree's invariants
 * hold after every step (ps_blocks_check).
 */
struct live {
	char *p;
	size_t size;
	unsigned char tag;
};

START_TEST(test_random_against_model)
{
	enum { SLOTS = 64, STEPS = 6000 };
	static struct live slot[SLOTS];
	unsigned seed = 12345u + (unsigned)_i;
	enum ps_pool_fail why;

	memset(slot, 0, sizeof(slot));
	pst_pool_setup(PS_HUGE_NONE, 512 * MB);
	for (int step = 0; step < STEPS; step++) {
		struct live *s = &slot[rand_r(&seed) % SLOTS];
		int op = rand_r(&seed) % 8;
		if (s->p && op < 3) {
			ck_assert_uint_eq(ps_blocks_size(s->p), (s->size + 4095) & ~(size_t)4095);
			ck_assert_int_eq((unsigned char)s->p[0], s->tag);
			ck_assert_int_eq((unsigned char)s->p[s->size - 1], s->tag);
			ck_assert_uint_gt(ps_blocks_free(s->p), 0);
			s->p = NULL;
		} else if (s->p && op == 3) {
			size_t size = 4096 + (size_t)rand_r(&seed) % (8 * MB);
			size_t old, n = ps_blocks_resize(s->p, size, &old);
			ck_assert_uint_eq(old, (s->size + 4095) & ~(size_t)4095);
			if (n) {
				ck_assert_uint_eq(n, (size + 4095) & ~(size_t)4095);
				ck_assert_int_eq((unsigned char)s->p[0], s->tag);
				if (size > s->size)
					ck_assert_int_eq((unsigned char)s->p[s->size - 1], s->tag);
				s->size = size;
				s->p[size - 1] = (char)s->tag;
			}
		} else if (!s->p) {
			size_t size = (size_t)1 << (12 + rand_r(&seed) % 12);
			size += (size_t)rand_r(&seed) % size;
			size_t align = op == 7 ? (size_t)1 << (12 + rand_r(&seed) % 10) : 0;
			s->p = ps_blocks_alloc(size, align, op == 6, &why);
			ck_assert_msg(s->p != NULL, "step %d: %zu bytes failed (%d)", step, size, (int)why);
			if (align)
				ck_assert_uint_eq((uintptr_t)s->p % align, 0);
			if (op == 6)
				ck_assert_int_eq(s->p[0] | s->p[size / 2] | s->p[size - 1], 0);
			s->size = size;
			s->tag = (unsigned char)(step | 1);
			s->p[0] = s->p[size - 1] = (char)s->tag;
		} else if (op == 4 && step % 97 == 0) {
			ps_blocks_purge();
		}
		int r = ps_blocks_check();
		ck_assert_msg(r == 0, "step %d: the tree broke", step);
	}
	/* No two live blocks overlap. */
	for (int i = 0; i < SLOTS; i++)
		for (int j = 0; j < SLOTS; j++)
			if (i != j && slot[i].p && slot[j].p)
				ck_assert(slot[i].p + slot[i].size <= slot[j].p ||
					  slot[j].p + slot[j].size <= slot[i].p);
	for (int i = 0; i < SLOTS; i++)
		if (slot[i].p)
			put(slot[i].p);
	struct ps_blocks_info info;
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live, 0);
	ck_assert_uint_le(info.free, 8);   /* merged back into the slabs' runs */
}
END_TEST

/* ---- arenas (POOLSHIM_POOL_ARENAS) ---- */

struct other {
	char *theirs;      /* the main thread's block, freed here */
	size_t theirs_freed;
	char *mine;        /* this thread's block, left live */
	int mine_arena;
	size_t size;
};

static void *other_thread(void *arg)
{
	struct other *o = arg;
	enum ps_pool_fail why;

	o->mine = ps_blocks_alloc(o->size, 0, false, &why);
	if (o->mine)
		memset(o->mine, 2, o->size);
	o->mine_arena = ps_blocks_arena_of(o->mine);
	if (o->theirs)
		o->theirs_freed = ps_blocks_free(o->theirs);
	return NULL;
}

/*
 * Two threads, two arenas: each block is freed into the arena whose slab
 * holds it, by whichever thread frees it (the owner map; freed into the
 * freeing thread's arena, the block would not be found), and a purge
 * gives back the free memory of both arenas.
 */
START_TEST(test_arenas_cross_free)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ck_assert_uint_eq(ps_blocks_init(2), 2);
	char *a = get(MB);
	memset(a, 1, MB);
	ck_assert_int_eq(ps_blocks_arena_of(a), 0);
	struct other o = { .theirs = a, .size = 3 * MB };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, other_thread, &o), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_ptr_nonnull(o.mine);
	ck_assert_int_eq(o.mine_arena, 1);
	ck_assert_uint_eq(o.theirs_freed, MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
	/* The main thread's arena has a's megabyte free; the other's block comes from a slab of its own. */
	ck_assert(o.mine + 3 * MB <= a || o.mine >= a + MB);
	put(o.mine);
	struct ps_blocks_info info;
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live, 0);
	ck_assert_uint_eq(info.free_zero_bytes, 0);
	/* Every byte the two arenas hold is free and written: the purge gives all of it back. */
	uint64_t held = info.free_bytes;
	ck_assert_uint_ge(held, 4 * MB);
	ck_assert_uint_eq(ps_blocks_purge(), held);
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.free_zero_bytes, held);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST

/*
 * With two arenas and one of them busy, the poll's purge gives back the
 * other's free memory and says it did part (-EAGAIN, not -EBUSY: alloc.c
 * counts a purge that gave back memory); one that gave back nothing
 * while an arena was busy is -EBUSY (a one-thread process has 16 idle
 * arenas: their free locks must not make its busy arena's purge count);
 * the busy arena's memory goes at the next try.
 */
START_TEST(test_purge_try_partial)
{
	size_t total = 1;

	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ck_assert_uint_eq(ps_blocks_init(2), 2);
	char *a = get(2 * MB);
	memset(a, 1, 2 * MB);
	struct other o = { .size = 3 * MB };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, other_thread, &o), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_ptr_nonnull(o.mine);
	ck_assert_int_eq(o.mine_arena, 1);
	put(a);
	put(o.mine);                  /* written by other_thread: both arenas hold dirty memory */
	ps_blocks_hold_for_tests(1, true);
	ck_assert_int_eq(ps_blocks_purge_try(&total), -EAGAIN);
	ck_assert_uint_eq(total, 2 * MB);
	/* Arena 0 has nothing left to give: with 1 busy, nothing was done. */
	ck_assert_int_eq(ps_blocks_purge_try(&total), -EBUSY);
	ck_assert_uint_eq(total, 0);
	ps_blocks_hold_for_tests(0, true);
	ck_assert_int_eq(ps_blocks_purge_try(&total), -EBUSY);
	ck_assert_uint_eq(total, 0);
	ps_blocks_hold_for_tests(0, false);
	ps_blocks_hold_for_tests(1, false);
	ck_assert_int_eq(ps_blocks_purge_try(&total), 0);
	ck_assert_uint_ge(total, 3 * MB);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST

/*
 * At the cap, a thread whose arena cannot grow takes another arena's free
 * block (POOLSHIM_POOL_SIZE bounds the pool, not each arena): the main
 * thread's 6 MiB, written and freed, serve the other thread's 6 MiB.
 */
START_TEST(test_arenas_cap)
{
	pst_pool_setup(PS_HUGE_NONE, 8 * MB);
	ck_assert_uint_eq(ps_blocks_init(2), 2);
	char *a = get(6 * MB);
	memset(a, 1, 6 * MB);   /* the cap counts what is resident */
	put(a);
	struct other o = { .size = 6 * MB };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, other_thread, &o), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_ptr_eq(o.mine, a);
	ck_assert_int_eq(o.mine_arena, 0);
	ck_assert_int_eq(ps_blocks_check(), 0);
	struct ps_pool_info pool;
	ps_pool_get_info(&pool);
	ck_assert_uint_le(pool.backed, 8 * MB);
	put(o.mine);
}
END_TEST

/*
 * The default count (POOLSHIM_POOL_ARENAS=0): four per CPU the process may
 * run on, at most 16, taken when a second thread comes; the second
 * thread is bound to the next arena.  Start-up makes no system call for it
 * (tests/preload/startup_syscalls.sh).
 */
START_TEST(test_arenas_default)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ck_assert_uint_eq(ps_blocks_init(0), PS_BLOCKS_ARENAS_DEFAULT_MAX);
	char *a = get(MB);
	ck_assert_int_eq(ps_blocks_arena_of(a), 0);
	/* One thread so far: one arena used, the count not taken (the report's pool.arenas). */
	struct ps_blocks_info info;
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.arenas_used, 1);
	ck_assert_uint_eq(info.arenas_max, 0);
	struct other o = { .size = MB };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, other_thread, &o), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_ptr_nonnull(o.mine);
	ck_assert_int_eq(o.mine_arena, 1);
	cpu_set_t set;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	unsigned want = (unsigned)CPU_COUNT(&set) * PS_BLOCKS_ARENAS_PER_CPU;
	if (want > PS_BLOCKS_ARENAS_DEFAULT_MAX)
		want = PS_BLOCKS_ARENAS_DEFAULT_MAX;
	ck_assert_uint_eq(ps_blocks_arenas(), want);
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.arenas_used, want < 2 ? want : 2);
	ck_assert_uint_eq(info.arenas_max, want);
	put(o.mine);
	put(a);
	ck_assert_int_eq(ps_blocks_check(), 0);
}
END_TEST

/*
 * One thread, several arenas: it places exactly as with one (the first
 * slab is the request, not an arena's share; the next block follows).
 */
START_TEST(test_arenas_one_thread)
{
	pst_pool_setup(PS_HUGE_NONE, 256 * MB);
	ck_assert_uint_eq(ps_blocks_init(8), 8);
	char *a = get(64 * KB);
	char *b = get(MB);
	ck_assert_ptr_eq(b, a + 64 * KB);
	ck_assert_int_eq(ps_blocks_arena_of(a), 0);
	ck_assert_int_eq(ps_blocks_arena_of(b), 0);
	struct ps_slab sl;
	ck_assert(ps_pool_slab(0, &sl));
	ck_assert_uint_eq(sl.len, 64 * KB + MB);
	ck_assert(!ps_pool_slab(1, &sl));
	put(a);
	put(b);
}
END_TEST

/*
 * Threads in several arenas, each a random run of alloc, resize and free
 * over its own slots, handing every fourth block to the next thread to
 * free: the patterns hold and the trees check after.
 */
enum { ARENA_THREADS = 6, ARENA_SLOTS = 32, ARENA_STEPS = 3000 };
static char *handoff[ARENA_THREADS];
static size_t handoff_size[ARENA_THREADS];
static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;

static void *arena_worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	unsigned seed = 777u * (unsigned)(me + 1);
	struct live slot[ARENA_SLOTS] = { 0 };
	enum ps_pool_fail why;
	int bad = 0;

	for (int step = 0; step < ARENA_STEPS && !bad; step++) {
		struct live *s = &slot[rand_r(&seed) % ARENA_SLOTS];
		int op = rand_r(&seed) % 8;
		if (s->p && op < 3) {
			if ((unsigned char)s->p[0] != s->tag || (unsigned char)s->p[s->size - 1] != s->tag)
				bad = 1;
			if (op == 0) {
				/* To the next thread, which frees the one it finds there. */
				pthread_mutex_lock(&handoff_lock);
				char *q = handoff[(me + 1) % ARENA_THREADS];
				handoff[(me + 1) % ARENA_THREADS] = s->p;
				handoff_size[(me + 1) % ARENA_THREADS] = s->size;
				pthread_mutex_unlock(&handoff_lock);
				if (q && ps_blocks_free(q) == 0)
					bad = 2;
			} else if (ps_blocks_free(s->p) == 0) {
				bad = 3;
			}
			s->p = NULL;
		} else if (s->p && op == 3) {
			size_t size = 4096 + (size_t)rand_r(&seed) % (4 * MB);
			size_t old;
			if (ps_blocks_resize(s->p, size, &old)) {
				if (size > s->size)
					s->p[s->size - 1] = (char)s->tag;
				s->size = size;
				s->p[size - 1] = (char)s->tag;
			}
		} else if (!s->p) {
			size_t size = (size_t)1 << (12 + rand_r(&seed) % 10);
			size += (size_t)rand_r(&seed) % size;
			size_t align = op == 7 ? (size_t)1 << (12 + rand_r(&seed) % 8) : 0;
			s->p = ps_blocks_alloc(size, align, false, &why);
			if (!s->p || (align && (uintptr_t)s->p % align)) {
				bad = 4;
				break;
			}
			s->size = size;
			s->tag = (unsigned char)(step | 1);
			s->p[0] = s->p[size - 1] = (char)s->tag;
		} else if (op == 4 && step % 211 == 0) {
			ps_blocks_purge();
		}
	}
	for (int i = 0; i < ARENA_SLOTS; i++)
		if (slot[i].p && ps_blocks_free(slot[i].p) == 0)
			bad = 5;
	return (void *)(intptr_t)bad;
}

START_TEST(test_arenas_threads)
{
	pst_pool_setup(PS_HUGE_NONE, 1024 * MB);
	ck_assert_uint_eq(ps_blocks_init(_i ? 4 : 1), _i ? 4 : 1);
	memset(handoff, 0, sizeof(handoff));
	pthread_t t[ARENA_THREADS];
	for (int i = 0; i < ARENA_THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, arena_worker, (void *)(intptr_t)i), 0);
	for (int i = 0; i < ARENA_THREADS; i++) {
		void *r;
		ck_assert_int_eq(pthread_join(t[i], &r), 0);
		ck_assert_msg(r == NULL, "thread %d: check %d failed", i, (int)(intptr_t)r);
	}
	for (int i = 0; i < ARENA_THREADS; i++)
		if (handoff[i])
			ck_assert_uint_gt(ps_blocks_free(handoff[i]), 0);
	ck_assert_int_eq(ps_blocks_check(), 0);
	struct ps_blocks_info info;
	ps_blocks_get_info(&info);
	ck_assert_uint_eq(info.live, 0);
	ck_assert_uint_eq(info.live_bytes, 0);
}
END_TEST

Suite *suite_blocks(void)
{
	Suite *s = suite_create("blocks");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_page_exact);
	tcase_add_test(tc, test_best_fit_and_merge);
	tcase_add_test(tc, test_hint);
	tcase_add_test(tc, test_hint_block_start);
	tcase_add_test(tc, test_tails_trim);
	tcase_add_test(tc, test_tails_auto);
	tcase_add_test(tc, test_tails_auto_unclean);
	tcase_add_test(tc, test_tails_spacing);
	tcase_add_test(tc, test_tails_pace);
	tcase_add_test(tc, test_grow_at_top);
	tcase_add_test(tc, test_grow_at_top_steps);
	tcase_add_test(tc, test_aligned);
	tcase_add_test(tc, test_aligned_gap_unbacked);
	tcase_add_test(tc, test_aligned_reuse);
	tcase_add_test(tc, test_aligned_inside_free);
	tcase_add_test(tc, test_aligned_no_gap);
	tcase_add_test(tc, test_resize);
	tcase_add_test(tc, test_resize_no_nodes);
	tcase_add_test(tc, test_zero_and_purge);
	tcase_add_test(tc, test_purge_try);
	tcase_add_test(tc, test_purge_try_partial);
	tcase_add_test(tc, test_full);
	tcase_add_test(tc, test_purge_partial_once);
	tcase_add_test(tc, test_grow_at_cap);
	tcase_add_loop_test(tc, test_random_against_model, 0, 3);
	tcase_add_test(tc, test_arenas_cross_free);
	tcase_add_test(tc, test_arenas_cap);
	tcase_add_test(tc, test_arenas_one_thread);
	tcase_add_test(tc, test_arenas_default);
	tcase_add_loop_test(tc, test_arenas_threads, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
