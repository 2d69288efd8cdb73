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
 *
 * The blocks, live and free, are nodes of a tree ordered by address; the
 * free ones are also in a tree ordered by size.  A block's size, its
 * neighbours and the best fit are each one walk down a tree.  The nodes
 * live in mappings of their own, never in the pool (a free block's pages
 * are not touched, so a purged block stays out of memory).  One lock
 * serves the trees; it is not held while slabs are taken or pages given
 * back.
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
 * ps_blocks_free() only if the lock is free now, for a caller that must
 * not wait (a poll that may run in a signal handler): the size freed, 0
 * as ps_blocks_free(), or -EBUSY with nothing done.
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
 * units a block covers only in part); the blocks stay the pool's.  Blocks
 * whose pages all went back are known zero from then.  One thread at a
 * time is enough; a concurrent call returns at once.  The bytes of the
 * blocks given back whole.
 */
size_t ps_blocks_purge(void);

/*
 * The same, only if no thread holds the trees' lock at this moment (a
 * signal handler may run this while its thread is inside the blocks):
 * 0 with *total the bytes given back whole, or -EBUSY with nothing done.
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
};

/*
 * A copy of the counts above as of the last change: no lock, so any
 * thread or a signal handler may ask; fields copied one by one, so a copy
 * taken during a change may mix before and after.
 */
void ps_blocks_get_info(struct ps_blocks_info *out);

/*
 * Walk the tree and check every invariant (order, no overlap, maximal
 * free blocks, the subtree maxima, the counts, every byte of every slab
 * in some block): 0, or -EUCLEAN with the first broken one named on
 * stderr.  For tests.
 */
int ps_blocks_check(void);

/*
 * Copy the counts to m after every change, under the lock: m[0] = 1
 * (known), then the free blocks, their bytes, those known zero and the
 * largest (the live record's header: a process killed with SIGKILL leaves
 * them as they were).  m stays mapped for the life of the process.
 */
void ps_blocks_set_mirror(uint64_t *m);

/* Fork: prepare takes the lock (before the pool's), parent and child release it. */
void ps_blocks_atfork_prepare(void);
void ps_blocks_atfork_parent(void);
void ps_blocks_atfork_child(void);

/* Forget every block and unmap the tree (unit tests, with ps_pool_reset_for_tests). */
void ps_blocks_reset_for_tests(void);

#endif
