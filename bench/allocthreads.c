// SPDX-License-Identifier: MIT
/*
 * allocthreads: the two multi-threaded small-allocation benchmarks issue
 * 26 names as its targets, written here after what they do (no code of
 * theirs), so that scripts/bench allocthreads can run them with no shim
 * and under the shim's settings, 1 and 2 threads.
 *
 *   allocthreads [--scale F] [--threads N,...] [--bench NAME,...] [--label L]
 *
 * Benchmarks:
 *   thread  after glibc's benchtests/bench-malloc-thread: each thread owns
 *           a working set of 1024 blocks and, over and over, frees a block
 *           at a random slot and mallocs a new one there.  The sizes come
 *           from a fixed table of 8000 drawn from an inverse-square
 *           distribution over 4 B-32 KiB (half of them 4-8 bytes, one in
 *           a thousand 4 KiB or more), the slots from a fixed table of
 *           4096; both are walked in order, as glibc's benchmark does.
 *   larson  after the Larson-Krishnan server benchmark: each thread owns
 *           an array of 5000 blocks of 8-1000 bytes (uniform) and replaces
 *           random ones, and after 50,000 replacements hands its array to
 *           a new thread and exits, so the new thread frees what the old
 *           one allocated: frees cross threads, and threads come and go
 *           as in a server.
 * Each runs a fixed number of iterations per thread (times --scale) after
 * a short warm-up, and reports iterations per CPU second of the whole
 * process (getrusage: user + system of all threads), so that waiting on
 * a loaded machine does not count.  Prints one line:
 * `allocthreads label=L thread1_ops=... thread2_ops=... larson1_ops=...`.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cputime.h"

static double scale = 1.0;

/* xorshift32: the same sequence on every run, no libc state shared by threads. */
static inline uint32_t rnd(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* ---- thread: bench-malloc-thread's loop ---- */

#define WSET 1024
#define NSIZES 8000
#define NSLOTS (WSET * 4)
static unsigned sizes[NSIZES], slots[NSLOTS];

/*
 * Inverse-square sizes over [lo, hi]: the inverse of the CDF, x = 1 /
 * (1/lo - u (1/lo - 1/hi)) for u uniform in [0, 1).
 */
static void make_tables(void)
{
	const double lo = 4, hi = 32768;
	uint32_t s = 88;
	for (int i = 0; i < NSIZES; i++) {
		double u = rnd(&s) / 4294967296.0;
		sizes[i] = (unsigned)(1.0 / (1.0 / lo - u * (1.0 / lo - 1.0 / hi)));
	}
	for (int i = 0; i < NSLOTS; i++)
		slots[i] = rnd(&s) % WSET;
}

struct job {
	long iters;
	int id;
};

static void *thread_loop(void *arg)
{
	const struct job *j = arg;
	void **set = calloc(WSET, sizeof(void *));
	/* Each thread starts at its own place in the tables. */
	unsigned si = (unsigned)j->id * 977 % NSIZES, oi = (unsigned)j->id * 331 % NSLOTS;

	for (long i = 0; i < j->iters; i++) {
		unsigned k = slots[oi];
		oi = oi + 1 == NSLOTS ? 0 : oi + 1;
		free(set[k]);
		set[k] = malloc(sizes[si]);
		si = si + 1 == NSIZES ? 0 : si + 1;
	}
	for (int k = 0; k < WSET; k++)
		free(set[k]);
	free(set);
	return NULL;
}

/* ---- larson: arrays handed from thread to thread ---- */

#define LBLOCKS 5000
#define LMIN 8
#define LMAX 1000
#define LGEN 50000   /* replacements before the array moves to a new thread */

struct lineage {
	void *blk[LBLOCKS];
	long left;       /* replacements still to make, in all generations */
	uint32_t seed;
};

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done_count;

/* One generation: LGEN replacements, then the array goes to a new thread. */
static void *larson_gen(void *arg)
{
	struct lineage *l = arg;
	long n = l->left < LGEN ? l->left : LGEN;

	for (long i = 0; i < n; i++) {
		unsigned k = rnd(&l->seed) % LBLOCKS;
		free(l->blk[k]);
		size_t sz = LMIN + rnd(&l->seed) % (LMAX - LMIN + 1);
		char *p = malloc(sz);
		p[0] = p[sz - 1] = 1;
		l->blk[k] = p;
	}
	l->left -= n;
	if (l->left > 0) {
		/* The next generation frees what this one allocated. */
		pthread_t t;
		if (pthread_create(&t, NULL, larson_gen, l) != 0)
			abort();
		pthread_detach(t);
		return NULL;
	}
	pthread_mutex_lock(&done_lock);
	done_count++;
	pthread_cond_signal(&done_cond);
	pthread_mutex_unlock(&done_lock);
	return NULL;
}

static long run_larson(int nthreads, long iters)
{
	struct lineage *ls = calloc((size_t)nthreads, sizeof(*ls));

	done_count = 0;
	for (int i = 0; i < nthreads; i++) {
		ls[i].seed = 4141u + (uint32_t)i * 7919u;
		for (int k = 0; k < LBLOCKS; k++)
			ls[i].blk[k] = malloc(LMIN + rnd(&ls[i].seed) % (LMAX - LMIN + 1));
		ls[i].left = iters;
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, larson_gen, &ls[i]) != 0)
			abort();
		pthread_detach(t);
	}
	pthread_mutex_lock(&done_lock);
	while (done_count < nthreads)
		pthread_cond_wait(&done_cond, &done_lock);
	pthread_mutex_unlock(&done_lock);
	for (int i = 0; i < nthreads; i++)
		for (int k = 0; k < LBLOCKS; k++)
			free(ls[i].blk[k]);
	free(ls);
	return iters * nthreads;
}

static long run_thread(int nthreads, long iters)
{
	pthread_t t[8];
	struct job j[8];

	for (int i = 0; i < nthreads; i++) {
		j[i] = (struct job){ iters, i };
		pthread_create(&t[i], NULL, thread_loop, &j[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	return iters * nthreads;
}

static const struct bench {
	const char *name;
	long (*fn)(int, long);
	long iters;     /* per thread at --scale 1: about 0.5-1 s of CPU without the shim */
} benches[] = {
	{ "thread", run_thread, 40000000 },
	{ "larson", run_larson, 12000000 },
};

int main(int argc, char **argv)
{
	const char *label = "run", *only = NULL, *threads = "1,2";

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = atof(argv[++i]);
		else if (!strcmp(argv[i], "--label") && i + 1 < argc)
			label = argv[++i];
		else if (!strcmp(argv[i], "--bench") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = argv[++i];
		else {
			fprintf(stderr, "usage: allocthreads [--scale F] [--threads N,...] "
					"[--bench thread,larson] [--label L]\n");
			return 2;
		}
	}
	make_tables();
	printf("allocthreads label=%s", label);
	for (size_t b = 0; b < sizeof(benches) / sizeof(benches[0]); b++) {
		if (only && !strstr(only, benches[b].name))
			continue;
		for (const char *p = threads; *p;) {
			int n = atoi(p);
			if (n < 1 || n > 8) {
				fprintf(stderr, "allocthreads: 1 to 8 threads\n");
				return 2;
			}
			long iters = (long)(benches[b].iters * scale);
			benches[b].fn(n, iters / 10 + 1);       /* warm-up, not timed */
			double c0 = bench_cpu_seconds(NULL);
			long done = benches[b].fn(n, iters);
			double c = bench_cpu_seconds(NULL) - c0;
			printf(" %s%d_ops=%.0f", benches[b].name, n, c > 0 ? done / c : 0.0);
			p = strchr(p, ',');
			p = p ? p + 1 : "";
		}
	}
	printf("\n");
	fflush(stdout);
	return 0;
}
