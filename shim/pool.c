// SPDX-License-Identifier: MIT
/*
 * Slabs.  At start the pool reserves one PROT_NONE, MAP_NORESERVE range of
 * address space (twice POOLSHIM_POOL_SIZE, so alignment slack never runs
 * it dry).  A slab is one extent handed to jemalloc's pool arena; slabs are
 * carved back to back in address order, and the range below the highest
 * slab is backed in place, whole 2 MiB units at a time, with MAP_FIXED:
 * hugetlb pages when the system has them, else anonymous memory advised
 * for THP, else plain 4 KiB pages.
 * Backing is prefaulted (MAP_POPULATE / MADV_POPULATE_WRITE), so a hugetlb
 * shortage shows up here, where we can fall back, and never as a SIGBUS in
 * the middle of a request.  Slabs are never returned: the pool arena never
 * purges, and a buffer freed at the end of one request must come back for
 * the next without faults.
 *
 * The lock below is taken only while jemalloc holds the pool arena's grow
 * mutex (the extent hooks are the only caller), so jemalloc's own fork
 * handlers already keep it free across fork.
 */
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t pool_next;      /* where the next slab may start */
static uintptr_t backed_end;     /* end of the backed prefix (unit aligned) */
static enum ps_backing last_backing = PS_BACK_4K;
static bool try_hugetlb, try_thp, prefault;
static struct ps_pool_info info;

/* Slab index + 1 for every 2 MiB unit of the reserve; 0 = not a slab. */
static uint16_t unit_slab[PS_MAX_UNITS];
static struct ps_slab slabs[PS_MAX_SLABS];
static int nslabs;

static const char *const backing_names[] = { "hugetlb", "thp", "4k" };
static const char *const fail_names[] = {
	"none", "pool_full", "too_large", "no_memory", "no_address_space",
};

const char *ps_backing_name(enum ps_backing b)
{
	return (unsigned)b < PS_BACK__COUNT ? backing_names[b] : "?";
}

const char *ps_pool_fail_name(enum ps_pool_fail f)
{
	return (unsigned)f < PS_FAIL__COUNT ? fail_names[f] : "?";
}

static size_t round_up(size_t v, size_t to)
{
	return (v + to - 1) & ~(to - 1);
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

	if (read_small_file(path, buf, sizeof(buf)) <= 0)
		return 0;
	for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
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
	}
}

/*
 * Under a finite RLIMIT_AS, at most half of the address space still free
 * (limit minus what the process maps now, from /proc/self/statm): the rest
 * stays for the program and jemalloc's ordinary arenas.  SIZE_MAX when
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
	for (const char *c = buf; *c >= '0' && *c <= '9'; c++)
		pages = pages * 10 + (uint64_t)(*c - '0');
	uint64_t used = pages * (uint64_t)sysconf(_SC_PAGESIZE);
	if (used >= rl.rlim_cur)
		return 0;
	return (size_t)((rl.rlim_cur - used) / 2);
}

int ps_pool_init(const struct ps_config *cfg)
{
	size_t want = round_up(cfg->pool_size, PS_UNIT) * 2;
	if (want > PS_RESERVE_MAX)
		want = PS_RESERVE_MAX;
	size_t share = address_space_share();
	if (want > share) {
		/* Whole units, one of them spent on alignment below. */
		want = share >= 2 * PS_UNIT ? (share / PS_UNIT - 1) * PS_UNIT : 0;
		if (want == 0)
			return -ENOMEM;
	}

	memset(&info, 0, sizeof(info));
	info.requested = cfg->hugepages;
	info.cap = cfg->pool_size;
	prefault = cfg->prefault;
	probe_page_kinds(cfg->hugepages);

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
	info.reserve = want;
	__atomic_store_n(&ps_pool_hi, hi, __ATOMIC_RELEASE);
	__atomic_store_n(&ps_pool_lo, lo, __ATOMIC_RELEASE);
	return 0;
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

void *ps_pool_take(size_t len, size_t align, bool *zeroed, enum ps_pool_fail *why)
{
	int saved_errno = errno;
	enum ps_pool_fail fail = PS_FAIL_NONE;
	enum ps_backing backing = last_backing;
	uintptr_t start = 0, end = 0, back_from = 0, back_to = 0;

	len = round_up(len, PS_PAGE);
	align = align > PS_PAGE ? align : PS_PAGE;

	pthread_mutex_lock(&pool_lock);
	if (ps_pool_hi == ps_pool_lo || nslabs >= PS_MAX_SLABS) {
		fail = PS_FAIL_RESERVE;
	} else if (len > PS_SLAB_MAX) {
		fail = PS_FAIL_TOO_LARGE;
	} else {
		/*
		 * Slabs sit back to back, so the 2 MiB unit holding the end of
		 * one slab also holds the start of the next: only whole units
		 * beyond what is already backed need new memory.
		 */
		start = round_up(pool_next, align);
		end = start + len;
		back_from = backed_end;
		back_to = round_up(end, PS_UNIT);
		if (start > ps_pool_hi || back_to > ps_pool_hi)
			fail = PS_FAIL_RESERVE;
		else if (back_to > back_from && info.backed + (back_to - back_from) > info.cap)
			fail = PS_FAIL_POOL_FULL;
	}

	if (fail == PS_FAIL_NONE && back_to > back_from) {
		size_t n = back_to - back_from;
		if (try_hugetlb && back_hugetlb(back_from, n))
			backing = PS_BACK_HUGETLB;
		else if (back_anon(back_from, n, try_thp))
			backing = try_thp ? PS_BACK_THP : PS_BACK_4K;
		else
			fail = PS_FAIL_NO_MEMORY;
		if (fail == PS_FAIL_NONE) {
			backed_end = back_to;
			last_backing = backing;
			info.backed += n;
			info.backed_by[backing] += n;
		}
	}

	if (fail == PS_FAIL_NONE) {
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

	if (ps_pool_on_change)
		ps_pool_on_change();
	errno = saved_errno;
	*why = fail;
	if (fail != PS_FAIL_NONE)
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

	if (prot == (PROT_READ | PROT_WRITE) || len == 0 || end <= ps_pool_lo || a >= ps_pool_hi)
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
	/* Not offset + len <= slab length: a huge len wraps that to a small sum. */
	return len <= s->len - ((uintptr_t)p - s->base);
}

void ps_pool_get_info(struct ps_pool_info *out)
{
	bool locked = pthread_mutex_trylock(&pool_lock) == 0;
	*out = info;
	if (locked)
		pthread_mutex_unlock(&pool_lock);
}

void ps_pool_reset_for_tests(void)
{
	if (ps_pool_hi != ps_pool_lo)
		munmap((void *)ps_pool_lo, ps_pool_hi - ps_pool_lo);
	memset(unit_slab, 0, sizeof(unit_slab));
	nslabs = 0;
	pool_next = backed_end = 0;
	ps_pool_lo = ps_pool_hi = 0;
	memset(&info, 0, sizeof(info));
}
