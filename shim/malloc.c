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
PS_MALLOC_FAMILY(PS_MALLOC_DOOR)

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

/*
 * malloc_trim also gives the pool's free memory back (alloc.c), then trims
 * the program's heap.  A door of its own: not in the family above, and the
 * same whoever owns the heap (with a foreign heap nothing is pooled).
 */
PS_EXPORT int malloc_trim(size_t pad)
{
	return ps_alloc_trim(pad);
}
