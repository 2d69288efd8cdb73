// SPDX-License-Identifier: MIT
/*
 * Helper for alloc_blocks.sh: what the page-exact placement does for a
 * program through the shim, where its unit test (tests/unit/test_blocks.c)
 * cannot see.  Modes:
 *   badfree      free() of a pointer inside a pooled block: prints the
 *                pointer, then frees it (the shim ends the program)
 *   badrealloc [small]   the same through realloc() to 8 MiB (or to
 *                1000 bytes, below POOLSHIM_POOL_MIN: glibc's heap)
 *   freed grown|fresh     80 MiB stays live while a 64 MiB block is freed;
 *                the block was realloc()ed in place from 1 MiB (grown) or
 *                malloc()ed at 64 MiB (fresh); prints the freed block's
 *                resident MiB (kept: 64)
 *   tail shrunk|moved     a 200 MiB block becomes 1 MiB, in place
 *                (shrunk) or by a copy (moved), then 32 MiB is freed;
 *                prints the resident MiB of the 199 MiB past the first
 *                (given back: 0)
 *   cap malloc|realloc    under POOLSHIM_POOL_SIZE=64M: 40 MiB freed (kept
 *                resident), 8 MiB live above it, then a 4 MiB block taken
 *                from the freed memory becomes 45 MiB, by realloc or as a
 *                new malloc; prints 1 if the 45 MiB block is in the pool
 *   forks        a thread makes the first pooled request (which sets the
 *                pool up) while the main thread forks 40 children at once;
 *                each child asks for 1 MiB; prints how many got it from
 *                glibc's heap (0: every child pools)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MB ((size_t)1 << 20)

/*
 * Write n bytes of c at p, for certain: a memset right before free() is a
 * dead store the compiler may drop, and without prefault (the default)
 * the pages would then never be resident at all.
 */
static void fill(void *p, int c, size_t n)
{
	memset(p, c, n);
	__asm__ volatile("" : : "r"(p) : "memory");
}

static size_t resident_mb(void *p, size_t len)
{
	static unsigned char vec[(256 << 20) / 4096];
	if (len > sizeof(vec) * 4096 || mincore(p, len, vec) != 0) {
		perror("mincore");
		exit(2);
	}
	size_t n = 0;
	for (size_t i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	return n * 4096 / MB;
}

/* The pool's range lies between 16 and 32 TiB (pool.c), glibc's blocks do not. */
static int in_pool(const void *p)
{
	uintptr_t at = (uintptr_t)p;
	return at >= ((uintptr_t)16 << 40) && at < ((uintptr_t)32 << 40);
}

static volatile int go;

/* p as the compiler cannot follow it: the bad calls below are on purpose. */
static void *opaque(void *p)
{
	__asm__ volatile("" : "+r"(p));
	return p;
}

static void *first_pooled(void *arg)
{
	(void)arg;
	while (!go)
		;
	char *p = malloc(MB);
	if (p)
		p[0] = 1;
	return p;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *how = argc > 2 ? argv[2] : "";

	if (strcmp(mode, "badfree") == 0 || strcmp(mode, "badrealloc") == 0) {
		char *p = malloc(4 * MB);
		if (!p)
			return 2;
		fill(p, 1, 4 * MB);
		char *bad = (char *)opaque(p) + 4096;
		printf("%p\n", (void *)bad);
		fflush(stdout);
		if (mode[3] == 'f')
			free(bad);
		else
			p = realloc(bad, strcmp(how, "small") == 0 ? 1000 : 8 * MB);
		printf("survived %p\n", (void *)p);
		return 0;
	}
	if (strcmp(mode, "freed") == 0) {
		char *live = malloc(80 * MB), *g;
		if (!live)
			return 2;
		fill(live, 1, 80 * MB);
		if (strcmp(how, "grown") == 0) {
			g = malloc(MB);
			g = g ? realloc(g, 64 * MB) : NULL;
		} else {
			g = malloc(64 * MB);
		}
		if (!g)
			return 2;
		fill(g, 2, 64 * MB);
		uintptr_t where = (uintptr_t)g & ~(uintptr_t)4095;
		free(g);
		printf("%zu\n", resident_mb((void *)where, 64 * MB));
		free(live);
		return 0;
	}
	if (strcmp(mode, "tail") == 0) {
		char *a = malloc(200 * MB), *old = a;
		if (!a)
			return 2;
		fill(a, 1, 200 * MB);
		if (strcmp(how, "shrunk") == 0) {
			a = realloc(a, MB);
		} else {
			char *c = malloc(MB);
			if (c)
				memcpy(c, a, MB);
			free(a);
			a = c;
		}
		char *b = malloc(32 * MB);
		if (!a || !b)
			return 2;
		fill(b, 3, 32 * MB);
		free(b);
		printf("%zu\n", resident_mb(old + MB, 199 * MB));
		free(a);
		return 0;
	}
	if (strcmp(mode, "cap") == 0) {
		char *a = malloc(40 * MB), *c = malloc(8 * MB);
		if (!a || !c)
			return 2;
		fill(a, 1, 40 * MB);
		fill(c, 2, 8 * MB);
		free(a);
		char *b = malloc(4 * MB);
		if (!b)
			return 2;
		fill(b, 3, 4 * MB);
		char *q = strcmp(how, "realloc") == 0 ? realloc(b, 45 * MB) : malloc(45 * MB);
		if (!q)
			return 2;
		printf("%d\n", in_pool(q));
		return 0;
	}
	if (strcmp(mode, "forks") == 0) {
		pthread_t t;
		int unpooled = 0;
		if (pthread_create(&t, NULL, first_pooled, NULL) != 0)
			return 2;
		go = 1;
		for (int k = 0; k < 40; k++) {
			pid_t c = fork();
			if (c == 0)
				_exit(in_pool(malloc(MB)) ? 0 : 1);
			int st;
			if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) > 1)
				return 2;
			unpooled += WEXITSTATUS(st);
		}
		pthread_join(t, NULL);
		printf("%d\n", unpooled);
		return 0;
	}
	fprintf(stderr, "usage: alloc_blocks badfree|badrealloc|freed grown|fresh|tail shrunk|moved|cap malloc|realloc|forks\n");
	return 2;
}
