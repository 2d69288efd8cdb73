// SPDX-License-Identifier: MIT
/*
 * Every malloc-family entry point, small and large, each block released
 * through a different one than it came from (free, cfree, realloc to a new
 * size), with a pattern checked at every step.  Run under the shim with
 * another allocator preloaded before or after it: whichever allocator owns
 * the heap must own every block, or free() of a block from the other one
 * corrupts the heap and this program aborts.  Prints "mix ok N" on success.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i += 512)
		p[i] = (unsigned char)(seed + i / 512);
	if (n)
		p[n - 1] = (unsigned char)seed;
}

/* Checks the first n bytes of a block filled for sz bytes. */
static void check(const unsigned char *p, size_t n, size_t sz, unsigned seed, const char *what)
{
	for (size_t i = 0; i < n; i += 512)
		if (p[i] != (unsigned char)(seed + i / 512))
			goto bad;
	if (n == sz && n && p[n - 1] != (unsigned char)seed)
		goto bad;
	return;
bad:
	fprintf(stderr, "alloc_mix: %s: pattern lost\n", what);
	exit(1);
}

static void *must(void *p, const char *what)
{
	if (!p) {
		fprintf(stderr, "alloc_mix: %s failed: %s\n", what, strerror(errno));
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 50;
	static const size_t sizes[] = { 24, 700, 5000, 70000, 1 << 20, (4 << 20) + 123 };
	void (*cfree_fn)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "cfree");
	long page = sysconf(_SC_PAGESIZE);
	unsigned long n = 0;

	for (int r = 0; r < rounds; r++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t sz = sizes[k];
			unsigned s = (unsigned)(r * 31 + k);
			void *b[10];

			b[0] = must(malloc(sz), "malloc");
			b[1] = must(calloc(1, sz), "calloc");
			if (((unsigned char *)b[1])[sz / 2] != 0) {
				fprintf(stderr, "alloc_mix: calloc memory not zero\n");
				return 1;
			}
			b[2] = must(reallocarray(NULL, sz, 1), "reallocarray");
			if (posix_memalign(&b[3], 4096, sz) != 0)
				must(NULL, "posix_memalign");
			b[4] = must(aligned_alloc(64, sz), "aligned_alloc");
			b[5] = must(memalign(256, sz), "memalign");
			b[6] = must(valloc(sz), "valloc");
			b[7] = must(pvalloc(sz), "pvalloc");
			b[8] = must(realloc(NULL, sz), "realloc(NULL)");
			b[9] = must(strdup("a string from strdup"), "strdup");
			if ((uintptr_t)b[3] % 4096 || (uintptr_t)b[5] % 256 ||
			    (uintptr_t)b[6] % (uintptr_t)page || (uintptr_t)b[7] % (uintptr_t)page) {
				fprintf(stderr, "alloc_mix: misaligned block\n");
				return 1;
			}
			for (int i = 0; i < 9; i++) {
				if (malloc_usable_size(b[i]) < sz) {
					fprintf(stderr, "alloc_mix: usable size %zu < %zu (entry %d)\n",
						malloc_usable_size(b[i]), sz, i);
					return 1;
				}
				fill(b[i], sz, s + (unsigned)i);
			}
			for (int i = 0; i < 9; i++)
				check(b[i], sz, sz, s + (unsigned)i, "after fill");
			/* Grow and shrink through realloc and reallocarray. */
			b[0] = must(realloc(b[0], sz * 3), "realloc grow");
			check(b[0], sz, sz, s, "realloc grow");
			b[2] = must(reallocarray(b[2], sz / 2 + 1, 1), "reallocarray shrink");
			check(b[2], sz / 2 + 1, sz, s + 2, "reallocarray shrink");
			b[6] = must(realloc(b[6], sz + 4096), "realloc of valloc");
			check(b[6], sz, sz, s + 6, "realloc of valloc");
			/* Release each through another door than it came in by. */
			free(b[0]);
			if (cfree_fn)
				cfree_fn(b[1]);
			else
				free(b[1]);
			free(b[2]);
			free(b[3]);
			free(realloc(b[4], 16));
			free(b[5]);
			free(b[6]);
			free(b[7]);
			if (realloc(b[8], 0) != NULL) {
				/* glibc frees on realloc(p, 0); some allocators return a block. */
			}
			free(b[9]);
			n += 10;
		}
	}
	/* Some I/O through the interposers, so their path runs too. */
	int fds[2];
	char out[64], in[64];
	if (pipe(fds) < 0)
		return 1;
	snprintf(out, sizeof(out), "mix %lu", n);
	if (write(fds[1], out, strlen(out)) != (ssize_t)strlen(out) ||
	    read(fds[0], in, sizeof(in)) != (ssize_t)strlen(out) || memcmp(in, out, strlen(out)))
		return 1;
	printf("mix ok %lu\n", n);
	return 0;
}
