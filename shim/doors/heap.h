/* SPDX-License-Identifier: MIT */
/*
 * Who owns the heap, decided once at start before the shim leaves its
 * starting state: normally we do (alloc.c).  With POOLSHIM=off, or when
 * another allocator is preloaded ahead of us so that the program's malloc
 * is not ours, every malloc-family call that still reaches us goes to
 * that allocator ("the other"), so a block is always freed by the
 * allocator that made it.
 */
#ifndef PS_HEAP_H
#define PS_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/alloc.h"
#include "format/compiler.h"

/*
 * Decide who owns the heap: the on path after the pool exists, or the off
 * path.  Binds the other allocator's functions.  Once, from start-up.
 */
void ps_heap_choose(bool on);
/* Whether ps_heap_choose() chose our own heap. */
bool ps_heap_chosen_mine(void);
/*
 * Make that choice visible to every thread: after the doors were opened
 * for it (ps_door_open(ps_heap_chosen_mine(), ...)), just before leaving
 * STARTING.
 */
void ps_heap_publish(void);
/* The other allocator's malloc, calloc, realloc and free, for the doors to jump to. */
void ps_heap_other_entries(struct ps_heap_entries *e);

/* Slow path of ps_heap_mine(): the decision is not published yet. */
bool ps_heap_mine_slow(void);

/* Whether malloc-family calls go to alloc.c; initialises on first use. */
static inline bool ps_heap_mine(void)
{
	int h = __atomic_load_n(&ps_heap, __ATOMIC_ACQUIRE);
	if (ps_likely(h == PS_HEAP_MINE))
		return true;
	if (h == PS_HEAP_OTHER)
		return false;
	return ps_heap_mine_slow();
}

/*
 * What the malloc, calloc and realloc doors (malloc.c) jump to when a call
 * is not a small one they hand to the small heap (ps_door_exact_min, the
 * sampling countdown), and the small heap's entry points; set once at the
 * end of start-up (ps_heap_publish) and read without ordering.  .malloc
 * is ps_malloc_slow (which starts the shim, and counts) when the heap is
 * ours or not yet decided, the other allocator's malloc itself when it is
 * not ours (POOLSHIM=off, another allocator first); .calloc and .realloc
 * the same.
 */
struct ps_door {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*small_malloc)(size_t);
	void *(*small_calloc)(size_t, size_t);
	void (*small_free)(void *);
	void *(*small_realloc)(void *, size_t);
};
extern PS_HIDDEN struct ps_door ps_door;
void *ps_calloc_slow(size_t n, size_t size);
void *ps_realloc_slow(void *p, size_t size);
/* The doors' slow paths: start-up, sampled and large requests, pooled frees. */
void *ps_malloc_slow(size_t size);
void ps_free_slow(void *p);
/* Set the doors for the heap's owner (mine: ours); counted: the counters are read. */
void ps_door_open(bool mine, bool counted);

/*
 * The other allocator's functions, with libc's contracts.  Those it lacks
 * (jemalloc has no pvalloc or reallocarray) are built from the ones it
 * has, never from ours or glibc's, so no block crosses allocators.  Until
 * it is bound (our own start-up with POOLSHIM=off) glibc serves.
 */
#define PS_HEAP_DECLARE(type, name, impl, params, args) type ps_heap_other_##impl params;
PS_MALLOC_FAMILY(PS_HEAP_DECLARE)
#undef PS_HEAP_DECLARE
void ps_heap_other_free(void *p);

#endif
