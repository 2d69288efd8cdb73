// SPDX-License-Identifier: MIT
/*
 * The per-CPU caches of pooled blocks (POOLSHIM_POOL_CACHE), seen through
 * the malloc API under the shim, pinned to one CPU (the process and its
 * threads): the block freed last is the next one handed out, at the same
 * address (LIFO, and a smaller request within the fit rule); a block
 * allocated by one thread and freed by another goes to the cache of the
 * CPU it is freed on, whose next request gets it; and blocks that cross
 * threads by the hundred (unpinned), every page written, are all back in
 * the pool once the threads are gone (malloc_trim then gives the memory
 * back to the kernel: nothing stayed in a cache, nothing was lost in
 * transit).  Without the cache (POOLSHIM_POOL_CACHE=0) the first two
 * fail: the placement hands out the lowest free block that fits best.
 * And a program that frees slower than POOLSHIM_POOL_CACHE_PACE_US (20 us
 * by default) has its CPU's cache bypassed: after a 1 MiB buffer is freed,
 * a 448 KiB request lands where it lay (the placement's hint), which the
 * cache never gives (under half the block) (fails with POOLSHIM_POOL_CACHE_PACE_US=0).
 * Skipped without the shim.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#endif
#include <check.h>
#include <sched.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib.h"

#define MiB ((size_t)1 << 20)

/* This process, and the threads it starts, on the CPU it runs on now. */
static void pin_cpu(void)
{
	cpu_set_t one;
	int cpu = sched_getcpu();

	CPU_ZERO(&one);
	CPU_SET(cpu < 0 ? 0 : cpu, &one);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
}

START_TEST(test_lifo_same_address)
{
	pin_cpu();
	char *a = malloc(MiB);
	char *b = malloc(MiB);
	char *c = malloc(MiB);
	ck_assert(a && b && c);
	ck_assert(pst_pooled(a) && pst_pooled(b) && pst_pooled(c));
	memset(a, 1, MiB);
	memset(b, 2, MiB);
	memset(c, 3, MiB);
	free(a);
	free(c);
	/* The last freed first: c, then a (the placement would give a, the lowest). */
	char *x = malloc(MiB);
	char *y = malloc(MiB);
	ck_assert_ptr_eq(x, c);
	ck_assert_ptr_eq(y, a);
	/* A smaller request of half the block or more takes it too. */
	free(b);
	free(y);
	char *z = malloc(MiB / 2);
	ck_assert_ptr_eq(z, a);
	ck_assert_uint_eq(malloc_usable_size(z), MiB);
	free(z);
	free(x);
}
END_TEST

/* Spin for us microseconds: the program's work between two buffers. */
static void spin_us(long us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

/* Under half of a 1 MiB block: a request the cache would not serve from it. */
#define SMALLER (7 * MiB / 16)

START_TEST(test_slow_frees_bypass)
{
	pin_cpu();
	char *a = malloc(MiB);
	ck_assert(a && pst_pooled(a));
	/* Three windows of 256 frees at most (two frees a round), 100 us apart. */
	int round = 0;
	for (;; round++) {
		ck_assert_int_lt(round, 3 * 128);
		uintptr_t was = (uintptr_t)a;
		memset(a, 1, MiB);
		free(a);
		spin_us(100);
		char *b = malloc(SMALLER);
		ck_assert(b && pst_pooled(b));
		uintptr_t got = (uintptr_t)b;
		memset(b, 2, SMALLER);
		free(b);
		spin_us(100);
		a = malloc(MiB);
		ck_assert(a && pst_pooled(a));
		if (got == was)
			break;
	}
	/* Below the pace from then on: every round lands there. */
	for (int i = 0; i < 8; i++) {
		uintptr_t was = (uintptr_t)a;
		free(a);
		spin_us(100);
		char *b = malloc(SMALLER);
		uintptr_t got = (uintptr_t)b;
		free(b);
		ck_assert_uint_eq(got, was);
		spin_us(100);
		a = malloc(MiB);
	}
	free(a);
}
END_TEST

struct handoff {
	char *blocks[2];
	int ok;
};

/* Free what another thread allocated, then ask for the same size twice. */
static void *free_and_reuse(void *arg)
{
	struct handoff *h = arg;
	char *lo = h->blocks[0] < h->blocks[1] ? h->blocks[0] : h->blocks[1];
	char *hi = lo == h->blocks[0] ? h->blocks[1] : h->blocks[0];

	free(lo);
	free(hi);
	char *first = malloc(MiB), *second = malloc(MiB);
	h->ok = first == hi && second == lo;
	free(first);
	free(second);
	return NULL;
}

START_TEST(test_cross_thread_free)
{
	struct handoff h;
	pthread_t t;

	pin_cpu();
	for (int i = 0; i < 2; i++) {
		h.blocks[i] = malloc(MiB);
		ck_assert(pst_pooled(h.blocks[i]));
		pst_fill(h.blocks[i], MiB, 7);
	}
	ck_assert_int_eq(pthread_create(&t, NULL, free_and_reuse, &h), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(h.ok, "the freeing thread did not get the blocks it freed back, newest first");
}
END_TEST

/* A bounded queue of blocks between a producer and a consumer thread. */
#define QLEN 16
#define BLOCKS 600
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char *p[QLEN];
	size_t n[QLEN];
	uint64_t seed[QLEN];
	int head, tail;
	long bad;
} q;

static void *produce(void *arg)
{
	uint64_t r = 44;

	for (int i = 0; i < BLOCKS; i++) {
		size_t n = MiB + pst_rand(&r) % (3 * MiB);
		char *p = malloc(n);
		uint64_t seed = pst_rand(&r);
		if (p)
			pst_fill(p, n, seed);
		pthread_mutex_lock(&q.lock);
		while (q.tail - q.head == QLEN)
			pthread_cond_wait(&q.cond, &q.lock);
		q.p[q.tail % QLEN] = p;
		q.n[q.tail % QLEN] = n;
		q.seed[q.tail % QLEN] = seed;
		q.tail++;
		pthread_cond_broadcast(&q.cond);
		pthread_mutex_unlock(&q.lock);
	}
	return NULL;
}

static void *consume(void *arg)
{
	for (int i = 0; i < BLOCKS; i++) {
		pthread_mutex_lock(&q.lock);
		while (q.tail == q.head)
			pthread_cond_wait(&q.cond, &q.lock);
		char *p = q.p[q.head % QLEN];
		size_t n = q.n[q.head % QLEN];
		uint64_t seed = q.seed[q.head % QLEN];
		q.head++;
		pthread_cond_broadcast(&q.cond);
		pthread_mutex_unlock(&q.lock);
		if (!p || !pst_check(p, n, seed))
			q.bad++;
		free(p);
	}
	return NULL;
}

static long rss_kib(void)
{
	char buf[4096];
	long v = -1;

	if (pst_slurp("/proc/self/status", buf, sizeof(buf)) > 0) {
		char *s = strstr(buf, "VmRSS:");
		if (s)
			v = strtol(s + 6, NULL, 10);
	}
	return v;
}

START_TEST(test_cross_thread_no_loss)
{
	pthread_t a, b;

	pthread_mutex_init(&q.lock, NULL);
	pthread_cond_init(&q.cond, NULL);
	long before = rss_kib();
	ck_assert_int_eq(pthread_create(&b, NULL, consume, NULL), 0);
	ck_assert_int_eq(pthread_create(&a, NULL, produce, NULL), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	ck_assert_int_eq(q.bad, 0);
	long peak = rss_kib();
	malloc_trim(0);
	long after = rss_kib();
	/*
	 * 600 blocks of 1-4 MiB, written whole, crossed; at most 16 in transit
	 * and a cache's worth at once.  Once both threads are gone and the
	 * pool trimmed, what stays resident is what any block left stranded
	 * would hold.
	 */
	ck_assert_msg(after - before < 16 * 1024,
		      "%ld KiB resident before, %ld at the end, %ld after malloc_trim", before,
		      peak, after);
}
END_TEST

int main(void)
{
	if (!pst_shim_loaded())
		return PST_SKIP;
	Suite *s = suite_create("alloc_tcache");
	TCase *tc = tcase_create("tcache");

	tcase_set_timeout(tc, 120 * pst_scale());
	tcase_add_test(tc, test_lifo_same_address);
	tcase_add_test(tc, test_cross_thread_free);
	tcase_add_test(tc, test_cross_thread_no_loss);
	tcase_add_test(tc, test_slow_frees_bypass);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
