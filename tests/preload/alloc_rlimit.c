// SPDX-License-Identifier: MIT
/*
 * Memory pressure: the address-space limit (RLIMIT_AS) reached.
 *
 * With "runtime" the program lowers RLIMIT_AS after start-up to what it
 * uses plus 192 MiB; without it, the limit was set before the program
 * started (the script runs it under `ulimit -v`), so the shim's pool
 * reservation itself may have failed.  Then, until the limit is hit, it
 * allocates through each malloc-family call in turn, both sizes of the
 * pool threshold: every failure must be NULL with ENOMEM (posix_memalign:
 * ENOMEM returned), realloc failing must leave the old
 * block intact, and nothing may crash.  After freeing everything the same
 * allocations succeed again, and O_DIRECT reads into a pooled buffer (the
 * io_uring ring may not fit under the limit) still return the right data.
 * Prints "rlimit ok FAILURES" with the number of failed calls seen.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "io_common.h"

#define MiB (1024UL * 1024)
#define MAXBLOCKS 100000

static void *blocks[MAXBLOCKS];
static size_t nblocks;

static long vm_size_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static int bad(const char *what)
{
	fprintf(stderr, "alloc_rlimit: %s\n", what);
	return 1;
}

/* One allocation through call k; NULL on failure, errno as the call left it. */
static void *alloc_with(int k, size_t n, int *posix_ret)
{
	void *p = NULL;
	*posix_ret = 0;
	switch (k) {
	case 0: return malloc(n);
	case 1: return calloc(1, n);
	case 2: return realloc(NULL, n);
	case 3: return aligned_alloc(4096, n);
	case 4: return memalign(4096, n);
	case 5: return valloc(n);
	case 6:
		errno = 12345;
		*posix_ret = posix_memalign(&p, 4096, n);
		if (*posix_ret == 0)
			return p;
		return NULL;
	default: return reallocarray(NULL, n, 1);
	}
}

int main(int argc, char **argv)
{
	unsigned long failures = 0;

	if (argc > 1 && strcmp(argv[1], "runtime") == 0) {
		/* Touch the shim once so its start-up is behind us. */
		free(malloc(MiB));
		struct rlimit rl;
		long vm = vm_size_kib();
		if (vm < 0)
			return bad("no VmSize");
		rl.rlim_cur = rl.rlim_max = (rlim_t)vm * 1024 + 192 * MiB;
		if (setrlimit(RLIMIT_AS, &rl) < 0)
			return bad("setrlimit");
	}
	for (int round = 0; round < 2; round++) {
		nblocks = 0;
		/* The limit is reached when every call in turn has failed. */
		for (int k = 0, in_row = 0; nblocks < MAXBLOCKS && in_row < 8; k = (k + 1) % 8) {
			size_t n = (nblocks % 3) ? 3 * MiB : 700;
			int pr;
			void *p = alloc_with(k, n, &pr);
			if (!p) {
				if (k == 6) {
					/* glibc may set errno here too; the result is what counts. */
					if (pr != ENOMEM)
						return bad("posix_memalign: not ENOMEM");
				} else if (errno != ENOMEM) {
					fprintf(stderr, "alloc_rlimit: call %d failed with errno %d\n", k, errno);
					return 1;
				}
				failures++;
				in_row++;
				continue;
			}
			in_row = 0;
			memset(p, (int)(nblocks & 0xff), n < 4096 ? n : 4096);
			blocks[nblocks++] = p;
		}
		if (nblocks == MAXBLOCKS)
			return bad("the limit was never reached");
		/* A failed realloc leaves the block as it was. */
		if (nblocks > 1) {
			unsigned char *p = blocks[1];
			errno = 0;
			void *q = realloc(p, 1UL << 40);
			if (q)
				return bad("realloc to 1 TiB succeeded");
			if (errno != ENOMEM || p[0] != 1 || p[4095] != 1)
				return bad("failed realloc: not ENOMEM, or the block changed");
			failures++;
		}
		for (size_t i = 0; i < nblocks; i++) {
			unsigned char *p = blocks[i];
			if (p[0] != (unsigned char)(i & 0xff))
				return bad("block contents changed");
			free(p);
		}
		printf("round %d: %zu blocks before the limit\n", round, nblocks);
	}
	/* After freeing, the same allocations work again. */
	for (int k = 0; k < 8; k++) {
		int pr;
		void *p = alloc_with(k, 3 * MiB, &pr);
		if (!p)
			return bad("allocation after freeing everything failed");
		free(p);
	}
	/* O_DIRECT reads into a pooled buffer under the limit. */
	pio_require_direct();
	char *path = pio_path("rlimit");
	pio_make_file(path, 8 * MiB, 77);
	int fd = pio_open_direct(path, O_RDONLY);
	char *buf = pio_alloc(4 * MiB);
	if (!buf)
		return bad("pio_alloc");
	for (off_t off = 0; off < (off_t)(8 * MiB); off += 4 * MiB) {
		if (pread(fd, buf, 4 * MiB, off) != (ssize_t)(4 * MiB) ||
		    pio_diff(buf, 4 * MiB, (uint64_t)off, 77) >= 0)
			return bad("O_DIRECT read under the limit");
	}
	free(buf);
	close(fd);
	pio_cleanup();
	printf("rlimit ok %lu\n", failures);
	return 0;
}
