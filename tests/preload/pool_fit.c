// SPDX-License-Identifier: MIT
/*
 * pool_fit: shapes where the pool used to hold far more memory than the
 * program's own heap, for pool_aligned.sh, pool_decay_io.sh and
 * pool_small.sh.  Each mode prints one line.
 *
 *   aligned ALIGN N SIZE  N times posix_memalign(&p, ALIGN, SIZE), every
 *                         byte written, freed: "rss peak=K end=K" (KiB:
 *                         VmHWM, then VmRSS)
 *   quiet N MIB MS        N buffers of MIB MiB written whole, then all
 *                         freed; then for MS ms (and 256 rounds at least),
 *                         every 10 ms, a 200-byte malloc and free and a
 *                         4 KiB write to /dev/null,
 *                         nothing else: "rss free=K later=K" (VmRSS after
 *                         the frees and at the end)
 *   small N SIZE          N blocks of SIZE bytes, each written at both
 *                         ends, all kept until the end (so the top of the
 *                         pool is always live), then freed: "small ok"
 *   grow                  a written 1 MiB block realloc()ed to 1.5 GiB
 *                         (more than a slab may be), its ends checked:
 *                         "grow ok"
 *   signals MS            for MS ms: 16 pooled blocks of 1 MiB written
 *                         and freed (free memory for the decay to give
 *                         back), then 5 ms of 1 MiB malloc, 64 KiB
 *                         written, free, again; all the while SIGALRM
 *                         every 100 us runs a handler that write()s a
 *                         byte to /dev/null: a door whose look at the
 *                         clock may purge, landing now and then inside
 *                         the pool's own calls: "signals ok N" (N
 *                         handler runs)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc_status.h"

#define MiB (1024UL * 1024)

/* memset that stays: right before free() a plain one is a dead store the compiler may drop. */
static void fill(void *p, int c, size_t n)
{
	memset(p, c, n);
	__asm__ volatile("" : : "r"(p) : "memory");
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int aligned(size_t align, long n, size_t size)
{
	for (long i = 0; i < n; i++) {
		void *p = NULL;
		int r = posix_memalign(&p, align, size);
		if (r != 0) {
			fprintf(stderr, "posix_memalign(%zu, %zu): %s\n", align, size, strerror(r));
			return 1;
		}
		fill(p, (int)i, size);
		free(p);
	}
	printf("rss peak=%ld end=%ld\n", status_kib("VmHWM"), status_kib("VmRSS"));
	return 0;
}

static int quiet(long n, size_t mib, long ms)
{
	char **b = calloc((size_t)n, sizeof(*b));
	static char page[4096];
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (!b || fd < 0)
		return 1;
	for (long i = 0; i < n; i++) {
		b[i] = malloc(mib * MiB);
		if (!b[i])
			return 1;
		fill(b[i], 1, mib * MiB);
	}
	for (long i = 0; i < n; i++)
		free(b[i]);
	long after_free = status_kib("VmRSS");
	double end = now_ms() + (double)ms;
	/*
	 * At least 256 writes too: the doors look at the clock every 64
	 * calls, and on a loaded machine 10 ms sleeps run long (2 s once held
	 * fewer than 64 writes: the test measured the machine, not the pool).
	 */
	for (long writes = 0; now_ms() < end || writes < 256; writes++) {
		char *s = malloc(200);
		if (!s)
			return 1;
		s[0] = 1;
		free(s);
		if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page))
			return 1;
		sleep_ms(10);
	}
	printf("rss free=%ld later=%ld\n", after_free, status_kib("VmRSS"));
	close(fd);
	free(b);
	return 0;
}

static int small(long n, size_t size)
{
	char **b = calloc((size_t)n, sizeof(*b));

	if (!b)
		return 1;
	for (long i = 0; i < n; i++) {
		b[i] = malloc(size);
		if (!b[i])
			return 1;
		b[i][0] = b[i][size - 1] = (char)i;
	}
	for (long i = 0; i < n; i++) {
		if (b[i][0] != (char)i || b[i][size - 1] != (char)i) {
			fprintf(stderr, "block %ld changed\n", i);
			return 1;
		}
		free(b[i]);
	}
	free(b);
	printf("small ok\n");
	return 0;
}

static int grow(void)
{
	size_t big = (size_t)3 << 29;
	char *p = malloc(MiB);

	if (!p)
		return 1;
	fill(p, 7, MiB);
	char *q = realloc(p, big);
	if (!q)
		return 1;
	q[big - 1] = 8;
	if (q[0] != 7 || q[MiB - 1] != 7 || q[big - 1] != 8)
		return 1;
	free(q);
	printf("grow ok\n");
	return 0;
}

static int null_fd = -1;
static volatile sig_atomic_t handled;

static void on_alarm(int sig)
{
	int saved = errno;
	(void)sig;
	if (write(null_fd, "x", 1) == 1)
		handled++;
	errno = saved;
}

static int signals(long ms)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 100 }, { 0, 100 } };
	char *b[16];

	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd < 0 || sigaction(SIGALRM, &sa, NULL) != 0 || setitimer(ITIMER_REAL, &it, NULL) != 0)
		return 1;
	double end = now_ms() + (double)ms;
	while (now_ms() < end) {
		for (int i = 0; i < 16; i++) {
			b[i] = malloc(MiB + (size_t)i * 4096);
			if (!b[i])
				return 1;
			fill(b[i], i, MiB);
		}
		for (int i = 0; i < 16; i++)
			free(b[i]);
		for (double t = now_ms() + 5; now_ms() < t;) {
			char *p = malloc(MiB);
			if (!p)
				return 1;
			fill(p, 1, 64 << 10);
			free(p);
		}
	}
	it = (struct itimerval){ { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &it, NULL);
	printf("signals ok %ld\n", (long)handled);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "signals") == 0)
		return signals(atol(argv[2]));
	if (argc == 2 && strcmp(argv[1], "grow") == 0)
		return grow();
	if (argc == 5 && strcmp(argv[1], "aligned") == 0)
		return aligned(strtoul(argv[2], NULL, 0), atol(argv[3]), strtoul(argv[4], NULL, 0));
	if (argc == 5 && strcmp(argv[1], "quiet") == 0)
		return quiet(atol(argv[2]), strtoul(argv[3], NULL, 0), atol(argv[4]));
	if (argc == 4 && strcmp(argv[1], "small") == 0)
		return small(atol(argv[2]), strtoul(argv[3], NULL, 0));
	fprintf(stderr, "usage: pool_fit aligned ALIGN N SIZE | quiet N MIB MS | small N SIZE | grow | "
			"signals MS\n");
	return 2;
}
