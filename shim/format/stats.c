// SPDX-License-Identifier: MIT
/*
 * Per-thread counter blocks.  A block is mmap'd (never malloc'd: the
 * counters must work inside malloc), pushed on a global list with one CAS,
 * and never freed.  When a thread exits its block is retired, and once the
 * thread is gone (tgkill(2) with signal 0 says ESRCH) the next new thread
 * takes it over and counts on top, so the merged totals always include
 * every thread that ever ran while the blocks stay as many as the threads
 * alive at once.  The thread keeps its block until it is gone because
 * glibc still calls free() for it after the pthread key destructors
 * (__libc_thread_freeres): handing the block back there let the exiting
 * thread claim another one, a block per thread ever created.
 */
#include "format/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>

#include "format/sys.h"

static struct ps_tstats *blocks;
static int nblocks;
/* Threads counting now, and the most at once (stats.h). */
static int counting, counting_peak;
uint32_t *ps_threads_mirror;
__thread struct ps_tstats *ps_stats_tls;
/* 1: a new thread's first I/O call takes the slow path (stats.h). */
__thread uint32_t ps_io_gate = 1;
static struct ps_gauges private_gauges;
struct ps_gauges *ps_gauges = &private_gauges;
struct ps_gauges *ps_gauges_mirror;
void *(*ps_stats_block_source)(void);
void (*ps_stats_on_claim)(void *block);

/* Put a new block, in use, on the list every report walks (lock-free push). */
static void list_block(struct ps_tstats *t)
{
	t->in_use = PS_BLOCK_USED;
	t->is_block = 1;
	t->next = __atomic_load_n(&blocks, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&blocks, &t->next, t, true,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
	__atomic_add_fetch(&nblocks, 1, __ATOMIC_RELAXED);
}

/* One more thread counting: raise the peak, and the live file's copy of it. */
static void count_thread(void)
{
	int now = __atomic_add_fetch(&counting, 1, __ATOMIC_RELAXED);
	int peak = __atomic_load_n(&counting_peak, __ATOMIC_RELAXED);

	while (now > peak) {
		if (__atomic_compare_exchange_n(&counting_peak, &peak, now, true,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			uint32_t *m = __atomic_load_n(&ps_threads_mirror, __ATOMIC_RELAXED);
			if (m)
				__atomic_store_n(m, (uint32_t)now, __ATOMIC_RELAXED);
			break;
		}
	}
}

static struct ps_tstats *adopt(struct ps_tstats *t)
{
	void (*hook)(void *) = ps_stats_on_claim;

	count_thread();
	/* Set first: the hook may allocate, and that allocation is counted here. */
	ps_stats_tls = t;
	if (hook)
		hook(t);
	return t;
}

/* The retired block's thread has left the kernel: nobody writes it any more. */
static bool owner_gone(const struct ps_tstats *t, long *pid)
{
	int tid = __atomic_load_n(&t->tid, __ATOMIC_RELAXED);

	if (*pid == 0)
		*pid = PS_SYSCALL(SYS_getpid);
	return tid > 0 && PS_SYSCALL(SYS_tgkill, *pid, tid, 0) == -ESRCH;
}

/*
 * The first block not in a live file: static, so the first thread to count
 * maps nothing (its pages cost nothing until written).  Blocks are never
 * unmapped, so one from .bss serves like the others.
 */
static struct ps_tstats first_block __attribute__((aligned(4096)));
static bool first_taken;

struct ps_tstats *ps_stats_claim(void)
{
	struct ps_tstats *t;
	long pid = 0;

	for (t = __atomic_load_n(&blocks, __ATOMIC_ACQUIRE); t; t = t->next) {
		int expected = PS_BLOCK_FREE;
		if (__atomic_compare_exchange_n(&t->in_use, &expected, PS_BLOCK_USED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return adopt(t);
		if (expected == PS_BLOCK_RETIRED && owner_gone(t, &pid) &&
		    __atomic_compare_exchange_n(&t->in_use, &expected, PS_BLOCK_USED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return adopt(t);
	}

	void *(*source)(void) = ps_stats_block_source;
	void *p = source ? source() : NULL;
	bool anon = !p;
	if (!p && !__atomic_exchange_n(&first_taken, true, __ATOMIC_ACQ_REL))
		p = &first_block;
	if (!p) {
		int saved_errno = errno;
		p = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		errno = saved_errno;
		if (p == MAP_FAILED)
			return NULL;
	}
	t = p;
	t->anon = anon;
	list_block(t);
	return adopt(t);
}

/* log2 of the page size. */
static unsigned page_shift(void)
{
	static unsigned shift;
	if (!shift) {
		unsigned long sz = getauxval(AT_PAGESZ);
		shift = sz >= 4096 && !(sz & (sz - 1)) ? (unsigned)__builtin_ctzl(sz) : 12;
	}
	return shift;
}

/*
 * Zero a block's counters.  A private anonymous block gives its whole
 * pages back instead (MADV_DONTNEED: they read as zeros again): a memset
 * would fault in all 43 pages, in a fork child copying the parent's
 * written ones and filling the others, ~1 ms and 171 KiB per fork here.
 * Locked memory (mlockall) refuses that, and gets the memset.
 */
static void zero_counters(struct ps_tstats *t)
{
	char *lo = (char *)t->c, *hi = (char *)&t->next;
	uintptr_t page = (uintptr_t)1 << page_shift();
	char *a = (char *)(((uintptr_t)lo + page - 1) & ~(page - 1));
	char *b = (char *)((uintptr_t)hi & ~(page - 1));

	if (t->anon && a < b && PS_SYSCALL(SYS_madvise, a, b - a, MADV_DONTNEED) == 0) {
		memset(lo, 0, (size_t)(a - lo));
		memset(b, 0, (size_t)(hi - b));
		return;
	}
	memset(t->c, 0, sizeof(t->c));
	memset(t->errnos, 0, sizeof(t->errnos));
	memset(t->events, 0, sizeof(t->events));
	memset(&t->uring, 0, sizeof(t->uring));
}

void ps_stats_rehome(void)
{
	struct ps_tstats *old = ps_stats_tls;
	void *(*source)(void) = ps_stats_block_source;

	if (!old || !source)
		return;
	struct ps_tstats *t = source();
	if (!t)
		return;
	memcpy(t->c, old->c, sizeof(t->c));
	memcpy(t->errnos, old->errnos, sizeof(t->errnos));
	memcpy(t->events, old->events, sizeof(t->events));
	t->uring = old->uring;
	list_block(t);
	/* Switch first, then empty the old block for the next thread to take. */
	ps_stats_tls = t;
	zero_counters(old);
	__atomic_store_n(&old->in_use, PS_BLOCK_FREE, __ATOMIC_RELEASE);
}

void ps_stats_release(void *block)
{
	/* The key's value is stale if ps_stats_rehome() moved this thread since. */
	struct ps_tstats *t = ps_stats_tls ? ps_stats_tls : block;

	if (!t || __atomic_load_n(&t->in_use, __ATOMIC_RELAXED) != PS_BLOCK_USED)
		return;
	int saved_errno = errno;
	__atomic_store_n(&t->tid, (int)PS_SYSCALL(SYS_gettid), __ATOMIC_RELAXED);
	errno = saved_errno;
	__atomic_sub_fetch(&counting, 1, __ATOMIC_RELAXED);
	/* ps_stats_tls stays: what the thread counts from here on lands in its block. */
	__atomic_store_n(&t->in_use, PS_BLOCK_RETIRED, __ATOMIC_RELEASE);
}

void ps_stats_io_slow(enum ps_call call, enum ps_fdkind kind, uint64_t request, long result,
		      int err, uint64_t nsec)
{
	struct ps_tstats *t = ps_stats_tls;
	if (ps_unlikely(!t)) {
		/* Claiming may run the thread-exit hook's set-up: keep errno. */
		int saved_errno = errno;
		t = ps_stats_claim();
		errno = saved_errno;
		if (!t)
			return;
	}
	struct ps_counter *c = &t->c[call][kind];
	if (result >= 0) {
		PS_ADD(c->bytes, (uint64_t)result);
	} else {
		PS_ADD(c->errors, 1);
		if (err == EAGAIN)
			PS_ADD(c->eagain, 1);
		if (err > 0 && err < PS_ERRNO_MAX)
			PS_ADD(t->errnos[call][err], 1);
	}
	ps_hist_add(c->size_hist, PS_SIZE_BUCKETS, request);
	if (nsec) {
		PS_ADD(c->timed, 1);
		PS_ADD(c->nsec, nsec);
		ps_hist_add(c->lat_hist, PS_LAT_BUCKETS, nsec);
	}
}

void ps_stats_after_fork_child(void)
{
	/*
	 * A thread of the parent may have been between raising in_use and
	 * raising the peak when the fork happened.
	 */
	if (private_gauges.pool_peak < private_gauges.pool_in_use)
		private_gauges.pool_peak = private_gauges.pool_in_use;
	/* Only the forking thread lives on; the child reports its own work. */
	for (struct ps_tstats *t = blocks; t; t = t->next) {
		zero_counters(t);
		if (t != ps_stats_tls)
			t->in_use = PS_BLOCK_FREE;
	}
	counting = counting_peak = ps_stats_tls ? 1 : 0;
}

/* A block's calls are the unsized ones plus its size histogram's sum. */
static uint64_t counter_calls(const struct ps_counter *c, bool block)
{
	uint64_t n = PS_LOAD(c->calls);
	for (int i = 0; block && i < PS_SIZE_SLOTS; i++)
		n += PS_LOAD(c->size_hist[i]);
	return n;
}

static void add_counter(struct ps_counter *dst, const struct ps_counter *src, uint64_t calls,
			int sign)
{
	uint64_t m = (uint64_t)(int64_t)sign;   /* 1 or all ones: add or subtract */
	dst->calls += m * calls;
	dst->bytes += m * PS_LOAD(src->bytes);
	dst->errors += m * PS_LOAD(src->errors);
	dst->eagain += m * PS_LOAD(src->eagain);
	dst->timed += m * PS_LOAD(src->timed);
	dst->nsec += m * PS_LOAD(src->nsec);
	for (int i = 0; i < PS_SIZE_SLOTS; i++)
		dst->size_hist[i < PS_SIZE_BUCKETS ? i : PS_SIZE_BUCKETS - 1] +=
			m * PS_LOAD(src->size_hist[i]);
	for (int i = 0; i < PS_LAT_BUCKETS; i++)
		dst->lat_hist[i] += m * PS_LOAD(src->lat_hist[i]);
}

/*
 * The pages of a block that can hold counts.  A page of private anonymous
 * memory (the static first block, mapped ones) that /proc/self/pagemap
 * shows neither present nor swapped out was never written: all zeros.
 * Reading it would map the zero page with a fault of its own, ~10 us each
 * on this VM, 43 of them for a block a short process barely used.  Blocks
 * in the live file (tmpfs: a page swapped out of it looks absent too) and
 * any block where pagemap cannot be read are read whole.  pagemap, not
 * mincore(2): a service confined to systemd's @system-service calls
 * would be killed for mincore (not in the set) at its exit.
 */
struct page_filter {
	const char *base;       /* src rounded down to its page */
	unsigned shift;         /* log2 of the page size */
	bool all;               /* no residency known: every page may hold counts */
	unsigned char vec[(sizeof(struct ps_tstats) >> 12) + 2];
};

#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)

/* pagemap: the descriptor of /proc/self/pagemap, opened by the first anonymous block (-2: not yet). */
static void filter_init(struct page_filter *f, const struct ps_tstats *src, long *pagemap)
{
	unsigned long page = 1ul << page_shift();
	uintptr_t lo = (uintptr_t)src & ~(page - 1);
	uintptr_t hi = ((uintptr_t)src + sizeof(*src) + page - 1) & ~(page - 1);
	size_t n = (hi - lo) >> page_shift();
	uint64_t ent[sizeof(f->vec)];

	f->base = (const char *)lo;
	f->shift = page_shift();
	f->all = true;
	if (!src->anon || n > sizeof(f->vec))
		return;
	if (*pagemap == -2)
		*pagemap = ps_sys_openat(AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC, 0);
	if (*pagemap < 0 ||
	    PS_SYSCALL(SYS_pread64, *pagemap, ent, n * sizeof(ent[0]),
		       (long)((lo >> f->shift) * sizeof(ent[0]))) != (long)(n * sizeof(ent[0])))
		return;
	for (size_t i = 0; i < n; i++)
		f->vec[i] = (ent[i] & (PM_PRESENT | PM_SWAPPED)) != 0;
	f->all = false;
}

static bool may_hold(const struct page_filter *f, const void *p, size_t len)
{
	if (!f || f->all)
		return true;
	size_t a = (size_t)((const char *)p - f->base) >> f->shift;
	size_t b = (size_t)((const char *)p + len - 1 - f->base) >> f->shift;
	for (; a <= b; a++)
		if (f->vec[a])
			return true;
	return false;
}

static void add_block(struct ps_tstats *dst, const struct ps_tstats *src, int sign,
		      const struct page_filter *f, struct ps_rows *rows)
{
	uint64_t m = (uint64_t)(int64_t)sign;

	for (int call = 0; call < PS_CALL__COUNT; call++) {
		for (int k = 0; k < PS_FD__COUNT; k++) {
			const struct ps_counter *c = &src->c[call][k];
			if (!may_hold(f, c, sizeof(*c)))
				continue;
			uint64_t calls = counter_calls(c, src->is_block);
			if (!calls)
				continue;
			add_counter(&dst->c[call][k], c, calls, sign);
			if (rows)
				rows->used[call][k] = true;
		}
		if (!may_hold(f, src->errnos[call], sizeof(src->errnos[call])))
			continue;
		/* Only what is there: a write of 0 would fault in a fresh sum's page. */
		for (int e = 0; e < PS_ERRNO_MAX; e++) {
			uint32_t v = PS_LOAD(src->errnos[call][e]);
			if (v)
				dst->errnos[call][e] += (uint32_t)m * v;
		}
	}
	/* The events and io_uring counts, side by side after the errnos. */
	if (!may_hold(f, src->events, (size_t)((const char *)(&src->uring + 1) -
					       (const char *)src->events)))
		return;
	for (int e = 0; e < PS_EV__COUNT; e++) {
		uint64_t v = PS_LOAD(src->events[e]);
		if (v)
			dst->events[e] += m * v;
	}
	dst->uring.enters += m * PS_LOAD(src->uring.enters);
	dst->uring.sqes += m * PS_LOAD(src->uring.sqes);
	dst->uring.fixed += m * PS_LOAD(src->uring.fixed);
	dst->uring.split_calls += m * PS_LOAD(src->uring.split_calls);
	for (int i = 0; i < PS_SQE_BUCKETS; i++)
		dst->uring.sqes_per_enter[i] += m * PS_LOAD(src->uring.sqes_per_enter[i]);
	for (int i = 0; i < PS_UFB__COUNT; i++)
		dst->uring.fallbacks[i] += m * PS_LOAD(src->uring.fallbacks[i]);
	for (int i = 0; i < PS_ROUTE_SLOTS; i++)
		for (int r = 0; r < PS_ROUTE__COUNT; r++) {
			dst->uring.route_calls[i][r] += m * PS_LOAD(src->uring.route_calls[i][r]);
			dst->uring.route_bytes[i][r] += m * PS_LOAD(src->uring.route_bytes[i][r]);
		}
}

void ps_stats_add(struct ps_tstats *dst, const struct ps_tstats *src, int sign)
{
	add_block(dst, src, sign, NULL, NULL);
}

void ps_stats_merge_zeroed(struct ps_tstats *out, struct ps_rows *rows)
{
	struct page_filter f;
	long pagemap = -2;

	if (rows)
		memset(rows, 0, sizeof(*rows));
	for (struct ps_tstats *t = __atomic_load_n(&blocks, __ATOMIC_ACQUIRE); t; t = t->next) {
		filter_init(&f, t, &pagemap);
		add_block(out, t, 1, &f, rows);
	}
	if (pagemap >= 0)
		ps_sys_close((int)pagemap);
}

void ps_stats_merge(struct ps_tstats *out, struct ps_rows *rows)
{
	memset(out, 0, sizeof(*out));
	ps_stats_merge_zeroed(out, rows);
}

int ps_stats_blocks(void)
{
	return __atomic_load_n(&nblocks, __ATOMIC_RELAXED);
}

int ps_stats_threads_peak(void)
{
	return __atomic_load_n(&counting_peak, __ATOMIC_RELAXED);
}

void ps_stats_pool_used(int64_t delta)
{
	ps_stats_pool_moved(delta, delta > 0);
}

void ps_stats_pool_moved(int64_t delta, uint64_t allocs)
{
	struct ps_gauges *g = ps_gauges;
	uint64_t now = __atomic_add_fetch(&g->pool_in_use, (uint64_t)delta, __ATOMIC_RELAXED);
	uint64_t peak = __atomic_load_n(&g->pool_peak, __ATOMIC_RELAXED);
	/*
	 * A pooled allocation (or growth) past the peak needed memory the pool
	 * had never held; one below it could reuse what it held.  The report's
	 * "saved" line counts the two (report.c).
	 */
	if (delta > 0 && now > peak && allocs)
		ps_stats_event_n(PS_EV_POOL_FRESH, allocs);
	while (delta > 0 && now > peak &&
	       !__atomic_compare_exchange_n(&g->pool_peak, &peak, now, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	struct ps_gauges *m = __atomic_load_n(&ps_gauges_mirror, __ATOMIC_RELAXED);
	if (m) {
		/* Threads may store out of order; the next change corrects it. */
		__atomic_store_n(&m->pool_in_use, __atomic_load_n(&g->pool_in_use, __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
		__atomic_store_n(&m->pool_peak, __atomic_load_n(&g->pool_peak, __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
	}
}

static uint64_t anchor_ticks, anchor_ns;
static double ns_per_tick;

static uint64_t mono_ns(void)
{
	return ps_clock_ns(CLOCK_MONOTONIC);
}

void ps_clock_init(void)
{
	anchor_ns = mono_ns();
	anchor_ticks = ps_ticks();
}

uint64_t ps_ticks_to_ns(uint64_t ticks)
{
	double rate;

	/* Set once by whichever thread gets there; a stale 0 only recomputes. */
	__atomic_load(&ns_per_tick, &rate, __ATOMIC_RELAXED);

	if (rate == 0) {
		/* Measure the rate once at least a millisecond has passed. */
		uint64_t ns = mono_ns(), t = ps_ticks();
		if (!anchor_ticks || t <= anchor_ticks || ns <= anchor_ns)
			return ticks;
		rate = (double)(ns - anchor_ns) / (double)(t - anchor_ticks);
		if (ns - anchor_ns >= 1000000)
			__atomic_store(&ns_per_tick, &rate, __ATOMIC_RELAXED);
	}
	return (uint64_t)((double)ticks * rate);
}

bool ps_stats_worked(const struct ps_tstats *s, const struct ps_rows *rows, uint64_t unpooled_min)
{
	uint64_t calls = s->events[PS_EV_POOL_ALLOC], bytes = 0;

	for (int call = PS_CALL_MALLOC; unpooled_min && call < PS_CALL_FREE; call++) {
		if (rows && !rows->used[call][PS_FD_NONE])
			continue;
		for (int k = 0; k < PS_SIZE_BUCKETS; k++)
			if ((1ULL << k) >= unpooled_min)
				calls += s->c[call][PS_FD_NONE].size_hist[k];
	}

	for (int call = PS_CALL_READ; call < PS_CALL__COUNT; call++)
		for (int k = 0; k < PS_FD__COUNT; k++) {
			if (rows && !rows->used[call][k])
				continue;
			calls += s->c[call][k].calls;
			bytes += s->c[call][k].bytes;
		}
	return calls >= PS_WORK_CALLS || bytes >= PS_WORK_BYTES;
}

bool ps_stats_idle(const struct ps_tstats *s, const struct ps_rows *rows, uint64_t large_min)
{
	if (s->events[PS_EV_POOL_ALLOC])
		return false;
	for (int call = PS_CALL_MALLOC; call < PS_CALL_FREE; call++) {
		if (rows && !rows->used[call][PS_FD_NONE])
			continue;
		for (int k = 0; k < PS_SIZE_BUCKETS; k++)
			if (s->c[call][PS_FD_NONE].size_hist[k] && (2ULL << k) > large_min)
				return false;
	}
	for (int call = PS_CALL_READ; call < PS_CALL__COUNT; call++)
		for (int k = 0; k < PS_FD__COUNT; k++)
			if ((!rows || rows->used[call][k]) && s->c[call][k].calls)
				return false;
	return true;
}
