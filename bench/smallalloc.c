// SPDX-License-Identifier: MIT
/*
 * smallalloc: allocation-heavy programs whose allocations are all small,
 * where the shim has nothing to gain and must cost nothing (issue 26).
 * scripts/bench smallalloc runs it with no shim and the shim, interleaved.
 *
 *   smallalloc [--scale F] [--loop NAME,...] [--label L]
 *
 * Loops:
 *   st       one thread: malloc 16-240 bytes into a window of 512 live
 *            blocks, freeing the one it replaces (glibc's bench-malloc-thread)
 *   cross    two threads swapping new blocks into 4096 shared slots and
 *            freeing what they take out, often the other's (larson-style)
 *   realloc  grow a block 16 bytes at a time to 4 KiB with realloc, free it
 *   churn    start a thread that makes 1000 malloc+free pairs, join it
 * Each loop runs a fixed number of operations (times --scale); the result
 * is operations per CPU second of the process (getrusage), so that a
 * loaded machine's waiting does not count.  Prints one line:
 * `smallalloc label=L st_ops=... cross_ops=... ...`.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cputime.h"

static double scale = 1.0;

static inline uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

static inline size_t small_size(uint32_t *s)
{
	return 16 + (rnd(s) % 15) * 16;
}

static long loop_st(long n)
{
	void *win[512] = { 0 };
	uint32_t s = 1;
	for (long i = 0; i < n; i++) {
		unsigned k = rnd(&s) & 511;
		free(win[k]);
		win[k] = malloc(small_size(&s));
		*(volatile char *)win[k] = 1;
	}
	for (int k = 0; k < 512; k++)
		free(win[k]);
	return n;
}

#define SLOTS 4096
static void *_Atomic slots[SLOTS];
static long cross_n;

/* Swap a new block into a random shared slot and free what was there. */
static void *cross_thread(void *arg)
{
	uint32_t s = 7 + (uint32_t)(intptr_t)arg;
	for (long i = 0; i < cross_n; i++) {
		void *p = malloc(small_size(&s));
		*(volatile char *)p = 1;
		free(atomic_exchange_explicit(&slots[rnd(&s) % SLOTS], p, memory_order_acq_rel));
	}
	return NULL;
}

static long loop_cross(long n)
{
	pthread_t t[2];
	cross_n = n / 2;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, cross_thread, (void *)(intptr_t)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < SLOTS; i++)
		free(atomic_exchange(&slots[i], NULL));
	return cross_n * 2;
}

static long loop_realloc(long n)
{
	long ops = 0;
	while (ops < n) {
		char *p = NULL;
		for (size_t sz = 16; sz <= 4096; sz += 16, ops++) {
			p = realloc(p, sz);
			p[sz - 1] = 1;
		}
		free(p);
	}
	return ops;
}

static void *churn_thread(void *arg)
{
	return (void *)(intptr_t)loop_st((long)(intptr_t)arg);
}

static long loop_churn(long n)
{
	long ops = 0;
	while (ops < n) {
		pthread_t t;
		pthread_create(&t, NULL, churn_thread, (void *)(intptr_t)1000);
		pthread_join(t, NULL);
		ops += 1000;
	}
	return ops;
}

static const struct loop {
	const char *name;
	long (*fn)(long);
	long ops;      /* at --scale 1: about 0.5 s each without the shim */
} loops[] = {
	{ "st", loop_st, 10000000 },
	{ "cross", loop_cross, 6000000 },
	{ "realloc", loop_realloc, 6000000 },
	{ "churn", loop_churn, 6000000 },
};

int main(int argc, char **argv)
{
	const char *label = "run", *only = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = atof(argv[++i]);
		else if (!strcmp(argv[i], "--label") && i + 1 < argc)
			label = argv[++i];
		else if (!strcmp(argv[i], "--loop") && i + 1 < argc)
			only = argv[++i];
		else {
			fprintf(stderr, "usage: smallalloc [--scale F] [--loop NAME,...] [--label L]\n");
			return 2;
		}
	}
	printf("smallalloc label=%s", label);
	for (size_t i = 0; i < sizeof(loops) / sizeof(loops[0]); i++) {
		if (only && !strstr(only, loops[i].name))
			continue;
		long n = (long)(loops[i].ops * scale);
		loops[i].fn(n / 10 + 1);          /* warm-up, not timed */
		double c0 = bench_cpu_seconds(NULL);
		long done = loops[i].fn(n);
		double c = bench_cpu_seconds(NULL) - c0;
		printf(" %s_ops=%.0f", loops[i].name, c > 0 ? done / c : 0.0);
	}
	printf("\n");
	return 0;
}
