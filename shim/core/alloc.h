/* SPDX-License-Identifier: MIT */
/*
 * The allocator behind the malloc-family interposers: glibc's own heap
 * below POOLSHIM_POOL_MIN, and at or above it a dedicated jemalloc arena
 * whose extent hooks take memory from the pool's slabs, and which gives
 * free memory back as alloc.c's purge policy decides.
 * Every function follows the libc contract of its namesake (NULL + ENOMEM
 * on failure, errno untouched on success) and records its statistics.
 */
#ifndef PS_ALLOC_H
#define PS_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/compiler.h"
#include "format/config.h"

/*
 * glibc's allocator by its own names (the plain names are ours).  An
 * allocator preloaded after us may define these too (tcmalloc, mimalloc
 * do): alloc.c binds its small heap from whichever object they resolve to.
 */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/*
 * Set up the pool from cfg and initialise jemalloc; the pool arena itself is
 * made by the first pooled request.  Call once; before it returns (or when
 * it fails) every allocation goes to glibc's heap.  With cfg->pool off
 * (POOLSHIM_POOL=off) it always does, counted as with the pool.
 * 0 or -errno.
 */
int ps_alloc_init(const struct ps_config *cfg);

/*
 * Whether this library holds the private jemalloc that
 * POOLSHIM_POOL_ALLOCATOR=jemalloc needs (libpoolshim-jemalloc.so and the
 * test builds do; libpoolshim.so does not).
 */
bool ps_alloc_have_jemalloc(void);

struct ps_blocks_info;
/*
 * The pool's blocks as blocks.c holds them: true and *out filled when it
 * places them and the pool is set up, else false (jemalloc's placement,
 * the pool off or not made yet).  Safe in a signal handler.
 */
bool ps_alloc_blocks_info(struct ps_blocks_info *out);

/* Whether the pool can serve: set up, and its arena not failed. */
bool ps_alloc_pool_ready(void);

/*
 * Add what each CPU counted of the pooled bytes to the shared counts (the
 * report's in-use gauge and peak): with two or more threads they are
 * added in batches (alloc.c).  Atomics only; safe in a signal handler.
 */
void ps_alloc_counts_sync(void);

/*
 * malloc_trim: give all of the pool's free memory back to the kernel, then
 * call the program heap's own malloc_trim(pad).  1 if memory was released
 * by either, else 0 (glibc's convention).
 */
int ps_alloc_trim(size_t pad);

/*
 * Decay in time between pooled calls: the interposed doors that are not
 * the allocator's (the I/O doors, every few dozen calls: iocount.c) call
 * ps_alloc_decay_poll(), which reads the coarse clock and, when a quarter
 * of POOLSHIM_POOL_DECAY_MS has ended, runs the decay policy as a pooled
 * call would: free memory that sat unused through the window goes back
 * even when the program makes no pooled call any more.  Safe in a signal
 * handler (it gives up rather than wait for a lock its own thread may
 * hold); errno is kept.  ps_alloc_decay_on(): whether there is a window
 * at all (POOLSHIM_POOL_DECAY_MS not 0, the pool on).
 */
void ps_alloc_decay_poll(void);
bool ps_alloc_decay_on(void);

/* In a fork child (async-signal-safe): undo an arena half made by a thread. */
void ps_alloc_after_fork_child(void);

/*
 * The malloc family as both heaps implement it (ours here as ps_NAME, the
 * other allocator's in heap.c as ps_heap_other_NAME), and as malloc.c's
 * doors export it: type, exported name, NAME, parameters, arguments.
 * posix_memalign returns 0 or an errno value and leaves errno alone;
 * free, which returns nothing, is declared on its own.
 */
#define PS_MALLOC_FAMILY(X)                                                               \
	X(void *, malloc, malloc, (size_t size), (size))                                   \
	PS_MALLOC_FAMILY_REST(X)
#define PS_MALLOC_FAMILY_REST(X)                                                          \
	X(void *, calloc, calloc, (size_t n, size_t size), (n, size))                      \
	X(void *, realloc, realloc, (void *p, size_t size), (p, size))                     \
	X(void *, reallocarray, reallocarray, (void *p, size_t n, size_t size), (p, n, size)) \
	X(int, posix_memalign, posix_memalign, (void **out, size_t align, size_t size),    \
	  (out, align, size))                                                              \
	X(void *, aligned_alloc, aligned_alloc, (size_t align, size_t size), (align, size)) \
	X(void *, memalign, memalign, (size_t align, size_t size), (align, size))          \
	X(void *, valloc, valloc, (size_t size), (size))                                   \
	X(void *, pvalloc, pvalloc, (size_t size), (size))                                 \
	X(size_t, malloc_usable_size, usable_size, (void *p), (p))

#define PS_ALLOC_DECLARE(type, name, impl, params, args) type ps_##impl params;
PS_MALLOC_FAMILY(PS_ALLOC_DECLARE)
#undef PS_ALLOC_DECLARE
void ps_free(void *p);

/*
 * What the malloc and free doors (malloc.c) branch on, set once at start
 * and read without ordering.  free hands a pointer below
 * ps_door_pool_end straight to its slow path, and any other straight to
 * the small heap's free: one compare.  That is every pointer until
 * start-up ends (UINTPTR_MAX), so that the first free starts the shim;
 * then none (0) until the pool's range exists, and from the first pooled
 * block on, the end of the range the pool may grow to (ps_pool_lo +
 * ps_pool_span), set before that block reaches the program.  The pool
 * lies between 16 and 32 TiB (pool.c), below a position-independent
 * program's heap and the mmap area, where glibc's memory is: only NULL
 * and the heap of a program linked at a fixed low address go the slow
 * way without being pooled, and it checks again.
 */
extern PS_HIDDEN uintptr_t ps_door_pool_end;

/* Whether free's door sends p to the slow path (perhaps pooled, or start-up). */
static inline bool ps_door_maybe_pooled(const void *p)
{
	return (uintptr_t)p < ps_door_pool_end;
}

/*
 * Sizes below this go through the doors (malloc.c) straight to the small
 * heap, uncounted: POOLSHIM_POOL_MIN/16 when the counters are read,
 * POOLSHIM_POOL_MIN when nothing reads them; 0 (all by the jump) when the
 * heap is not ours, when small calls are counted (POOLSHIM_COUNT_SMALL),
 * and until start-up ends.
 */
extern PS_HIDDEN size_t ps_door_exact_min;
/*
 * With POOLSHIM_COUNT_SMALL: POOLSHIM_POOL_MIN/16, below which the slow
 * paths count one call in about PS_ALLOC_SAMPLE; else 0.
 */
extern PS_HIDDEN size_t ps_door_sample_below;
/* POOLSHIM_COUNT_SMALL, as ps_alloc_init() read it. */
bool ps_alloc_count_small(void);
/*
 * The doors' choice, for the rest of the malloc family and the report:
 * below `below` a call is small; counted (sampled) only if counted.
 */
void ps_alloc_set_small(size_t below, bool counted);
/* The size below which small calls go uncounted, 0 if none do (the report's note). */
size_t ps_alloc_small_uncounted_below(void);

/*
 * Small allocations until this thread's next counted one, when they are
 * counted (POOLSHIM_COUNT_SMALL): the slow paths (and the other
 * malloc-family calls) decrement it and count at 0.
 */
extern __thread uint32_t ps_alloc_gate;
/*
 * Mean of the sampling gap below ps_door_exact_min: one small allocation
 * (malloc, calloc, realloc of a small-heap block, reallocarray and the
 * aligned ones, all on one gate per thread) in PS_ALLOC_SAMPLE is
 * counted, with the weight of the gap it closes.  The
 * sampled call costs ~40 instructions, so 128 keeps the average under
 * half an instruction, and a program that makes 10,000 small mallocs
 * still has ~80 samples in its histogram.  A thread's first
 * PS_ALLOC_EXACT_FIRST small mallocs are counted one by one, so a short
 * program's counts are exact.
 */
#define PS_ALLOC_EXACT_FIRST 32

/* A heap's entry points, as the doors (malloc.c) jump to them. */
struct ps_heap_entries {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
};

/* The small heap's entry points, and POOLSHIM_POOL_MIN (SIZE_MAX: no pool). */
void ps_alloc_small_heap(struct ps_heap_entries *e, size_t *min);
/*
 * quiet: nothing reads the counters, so the sampling countdown is refilled
 * with the longest gap (2^32 calls) and the doors practically never leave
 * their fast path.  Once, at the end of start-up.
 */
void ps_alloc_gate_quiet(bool quiet);
/* Set free's door for the heap's owner (mine: ours).  At the end of start-up. */
void ps_alloc_open_door(bool mine);
/* A small malloc whose gate ran out: counted for the gap it closes. */
void *ps_malloc_sampled(size_t size);
/* A small calloc (n * size does not overflow) whose gate ran out: the same. */
void *ps_calloc_sampled(size_t n, size_t size);
/* A small realloc of a small-heap block whose gate ran out: the same. */
void *ps_realloc_sampled(void *p, size_t size);
/* free of a block of our heap, counted only if pooled. */
void ps_free_uncounted(void *p);

/*
 * Who owns the heap, decided once at start by the doors (doors/heap.c):
 * normally we do; with POOLSHIM=off, or another allocator preloaded ahead
 * of us, "the other" does.  Kept here, with the heap it describes, so the
 * runtime reads it without reaching up into the doors.
 */
enum ps_heap_owner {
	PS_HEAP_UNDECIDED,
	PS_HEAP_MINE,
	PS_HEAP_OTHER,
};
extern PS_HIDDEN int ps_heap;
/* With PS_HEAP_OTHER while the shim is on: the file providing malloc. */
extern const char *ps_heap_owner;

#endif
