// SPDX-License-Identifier: MIT
/*
 * shapes: two allocation patterns of issue 44 whose resident memory at the
 * end is the measure (scripts/bench footprint shapes).
 *
 *   shapes aligned ALIGN SIZE COUNT
 *       COUNT times posix_memalign(&p, ALIGN, SIZE), write every byte, free:
 *       one block at a time, so an allocator that reuses what was freed ends
 *       near one block.  ALIGN and SIZE take K and M suffixes.
 *   shapes idle N MIB SECONDS [INTERVAL_MS]
 *       N blocks of MIB MiB malloc'd and written, then all freed (a burst);
 *       then, for SECONDS, every INTERVAL_MS (10) a 200-byte malloc and free
 *       and a 4 KiB write to /dev/null: a program that goes on with small
 *       allocations and I/O only, which no allocator's large path sees.
 *
 * Prints one line of KiB from /proc/self/status:
 *   aligned align=A size=S count=C rss_kib=R hwm_kib=H
 *   idle burst_kib=B freed_kib=F end_kib=E hwm_kib=H calls=N
 * (burst: RSS with the N blocks live; freed: just after the frees; end:
 * after the idle loop.)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A field of /proc/self/status in KiB, or -1. */
static long status_kib(const char *field)
{
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			v = atol(line + n + 1);
			break;
		}
	fclose(f);
	return v;
}

static size_t parse_size(const char *s)
{
	char *end;
	size_t v = strtoull(s, &end, 0);
	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	else if (*end == 'G' || *end == 'g')
		v <<= 30;
	return v;
}

static int aligned(size_t align, size_t size, long count)
{
	for (long i = 0; i < count; i++) {
		void *p;
		int rc = posix_memalign(&p, align, size);
		if (rc) {
			fprintf(stderr, "shapes: posix_memalign(%zu, %zu): %s\n", align, size,
				strerror(rc));
			return 1;
		}
		memset(p, (int)(i & 0xff) | 1, size);
		free(p);
	}
	printf("aligned align=%zu size=%zu count=%ld rss_kib=%ld hwm_kib=%ld\n", align, size,
	       count, status_kib("VmRSS"), status_kib("VmHWM"));
	return 0;
}

static int idle(int n, size_t mib, double seconds, long interval_ms)
{
	char **big = calloc((size_t)n, sizeof(*big));
	static char page[4096];
	int fd = open("/dev/null", O_WRONLY);
	long calls = 0;

	if (!big || fd < 0)
		return 1;
	for (int i = 0; i < n; i++) {
		big[i] = malloc(mib << 20);
		if (!big[i]) {
			fprintf(stderr, "shapes: malloc(%zu MiB) failed\n", mib);
			return 1;
		}
		memset(big[i], i + 1, mib << 20);
	}
	long burst = status_kib("VmRSS");
	for (int i = 0; i < n; i++)
		free(big[i]);
	long freed = status_kib("VmRSS");
	struct timespec t0, t, nap = { interval_ms / 1000, (interval_ms % 1000) * 1000000 };
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		char *small = malloc(200);
		if (!small)
			return 1;
		memset(small, 'x', 200);
		memcpy(page, small, 200);
		if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page))
			return 1;
		free(small);
		calls++;
		nanosleep(&nap, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
	printf("idle burst_kib=%ld freed_kib=%ld end_kib=%ld hwm_kib=%ld calls=%ld\n", burst, freed,
	       status_kib("VmRSS"), status_kib("VmHWM"), calls);
	close(fd);
	free(big);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "aligned"))
		return aligned(parse_size(argv[2]), parse_size(argv[3]), atol(argv[4]));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "idle"))
		return idle(atoi(argv[2]), (size_t)atol(argv[3]), atof(argv[4]),
			    argc == 6 ? atol(argv[5]) : 10);
	fprintf(stderr, "usage: shapes aligned ALIGN SIZE COUNT\n"
			"       shapes idle N MIB SECONDS [INTERVAL_MS]\n");
	return 2;
}
