// SPDX-License-Identifier: MIT
/*
 * footprint: what a program's large buffers cost in memory, for
 * footprint.sh and footprint_cgroup.sh.  Each mode prints one line.
 *
 *   big N MIB      N buffers of MIB MiB, written whole, then all freed, then
 *                  malloc_trim(0): "rss peak=K free=K trim=K" (KiB: VmHWM,
 *                  then VmRSS after the frees and after the trim)
 *   steady MIB N   malloc, write, free one MIB MiB buffer N times after a
 *                  warm-up: "faults F" (minor faults in the N rounds)
 *   decay MIB MS   free one written MIB MiB buffer, then three times: sleep
 *                  MS ms, malloc/free 1 MiB: "rss free=K later=K"
 *   burst N MIB MS N buffers of MIB MiB written, then all freed; then a
 *                  steady loop (malloc, write, free 1 MiB every ms) for
 *                  MS * 5/4 ms and one round more, then 200 more: "rss free=K
 *                  window=K faults=F" (VmRSS after the frees and after
 *                  MS * 5/4 ms, minor faults in the last 200 rounds)
 *   swing ROUNDS   a live set of 110 MiB swinging, ROUNDS times, from
 *                  buffers of 1-3 MiB to buffers of 5-9 MiB and back, one
 *                  buffer replaced at a time, each written whole: "rss
 *                  peak=K" (VmHWM).  In a 160 MiB memory cgroup glibc
 *                  peaks at 130 MiB (footprint_swing.sh)
 *   churn N ROUNDS N live buffers of 1-24 MiB (uniform), each written
 *                  whole, one replaced at a random slot ROUNDS times: "rss
 *                  peak=K" (VmHWM), for scripts/bench footprint
 *   large N ROUNDS the shape of mimalloc-bench's malloc-large: N slots
 *                  (20 there), ROUNDS times (2000) a random slot gets a
 *                  new buffer of 5-25 MiB (uniform), written whole,
 *                  before its old one is freed (a smart pointer's
 *                  assignment): "rss peak=K" (VmHWM)
 *   pressure       24 buffers of 4 MiB written, every third freed (32 MiB
 *                  the pool keeps: less than what is in use), then 4 of
 *                  16 MiB written: "rss peak=K" (VmHWM).  For a 160 MiB
 *                  memory cgroup: 128 MiB live at most
 *   aslimit        malloc 1 MiB, then 2.5 GiB: "aslimit ok" or "aslimit
 *                  ENOMEM" (exit 1)
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "proc_status.h"

#define MiB (1024UL * 1024)

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *must(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "footprint: malloc(%zu) failed\n", n);
		exit(2);
	}
	memset(p, 1, n);
	return p;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (strcmp(mode, "big") == 0 && argc == 4) {
		int n = atoi(argv[2]);
		size_t size = strtoul(argv[3], NULL, 10) * MiB;
		void **bufs = calloc((size_t)n, sizeof(*bufs));
		for (int i = 0; i < n; i++)
			bufs[i] = must(size);
		for (int i = 0; i < n; i++)
			free(bufs[i]);
		long after_free = status_kib("VmRSS");
		malloc_trim(0);
		printf("rss peak=%ld free=%ld trim=%ld\n", status_kib("VmHWM"), after_free,
		       status_kib("VmRSS"));
		free(bufs);
		return 0;
	}
	if (strcmp(mode, "steady") == 0 && argc == 4) {
		size_t size = strtoul(argv[2], NULL, 10) * MiB;
		long rounds = atol(argv[3]);
		for (int i = 0; i < 3; i++)
			free(must(size));
		long before = minflt();
		for (long i = 0; i < rounds; i++)
			free(must(size));
		printf("faults %ld\n", minflt() - before);
		return 0;
	}
	if (strcmp(mode, "decay") == 0 && argc == 4) {
		size_t size = strtoul(argv[2], NULL, 10) * MiB;
		long ms = atol(argv[3]);
		free(must(size));
		long after_free = status_kib("VmRSS");
		for (int i = 0; i < 3; i++) {
			sleep_ms(ms);
			free(must(MiB));
		}
		printf("rss free=%ld later=%ld\n", after_free, status_kib("VmRSS"));
		return 0;
	}
	if (strcmp(mode, "burst") == 0 && argc == 5) {
		int n = atoi(argv[2]);
		size_t size = strtoul(argv[3], NULL, 10) * MiB;
		long ms = atol(argv[4]);
		void **bufs = calloc((size_t)n, sizeof(*bufs));
		for (int i = 0; i < n; i++)
			bufs[i] = must(size);
		for (int i = 0; i < n; i++)
			free(bufs[i]);
		long after_free = status_kib("VmRSS");
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			free(must(MiB));
			sleep_ms(1);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms * 5 / 4);
		/* The window plus one large call, whatever the scheduler did to the loop. */
		free(must(MiB));
		long window = status_kib("VmRSS");
		long before = minflt();
		for (int i = 0; i < 200; i++) {
			free(must(MiB));
			sleep_ms(1);
		}
		printf("rss free=%ld window=%ld faults=%ld\n", after_free, window, minflt() - before);
		free(bufs);
		return 0;
	}
	if (strcmp(mode, "swing") == 0 && argc == 3) {
		int rounds = atoi(argv[2]);
		enum { MAXB = 256 };
		static void *buf[MAXB];
		static size_t len[MAXB];
		size_t total = 0, target = 110 * MiB;
		unsigned seed = 12345;
		int head = 0, n = 0;   /* a ring: the oldest buffer goes first */
		for (int r = 0; r < 2 * rounds; r++) {
			size_t lo = r % 2 ? 5 : 1, span = r % 2 ? 5 : 3;
			/* Replace every buffer of the last phase by one of this phase's. */
			for (int k = n; k > 0; k--) {
				seed = seed * 1103515245u + 12345u;
				size_t want = (lo * MiB) + (seed >> 8) % (span * MiB);
				while (n > 0 && total + want > target) {
					free(buf[head]);
					total -= len[head];
					head = (head + 1) % MAXB;
					n--;
				}
				int at = (head + n) % MAXB;
				buf[at] = must(want);
				len[at] = want;
				total += want;
				n++;
			}
			if (r == 0)   /* the first phase fills the set */
				while (n < MAXB) {
					seed = seed * 1103515245u + 12345u;
					size_t want = (lo * MiB) + (seed >> 8) % (span * MiB);
					if (total + want > target)
						break;
					buf[(head + n) % MAXB] = must(want);
					len[(head + n) % MAXB] = want;
					total += want;
					n++;
				}
		}
		printf("rss peak=%ld\n", status_kib("VmHWM"));
		return 0;
	}
	if (strcmp(mode, "large") == 0 && argc == 4) {
		int n = atoi(argv[2]);
		long rounds = atol(argv[3]);
		unsigned seed = 42;
		void **bufs = calloc((size_t)n, sizeof(*bufs));
		for (long r = 0; r < rounds; r++) {
			seed = seed * 1103515245u + 12345u;
			int at = (int)((seed >> 8) % (unsigned)n);
			seed = seed * 1103515245u + 12345u;
			void *fresh = must(5 * MiB + (seed >> 4) % (20 * MiB + 1));
			free(bufs[at]);
			bufs[at] = fresh;
		}
		printf("rss peak=%ld\n", status_kib("VmHWM"));
		for (int i = 0; i < n; i++)
			free(bufs[i]);
		free(bufs);
		return 0;
	}
	if (strcmp(mode, "churn") == 0 && argc == 4) {
		int n = atoi(argv[2]);
		long rounds = atol(argv[3]);
		unsigned seed = 4242;
		void **bufs = calloc((size_t)n, sizeof(*bufs));
		for (long r = -n; r < rounds; r++) {
			seed = seed * 1103515245u + 12345u;
			int at = r < 0 ? (int)(r + n) : (int)((seed >> 8) % (unsigned)n);
			seed = seed * 1103515245u + 12345u;
			size_t want = MiB + (seed >> 4) % (23 * MiB);
			free(bufs[at]);
			bufs[at] = must(want);
		}
		printf("rss peak=%ld\n", status_kib("VmHWM"));
		for (int i = 0; i < n; i++)
			free(bufs[i]);
		free(bufs);
		return 0;
	}
	if (strcmp(mode, "pressure") == 0) {
		void *small[24], *big[4];
		for (int i = 0; i < 24; i++)
			small[i] = must(4 * MiB);
		for (int i = 0; i < 24; i += 3)
			free(small[i]);
		for (int i = 0; i < 4; i++)
			big[i] = must(16 * MiB);
		printf("rss peak=%ld\n", status_kib("VmHWM"));
		for (int i = 0; i < 4; i++)
			free(big[i]);
		for (int i = 0; i < 24; i++)
			if (i % 3)
				free(small[i]);
		return 0;
	}
	if (strcmp(mode, "aslimit") == 0) {
		void *small = must(MiB);
		errno = 0;
		void *big = malloc(5 * (MiB << 9));   /* 2.5 GiB */
		if (!big) {
			printf("aslimit %s\n", errno == ENOMEM ? "ENOMEM" : "failed");
			return 1;
		}
		printf("aslimit ok\n");
		free(big);
		free(small);
		return 0;
	}
	fprintf(stderr, "usage: footprint big N MIB | steady MIB N | decay MIB MS | burst N MIB MS | swing ROUNDS | churn N ROUNDS | large N ROUNDS | pressure | aslimit\n");
	return 2;
}
