// SPDX-License-Identifier: MIT
/*
 * A small program for the shell tests: allocates --count buffers of --size
 * bytes, keeping --live of them alive at once, fills and verifies each, and
 * prints "helper ok allocations=N pooled=K" (K counted through
 * poolshim_is_pooled when the shim is loaded).  Exit 1 on any corruption.
 * --thp-off-after N turns THP off for the process (prctl
 * PR_SET_THP_DISABLE, as Ceph's daemons do) after N allocations.
 * --threads T runs the loop in T threads at once, each with its own
 * --count and --live (the counts printed are the totals).  --gap-us U
 * spins U microseconds after each free (a program's work between buffers).
 * --fill B fills and verifies only the first B bytes of each buffer (a
 * buffer sized for more than it carries).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>

#include "lib.h"

struct loop {
	size_t size, fill;
	long gap_us;
	int count, live, thp_off_after;
	int pooled;
	int failed;
	pthread_t tid;
};

static void spin_us(long us)
{
	struct timespec a, b;

	if (us <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static void *run(void *arg)
{
	struct loop *l = arg;
	void **slots = calloc((size_t)l->live, sizeof(void *));
	if (!slots) {
		l->failed = 1;
		return NULL;
	}
	for (int i = 0; i < l->count; i++) {
		int k = i % l->live;
		if (i == l->thp_off_after && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
			perror("prctl(PR_SET_THP_DISABLE)");
			l->failed = 1;
			break;
		}
		if (slots[k]) {
			if (!pst_check(slots[k], l->fill, (uint64_t)(i - l->live))) {
				l->failed = 1;
				break;
			}
			free(slots[k]);
			spin_us(l->gap_us);
		}
		slots[k] = malloc(l->size);
		if (!slots[k]) {
			perror("malloc");
			l->failed = 1;
			break;
		}
		l->pooled += pst_pooled(slots[k]);
		pst_fill(slots[k], l->fill, (uint64_t)i);
	}
	for (int k = 0; k < l->live; k++)
		free(slots[k]);
	free(slots);
	return NULL;
}

int main(int argc, char **argv)
{
	size_t size = 1 << 20;
	int count = 32, live = 1, thp_off_after = -1, threads = 1;
	long gap_us = 0;
	size_t fill = SIZE_MAX;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--size"))
			size = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--count"))
			count = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--live"))
			live = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--thp-off-after"))
			thp_off_after = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--gap-us"))
			gap_us = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--fill"))
			fill = strtoull(argv[i + 1], NULL, 0);
		else {
			fprintf(stderr, "alloc_helper: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (live < 1 || live > 4096 || count < 0 || threads < 1 || threads > 64 || gap_us < 0 ||
	    gap_us > 1000000) {
		fprintf(stderr, "alloc_helper: bad --live/--count/--threads/--gap-us\n");
		return 2;
	}
	struct loop l[64];
	int pooled = 0, failed = 0;
	for (int t = 0; t < threads; t++) {
		l[t] = (struct loop){ .size = size, .fill = fill < size ? fill : size, .gap_us = gap_us, .count = count, .live = live,
				      .thp_off_after = thp_off_after };
		/* One thread: the loop runs in main, as it always did. */
		if (threads > 1 && pthread_create(&l[t].tid, NULL, run, &l[t]) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	for (int t = 0; t < threads; t++) {
		if (threads > 1)
			pthread_join(l[t].tid, NULL);
		else
			run(&l[t]);
		pooled += l[t].pooled;
		failed |= l[t].failed;
	}
	if (failed)
		return 1;
	printf("helper ok allocations=%d pooled=%d\n", count * threads, pooled);
	return 0;
}
