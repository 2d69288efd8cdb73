// SPDX-License-Identifier: MIT
/*
 * The malloc-family interposers: doors only.  Each calls the core
 * allocator (alloc.c) when the heap is ours, else the allocator that owns
 * it (heap.c), so that the program's heap is never split between two
 * allocators.
 *
 * malloc, calloc and free, the calls a program makes millions of, are a
 * compare and a jump in the common case (ps_door, heap.h): a small
 * request goes straight to the small heap's malloc or calloc, a pointer
 * above the pool's range straight to its free, with no errno saved, no
 * atomic and no thread-local access.  Everything else takes one indirect
 * jump, to the slow path in alloc.c or to the other allocator's own
 * function.  Small calls (below POOLSHIM_POOL_MIN/16) are not counted
 * unless POOLSHIM_COUNT_SMALL=on; then the slow paths count them one in
 * about PS_ALLOC_SAMPLE, the rest of the malloc family alike (alloc.c).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/alloc.h"
#include "format/compiler.h"
#include "doors/heap.h"
#include "core/pool.h"

/* Gone from glibc's headers, still reachable by old binaries. */
void cfree(void *p);

#define PS_MALLOC_DOOR(type, name, impl, params, args)                             \
	PS_EXPORT type name params                                                 \
	{                                                                          \
		if (ps_likely(ps_heap_mine()))                                     \
			return ps_##impl args;                                     \
		return ps_heap_other_##impl args;                                  \
	}
/* malloc, calloc and realloc have doors of their own, below. */
#define PS_MALLOC_DOOR_BUT_REALLOC(type, name, impl, params, args) \
	PS_MALLOC_DOOR_IF_##impl(type, name, impl, params, args)
#define PS_MALLOC_DOOR_IF_realloc(type, name, impl, params, args)
#define PS_MALLOC_DOOR_IF_calloc(type, name, impl, params, args)
#define PS_MALLOC_DOOR_IF_reallocarray PS_MALLOC_DOOR
#define PS_MALLOC_DOOR_IF_posix_memalign PS_MALLOC_DOOR
#define PS_MALLOC_DOOR_IF_aligned_alloc PS_MALLOC_DOOR
#define PS_MALLOC_DOOR_IF_memalign PS_MALLOC_DOOR
#define PS_MALLOC_DOOR_IF_valloc PS_MALLOC_DOOR
#define PS_MALLOC_DOOR_IF_pvalloc PS_MALLOC_DOOR
#define PS_MALLOC_DOOR_IF_usable_size PS_MALLOC_DOOR
PS_MALLOC_FAMILY_REST(PS_MALLOC_DOOR_BUT_REALLOC)

struct ps_door ps_door = {
	.malloc = ps_malloc_slow,
	.calloc = ps_calloc_slow,
	.realloc = ps_realloc_slow,
	.small_malloc = __libc_malloc,
	.small_calloc = __libc_calloc,
	.small_free = __libc_free,
	.small_realloc = __libc_realloc,
};

/*
 * The doors: below ps_door_exact_min straight to the small heap, else one
 * indirect jump, to what start-up chose (ps_door_open): our slow path, or
 * the other allocator's own function when the heap is not ours (then
 * ps_door_exact_min is 0 and every call takes that jump).  One compare,
 * one jump: by default the small calls below POOLSHIM_POOL_MIN/16 are not
 * counted (the report says so).  With POOLSHIM_COUNT_SMALL=on
 * ps_door_exact_min is 0, and the slow path counts them one in about
 * PS_ALLOC_SAMPLE on a thread-local countdown.
 */
PS_EXPORT void *malloc(size_t size)
{
	if (ps_likely(size < ps_door_exact_min))
		return ps_door.small_malloc(size);
	return ps_door.malloc(size);
}

/*
 * calloc, on n * size.  The product wraps: it is below ps_door_exact_min
 * but wrong only when n * size overflows, and then the small heap's
 * calloc fails the call with ENOMEM, as it would without us (an overflow
 * test here would cost two more instructions a call).
 */
PS_EXPORT void *calloc(size_t n, size_t size)
{
	if (ps_likely(n * size < ps_door_exact_min))
		return ps_door.small_calloc(n, size);
	return ps_door.calloc(n, size);
}

/* calloc's slow path: start-up, a small request when they are counted, the rest. */
void *ps_calloc_slow(size_t n, size_t size)
{
	size_t total;

	if (!__builtin_mul_overflow(n, size, &total) && total < ps_door_sample_below) {
		if (ps_likely(--ps_alloc_gate != 0))
			return ps_door.small_calloc(n, size);
		return ps_calloc_sampled(n, size);
	}
	if (ps_unlikely(!ps_heap_mine()))
		return ps_heap_other_calloc(n, size);
	return ps_calloc(n, size);
}

/*
 * realloc of a small-heap block to a small size stays in the small heap
 * (alloc.c's realloc would do the same, after more tests): the same
 * compares as malloc and free.  realloc(NULL, n) is a malloc, realloc(p,
 * 0) a free, in glibc's heap as in ours.
 */
PS_EXPORT void *realloc(void *p, size_t size)
{
	if (ps_likely(size < ps_door_exact_min) && ps_likely(!ps_door_maybe_pooled(p)))
		return ps_door.small_realloc(p, size);
	return ps_door.realloc(p, size);
}

void *ps_realloc_slow(void *p, size_t size)
{
	if (size < ps_door_sample_below && !ps_pool_contains(p)) {
		if (ps_likely(--ps_alloc_gate != 0))
			return ps_door.small_realloc(p, size);
		return ps_realloc_sampled(p, size);
	}
	if (ps_unlikely(!ps_heap_mine()))
		return ps_heap_other_realloc(p, size);
	return ps_realloc(p, size);
}

PS_EXPORT void free(void *p)
{
	if (ps_likely(!ps_door_maybe_pooled(p)))
		ps_door.small_free(p);
	else
		ps_free_slow(p);
}

void ps_door_open(bool mine, bool counted)
{
	struct ps_heap_entries small;
	void *(*m)(size_t);
	void *(*c)(size_t, size_t);
	void *(*r)(void *, size_t);
	size_t pool_min;

	ps_alloc_small_heap(&small, &pool_min);
	if (mine) {
		m = ps_malloc_slow;
		c = ps_calloc_slow;
		r = ps_realloc_slow;
		ps_alloc_gate_quiet(!counted);
	} else {
		ps_heap_other_entries(&small);
		m = small.malloc;
		c = small.calloc;
		r = small.realloc;
	}
	ps_door.small_malloc = small.malloc;
	ps_door.small_calloc = small.calloc;
	ps_door.small_realloc = small.realloc;
	__atomic_store_n(&ps_door.small_free, small.free, __ATOMIC_RELAXED);
	__atomic_store_n(&ps_door.realloc, r, __ATOMIC_RELEASE);
	__atomic_store_n(&ps_door.calloc, c, __ATOMIC_RELEASE);
	__atomic_store_n(&ps_door.malloc, m, __ATOMIC_RELEASE);
	ps_alloc_open_door(mine);
	/*
	 * Quiet: only pooled sizes need the slow path; counted: the advice's
	 * too (exactly, from POOLSHIM_POOL_MIN/16 up); counting the small
	 * ones (POOLSHIM_COUNT_SMALL): all, the small ones sampled there; not
	 * ours: everything goes to the other allocator by the jump.
	 */
	bool sampled = mine && counted && ps_alloc_count_small();
	size_t below = !mine ? 0 : counted ? pool_min / 16 : pool_min;
	ps_alloc_set_small(below, sampled);
	__atomic_store_n(&ps_door_sample_below, sampled ? below : 0, __ATOMIC_RELEASE);
	__atomic_store_n(&ps_door_exact_min, sampled ? 0 : below, __ATOMIC_RELEASE);
}

/*
 * malloc's slow path: start-up (the heap's owner is not known yet), a
 * small request when they are counted (one in about PS_ALLOC_SAMPLE, for
 * the gap it closes), or a size the door leaves to ps_malloc.
 */
void *ps_malloc_slow(size_t size)
{
	/* Non-zero only once the heap is known to be ours (ps_door_open). */
	if (size < ps_door_sample_below) {
		if (ps_likely(--ps_alloc_gate != 0))
			return ps_door.small_malloc(size);
		return ps_malloc_sampled(size);
	}
	if (ps_unlikely(!ps_heap_mine()))
		return ps_heap_other_malloc(size);
	return ps_malloc(size);
}

/*
 * free's slow path: start-up, or a pointer below the end of the range the
 * pool may grow to (NULL, the heap of a program not built
 * position-independent).
 * Only pooled blocks are counted: a free of the small heap's costs no
 * more than glibc's own, wherever its address lies.
 */
void ps_free_slow(void *p)
{
	if (ps_unlikely(!ps_heap_mine()))
		ps_heap_other_free(p);
	else
		ps_free_uncounted(p);
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
