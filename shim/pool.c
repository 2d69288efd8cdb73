// SPDX-License-Identifier: MIT
/*
 * Slabs.  On the first slab request the pool reserves one PROT_NONE,
 * MAP_NORESERVE range of address space (twice POOLSHIM_POOL_SIZE, so
 * alignment slack never runs it dry) and probes the page kinds: a program
 * that never makes a pooled allocation pays no syscall and no fault for
 * the pool.  A slab is one extent handed to jemalloc's pool arena; slabs
 * are carved back to back in address order, and the range below the
 * highest slab is backed in place, whole 2 MiB units at a time, with
 * MAP_FIXED: hugetlb pages when the system has them, else anonymous memory
 * advised for THP, else plain 4 KiB pages.
 *
 * Except at first, when no hugepages are tried (POOLSHIM_HUGEPAGES=none,
 * or THP disabled): the first 2 MiB unit of the reserve is a small region
 * where slabs are sized by need (the extent jemalloc needs for the request
 * at hand, not its 2 MiB growth step) and backed in 64 KiB steps.  A short
 * program with one 128 KiB buffer then prefaults 192 KiB, not 2 MiB (512
 * faults).  With hugepages the first unit is one hugepage, one fault, as
 * before.  The first request that does not fit closes the region: slabs
 * continue at the next unit boundary and the rest of it stays reserved and
 * unbacked.
 * Backing is prefaulted (MAP_POPULATE / MADV_POPULATE_WRITE), so a hugetlb
 * shortage shows up here, where we can fall back, and never as a SIGBUS in
 * the middle of a request.  Slabs are never returned: the pool arena never
 * purges, and a buffer freed at the end of one request must come back for
 * the next without faults.
 *
 * The lock below is taken by the extent hook, sometimes under jemalloc's
 * grow mutex and sometimes not (near the cap, when the growth step fails,
 * jemalloc asks again for the exact size without that mutex).  So it has
 * fork handlers of its own (ps_pool_atfork_*), which must run inside
 * jemalloc's: see init.c for the order.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "compiler.h"
#include "fmt.h"
#include "sys.h"

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

uintptr_t ps_pool_lo, ps_pool_hi;
void (*ps_pool_on_change)(void);

#define SMALL_STEP ((size_t)64 << 10)   /* backing step in the small region */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t pool_next;      /* where the next slab may start */
static uintptr_t backed_end;     /* end of the backed prefix */
static uintptr_t small_end;      /* end of the open small region, or 0 */
static enum ps_backing last_backing = PS_BACK_4K;
static bool try_hugetlb, try_thp, prefault;
static bool prepared;            /* reserve_range() has run (under the lock) */
static int prepare_error;        /* and failed with this -errno */
static size_t cfg_pool_size;
#ifdef PS_TEST_HOOKS
static unsigned test_delay_us;   /* PS_TEST_POOL_DELAY_US */
#else
static const unsigned test_delay_us = 0;   /* the shipped library never waits: folds away */
#endif
static struct ps_pool_info info;

/* Slab index + 1 for every 2 MiB unit of the reserve; 0 = not a slab. */
static uint16_t unit_slab[PS_MAX_UNITS];
static struct ps_slab slabs[PS_MAX_SLABS];
static int nslabs;

static size_t round_up(size_t v, size_t to)
{
	return (v + to - 1) & ~(to - 1);
}

/* The test delay: a raw nanosleep, no libc state touched under the lock. */
static void delay_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };
	PS_SYSCALL(SYS_nanosleep, &ts, NULL);
}

/* Read a small sysfs file into buf (NUL-terminated): length or -errno. */
static long read_small_file(const char *path, char *buf, size_t cap)
{
	long fd = ps_sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	long n = ps_sys_read((int)fd, buf, cap - 1);
	ps_sys_close((int)fd);
	if (n < 0)
		return n;
	buf[n] = '\0';
	return n;
}

static uint64_t read_u64_file(const char *path)
{
	char buf[32];
	uint64_t v = 0;

	if (read_small_file(path, buf, sizeof(buf)) <= 0 || !ps_parse_digits(buf, UINT64_MAX, &v))
		return 0;
	return v;
}

#define PROGRAM_THP_OFF "the program turned THP off for itself (prctl PR_SET_THP_DISABLE)"

/*
 * Has the program turned THP off for itself?  PR_SET_THP_DISABLE is
 * inherited across fork and exec, and Ceph's daemons set it early in
 * their start-up.  The kernel then gives 4 KiB pages whatever we advise.
 */
static bool program_thp_off(void)
{
	return PS_SYSCALL(SYS_prctl, PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1;
}

static void probe_page_kinds(enum ps_hugepages mode)
{
	char buf[128];

	/*
	 * hugetlb only when asked for: a private hugetlb page written after
	 * fork must be copied from the free hugetlb pages, and when there are
	 * none the kernel kills the child (SIGBUS).  THP has ordinary
	 * copy-on-write and still gives 2 MiB pages where the kernel can.
	 */
	try_hugetlb = mode == PS_HUGE_HUGETLB;
	try_thp = mode != PS_HUGE_NONE;
	info.hugetlb_reason = NULL;
	info.thp_reason = NULL;

	if (mode == PS_HUGE_AUTO)
		info.hugetlb_reason = "not used unless POOLSHIM_HUGEPAGES=hugetlb (a fork child "
				      "writing inherited hugetlb pages dies when none are free)";
	else if (mode != PS_HUGE_HUGETLB)
		info.hugetlb_reason = "not requested (POOLSHIM_HUGEPAGES)";
	else if (read_u64_file("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages") == 0)
		/* Still tried, in case sysfs is hidden from us. */
		info.hugetlb_reason = "no 2 MiB hugetlb pages reserved (vm.nr_hugepages=0)";

	if (mode == PS_HUGE_NONE)
		info.thp_reason = "not requested (POOLSHIM_HUGEPAGES=none)";
	else if (read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) > 0 &&
		 strstr(buf, "[never]")) {
		info.thp_reason = "THP disabled (transparent_hugepage/enabled=never)";
		try_thp = false;
	} else if (program_thp_off()) {
		info.thp_reason = PROGRAM_THP_OFF;
		try_thp = false;
	}
}

/*
 * Under a finite RLIMIT_AS, at most half of the address space still free
 * (limit minus what the process maps now, from /proc/self/statm): the rest
 * stays for the program and glibc's heap.  SIZE_MAX when
 * unlimited or unknown.
 */
static size_t address_space_share(void)
{
	struct rlimit rl;
	char buf[128];

	if (PS_SYSCALL(SYS_prlimit64, 0, RLIMIT_AS, NULL, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return SIZE_MAX;
	if (read_small_file("/proc/self/statm", buf, sizeof(buf)) <= 0)
		return SIZE_MAX;
	uint64_t pages = 0;
	if (!ps_parse_digits(buf, UINT64_MAX / PS_PAGE, &pages))
		return SIZE_MAX;
	uint64_t used = pages * (uint64_t)PS_PAGE;
	if (used >= rl.rlim_cur)
		return 0;
	return (size_t)((rl.rlim_cur - used) / 2);
}

int ps_pool_init(const struct ps_config *cfg)
{
	memset(&info, 0, sizeof(info));
	info.requested = cfg->hugepages;
	info.cap = cfg->pool_size;
	cfg_pool_size = cfg->pool_size;
	prefault = cfg->prefault;
#ifdef PS_TEST_HOOKS
	/*
	 * A knob of the test build (tests/preload/fork_pool.sh): hold the lock
	 * this long in each slab request, so a fork can land inside it.
	 * Outside the POOLSHIM_ names, which the configuration checks.
	 */
	const char *d = secure_getenv("PS_TEST_POOL_DELAY_US");
	uint64_t us = 0;
	test_delay_us = d && ps_parse_digits(d, 1000000, &us) ? (unsigned)us : 0;
#endif
	prepared = false;
	prepare_error = 0;
	return 0;
}

/*
 * Probe the page kinds and reserve the range.  Called once, under the lock,
 * by the first slab request (or ps_pool_prepare()).  0 or -errno.
 */
static int reserve_range(void)
{
	size_t want = round_up(cfg_pool_size, PS_UNIT) * 2;
	if (want > PS_RESERVE_MAX)
		want = PS_RESERVE_MAX;

	probe_page_kinds(info.requested);
	size_t share = address_space_share();
	if (want > share) {
		/* Whole units, one of them spent on alignment below. */
		want = share >= 2 * PS_UNIT ? (share / PS_UNIT - 1) * PS_UNIT : 0;
		if (want == 0)
			return -ENOMEM;
	}

	/* Over-reserve by one unit, then trim to a 2 MiB aligned range. */
	void *p = mmap(NULL, want + PS_UNIT, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	uintptr_t raw = (uintptr_t)p;
	uintptr_t lo = round_up(raw, PS_UNIT);
	if (lo > raw)
		munmap(p, lo - raw);
	uintptr_t hi = lo + want;
	if (raw + want + PS_UNIT > hi)
		munmap((void *)hi, raw + want + PS_UNIT - hi);

	pool_next = lo;
	backed_end = lo;
	/* Hugepages, THP included, come in whole units: no small region then. */
	small_end = try_hugetlb || try_thp ? 0 : lo + PS_UNIT;
	info.reserve = want;
	/* Readers test hi first (ps_pool_contains): lo must be there before it. */
	__atomic_store_n(&ps_pool_lo, lo, __ATOMIC_RELEASE);
	__atomic_store_n(&ps_pool_hi, hi, __ATOMIC_RELEASE);
	return 0;
}

/* Under the lock: reserve on first use.  0 or -errno. */
static int prepare_locked(void)
{
	if (!prepared) {
		prepared = true;
		prepare_error = reserve_range();
	}
	return prepare_error;
}

int ps_pool_prepare(void)
{
	int saved_errno = errno;
	pthread_mutex_lock(&pool_lock);
	int r = prepare_locked();
	pthread_mutex_unlock(&pool_lock);
	errno = saved_errno;
	return r;
}

/* Put the PROT_NONE reservation back over [addr, addr + len). */
static void rereserve(uintptr_t addr, size_t len)
{
	mmap((void *)addr, len, PROT_NONE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

static bool back_hugetlb(uintptr_t addr, size_t len)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_HUGETLB | MAP_HUGE_2MB;

	/* A private hugetlb mapping reserves its pages here, at mmap time. */
	void *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
		       flags | (prefault ? MAP_POPULATE : 0), -1, 0);
	if (p == MAP_FAILED) {
		if (!info.hugetlb_reason)
			info.hugetlb_reason = errno == ENOMEM
				? "hugetlb pages ran out (mmap MAP_HUGETLB: ENOMEM)"
				: "mmap MAP_HUGETLB refused";
		rereserve(addr, len);
		return false;
	}
	return true;
}

static void touch_pages(uintptr_t addr, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		*(volatile char *)(addr + off) = 0;
}

/*
 * Under the lock, before backing a unit with THP: the program may have
 * turned THP off since the pool was set up (Ceph does it moments after
 * its first large allocations).  The unit then gets 4 KiB pages, counted
 * and reported as such, with the reason.  Units backed with THP before
 * keep their hugepages: the kernel does not split them, and we cannot
 * without racing the threads that use them.  Giving only the free part
 * new pages (jemalloc can purge it through a hook) was tried: in radosgw
 * it reached 0.6 MiB of the 16, the rest being in use or held back by
 * jemalloc for later requests, so it is not done.  One prctl per unit
 * backed, never on the allocation path.
 */
static bool thp_still_allowed(void)
{
	if (!program_thp_off())
		return true;
	info.thp_reason = info.backed_by[PS_BACK_THP]
		? PROGRAM_THP_OFF " after the pool's first THP units; later units have 4 KiB pages"
		: PROGRAM_THP_OFF;
	return false;
}

static bool back_anon(uintptr_t addr, size_t len, bool thp)
{
	void *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED) {
		rereserve(addr, len);
		return false;
	}
	if (madvise(p, len, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0 && thp) {
		if (!info.thp_reason)
			info.thp_reason = "madvise(MADV_HUGEPAGE) refused";
	}
	if (prefault && madvise(p, len, MADV_POPULATE_WRITE) != 0)
		touch_pages(addr, len);
	return true;
}

/*
 * The most jemalloc asks the hook for when it needs an extent for a request
 * of need bytes, not its growth step: the size class (at most a quarter
 * above) plus its one-page cache-colouring pad, and a page of slack.
 */
static size_t need_bound(size_t need)
{
	return round_up(need + need / 4 + 2 * PS_PAGE, PS_PAGE);
}

/*
 * Under the lock: where a slab of len bytes aligned to align goes, and the
 * range [*back_from, *back_to) to back for it.  Returns false to decline a
 * growth step while the small region can still hold the request itself.
 */
static bool place(size_t len, size_t align, size_t need, uintptr_t *start,
		  uintptr_t *back_from, uintptr_t *back_to, bool *small)
{
	*start = round_up(pool_next, align);
	*small = false;
	if (small_end) {
		if (need && len > need_bound(need) &&
		    round_up(pool_next, align) + need_bound(need) <= small_end)
			return false;
		if (*start + len <= small_end) {
			*small = true;
			*back_from = backed_end;
			*back_to = round_up(*start + len, SMALL_STEP);
			if (*back_to > small_end)
				*back_to = small_end;
			return true;
		}
		/* Too big for it: close the region, go on at the next unit. */
		if (backed_end > ps_pool_lo) {
			uintptr_t unit = ps_pool_lo + PS_UNIT;
			backed_end = backed_end > unit ? backed_end : unit;
			pool_next = pool_next > unit ? pool_next : unit;
			*start = round_up(pool_next, align);
		}
		small_end = 0;
	}
	/*
	 * Slabs sit back to back, so the 2 MiB unit holding the end of one
	 * slab also holds the start of the next: only whole units beyond what
	 * is already backed need new memory.
	 */
	*back_from = backed_end;
	*back_to = round_up(*start + len, PS_UNIT);
	return true;
}

void *ps_pool_take(size_t len, size_t align, size_t need, bool *zeroed, enum ps_pool_fail *why)
{
	int saved_errno = errno;
	enum ps_pool_fail fail = PS_FAIL_NONE;
	enum ps_backing backing = last_backing;
	uintptr_t start = 0, end = 0, back_from = 0, back_to = 0;
	bool small = false, declined = false;

	len = round_up(len, PS_PAGE);
	align = align > PS_PAGE ? align : PS_PAGE;

	pthread_mutex_lock(&pool_lock);
	if (test_delay_us)
		delay_us(test_delay_us);
	if (prepare_locked() < 0 || nslabs >= PS_MAX_SLABS) {
		fail = PS_FAIL_NO_ADDRESS;
	} else if (len > PS_SLAB_MAX) {
		fail = PS_FAIL_TOO_LARGE;
	} else if (!place(len, align, need, &start, &back_from, &back_to, &small)) {
		declined = true;
	} else {
		end = start + len;
		if (start > ps_pool_hi || back_to > ps_pool_hi)
			fail = PS_FAIL_NO_ADDRESS;
		else if (back_to > back_from && info.backed + (back_to - back_from) > info.cap)
			fail = PS_FAIL_POOL_FULL;
	}

	if (!declined && fail == PS_FAIL_NONE && back_to > back_from) {
		size_t n = back_to - back_from;
		if (small) {
			/* A few 4 KiB pages: THP cannot back a part of a unit anyway. */
			if (back_anon(back_from, n, false))
				backing = PS_BACK_4K;
			else
				fail = PS_FAIL_NO_MEMORY;
		} else if (try_hugetlb && back_hugetlb(back_from, n)) {
			backing = PS_BACK_HUGETLB;
		} else {
			bool thp = try_thp && thp_still_allowed();
			if (back_anon(back_from, n, thp))
				backing = thp ? PS_BACK_THP : PS_BACK_4K;
			else
				fail = PS_FAIL_NO_MEMORY;
		}
		if (fail == PS_FAIL_NONE) {
			backed_end = back_to;
			if (!small)
				last_backing = backing;
			info.backed += n;
			info.backed_by[backing] += n;
		}
	}

	if (declined) {
		/* Not a failure: jemalloc asks again for just the extent it needs. */
	} else if (fail == PS_FAIL_NONE) {
		int idx = nslabs;
		slabs[idx] = (struct ps_slab){ .base = start, .len = len, .backing = backing };
		for (uintptr_t u = (start - ps_pool_lo) >> PS_UNIT_SHIFT,
			       last = (end - 1 - ps_pool_lo) >> PS_UNIT_SHIFT; u <= last; u++)
			__atomic_store_n(&unit_slab[u], (uint16_t)(idx + 1), __ATOMIC_RELEASE);
		__atomic_store_n(&nslabs, idx + 1, __ATOMIC_RELEASE);
		pool_next = end;
		if (info.slabs == 0)
			info.first_mode = backing;
		info.slabs++;
	} else {
		info.failures[fail]++;
	}
	pthread_mutex_unlock(&pool_lock);

	if (ps_pool_on_change && !declined)
		ps_pool_on_change();
	errno = saved_errno;
	*why = fail;
	if (declined || fail != PS_FAIL_NONE)
		return NULL;
	/* Fresh anonymous or hugetlb memory, never handed out before. */
	*zeroed = true;
	return (void *)start;
}

int ps_pool_slab_of(const void *p)
{
	if (!ps_pool_contains(p))
		return -1;
	uintptr_t a = (uintptr_t)p;
	size_t u = (a - ps_pool_lo) >> PS_UNIT_SHIFT;
	int i = (int)__atomic_load_n(&unit_slab[u], __ATOMIC_ACQUIRE) - 1;

	/* A unit records the last slab that touches it; earlier ones lie below. */
	while (i >= 0 && a < slabs[i].base)
		i--;
	if (i < 0 || a - slabs[i].base >= slabs[i].len)
		return -1;
	return i;
}

bool ps_pool_slab(int i, struct ps_slab *out)
{
	if (i < 0 || i >= __atomic_load_n(&nslabs, __ATOMIC_ACQUIRE))
		return false;
	*out = slabs[i];
	return true;
}

void ps_pool_note_mprotect(const void *addr, size_t len, int prot)
{
	uintptr_t a = (uintptr_t)addr, end = a + len;
	uintptr_t hi = __atomic_load_n(&ps_pool_hi, __ATOMIC_ACQUIRE);

	if (end < a)
		end = UINTPTR_MAX;   /* a length that wraps reaches every slab above addr */
	if (prot == (PROT_READ | PROT_WRITE) || len == 0 || hi == 0 || end <= ps_pool_lo || a >= hi)
		return;
	int n = ps_pool_nslabs();
	for (int i = 0; i < n; i++)
		if (slabs[i].base < end && a < slabs[i].base + slabs[i].len)
			__atomic_store_n(&slabs[i].protected, 1, __ATOMIC_RELEASE);
}

bool ps_pool_slab_protected(int i)
{
	return i >= 0 && i < ps_pool_nslabs() && __atomic_load_n(&slabs[i].protected, __ATOMIC_ACQUIRE);
}

int ps_pool_nslabs(void)
{
	return __atomic_load_n(&nslabs, __ATOMIC_ACQUIRE);
}

bool ps_pool_within_slab(const void *p, size_t len)
{
	int i = ps_pool_slab_of(p);
	if (i < 0 || len == 0)
		return i >= 0;
	const struct ps_slab *s = &slabs[i];
	/* off < s->len here; comparing len with what is left cannot wrap. */
	return len <= s->len - ((uintptr_t)p - s->base);
}

void ps_pool_get_info(struct ps_pool_info *out)
{
	bool locked = pthread_mutex_trylock(&pool_lock) == 0;
	*out = info;
	if (locked)
		pthread_mutex_unlock(&pool_lock);
}

/*
 * Taken after jemalloc's own prepare handler, so that no thread can hold
 * the lock while waiting for one of jemalloc's (none is taken under it).
 */
void ps_pool_atfork_prepare(void)
{
	pthread_mutex_lock(&pool_lock);
}

void ps_pool_atfork_parent(void)
{
	pthread_mutex_unlock(&pool_lock);
}

/* The child has one thread, the one that locked it. */
void ps_pool_atfork_child(void)
{
	pthread_mutex_unlock(&pool_lock);
}

void ps_pool_reset_for_tests(void)
{
	if (ps_pool_hi != ps_pool_lo)
		munmap((void *)ps_pool_lo, ps_pool_hi - ps_pool_lo);
	memset(unit_slab, 0, sizeof(unit_slab));
	nslabs = 0;
	pool_next = backed_end = small_end = 0;
	prepared = false;
	prepare_error = 0;
	ps_pool_lo = ps_pool_hi = 0;
	memset(&info, 0, sizeof(info));
}
