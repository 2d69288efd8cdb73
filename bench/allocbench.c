// SPDX-License-Identifier: MIT
/*
 * allocbench: the naive large-buffer loop a proxy runs per request.
 * Each operation mallocs a buffer whose size is log-uniform in
 * [--min, --max], fills it, scans it and frees it.  --prealloc runs the same
 * loop over one buffer allocated up front: the upper bound for any
 * allocator.  Prints one line: GB/s of buffer bytes processed and minor page
 * faults per operation (getrusage), for --threads threads over --seconds.
 * The size sequence is the same for every run with the same --seed, so
 * allocators can be compared side by side.
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

static size_t opt_min = 64 << 10, opt_max = 16 << 20;
static int opt_threads = 1;
static double opt_seconds = 2.0;
static int opt_prealloc;
static uint64_t opt_seed = 42;
static const char *opt_label = "run";

static atomic_int stop;

struct worker {
	pthread_t tid;
	uint64_t seed;
	uint64_t ops, bytes, sink;
	uint64_t hot;           /* bytes that overlap the thread's previous buffer */
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t next_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 11;
}

/* Log-uniform in [min, max], rounded to 4 KiB like real request sizes are not: keep bytes. */
static size_t next_size(uint64_t *s)
{
	double u = (double)next_rand(s) / (double)(1ULL << 53);
	double lo = log((double)opt_min), hi = log((double)opt_max);
	size_t n = (size_t)exp(lo + u * (hi - lo));
	return n < opt_min ? opt_min : n > opt_max ? opt_max : n;
}

static uint64_t scan(const uint64_t *p, size_t n)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < n / 8; i++)
		sum += p[i];
	return sum;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	unsigned char *pre = NULL;
	uintptr_t last_lo = 0, last_hi = 0;   /* the previous buffer, just written and freed */

	if (opt_prealloc) {
		pre = malloc(opt_max);
		if (!pre)
			abort();
		memset(pre, 1, opt_max);
	}
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		size_t n = next_size(&w->seed);
		unsigned char *p = pre ? pre : malloc(n);
		if (!p) {
			perror("malloc");
			exit(1);
		}
		uintptr_t lo = (uintptr_t)p, hi = lo + n;
		uintptr_t a = lo > last_lo ? lo : last_lo, b = hi < last_hi ? hi : last_hi;
		if (a < b)
			w->hot += b - a;
		last_lo = lo;
		last_hi = hi;
		memset(p, (int)(w->ops & 0xff), n);
		w->sink += scan((const uint64_t *)p, n);
		if (!pre)
			free(p);
		w->ops++;
		w->bytes += n;
	}
	free(pre);
	return NULL;
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	case '\0': break;
	default:
		fprintf(stderr, "allocbench: bad size '%s'\n", s);
		exit(2);
	}
	return (size_t)v;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: allocbench [--threads N] [--seconds S] [--min SIZE] [--max SIZE]\n"
		   "                  [--prealloc] [--seed N] [--label TEXT]\n");
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--prealloc")) {
			opt_prealloc = 1;
			continue;
		}
		if (!strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		}
		if (!v) {
			usage(stderr);
			return 2;
		}
		if (!strcmp(a, "--threads")) opt_threads = atoi(v);
		else if (!strcmp(a, "--seconds")) opt_seconds = atof(v);
		else if (!strcmp(a, "--min")) opt_min = parse_size(v);
		else if (!strcmp(a, "--max")) opt_max = parse_size(v);
		else if (!strcmp(a, "--seed")) opt_seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--label")) opt_label = v;
		else {
			usage(stderr);
			return 2;
		}
		i++;
	}
	if (opt_threads < 1 || opt_threads > 256 || opt_min < 8 || opt_min > opt_max ||
	    opt_seconds <= 0) {
		fprintf(stderr, "allocbench: bad arguments\n");
		return 2;
	}

	struct worker *w = calloc((size_t)opt_threads, sizeof(*w));
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	double t0 = now();
	for (int i = 0; i < opt_threads; i++) {
		w[i].seed = opt_seed + (uint64_t)i * 7919;
		pthread_create(&w[i].tid, NULL, run, &w[i]);
	}
	struct timespec ts = { (time_t)opt_seconds,
			       (long)((opt_seconds - (double)(time_t)opt_seconds) * 1e9) };
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	uint64_t ops = 0, bytes = 0, sink = 0, hot = 0;
	for (int i = 0; i < opt_threads; i++) {
		pthread_join(w[i].tid, NULL);
		ops += w[i].ops;
		bytes += w[i].bytes;
		sink += w[i].sink;
		hot += w[i].hot;
	}
	double dt = now() - t0;
	getrusage(RUSAGE_SELF, &r1);
	long faults = r1.ru_minflt - r0.ru_minflt;
	printf("%-12s threads=%d ops=%llu GB/s=%.2f faults/op=%.1f hot=%.0f%% sink=%llu\n",
	       opt_label, opt_threads, (unsigned long long)ops, (double)bytes / dt / 1e9,
	       ops ? (double)faults / (double)ops : 0.0,
	       bytes ? 100.0 * (double)hot / (double)bytes : 0.0, (unsigned long long)(sink & 0xff));
	free(w);
	return 0;
}
