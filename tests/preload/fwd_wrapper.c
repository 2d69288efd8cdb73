// SPDX-License-Identifier: MIT
/*
 * A malloc wrapper of the kind tracers preload ahead of an allocator: it
 * counts and forwards every call to the next definition (RTLD_NEXT), so the
 * heap stays the next allocator's.  Preloaded ahead of the shim, the shim
 * must see that its own malloc is reached and keep pooling.  While dlsym
 * runs, the first few requests are served from a static buffer.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static __thread int resolving;
static char early[1 << 16] __attribute__((aligned(16)));
static size_t early_used;
static unsigned long fwd_wrapper_calls;

static int is_early(void *p)
{
	return (char *)p >= early && (char *)p < early + sizeof(early);
}

static void *early_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	size_t at = __atomic_fetch_add(&early_used, n, __ATOMIC_RELAXED);
	return at + n <= sizeof(early) ? early + at : NULL;
}

static void resolve(void)
{
	if (next_malloc || resolving)
		return;
	resolving = 1;
	next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	resolving = 0;
}

void *malloc(size_t n)
{
	resolve();
	__atomic_fetch_add(&fwd_wrapper_calls, 1, __ATOMIC_RELAXED);
	return next_malloc ? next_malloc(n) : early_alloc(n);
}

void free(void *p)
{
	resolve();
	if (!is_early(p) && next_free)
		next_free(p);
}

void *calloc(size_t n, size_t size)
{
	resolve();
	if (next_calloc)
		return next_calloc(n, size);
	return early_alloc(n * size);   /* static memory is zero */
}

void *realloc(void *p, size_t n)
{
	resolve();
	if (is_early(p)) {
		void *q = malloc(n);
		if (q)
			memcpy(q, p, (size_t)(early + sizeof(early) - (char *)p) < n ?
			       (size_t)(early + sizeof(early) - (char *)p) : n);
		return q;
	}
	return next_realloc(p, n);
}
