// SPDX-License-Identifier: MIT
/*
 * The address space the program sees: what the pool holds of it must be
 * what it backs, so that an address-space limit (RLIMIT_AS) set before or
 * after start works as without the shim.  Modes, each printing one line
 * the script compares with the same program run without the shim:
 *
 *   late     one 1 MiB buffer, then RLIMIT_AS = 2 GiB (a sandboxing
 *            helper's setrlimit), then 20,000 small mallocs, an 8 MiB
 *            mmap, a thread, a 64 MiB malloc: "late ok" or what failed
 *   vmpeak   one 16 MiB buffer written: "vmpeak KIB"
 *   count    16 MiB buffers written until malloc fails (under a limit set
 *            before start): "count N"
 *   trim     malloc_trim(0) before anything else: "trim R"
 *   first    one 64 KiB buffer written: "rss KIB" (VmRSS after it)
 *   exhaust  (under a limit set before start) 16 MiB buffers, each
 *            touched at both ends, until malloc fails; then a calloc and
 *            a realloc to 32 MiB must fail too, leaving the old block
 *            as it was; every other buffer freed and taken again:
 *            "exhaust N ERRNO again M" (M of the N/2 taken again), or
 *            what went wrong
 *   threads  (under a limit set before start) 8 threads, each 20 rounds of
 *            1-8 MiB buffers, touched at both ends, until malloc fails,
 *            then every other one freed; a thread that cannot be created
 *            (EAGAIN: its stack does not fit) is skipped: "threads ok" or
 *            what went wrong
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#define MiB (1024UL * 1024)

static long status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t n = strlen(key);
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

static void *thread_main(void *arg)
{
	return arg;
}

static int late(void)
{
	char *one = malloc(MiB);
	if (!one)
		return printf("late: 1 MiB malloc failed\n"), 1;
	memset(one, 1, MiB);
	struct rlimit rl = { 2UL << 30, 2UL << 30 };
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		return printf("late: setrlimit: %s\n", strerror(errno)), 1;

	static void *small[20000];
	int n = 0;
	for (; n < 20000; n++)
		if (!(small[n] = malloc(1000)))
			break;
	if (n < 20000)
		return printf("late: small mallocs stopped after %d: %s\n", n, strerror(errno)), 1;
	void *m = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return printf("late: 8 MiB mmap: %s\n", strerror(errno)), 1;
	pthread_t t;
	int r = pthread_create(&t, NULL, thread_main, NULL);
	if (r != 0)
		return printf("late: pthread_create: %s\n", strerror(r)), 1;
	pthread_join(t, NULL);
	char *big = malloc(64 * MiB);
	if (!big)
		return printf("late: 64 MiB malloc: %s\n", strerror(errno)), 1;
	memset(big, 2, 64 * MiB);
	free(big);
	munmap(m, 8 * MiB);
	for (int i = 0; i < n; i++)
		free(small[i]);
	free(one);
	printf("late ok\n");
	return 0;
}

/*
 * The address space runs out in the middle of a run, wherever the limit
 * puts it (the pool's growth, jemalloc's metadata, the shim's tables):
 * every call fails as glibc's would and the program goes on.
 */
static int exhaust(void)
{
	static char *buf[4096];
	const size_t sz = 16 * MiB;
	int n = 0;

	errno = 0;
	while (n < 4096 && (buf[n] = malloc(sz))) {
		buf[n][0] = (char)n;
		buf[n][sz - 1] = (char)n;
		n++;
	}
	int e = errno;
	if (n < 2)
		return printf("exhaust %d %s again 0\n", n, e == ENOMEM ? "ENOMEM" : strerror(e)), 0;
	errno = 0;
	void *z = calloc(1, sz);
	if (z)
		return printf("exhaust: a calloc succeeded after malloc failed\n"), 1;
	if (errno != ENOMEM)
		return printf("exhaust: calloc failed with %s\n", strerror(errno)), 1;
	errno = 0;
	char *r = realloc(buf[1], 2 * sz);
	if (r) {
		/* glibc may grow an mmapped block in place (mremap): fine, if intact. */
		if (r[0] != 1 || r[sz - 1] != 1)
			return printf("exhaust: realloc moved the block without its data\n"), 1;
		buf[1] = r;
	} else if (errno != ENOMEM) {
		return printf("exhaust: realloc failed with %s\n", strerror(errno)), 1;
	} else if (buf[1][0] != 1 || buf[1][sz - 1] != 1) {
		return printf("exhaust: a failed realloc changed the block\n"), 1;
	}
	for (int i = 0; i < n; i += 2)
		free(buf[i]);
	int again = 0;
	for (int i = 0; i < n; i += 2)
		if ((buf[i] = malloc(sz))) {
			memset(buf[i], 3, 4096);
			again++;
		}
	for (int i = 1; i < n; i += 2)
		if (buf[i][0] != (char)i || buf[i][sz - 1] != (char)i)
			return printf("exhaust: buffer %d changed\n", i), 1;
	for (int i = 0; i < n; i++)
		free(buf[i]);
	printf("exhaust %d %s again %d\n", n, e == ENOMEM ? "ENOMEM" : strerror(e), again);
	return 0;
}

static int thread_bad;               /* a failed malloc's errno other than ENOMEM */

static void *churn_main(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char *buf[256];
	int n = 0;

	for (int round = 0; round < 20; round++) {
		while (n < 256) {
			size_t sz = (size_t)(1 + rand_r(&seed) % 8) * MiB;
			errno = 0;
			char *p = malloc(sz);
			if (!p) {
				if (errno != ENOMEM)
					__atomic_store_n(&thread_bad, errno ? errno : -1, __ATOMIC_RELAXED);
				break;
			}
			p[0] = 1;
			p[sz - 1] = 1;
			buf[n++] = p;
		}
		int kept = 0;
		for (int i = 0; i < n; i++)
			if (i % 2)
				buf[kept++] = buf[i];
			else
				free(buf[i]);
		n = kept;
	}
	for (int i = 0; i < n; i++)
		free(buf[i]);
	return NULL;
}

/*
 * Threads whose first pooled call, or any later one, finds the address
 * space gone: each call fails as glibc's would, nothing crashes.
 */
static int threads(void)
{
	pthread_t t[8];
	bool made[8];

	for (int i = 0; i < 8; i++) {
		int r = pthread_create(&t[i], NULL, churn_main, (void *)(uintptr_t)(i + 1));
		made[i] = r == 0;
		if (r != 0 && r != EAGAIN)
			return printf("threads: pthread_create: %s\n", strerror(r)), 1;
	}
	for (int i = 0; i < 8; i++)
		if (made[i])
			pthread_join(t[i], NULL);
	if (thread_bad)
		return printf("threads: a malloc failed with %s\n", strerror(thread_bad)), 1;
	printf("threads ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (strcmp(mode, "trim") == 0) {
		/* Before anything else: what start-up left in the program's heap. */
		int r = malloc_trim(0);
		printf("trim %d\n", r);
		return 0;
	}
	if (strcmp(mode, "late") == 0)
		return late();
	if (strcmp(mode, "vmpeak") == 0) {
		char *p = malloc(16 * MiB);
		if (!p)
			return printf("vmpeak: malloc failed\n"), 1;
		memset(p, 1, 16 * MiB);
		printf("vmpeak %ld\n", status_kib("VmPeak"));
		free(p);
		return 0;
	}
	if (strcmp(mode, "first") == 0) {
		char *p = malloc(64 << 10);
		if (!p)
			return printf("first: malloc failed\n"), 1;
		memset(p, 1, 64 << 10);
		printf("rss %ld\n", status_kib("VmRSS"));
		free(p);
		return 0;
	}
	if (strcmp(mode, "count") == 0) {
		int n = 0;
		char *p;
		while (n < 100000 && (p = malloc(16 * MiB))) {
			memset(p, 1, 16 * MiB);
			n++;
		}
		printf("count %d\n", n);
		return 0;
	}
	if (strcmp(mode, "exhaust") == 0)
		return exhaust();
	if (strcmp(mode, "threads") == 0)
		return threads();
	fprintf(stderr, "usage: alloc_aslimit late|vmpeak|count|trim|first|exhaust|threads\n");
	return 2;
}
