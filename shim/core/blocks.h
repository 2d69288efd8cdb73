/* SPDX-License-Identifier: MIT */
/*
 * Pooled blocks placed to the page: the pool's own placement of blocks in
 * its slabs (POOLSHIM_POOL_ALLOCATOR=pages, the default).
 *
 * Every block is a whole number of 4 KiB pages, exactly the pages its
 * request needs, placed in the smallest free block that holds it (the
 * lowest of equals: best fit, as glibc's large bins), and a freed block
 * merges with the free blocks on either side (across slab borders: slabs
 * sit back to back).  jemalloc's large size classes, four to a doubling,
 * made a 9 MiB request a 10 MiB block.  Replays of the footprint
 * programs' requests (the pool's extent, which is what stays resident):
 * the churn of 40 buffers of 1-24 MiB 728 MiB with the classes, 689 MiB
 * page-exact first fit, 687 MiB best fit (glibc's peak 674 MiB); the
 * malloc-large shape (20 of 5-25 MiB) 578, 529 and 508 MiB (glibc 508).
 * One exception: the next request goes to the start of the free block
 * that holds where the block freed last lay (that block merged with its
 * free neighbours), when it holds the request and either the arena has
 * as much free as it handed out or that free block is about as tight a
 * fit (ps_blocks_free() leaves that hint, ps_blocks_free_cold() does
 * not): a buffer freed and asked for again is still in the CPU's caches.
 *
 * The blocks, live and free, are nodes of a tree ordered by address; the
 * free ones are also in a tree ordered by size.  A block's size, its
 * neighbours and the best fit are each one walk down a tree.  The nodes
 * live in mappings of their own, never in the pool (a free block's pages
 * are not touched, so a purged block stays out of memory).
 *
 * The trees come in arenas (POOLSHIM_POOL_ARENAS, jemalloc's model): each
 * has its own lock and the slabs it took; a thread is bound to one at its
 * first call, round robin, so that threads no more numerous than the
 * arenas do not wait for each other when their caches (tcache.c) miss.  A
 * block belongs to the arena whose slab holds it (a byte per page of the
 * pool says which), and is freed, sized and resized there, whichever
 * thread asks; blocks of two arenas never merge.  An arena with no free
 * block that fits takes one from another arena (taking that arena's lock,
 * only where its published largest free block is large enough) before it
 * grows the pool, and again at the pool's cap.  Purges, the
 * counts and the check cover every arena; fork takes every lock, in
 * order.  Until a second thread binds, one arena serves and places
 * exactly as a single tree did.  No lock is held while slabs are taken or
 * pages given back.
 *
 * A free block remembers whether its pages are known to read as zeros
 * (never handed out, or given back whole since): calloc skips the memset
 * there.  Two free neighbours merge whatever they hold; the merged block
 * is known zero only when both were.
 */
#ifndef PS_BLOCKS_H
#define PS_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/names.h"

/*
 * Arenas (POOLSHIM_POOL_ARENAS): the most there may be; the default, per
 * CPU the process may run on and at most (see ps_blocks_init).  Chosen by
 * bench/threadchurn (T threads x 8 live blocks of 64 KiB-4 MiB, one
 * replaced per step) on the 2-CPU VM, with the per-CPU caches, load 4-8,
 * steps per CPU second against one arena, 5 interleaved rounds: 16
 * threads touching one byte 1.7x with 2 arenas, 3.4x with 4, 3.5x with 8,
 * 2.2x with 16, every page touched 1.5x, 1.7x, 1.9x, 1.9x; peak RSS 301,
 * 310, 349 and 349 MiB (one arena: 274); 4 threads 1.1-1.7x with 4 or
 * more.  (With per-thread caches, before: 3.3x, 3.6x, 4.1x, 4.6x.)  Four
 * per CPU (jemalloc's rule) is at the top or level with it; more arenas
 * than threads only cost memory, each keeping free blocks of its own,
 * hence the cap.
 */
#define PS_BLOCKS_ARENAS_MAX 64
#define PS_BLOCKS_ARENAS_PER_CPU 4
#define PS_BLOCKS_ARENAS_DEFAULT_MAX 16

/*
 * Use k arenas (0: the default, PS_BLOCKS_ARENAS_PER_CPU per CPU this
 * process may run on, at most PS_BLOCKS_ARENAS_DEFAULT_MAX, counted when
 * a second thread first comes, so that start-up makes no system call for
 * it; more than PS_BLOCKS_ARENAS_MAX: that many).  Before the first block,
 * single-threaded (the shim's start-up; unit tests after
 * ps_blocks_reset_for_tests, which goes back to one).  The most arenas
 * that may be used (ps_blocks_arenas(): how many are).
 */
unsigned ps_blocks_init(unsigned k);
/* The number of arenas threads are bound to (the default's count is taken now if not yet). */
unsigned ps_blocks_arenas(void);
/*
 * The arena (0 to ps_blocks_arenas() - 1) whose slab holds p, or -1 when
 * p is in none (with one arena, 0 for any p).  Lock-free.
 */
int ps_blocks_arena_of(const void *p);

/*
 * A block of at least size bytes (rounded up to whole pages) aligned to
 * align (a power of two; page alignment at least), from the smallest free
 * block that holds an aligned range of that size (the rooms in front and
 * behind stay free), or from a new slab that follows the top of the pool
 * (ps_pool_take; with POOLSHIM_PREFAULT=on it prefaults what the block
 * needs), the room alignment leaves in front of the block a free block
 * of the same run; zeroed if zero.  NULL, with *why saying why (ps_pool_take's reason, or
 * PS_FAIL_NO_MEMORY when the tree could not grow, PS_FAIL_TOO_LARGE for a
 * size the pool never takes), leaves everything as it was.  errno is kept.
 */
void *ps_blocks_alloc(size_t size, size_t align, bool zero, enum ps_pool_fail *why);

/*
 * Free the block that starts at p: its size in bytes, or 0 when p starts no
 * live block (a pointer the pool never handed out, or one freed already;
 * nothing is changed then).
 */
size_t ps_blocks_free(void *p);

/*
 * Unwritten tails (POOLSHIM_POOL_TAILS, mode; POOLSHIM_POOL_TAIL_KEEP,
 * keep): a program may ask for a buffer sized for the largest message it
 * could carry and write a few pages of it, as a proxy sizes a body buffer
 * for the largest body.  Once freed, the pages it did write stay resident
 * in the pool; the next buffer placed over them, written at its own start
 * only, leaves them resident in its middle, and so on until every page of
 * the pool's extent is (bench/proxybuf, 8 buffers of 1-16 MiB in flight
 * with 16 KiB-1 MiB of each written: 109 MiB resident against glibc's
 * 37).  So a freed block's pages past its first keep bytes can be given
 * back (MADV_DONTNEED, by the page: a THP unit is split) before the block
 * joins the free ones, and the next request is placed where the block
 * freed last started, over the pages it kept.  That pays only where those
 * pages were not written (a program that fills its buffers would fault
 * every page again) and where frees come slowly (a system call and
 * refaults beside each buffer's work: the caller says whether its CPU is
 * slow, by the caches' pace).  AUTO decides by
 * looking (mincore) at the tails of hot frees: each block carved from
 * pages known zero (what is resident, the program wrote) and one in 8 of
 * the others, a millisecond apart at least (a page there may be resident
 * because a block placed there before wrote it, so outside trimming only
 * an unwritten tail counts); tails go back from when at most one of the
 * last 8 looked at had three quarters written until 6 had, in an arena
 * whose frees of blocks with a tail come 20 us apart or more (on average
 * over 64), on a slow CPU.  KEEP never gives tails back, TRIM always
 * (whatever the pace).
 * Set once, before the first block (alloc.c, at start-up).
 */
void ps_blocks_set_tails(int mode, size_t keep);

/*
 * ps_blocks_free() (hot) or ps_blocks_free_cold(), first giving back the
 * block's tail as ps_blocks_set_tails() says: *trimmed says whether it
 * was.  Only hot frees are looked at; AUTO does nothing unless slow (the
 * calling CPU frees slowly, or has no cache to tell).
 */
size_t ps_blocks_free_tail(void *p, bool hot, bool slow, bool *trimmed);

/*
 * Tests: the least time between two looks at blocks not carved clean (1
 * ms; 0: none), and the pace below which an arena's frees give no tail
 * back (20 us; 0: never).
 */
void ps_blocks_tail_timing_for_tests(uint64_t spacing_ns, uint64_t pace_ns);

/*
 * Whether freed blocks' tails are being given back now in the calling
 * thread's arena (AUTO's votes and the arena's pace, or TRIM); for tests.
 */
bool ps_blocks_trimming(void);

/*
 * ps_blocks_free() of a block that waited in a cache (tcache.h) before it
 * came here: its lines have likely left the CPU's caches, so the arena's
 * next request is not placed where it lay, as it is after a free.
 */
size_t ps_blocks_free_cold(void *p);

/*
 * ps_blocks_free_cold() only if the lock of p's arena is free now, for a
 * caller that must not wait (a poll that may run in a signal handler):
 * the size freed, 0 as ps_blocks_free_cold(), or -EBUSY with nothing done.
 */
ssize_t ps_blocks_free_try(void *p);

/* The size in bytes of the live block that starts at p; 0 when none does. */
size_t ps_blocks_size(const void *p);

/*
 * Resize the live block at p in place to at least size bytes: a smaller
 * size gives the tail pages back to the free blocks, a larger one takes
 * them from the free block right above, and at the top of the pool from
 * a new slab right after it.  The block's size afterwards (in
 * place), or 0 when it cannot grow in place or p starts no live block;
 * the block is unchanged then.  *old: its size before (0 if no block).
 * errno is kept.
 */
size_t ps_blocks_resize(void *p, size_t size, size_t *old);

/*
 * Give the pages of every free block not given back since it was freed
 * back to the kernel (ps_pool_purge, which keeps hugetlb units and THP
 * units a block covers only in part), in every arena; the blocks stay the
 * pool's.  Blocks whose pages all went back are known zero from then.  One
 * thread at a time is enough; a concurrent call returns at once.  The
 * bytes of the blocks given back whole.
 */
size_t ps_blocks_purge(void);

/*
 * The same, for the arenas whose lock no thread holds at this moment (a
 * signal handler may run this while its thread is inside the blocks):
 * 0 with *total the bytes given back whole; -EAGAIN when some arenas'
 * locks were held and the others gave memory back (*total: what they
 * gave); -EBUSY when some locks were held and nothing was given back, or
 * another purge runs.
 */
int ps_blocks_purge_try(size_t *total);

struct ps_blocks_info {
	uint64_t live;          /* live blocks */
	uint64_t live_bytes;
	uint64_t free;          /* free blocks (maximal: neighbours are merged) */
	uint64_t free_bytes;
	uint64_t free_zero_bytes;   /* of free_bytes: known zero (given back, or never touched) */
	uint64_t largest_free;
	uint64_t nodes_mapped;  /* bytes of the tree's own mappings */
	uint32_t arenas_used;   /* arenas threads are bound to (1 until a second thread comes) */
	/*
	 * Arenas the threads are spread over (POOLSHIM_POOL_ARENAS); 0 while
	 * the default is not counted yet (no second thread has come).
	 */
	uint32_t arenas_max;
};

/*
 * A copy of the counts above as of the last change, summed over the
 * arenas (largest_free: the largest of any): no lock, so any thread or a
 * signal handler may ask; fields copied one by one, so a copy taken
 * during a change may mix before and after.
 */
void ps_blocks_get_info(struct ps_blocks_info *out);

/* The largest free block of any arena, as ps_blocks_get_info says it (no lock; K loads). */
uint64_t ps_blocks_largest_free(void);

/*
 * Walk every arena's trees and check every invariant (order, no overlap,
 * maximal free blocks, the subtree maxima, the counts, every block in its
 * arena's slabs, every byte of every slab in some block): 0, or -EUCLEAN
 * with the first broken one named on stderr.  For tests.
 */
int ps_blocks_check(void);

/*
 * Copy the counts to m after every change: m[0] = 1 (known), then the
 * free blocks, their bytes, those known zero (sums over the arenas) and
 * the largest (the live record's header: a process killed with SIGKILL
 * leaves them as they were).  m stays mapped for the life of the process.
 */
void ps_blocks_set_mirror(uint64_t *m);

/* Fork: prepare takes every arena's lock, in order (before the pool's), parent and child release them. */
void ps_blocks_atfork_prepare(void);
void ps_blocks_atfork_parent(void);
void ps_blocks_atfork_child(void);

/* Forget every block and unmap the trees; one arena again (unit tests, with ps_pool_reset_for_tests). */
void ps_blocks_reset_for_tests(void);

/* Take (hold) or release arena i's lock, as a thread inside that arena would (unit tests). */
void ps_blocks_hold_for_tests(unsigned i, bool hold);

#endif
