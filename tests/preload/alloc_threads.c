// SPDX-License-Identifier: MIT
/*
 * Data integrity under concurrency: 16 threads keep a table of live
 * buffers, each filled with a pattern from its own seed, and randomly
 * malloc, calloc, realloc, posix_memalign and free them (sizes from 16 bytes
 * to 8 MiB, across the pool threshold), checking every buffer's pattern
 * before it changes hands.  Any overlap between two live buffers, or memory
 * handed out twice, breaks a pattern.  Sized by work: OPS operations per
 * thread (about 8 CPU-seconds a configuration), times PST_SCALE for a soak
 * (PST_SCALE=12 is the 3000 it once did); the timeout only catches a hang.
 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib.h"

#define THREADS 16
#define SLOTS 24
#define OPS 250

struct slot {
	unsigned char *p;
	size_t n;
	uint64_t seed;
};

static size_t pick_size(uint64_t *r)
{
	switch (pst_rand(r) % 4) {
	case 0: return 16 + pst_rand(r) % 4096;
	case 1: return (32 << 10) + pst_rand(r) % (96 << 10);   /* around the threshold */
	case 2: return (64 << 10) + pst_rand(r) % (2 << 20);
	default: return (1 << 20) + pst_rand(r) % (7 << 20);
	}
}

static void *worker(void *arg)
{
	uint64_t r = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
	struct slot s[SLOTS];
	long bad = 0;
	const long ops = pst_scaled(OPS);

	memset(s, 0, sizeof(s));
	for (long op = 0; op < ops; op++) {
		struct slot *x = &s[pst_rand(&r) % SLOTS];
		if (x->p && !pst_check(x->p, x->n, x->seed))
			bad++;
		uint64_t seed = pst_rand(&r);
		size_t n = pick_size(&r);
		switch (pst_rand(&r) % 5) {
		case 0:
			free(x->p);
			x->p = malloc(n);
			break;
		case 1:
			free(x->p);
			x->p = calloc(1, n);
			for (size_t i = 0; i < n; i += 512)
				if (x->p[i])
					bad++;
			break;
		case 2: {
			unsigned char *q = realloc(x->p, n);
			size_t keep = x->n < n ? x->n : n;
			if (x->p && !pst_check(q, keep, x->seed))
				bad++;
			x->p = q;
			break;
		}
		case 3: {
			void *q = NULL;
			free(x->p);
			if (posix_memalign(&q, (size_t)1 << (3 + pst_rand(&r) % 10), n) != 0)
				q = NULL;
			x->p = q;
			break;
		}
		default:
			free(x->p);
			x->p = NULL;
			x->n = 0;
			continue;
		}
		if (!x->p)
			return (void *)(intptr_t)-1;
		x->n = n;
		x->seed = seed;
		pst_fill(x->p, n, seed);
	}
	for (int i = 0; i < SLOTS; i++) {
		if (s[i].p && !pst_check(s[i].p, s[i].n, s[i].seed))
			bad++;
		free(s[i].p);
	}
	return (void *)(intptr_t)bad;
}

START_TEST(test_threads_integrity)
{
	pthread_t t[THREADS];

	for (intptr_t i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
	for (int i = 0; i < THREADS; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		ck_assert_msg(ret == NULL, "thread %d: %ld corrupted or failed buffers", i,
			      (long)(intptr_t)ret);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("alloc_threads");
	TCase *tc = tcase_create("threads");

	/* A hang detector: some 40 times the work's wall time on a 2-core
	 * machine at a load average of 20. */
	tcase_set_timeout(tc, 600 * pst_scale());
	tcase_add_test(tc, test_threads_integrity);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
