// SPDX-License-Identifier: MIT
/*
 * threadchurn: large blocks churned by several threads at once, the shape
 * of issue 44's "threads" table (scripts/bench threads).  Each of T threads
 * keeps 8 live blocks of 64 KiB-4 MiB (log-uniform sizes from a fixed
 * seed) and, per step, frees one at random and mallocs a new one in its
 * place, touching one byte of the new block (--touch byte) or one byte in
 * every 4 KiB page of it (--touch pages): a server whose threads allocate
 * request buffers and fill them, or fill a little of them.
 *
 *   threadchurn [--threads T] [--touch byte|pages] [--steps N | --seconds S]
 *               [--warmup N] [--seed N] [--label L]
 *
 * The timed part starts when every thread has its 8 blocks and has made
 * --warmup steps (256: the allocator's first slabs and caches are not its
 * steady state) and ends when the last thread has freed its blocks:
 * --steps per thread (default 20000), or as many steps as fit in
 * --seconds of wall time.  Prints one line:
 *   threadchurn label=L threads=T touch=pages steps=N wall_s=W cpu_s=C
 *     steps_per_s=N/W steps_per_cpu_s=N/C maxrss_kib=K minflt=F
 * where CPU is user + system of the whole process (getrusage), so that
 * waiting for a CPU on a loaded machine does not count, and maxrss is the
 * process's peak resident set (VmHWM: ru_maxrss would count the image the
 * process was forked from, a Python harness's); minflt counts the timed
 * part's minor page faults.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cputime.h"

#define LIVE 8
#define MIN_SIZE (64u << 10)
#define SIZE_SPAN_LOG2 6        /* 64 KiB * 2^6 = 4 MiB */
#define NSIZES 65536
#define PAGE 4096

static size_t sizes[NSIZES];
static int touch_pages;
static long steps_per_thread = 20000;
static long warmup_steps = 256;
static double seconds;
static atomic_int stop;
static pthread_barrier_t start;

struct worker {
	pthread_t tid;
	uint32_t seed;
	long steps;
};

/* xorshift32: a fixed sequence per thread, no libc state shared by threads. */
static inline uint32_t rnd(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* Log-uniform sizes over [64 KiB, 4 MiB), drawn once from the seed. */
static void make_sizes(uint32_t seed)
{
	uint32_t s = seed ? seed : 1;
	for (int i = 0; i < NSIZES; i++) {
		double u = rnd(&s) / 4294967296.0;
		sizes[i] = (size_t)(MIN_SIZE * exp2(u * SIZE_SPAN_LOG2));
	}
}

static void *new_block(uint32_t *s)
{
	size_t n = sizes[rnd(s) % NSIZES];
	unsigned char *p = malloc(n);

	if (!p) {
		fprintf(stderr, "threadchurn: malloc(%zu) failed\n", n);
		exit(1);
	}
	if (touch_pages)
		for (size_t off = 0; off < n; off += PAGE)
			p[off] = (unsigned char)off;
	else
		p[0] = 1;
	return p;
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	void *live[LIVE];
	long i;

	for (int k = 0; k < LIVE; k++)
		live[k] = new_block(&w->seed);
	/* Untimed: the allocator's first slabs, arenas and caches. */
	for (long j = 0; j < warmup_steps; j++) {
		unsigned k = rnd(&w->seed) % LIVE;
		free(live[k]);
		live[k] = new_block(&w->seed);
	}
	pthread_barrier_wait(&start);
	for (i = 0; seconds > 0 ? !atomic_load_explicit(&stop, memory_order_relaxed)
				: i < steps_per_thread; i++) {
		unsigned k = rnd(&w->seed) % LIVE;
		free(live[k]);
		live[k] = new_block(&w->seed);
	}
	for (int k = 0; k < LIVE; k++)
		free(live[k]);
	w->steps = i;
	return NULL;
}

/* The peak resident set of this image (VmHWM), KiB; -1 if unreadable. */
static long peak_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			v = atol(line + 6);
	fclose(f);
	return v;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(void)
{
	fprintf(stderr, "usage: threadchurn [--threads T] [--touch byte|pages] "
			"[--steps N | --seconds S] [--warmup N] [--seed N] [--label L]\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *label = "run";
	int nthreads = 1;
	uint32_t seed = 44;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "--threads"))
			nthreads = atoi(v);
		else if (!strcmp(a, "--touch") && (!strcmp(v, "byte") || !strcmp(v, "pages")))
			touch_pages = !strcmp(v, "pages");
		else if (!strcmp(a, "--steps"))
			steps_per_thread = atol(v);
		else if (!strcmp(a, "--warmup"))
			warmup_steps = atol(v);
		else if (!strcmp(a, "--seconds"))
			seconds = atof(v);
		else if (!strcmp(a, "--seed"))
			seed = (uint32_t)strtoul(v, NULL, 0);
		else if (!strcmp(a, "--label"))
			label = v;
		else
			return usage();
	}
	if (nthreads < 1 || nthreads > 1024 || steps_per_thread < 1 || seconds < 0 ||
	    warmup_steps < 0)
		return usage();
	make_sizes(seed);

	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	if (!w || pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1))
		return 1;
	for (int t = 0; t < nthreads; t++) {
		w[t].seed = seed * 2654435761u + (uint32_t)t * 7919u + 1;
		if (pthread_create(&w[t].tid, NULL, worker, &w[t])) {
			fprintf(stderr, "threadchurn: pthread_create failed\n");
			return 1;
		}
	}
	pthread_barrier_wait(&start);
	long f0, minflt;
	double t0 = now(), c0 = bench_cpu_seconds(&f0);
	if (seconds > 0) {
		struct timespec ts = { (time_t)seconds,
				       (long)((seconds - (double)(time_t)seconds) * 1e9) };
		nanosleep(&ts, NULL);
		atomic_store(&stop, 1);
	}
	long total = 0;
	for (int t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		total += w[t].steps;
	}
	double wall = now() - t0, cpu = bench_cpu_seconds(&minflt) - c0;
	printf("threadchurn label=%s threads=%d touch=%s steps=%ld wall_s=%.3f cpu_s=%.3f "
	       "steps_per_s=%.0f steps_per_cpu_s=%.0f maxrss_kib=%ld minflt=%ld\n",
	       label, nthreads, touch_pages ? "pages" : "byte", total, wall, cpu,
	       wall > 0 ? total / wall : 0.0, cpu > 0 ? total / cpu : 0.0, peak_kib(), minflt - f0);
	fflush(stdout);
	pthread_barrier_destroy(&start);
	free(w);
	return 0;
}
