/* SPDX-License-Identifier: MIT */
/*
 * Per-CPU caches of freed pooled blocks (POOLSHIM_POOL_CACHE), in front of
 * whichever placement holds the blocks (blocks.c, or the jemalloc arena):
 * a pooled free puts the block in the cache of the CPU the thread runs on,
 * and a pooled request there takes the most recently freed block that
 * fits, its lines likely still in that CPU's caches, with no lock shared
 * by all threads.  The placement, and its lock, is reached only when the
 * cache has nothing that fits or holds more than its bound.
 *
 * Per CPU rather than per thread (TCMalloc's choice): a server runs more
 * threads than CPUs, and with a cache each, 16 threads on 2 CPUs split the
 * total the caches may hold sixteen ways (blocks over 1 MiB were never
 * cached, 57% of a churn of 64 KiB-4 MiB blocks hit) where two CPUs' caches
 * hold all of it; nothing is stranded in the cache of a thread that went
 * idle or exited, so no exit hook is needed.
 *
 * Blocks keep their exact size (whole pages from blocks.c, a size class
 * from jemalloc): a cached block of n bytes serves a request of need bytes
 * (need rounded up as the placement rounds it) when need <= n <= need + need / PS_TCACHE_FIT,
 * so a hit wastes at most 1/PS_TCACHE_FIT of what was asked (half of
 * the block with FIT 1: the block serves requests of half its size or
 * more), and
 * malloc_usable_size is the block's size, as the placement would say.
 *
 * Every live or cached block the cache has seen has its size in a map
 * beside the pool (one 32-bit word per page of the pool, in mappings of
 * 256 KiB made as the pool grows, each for 256 MiB of pool): free learns a
 * block's size there without the placement's lock, and the map says
 * whether the block is live or cached, so a second free of a cached block
 * is told apart from a first.  A block the map does not know (handed out
 * by a path that does not record it, as realloc) goes to the placement as
 * before.
 *
 * Footprint: PS_TCACHE_SLOTS slots of sizeof(struct ps_tcache) bytes in
 * one mapping made at the first cached block (touched only where CPUs
 * use them), up to the bound in cached blocks per CPU used, and the map
 * (about 1/1024 of the pool's used range, touched only where blocks
 * start).
 *
 * A block over an eighth of the bound is not cached (a cache holds at
 * least eight), nor one over half of its slot's share of the total
 * (ps_tcache_limit_total), and blocks.c's free memory is given the caches'
 * blocks before a request that large grows the pool (alloc.c): held in
 * caches, memory the placement could merge made a churn of large buffers
 * peak higher.
 *
 * Flushing (the blocks go back to the placement): on every purge
 * (malloc_trim, decay, retention, the cgroup's limit; every CPU's cache),
 * when the placement refuses a request (then it is retried) or lacks a
 * free block for a large one, and when its CPU turns slow (PACE below).
 * A fork child keeps the caches.  No function here is async-signal-safe
 * except ps_tcache_after_fork_child().
 */
#ifndef PS_TCACHE_H
#define PS_TCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A hit wastes at most need / PS_TCACHE_FIT bytes (see above).  2, not 4
 * (jemalloc's class spacing): on bench/threads.py's churn (64 KiB-4 MiB,
 * 2-core VM, quiet) hits rose from 85% to 94% and steps per CPU second
 * 1.9x at 1 thread, 1.6x at 4, 1.4x at 16; the churn peak and the
 * real-programs RSS stayed within 3%
 * (docs/history/2026-12-07-allocator.md).  1, not 2: hits 98.3% against
 * 94.9% at 4 threads, every page, and steps per CPU second 1.22x at 1
 * thread, one byte, 1.30x at 4, 1.04x every page, 1.02-1.04x at 16; a
 * block of up to 1.75x the request instead of 2x read 0.74-1.01x of that;
 * the churn and malloc-large peaks, the real programs' RSS and
 * scripts/bench alloc as before; peak RSS 0.91-1.06x
 * (docs/history/2026-12-07-allocator-6.md).
 */
#ifndef PS_TCACHE_FIT
#define PS_TCACHE_FIT 1
#endif
/* A cache keeps no block over 1/PS_TCACHE_LARGEST of its bound: at least that many fit. */
#define PS_TCACHE_LARGEST 8
/* The most blocks one CPU's cache holds, whatever their bytes. */
#ifndef PS_TCACHE_ENTRIES
#define PS_TCACHE_ENTRIES 32
#endif
/*
 * PACE: a cache pays where calls are frequent (bench/threadchurn, a
 * malloc and free pair a step: 0.13 us a step through the caches, 0.78 us
 * through the placement alone, on the 2-core VM).  Where they are not, it
 * costs locality: a program that frees one buffer and asks for the next,
 * of another size, gets an older cached block, written long before, where
 * the placement would put it where the freed one lay (merged with its
 * free neighbours), its lines still in the CPU's caches.  So each slot
 * counts its puts, and every PS_TCACHE_PACE_WINDOW of them compares the
 * mean time between them with POOLSHIM_POOL_CACHE_PACE_US: a slower CPU's
 * frees and requests go to the placement (what the slot held goes back,
 * cold) until a window is fast again.  Chosen by bench/allocbench and
 * bench/threadchurn, see POOLSHIM_POOL_CACHE_PACE_US in poolshim(7).
 */
#define PS_TCACHE_PACE_WINDOW 256
/* Slots for this many CPUs; CPUs numbered above share them (modulo). */
#define PS_TCACHE_SLOTS 256

/* What the cache needs from the placement behind it (alloc.c passes it down). */
struct ps_tcache_backend {
	/*
	 * Give the live block p of n bytes back to the placement, not
	 * counted again (it was counted freed when it was cached); hot: it
	 * was freed or cached last on this CPU, and the placement may put
	 * the next request where it lies.
	 */
	void (*release)(void *p, size_t n, bool hot);
	/*
	 * release() only if the placement can take it without waiting: 0,
	 * or -1 with nothing done.  NULL: ps_tcache_flush_try() does nothing.
	 */
	int (*release_try)(void *p, size_t n);
	/* The size of the block the placement would give size bytes; NULL: whole pages. */
	size_t (*good_size)(size_t size);
};

/*
 * bytes: the most one CPU's cache keeps (0: the cache is off and every
 * function below does nothing).  pace_ns: a CPU whose frees come further
 * apart than this, on average over PS_TCACHE_PACE_WINDOW of them, has its
 * cache bypassed (0: never; see PACE above).  The pool's range must exist
 * by the first ps_tcache_note_live().  Call once, before any other.
 */
void ps_tcache_init(size_t bytes, uint64_t pace_ns, const struct ps_tcache_backend *be);

/*
 * What all caches together may hold: each CPU's keeps at most this over
 * the number of CPUs whose caches held blocks (alloc.c: half the
 * retention, so that cached blocks alone never set off a purge).
 */
void ps_tcache_limit_total(size_t bytes);

/*
 * Whether the calling thread's CPU is known to free fast: its cache's slot
 * has counted a window of frees and the last was faster than the pace
 * (false with the cache off; true with the pace off, the cache never
 * bypassed).  blocks.c gives no freed block's tail back there.
 */
bool ps_tcache_cpu_fast(void);

/* Whether the cache is on (a per-process choice, read without ordering). */
extern bool ps_tcache_on;

/* The block p (in the pool's range) of n bytes reaches the program. */
void ps_tcache_note_live(void *p, size_t n);

/*
 * The most recently cached block of this CPU's cache that fits size bytes at
 * alignment align (0 or a power of two), its size in *n; NULL if none.
 * The block is dirty (it held the program's data).
 */
void *ps_tcache_take(size_t size, size_t align, size_t *n);

/*
 * Before a request of size bytes, larger than any block a cache keeps at
 * its full bound (POOLSHIM_POOL_CACHE / PS_TCACHE_LARGEST, whatever the
 * CPUs' shares): this CPU's most recently cached block goes back to the
 * placement, which may then place the request where it lies (blocks.c's
 * hint).  Requests between the share's largest block and that size, on
 * hosts with many CPUs, do not pay for it (measured only above it).
 */
void ps_tcache_give_newest(size_t size);

/*
 * free() of p, in the pool's range.  1: cached or handed on to the
 * placement (too large, or by the cache's bound), its size in *n, to be
 * counted freed; 2: the same, handed on because this CPU frees slower
 * than the pace; 0: the map does not know p (the caller frees it as
 * before); -1: p is cached already (freed twice).
 */
int ps_tcache_put(void *p, size_t *n);

/*
 * p (in the pool's range) leaves the map's care: its later operations go
 * to the placement directly.  0, or -1 if p is cached (freed already).
 */
int ps_tcache_forget(void *p);

/* The size of the live block p as the map knows it, 0 if it does not. */
size_t ps_tcache_live_size(const void *p);

/* Flush every CPU's cache into the placement: the bytes flushed. */
size_t ps_tcache_flush_all(void);

/*
 * ps_tcache_flush_all() without waiting for any lock, for the decay's
 * poll from the I/O doors (which may run in a signal handler that
 * interrupted a thread holding a cache's lock or the placement's): a
 * cache whose lock is held is skipped, and a block the placement cannot
 * take now stays cached.  The bytes flushed.
 */
size_t ps_tcache_flush_try(void);

/* The largest block a cache keeps now. */
size_t ps_tcache_largest(void);

/* The bytes in the cache of the CPU this thread runs on now. */
size_t ps_tcache_cached_bytes_mine(void);

/* The bytes in all caches now (the report's and the live record's gauge). */
uint64_t ps_tcache_cached_bytes(void);

/*
 * In a fork child, async-signal-safe: a cache whose lock a thread held at
 * the fork is forgotten (its blocks stay unusable); the others stay.
 */
void ps_tcache_after_fork_child(void);

/* Unit tests: forget every cache and the map (with ps_pool_reset_for_tests). */
void ps_tcache_reset_for_tests(void);

#endif
