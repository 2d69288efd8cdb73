/* SPDX-License-Identifier: MIT */
/*
 * Per-thread counters for every interposed call, merged when reporting.
 * Each thread owns one block (struct ps_tstats), claimed on its first
 * counted call from a lock-free list and handed back when it exits, so a
 * storm of short-lived threads reuses blocks and loses no counts: the
 * blocks in memory are as many as the most threads counting at once (plus
 * those whose threads are still on their way out).
 * Recording is a few relaxed stores into the caller's own block: no locks,
 * no allocation, async-signal-safe.
 */
#ifndef PS_STATS_H
#define PS_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/compiler.h"
#include "format/names.h"

#define PS_SIZE_BUCKETS 48   /* log2 of bytes: bucket k holds [2^k, 2^(k+1)) */
/*
 * A block has a slot for every log2 of a 64-bit size, so the hot path
 * needs no clamp; ps_stats_add() folds slots 47-63 into bucket 47.
 */
#define PS_SIZE_SLOTS 64
#define PS_LAT_BUCKETS 40    /* log2 of nanoseconds */
#define PS_ERRNO_MAX 134

struct ps_counter {
	/*
	 * In a thread's block, the calls that have no size (free) only: a
	 * sized call is counted once, in size_hist, and ps_stats_add() adds
	 * the histogram in.  In a sum (ps_stats_merge) every call.
	 */
	uint64_t calls;
	uint64_t bytes;
	uint64_t errors;
	uint64_t eagain;
	uint64_t timed;      /* calls that were timed (one in POOLSHIM_TIMING_SAMPLE) */
	uint64_t nsec;       /* their total time */
	uint64_t size_hist[PS_SIZE_SLOTS];
	uint64_t lat_hist[PS_LAT_BUCKETS];
};

#define PS_SQE_BUCKETS 10    /* log2 of SQEs per io_uring_enter */

/*
 * The routes an eligible O_DIRECT call can take (route.c): the plain libc
 * call or the io_uring ring.  Each (device, direction) the router met has
 * a slot, at most PS_ROUTE_SLOTS; the counters below are indexed by it.
 */
enum ps_route { PS_ROUTE_PLAIN, PS_ROUTE_RING, PS_ROUTE__COUNT };
#define PS_ROUTE_SLOTS 16

struct ps_uring_counts {
	uint64_t enters;
	uint64_t sqes;
	uint64_t fixed;      /* SQEs that used a registered buffer */
	uint64_t split_calls;   /* calls split into more than one SQE */
	uint64_t sqes_per_enter[PS_SQE_BUCKETS];
	uint64_t fallbacks[PS_UFB__COUNT];
	/* Eligible O_DIRECT calls and their bytes by route slot and route. */
	uint64_t route_calls[PS_ROUTE_SLOTS][PS_ROUTE__COUNT];
	uint64_t route_bytes[PS_ROUTE_SLOTS][PS_ROUTE__COUNT];
};

/*
 * What the router measured of one route: sampled calls, their bytes,
 * thread CPU time and wall time, and for the spread the sum of squares of
 * each sample's wall time per MiB (wall_per_mib).
 */
struct ps_route_window {
	uint64_t samples;
	uint64_t bytes;
	uint64_t cpu_ns;
	uint64_t wall_ns;
	uint64_t wall_per_mib;       /* sum over samples of wall ns per MiB */
	uint64_t wall_per_mib_sq;    /* sum of its squares */
};

/* Where a slot's calls go now. */
enum ps_route_state {
	PS_ROUTE_STATE_MEASURING,    /* alternating, sampling both routes */
	PS_ROUTE_STATE_PLAIN,
	PS_ROUTE_STATE_RING,
	PS_ROUTE_STATE_FORCED,       /* POOLSHIM_URING=on: the ring, never measured */
};

/*
 * One slot of the router: a device and a direction, the route its calls
 * take, and the two measurements behind its last decision.  Process-wide,
 * published into the live file's header (ps_routes_mirror) as it changes,
 * so a report rendered from the file says why each route was taken.
 */
struct ps_route_slot {
	uint64_t key;                /* (dev_t + 1) << 1 | 1 for writes; 0: slot free */
	uint32_t state;              /* enum ps_route_state */
	uint32_t decisions;          /* measurements finished */
	uint32_t changes;            /* decisions that changed the route */
	uint32_t chosen;             /* the last decision: enum ps_route + 1; 0 none yet */
	struct ps_route_window chose[PS_ROUTE__COUNT];   /* behind the last decision */
};

struct ps_route_table {
	uint32_t mode;               /* enum ps_uring_mode (config.h) */
	uint32_t nslots;             /* slots in use */
	struct ps_route_slot slot[PS_ROUTE_SLOTS];
};

struct ps_tstats {
	struct ps_counter c[PS_CALL__COUNT][PS_FD__COUNT];
	uint32_t errnos[PS_CALL__COUNT][PS_ERRNO_MAX];
	uint64_t events[PS_EV__COUNT];
	struct ps_uring_counts uring;
	/* bookkeeping, not counters */
	struct ps_tstats *next;
	int in_use;          /* PS_BLOCK_FREE, PS_BLOCK_USED or PS_BLOCK_RETIRED */
	int tid;             /* PS_BLOCK_RETIRED: the thread still writing it until it is gone */
	int is_block;        /* a thread's block (calls to derive), not a sum */
	int anon;            /* private anonymous memory: a page never written is absent */
};

/*
 * A block's owner.  RETIRED: its thread ran its thread-exit hook but may
 * still count (glibc frees the thread's own buffers after the pthread key
 * destructors run), so the block stays its until the kernel says the
 * thread is gone; a new thread then takes it over, counts kept.
 */
enum { PS_BLOCK_FREE = 0, PS_BLOCK_USED = 1, PS_BLOCK_RETIRED = 2 };

/* The calling thread's block, claiming one on first use; NULL only if mmap fails. */
struct ps_tstats *ps_stats_claim(void);

extern __thread struct ps_tstats *ps_stats_tls;

/*
 * The pass-through I/O path's one test (io.c): decremented on every call,
 * and only when it reaches 0 does the call take the slow path, which
 * checks that the shim is on, claims the thread's block and decides
 * whether to time the call.  So while it is non-zero the shim is on and
 * ps_stats_tls is set; whoever clears ps_stats_tls sets it to 1.
 */
extern __thread uint32_t ps_io_gate;

static inline struct ps_tstats *ps_stats_mine(void)
{
	struct ps_tstats *t = ps_stats_tls;
	return ps_likely(t != NULL) ? t : ps_stats_claim();
}

/* log2 rounded down, 0 for 0 and 1: v | 1 spares the branch on zero. */
static inline unsigned ps_log2(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v | 1);
}

static inline void ps_hist_add(uint64_t *hist, unsigned nbuckets, uint64_t v)
{
	unsigned k = ps_log2(v);
	if (k >= nbuckets)
		k = nbuckets - 1;
	PS_ADD(hist[k], 1);
}

/*
 * Timing with the TSC: two clock_gettime() calls would cost more than the
 * 2% budget of a 1 us syscall on a VM.  Ticks are converted to nanoseconds
 * with the rate measured between ps_clock_init() and the conversion.
 */
static inline uint64_t ps_ticks(void)
{
	return __builtin_ia32_rdtsc();
}

void ps_clock_init(void);
uint64_t ps_ticks_to_ns(uint64_t ticks);

/* Count one call of size bytes (no timing, no error). */
static inline void ps_stats_count(enum ps_call call, enum ps_fdkind kind, uint64_t bytes)
{
	struct ps_tstats *t = ps_stats_mine();
	if (ps_unlikely(!t))
		return;
	struct ps_counter *c = &t->c[call][kind];
	PS_ADD(c->bytes, bytes);
	ps_hist_add(c->size_hist, PS_SIZE_BUCKETS, bytes);
}

/*
 * Count a sampled call of size bytes that stands for n calls of its size
 * (alloc.h's small-allocation sampling; call is one of the allocating
 * calls): the estimate is labelled by the call's NAME_estimated event.
 */
static inline void ps_stats_count_sampled(enum ps_call call, uint64_t bytes, uint64_t n)
{
	enum ps_alloc_event ev = ps_call_estimate_event(call);
	struct ps_tstats *t = ps_stats_mine();
	if (ps_unlikely(!t))
		return;
	struct ps_counter *c = &t->c[call][PS_FD_NONE];
	PS_ADD(c->bytes, bytes * n);
	PS_ADD(c->size_hist[ps_log2(bytes)], n);
	PS_ADD(t->events[ev], n);
}

/* Count one call that has no size (free). */
static inline void ps_stats_call(enum ps_call call)
{
	struct ps_tstats *t = ps_stats_mine();
	if (ps_likely(t != NULL))
		PS_ADD(t->c[call][PS_FD_NONE].calls, 1);
}

static inline void ps_stats_uring_fallback(enum ps_uring_fb why)
{
	struct ps_tstats *t = ps_stats_mine();
	if (ps_likely(t != NULL))
		PS_ADD(t->uring.fallbacks[why], 1);
}

static inline void ps_stats_event(enum ps_alloc_event ev)
{
	struct ps_tstats *t = ps_stats_mine();
	if (ps_likely(t != NULL))
		PS_ADD(t->events[ev], 1);
}

/* n events of one kind at once. */
static inline void ps_stats_event_n(enum ps_alloc_event ev, uint64_t n)
{
	struct ps_tstats *t = ps_stats_mine();
	if (ps_likely(t != NULL))
		PS_ADD(t->events[ev], n);
}

/*
 * Count a finished I/O call the general way: failed (err its errno), timed
 * (nsec), or in a thread that has no block yet.  Leaves errno alone.
 */
void ps_stats_io_slow(enum ps_call call, enum ps_fdkind kind, uint64_t request, long result,
		      int err, uint64_t nsec);

/*
 * Count a successful, untimed I/O call of the thread that passed
 * ps_io_gate (so its block exists): two additions, calls being the size
 * histogram's sum.  Leaves errno alone.
 */
static inline void ps_stats_io_fast(enum ps_call call, enum ps_fdkind kind, uint64_t request,
				    long result)
{
	struct ps_counter *c = &ps_stats_tls->c[call][kind];
	/*
	 * c in a register: both additions then address from it.  Left to
	 * itself, GCC scales kind twice (once per field, two multiplies and
	 * a lea), one instruction more on every counted call.
	 */
	__asm__("" : "+r"(c));
	PS_ADD(c->bytes, (uint64_t)result);
	uint64_t k = 63u - (uint64_t)__builtin_clzll(request | 1);   /* ps_log2, in 64 bits */
	PS_ADD(c->size_hist[k], 1);
}

/* Called with each newly claimed block (init.c ties it to thread exit). */
extern void (*ps_stats_on_claim)(void *block);

/* Move the calling thread's counters into a block from ps_stats_block_source. */
void ps_stats_rehome(void);

/*
 * Thread exit (the pthread key's destructor): the calling thread's block
 * goes back for reuse once the thread is gone (its counts stay, and so do
 * whatever it counts on its way out).  block is the key's value, used
 * only when the thread has no block of its own any more.
 */
void ps_stats_release(void *block);

/* In a fork child: zero every block and keep only the caller's. */
void ps_stats_after_fork_child(void);

/* dst += src (sign 1) or dst -= src (sign -1), counters only. */
void ps_stats_add(struct ps_tstats *dst, const struct ps_tstats *src, int sign);

/*
 * The rows (call, kind) of a sum that have calls, filled by the merge from
 * the blocks it read.  A reader of a fresh sum asks it rather than the
 * sum: a short process writes a few rows of its 171 KiB, and looking at
 * the others would fault in their pages one by one (issue 26: most of
 * what the exit report of `/bin/true` cost).
 */
struct ps_rows {
	bool used[PS_CALL__COUNT][PS_FD__COUNT];
};

/* Sum of every block, past and present, into out; rows (or NULL) says which rows have calls. */
void ps_stats_merge(struct ps_tstats *out, struct ps_rows *rows);
/* The same into a block known to be all zeros: only the rows in use are written. */
void ps_stats_merge_zeroed(struct ps_tstats *out, struct ps_rows *rows);

/*
 * Whether the counters in s (rows: its rows with calls, or NULL to look at
 * every row) show work worth a report of its own: at least
 * PS_WORK_CALLS counted I/O calls and pooled allocations, or
 * PS_WORK_BYTES moved.  With the pool off (POOLSHIM_POOL=off) unpooled_min
 * is POOLSHIM_POOL_MIN, and the allocating calls from that size up count
 * as the pooled allocations they would have been, so that the baseline
 * reports where a pooled run does; else 0.  The rule for a fork child at
 * its end, and for `poolshim collect` before it renders a record left
 * behind.  Pure.
 */
#define PS_WORK_CALLS 64
#define PS_WORK_BYTES (1u << 20)
bool ps_stats_worked(const struct ps_tstats *s, const struct ps_rows *rows, uint64_t unpooled_min);

/*
 * Whether the counters in s (rows as for ps_stats_worked) show no work at
 * all: no counted I/O call, no pooled allocation and no allocating call of
 * large_min bytes or more (the sizes the report's advice is about).  Such
 * a process (`sh -c 'exit 5'`, a daemon's parent that only forks) gets no
 * report, whoever started it.  Pure.
 */
bool ps_stats_idle(const struct ps_tstats *s, const struct ps_rows *rows, uint64_t large_min);

/* Number of blocks ever created. */
int ps_stats_blocks(void);

/*
 * The most threads counting at once (a thread counts from its first
 * counted call to its exit): the report's process.threads.  Copied to
 * *ps_threads_mirror (live.c's file header) when it rises.
 */
int ps_stats_threads_peak(void);
extern uint32_t *ps_threads_mirror;

/* Gauges of pooled memory in use by live allocations. */
struct ps_gauges {
	uint64_t pool_in_use;
	uint64_t pool_peak;
};
/*
 * The gauges live in private memory, so a fork child starts from exactly
 * its parent's values at the fork; a shared live-stats file would hand it
 * whatever the parent's other threads changed between fork and the child's
 * handler, and its frees of inherited blocks could then wrap the gauge
 * below zero.  Each change is copied to the live file (ps_gauges_mirror,
 * set by live.c) for `poolshim stat`.
 */
extern struct ps_gauges *ps_gauges;
extern struct ps_gauges *ps_gauges_mirror;
void ps_stats_pool_used(int64_t delta);

/*
 * ps_stats_pool_used() for a batch of changes netting delta, allocs of
 * them allocations: all of those count as past the peak if the sum
 * passes it (alloc.c folds the per-CPU counts of threaded programs so).
 */
void ps_stats_pool_moved(int64_t delta, uint64_t allocs);

/*
 * Where new counter blocks come from: anonymous memory by default, the
 * live-stats file when live.c provides one.  Returns zeroed memory of
 * sizeof(struct ps_tstats) bytes, or NULL.
 */
extern void *(*ps_stats_block_source)(void);

#endif
