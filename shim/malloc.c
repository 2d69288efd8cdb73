// SPDX-License-Identifier: MIT
/*
 * The malloc-family interposers: doors only.  Each calls the core
 * allocator (alloc.c) when the heap is ours, else the allocator that owns
 * it (heap.c), so that the program's heap is never split between two
 * allocators.
 */
#include <malloc.h>
#include <stdlib.h>

#include "alloc.h"
#include "compiler.h"
#include "heap.h"

/* Gone from glibc's headers, still reachable by old binaries. */
void cfree(void *p);

#define PS_MALLOC_DOOR(type, name, impl, params, args)                             \
	PS_EXPORT type name params                                                 \
	{                                                                          \
		if (ps_likely(ps_heap_mine()))                                     \
			return ps_##impl args;                                     \
		return ps_heap_other_##impl args;                                  \
	}

PS_MALLOC_DOOR(void *, malloc, malloc, (size_t size), (size))
PS_MALLOC_DOOR(void *, calloc, calloc, (size_t n, size_t size), (n, size))
PS_MALLOC_DOOR(void *, realloc, realloc, (void *p, size_t size), (p, size))
PS_MALLOC_DOOR(void *, reallocarray, reallocarray, (void *p, size_t n, size_t size), (p, n, size))
PS_MALLOC_DOOR(int, posix_memalign, posix_memalign, (void **out, size_t align, size_t size),
	       (out, align, size))
PS_MALLOC_DOOR(void *, aligned_alloc, aligned_alloc, (size_t align, size_t size), (align, size))
PS_MALLOC_DOOR(void *, memalign, memalign, (size_t align, size_t size), (align, size))
PS_MALLOC_DOOR(void *, valloc, valloc, (size_t size), (size))
PS_MALLOC_DOOR(void *, pvalloc, pvalloc, (size_t size), (size))
PS_MALLOC_DOOR(size_t, malloc_usable_size, usable_size, (void *p), (p))

PS_EXPORT void free(void *p)
{
	if (ps_likely(ps_heap_mine()))
		ps_free(p);
	else
		ps_heap_other_free(p);
}

PS_EXPORT void cfree(void *p)
{
	free(p);
}
