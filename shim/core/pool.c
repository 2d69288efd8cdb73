// SPDX-License-Identifier: MIT
/*
 * Slabs.  On the first slab request the pool claims one 2 MiB unit of
 * PROT_NONE, MAP_NORESERVE address space at a randomised spot between 16
 * and 32 TiB, far from the program's binary, heap and mmap area, probes the page kinds and reads
 * the memory cgroup's limit: a program that never makes a pooled
 * allocation pays no syscall and no fault for the pool.  The range grows
 * upward (MAP_FIXED_NOREPLACE) only as slabs need it, whatever RLIMIT_AS
 * is, so the pool never holds address space it has not backed beyond that
 * first unit, and a limit set later (a shell's `ulimit -v`, a sandboxing
 * helper) finds what it would without the shim; lo never moves, so "is
 * this pooled" stays two compares.  A slab is one extent handed to jemalloc's pool
 * arena, of exactly the size it asks for (alloc.c turns jemalloc's
 * retained growth steps off); slabs are carved back to back in address
 * order, hugepage ones too (a unit may hold the end of one slab and the
 * start of the next), and the range below the highest slab is mapped in
 * place, whole 2 MiB units at a time, with MAP_FIXED: hugetlb pages when
 * the system has them, else anonymous memory advised for THP, else plain
 * 4 KiB pages.  Back-to-back slabs form runs of gapless memory, which the
 * pool arena treats as one: it merges free extents across slab borders,
 * so that freed small blocks can serve a larger request, and a block may
 * span slabs.  A run ends only where alignment or the small region's end
 * leaves a gap; each slab records its run's first slab, so that whether a
 * range is pool memory without a hole (ps_pool_within_slabs, for
 * io_uring) stays two lookups, and protection marks are read over every
 * slab a range touches (ps_pool_range_protected).
 *
 * Except at first, unless hugetlb pages are asked for: the first 2 MiB
 * unit of the reserve is a small region where slabs are sized by need (the
 * extent jemalloc needs for the request at hand, not its 2 MiB growth
 * step) and backed in 64 KiB steps of 4 KiB pages, THP or not.  A short
 * program with one 64 KiB buffer then holds 64 KiB of it, not a whole
 * hugepage (2 MiB of RSS), and with 4 KiB pages and POOLSHIM_PREFAULT=on
 * one 128 KiB buffer prefaults 192 KiB, not 2 MiB (512 faults).  With THP a slab of half a
 * unit or more does not go there.  The first request that does not fit
 * closes the region: slabs continue at the next unit boundary and the
 * rest of it stays reserved and unbacked.
 *
 * Footprint.  Slabs for requests above POOLSHIM_HUGEPAGE_MAX (32 MiB)
 * have 4 KiB pages whatever the hugepage mode, as glibc's mmap'd blocks
 * do: tables that big are touched sparsely, and a hugepage makes 2 MiB
 * resident for one write.  By default nothing is prefaulted: a page is resident once
 * the program writes it, as with its own heap.  Prefaulting every new
 * slab's request (POOLSHIM_PREFAULT=on, MADV_POPULATE_WRITE over the
 * part the request needs) made programs that allocate large and touch
 * little hold all of it: xz -9 of a 2 MB file 693 MB against glibc's
 * 86 MB, 89 MB without.  A block reused takes no fault either way, which
 * is what the pool saves.  The cap
 * (POOLSHIM_POOL_SIZE, or seven eighths of the cgroup's limit) bounds
 * what the pool holds resident, not what it has mapped: purged memory
 * does not count, so a pool whose freed blocks went back to the kernel
 * can take new slabs.  It is measured (mincore over the backed range)
 * only when the mapped size would pass the cap.  hugetlb slabs are
 * reserved and populated whole at mmap, prefault or not, so that a shortage shows up here,
 * where we can fall back, and never as a SIGBUS in the middle of a
 * request.  Free memory goes back to the kernel when the pool arena purges
 * it (alloc.c decides when: POOLSHIM_POOL_RETAIN, POOLSHIM_POOL_DECAY_MS,
 * malloc_trim), through ps_pool_purge(): MADV_DONTNEED on 4 KiB units and
 * on whole THP units.  The address range itself is never returned.  The
 * memory cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes, the
 * lowest along the cgroup's path) caps the pool at seven eighths of it
 * and what it keeps free at a sixteenth; the usage file of that cgroup
 * (memory.current, memory.usage_in_bytes) is read by alloc.c when it
 * nears the limit, and in such a cgroup purges give back the free pages
 * of partly used THP units too (the kernel splits them): what is resident
 * counts there, not the TLB.  The pool's own tables are mapped as it is
 * first used and grows (the per-unit tables with the range, sized to its
 * span; the slab table 512 slabs at a time), not kept in .bss: a process
 * that never pools holds none of them, and one that pools holds 24 KiB
 * for the default 4 GiB pool, not the 1.6 MiB that tables sized for the
 * largest pool took of an address-space limit.
 *
 * The lock below is taken by the extent hook, under whichever of
 * jemalloc's mutexes it holds then.  So it has fork handlers of its own
 * (ps_pool_atfork_*), which must run inside jemalloc's: see init.c for the
 * order.  ps_pool_purge() does not take it.
 */
#include "core/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "format/compiler.h"
#include "format/fmt.h"
#include "format/sys.h"

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

uintptr_t ps_pool_lo, ps_pool_hi, ps_pool_span;
void (*ps_pool_on_change)(void);

#define SMALL_STEP ((size_t)64 << 10)   /* backing step in the small region */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t pool_next;      /* where the next slab may start */
static uintptr_t backed_end;     /* end of the backed prefix */
static uintptr_t small_end;      /* end of the open small region, or 0 */
static enum ps_backing last_backing = PS_BACK_4K;
static bool try_hugetlb, try_thp, prefault;
static size_t thp_max = (size_t)32 << 20;   /* POOLSHIM_HUGEPAGE_MAX */
static bool prepared;            /* reserve_range() has run (under the lock) */
static uintptr_t range_max;      /* the most the range may grow to (lo + this) */
static int prepare_error;        /* and failed with this -errno */
static size_t cfg_pool_size;
static uint64_t cfg_retain;
static bool purge_split;         /* purges give back partly used THP units by the page */
static bool first_small;         /* every slab so far is in the small region */
#ifdef PS_TEST_HOOKS
static unsigned test_delay_us;   /* PS_TEST_POOL_DELAY_US */
#else
static const unsigned test_delay_us = 0;   /* the shipped library never waits: folds away */
#endif
static struct ps_pool_info info;

/*
 * Two tables with an entry per 2 MiB unit of what the range may grow to,
 * mapped together when the range is first reserved (12 KiB for the
 * default 4 GiB pool, rather than 96 KiB of .bss for the largest range
 * any pool may have), and set before ps_pool_hi is published: lock-free
 * readers reach them only past ps_pool_contains(), which loads hi with
 * acquire.
 *   unit_slab  slab index + 1 of the last slab touching the unit; 0 = none
 *   unit_kind  the backing of every mapped unit (enum ps_backing + 1), for purging
 */
static uint16_t *unit_slab;
static uint8_t *unit_kind;
static size_t unit_tables_len;
static int nslabs;

/*
 * The slab table, mapped a chunk at a time as slabs come: the whole of it
 * (PS_MAX_SLABS entries, 1.5 MiB of .bss) counted against an
 * address-space limit in every process, though most hold a few slabs.
 * A chunk is mapped before the first slab in it is written, and published
 * before that slab is (lock-free readers reach slab i only through nslabs
 * or unit_slab, loaded with acquire after the writer's release); chunks
 * are never unmapped while the pool lives.  Readers pay one load more.
 */
#define SLAB_CHUNK_SHIFT 9                      /* 512 slabs: 12 KiB */
#define SLAB_CHUNK ((size_t)1 << SLAB_CHUNK_SHIFT)
#define SLAB_CHUNKS ((PS_MAX_SLABS + SLAB_CHUNK - 1) / SLAB_CHUNK)
static struct ps_slab *slab_chunk[SLAB_CHUNKS];

/* Slab i (i < nslabs, or the one being added under the lock). */
static struct ps_slab *slab_at(int i)
{
	struct ps_slab *c = __atomic_load_n(&slab_chunk[(size_t)i >> SLAB_CHUNK_SHIFT],
					    __ATOMIC_RELAXED);
	return &c[(size_t)i & (SLAB_CHUNK - 1)];
}

/*
 * Under the lock: map the chunk that slab i goes into, if not yet there.
 * 0, or -errno (the address space ran out: the request falls back).
 */
static int slab_room(int i)
{
	struct ps_slab **c = &slab_chunk[(size_t)i >> SLAB_CHUNK_SHIFT];

	if (*c)
		return 0;
	void *p = mmap(NULL, SLAB_CHUNK * sizeof(struct ps_slab), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	__atomic_store_n(c, (struct ps_slab *)p, __ATOMIC_RELEASE);
	return 0;
}

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

bool ps_cgroup_parse_value(const char *text, uint64_t *out)
{
	uint64_t v;
	const char *end;

	if (strncmp(text, "max", 3) == 0 && (text[3] == '\0' || text[3] == '\n')) {
		*out = UINT64_MAX;
		return true;
	}
	if (!(end = ps_parse_digits(text, UINT64_MAX, &v)) || end == text || (*end && *end != '\n'))
		return false;
	/* v1 says "no limit" with a page-rounded number near 2^63. */
	*out = v >= (1ULL << 62) ? UINT64_MAX : v;
	return true;
}

/*
 * The limit in the file dir/leaf: lowered into out (and the usage file
 * beside it remembered) when it is lower than what out holds.
 */
static void lower_limit(const char *dir, size_t dlen, const char *leaf, const char *usage,
			int version, struct ps_cgroup *out)
{
	char path[sizeof(out->usage_path)], buf[32];
	size_t llen = strlen(leaf), ulen = strlen(usage);
	uint64_t v;

	if (dlen + llen + 1 > sizeof(path) || dlen + ulen + 1 > sizeof(path))
		return;
	memcpy(path, dir, dlen);
	memcpy(path + dlen, leaf, llen + 1);
	if (read_small_file(path, buf, sizeof(buf)) <= 0 || !ps_cgroup_parse_value(buf, &v) ||
	    v == UINT64_MAX || (out->limit != 0 && v >= out->limit))
		return;
	out->limit = v;
	out->version = version;
	memcpy(out->usage_path, dir, dlen);
	memcpy(out->usage_path + dlen, usage, ulen + 1);
}

void ps_cgroup_find(const char *root, char *self, struct ps_cgroup *out)
{
	char dir[sizeof(out->usage_path)];
	const char *v1 = NULL, *v2 = NULL;
	size_t v1len = 0, v2len = 0, rlen = strlen(root);

	memset(out, 0, sizeof(*out));
	/* Lines "ID:CONTROLLERS:PATH"; v2 is "0::PATH", v1 names "memory". */
	for (char *line = self, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		const char *path = c2 + 1;
		if (c2 == c1 + 1 && strncmp(line, "0:", 2) == 0) {
			v2 = path;
			v2len = strlen(path);
		}
		for (const char *c = c1 + 1; c < c2;) {
			const char *e = memchr(c, ',', (size_t)(c2 - c));
			size_t n = (size_t)((e ? e : c2) - c);
			if (n == 6 && memcmp(c, "memory", 6) == 0) {
				v1 = path;
				v1len = strlen(path);
			}
			c += n + 1;
		}
	}

	/* v1's memory controller, where mounted, is the one that limits. */
	static const struct { const char *mount, *leaf, *usage; int version; } where[] = {
		{ "/sys/fs/cgroup/memory", "/memory.limit_in_bytes", "/memory.usage_in_bytes", 1 },
		{ "/sys/fs/cgroup", "/memory.max", "/memory.current", 2 },
		{ "/sys/fs/cgroup/unified", "/memory.max", "/memory.current", 2 },
	};
	for (size_t w = 0; w < PS_ARRAY_SIZE(where) && out->limit == 0; w++) {
		const char *path = where[w].version == 1 ? v1 : v2;
		size_t plen = where[w].version == 1 ? v1len : v2len;
		size_t mlen = rlen + strlen(where[w].mount);
		if (!path || mlen + plen + 1 > sizeof(dir))
			continue;
		memcpy(dir, root, rlen);
		memcpy(dir + rlen, where[w].mount, mlen - rlen);
		memcpy(dir + mlen, path, plen + 1);
		/* From the process's cgroup up to the mount's root. */
		for (size_t len = mlen + plen; len >= mlen;) {
			while (len > mlen && dir[len - 1] == '/')
				len--;
			lower_limit(dir, len, where[w].leaf, where[w].usage, where[w].version, out);
			if (len == mlen)
				break;
			while (len > mlen && dir[len - 1] != '/')
				len--;
		}
	}
}

/*
 * The memory limit of the cgroup this process is in, as the JVM and Go
 * read it: the lowest memory.max (v2) or memory.limit_in_bytes (v1) from
 * the process's cgroup up to the root of the standard mounts (a cgroup
 * namespace shows its own root there).  Read once, at the pool's
 * preparation: a few opens, never at start-up.
 */
static struct ps_cgroup cgroup;

static void cgroup_read_limit(void)
{
	char buf[2048];

	if (read_small_file("/proc/self/cgroup", buf, sizeof(buf)) <= 0)
		memset(&cgroup, 0, sizeof(cgroup));
	else
		ps_cgroup_find("", buf, &cgroup);
}

uint64_t ps_pool_cgroup_usage(void)
{
	char buf[32];
	uint64_t v;

	if (cgroup.limit == 0 || read_small_file(cgroup.usage_path, buf, sizeof(buf)) <= 0 ||
	    !ps_cgroup_parse_value(buf, &v) || v == UINT64_MAX)
		return 0;
	return v;
}

int ps_pool_init(const struct ps_config *cfg)
{
	memset(&info, 0, sizeof(info));
	info.requested = cfg->hugepages;
	info.cap = cfg->pool_size;
	info.retain = cfg->pool_retain;
	info.decay_ms = cfg->pool_decay_ms;
	cfg_pool_size = cfg->pool_size;
	cfg_retain = cfg->pool_retain;
	prefault = cfg->prefault;
	thp_max = cfg->hugepage_max;
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
 * A 2 MiB aligned spot for lo with room above it for the whole range, in
 * [16 TiB, 32 TiB): away from the program's binary and heap (a PIE's near
 * 85 TiB, others' in the first GiB), far below the top-down mmap area, in one of 256 slots
 * picked from the kernel's AT_RANDOM bytes (no syscall).  Reserves the
 * first unit there; 0, or -errno when no slot could be had.
 */
#ifdef __SANITIZE_THREAD__
/*
 * ThreadSanitizer keeps its shadow memory over [16 TiB, 32 TiB) and refuses
 * mappings there: its build of the core (tests/tsan) puts the range in
 * TSan's high application region, below the mmap area.
 */
#define RANGE_BASE ((uintptr_t)0x7e8000000000)
#define RANGE_SLOTS 16u
#else
#define RANGE_BASE ((uintptr_t)16 << 40)
#define RANGE_SLOTS 256u
#endif

static int reserve_growing(uintptr_t *lo)
{
	const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
	unsigned slot = (r ? r[15] : 0) % RANGE_SLOTS;

	for (int tries = 0; tries < 8; tries++, slot = (slot + 37) % RANGE_SLOTS) {
		uintptr_t at = RANGE_BASE + (uintptr_t)slot * ((uintptr_t)64 << 30);
		void *p = mmap((void *)at, PS_UNIT, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == (void *)at) {
			*lo = at;
			return 0;
		}
		if (p != MAP_FAILED)
			munmap(p, PS_UNIT);   /* a kernel that took the flag for a hint */
		else if (errno != EEXIST)
			return -errno;
	}
	return -ENOMEM;
}

/*
 * Under the lock: grow the reservation up to end
 * (a unit boundary).  0, or -errno (the limit, or someone else's mapping
 * just above).
 */
static int reserve_to(uintptr_t end)
{
	uintptr_t hi = ps_pool_hi;

	if (end <= hi)
		return 0;
	if (end > range_max)
		return -ENOMEM;
	void *p = mmap((void *)hi, end - hi, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	if (p != (void *)hi) {
		munmap(p, end - hi);
		return -EEXIST;
	}
	info.reserve += end - hi;
	__atomic_store_n(&ps_pool_hi, end, __ATOMIC_RELEASE);
	return 0;
}

/*
 * Probe the page kinds, read the cgroup's limit and reserve the range.
 * Called once, under the lock, by the first slab request (or
 * ps_pool_prepare()).  0 or -errno.
 */
static int reserve_range(void)
{
	size_t want = round_up(cfg_pool_size, PS_UNIT) * 2;
	if (want > PS_RESERVE_MAX)
		want = PS_RESERVE_MAX;

	probe_page_kinds(info.requested);
	cgroup_read_limit();
	info.cgroup_limit = cgroup.limit;
	info.cgroup_version = cgroup.version;
	/* In a limited cgroup a purge splits partly used THP units too. */
	purge_split = cgroup.limit != 0;
	if (info.cgroup_limit) {
		/*
		 * Leave the program an eighth: near the limit alloc.c gives the
		 * pool's free memory back first (cgroup_watch), and past the cap
		 * glibc's heap serves.  It was three quarters when the cap
		 * counted mapped memory; counted resident, that turned a live set
		 * of 110 MiB in 160 MiB (124 MiB in size classes) away to glibc,
		 * whose heap then held its own free memory beside the pool's.
		 */
		uint64_t cap = info.cgroup_limit / 8 * 7;
		if (cap < info.cap)
			info.cap = cap < PS_UNIT ? PS_UNIT : cap;
		if (info.cgroup_limit / 16 < info.retain)
			info.retain = info.cgroup_limit / 16;
	}
	__atomic_store_n(&cfg_retain, info.retain, __ATOMIC_RELEASE);

	/*
	 * Always reserved as used, whatever RLIMIT_AS is now: a limit the
	 * program (or a shell's `ulimit -v`, or a sandboxing helper) sets
	 * later counts every mapping, PROT_NONE ones included, and a range
	 * reserved ahead would use it up.
	 */
	size_t units = want >> PS_UNIT_SHIFT;
	size_t tables = round_up(units * (sizeof(*unit_slab) + sizeof(*unit_kind)), PS_PAGE);
	void *t = mmap(NULL, tables, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return -errno;
	uintptr_t lo = 0;
	int r = reserve_growing(&lo);
	if (r < 0) {
		munmap(t, tables);
		return r;
	}
	unit_slab = t;
	unit_kind = (uint8_t *)(unit_slab + units);
	unit_tables_len = tables;
	uintptr_t hi = lo + PS_UNIT;
	info.reserve = PS_UNIT;

	range_max = lo + want;
	ps_pool_span = want;
	pool_next = lo;
	backed_end = lo;
	/* Hugepages, THP included, come in whole units: no small region then. */
	small_end = try_hugetlb ? 0 : lo + PS_UNIT;
	/* Readers test hi first (ps_pool_contains): lo must be there before it. */
	__atomic_store_n(&ps_pool_lo, lo, __ATOMIC_RELEASE);
	__atomic_store_n(&ps_pool_hi, hi, __ATOMIC_RELEASE);
	return 0;
}

uint64_t ps_pool_retain(void)
{
	return __atomic_load_n(&cfg_retain, __ATOMIC_ACQUIRE);
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

	/*
	 * A private hugetlb mapping reserves its pages here, at mmap time;
	 * they are the administrator's reserved pages, held whether touched
	 * or not, so they are populated too, whatever POOLSHIM_PREFAULT says.
	 */
	void *p = mmap((void *)addr, len, PROT_READ | PROT_WRITE, flags | MAP_POPULATE, -1, 0);
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
	return true;
}

/* Fault in [addr, addr + len) (mapped read-write) now, not in the request. */
static void populate(uintptr_t addr, size_t len)
{
	if (PS_SYSCALL(SYS_madvise, addr, len, MADV_POPULATE_WRITE) != 0)
		touch_pages(addr, len);
}

/*
 * Under the lock: where a slab of len bytes aligned to align goes, and the
 * range [*back_from, *back_to) to back for it.
 */
static void place(size_t len, size_t align, uintptr_t *start, uintptr_t *back_from,
		  uintptr_t *back_to, bool *small)
{
	*start = round_up(pool_next, align);
	*small = false;
	/* With THP, a buffer of half a unit or more is better off on hugepages. */
	size_t small_max = try_thp ? PS_UNIT / 2 : PS_UNIT;
	if (small_end) {
		if (*start + len <= small_end && len < small_max) {
			*small = true;
			*back_from = backed_end;
			*back_to = round_up(*start + len, SMALL_STEP);
			if (*back_to > small_end)
				*back_to = small_end;
			return;
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
	 * Slabs sit back to back, hugepage ones too, so the 2 MiB unit holding
	 * the end of one slab also holds the start of the next: only whole
	 * units beyond what is already backed need new memory, and the pool
	 * arena can merge the two slabs' free blocks.  (A slab used to start
	 * on a unit with hugepages, so that a free slab was whole units to
	 * purge; now free blocks merge across slabs, and the whole units
	 * inside a merged block are what a purge gives back.)  A slab aligned
	 * past whole units (memalign) leaves them unbacked, as the small
	 * region's rest: they are no slab, no block can use them, and backed
	 * they would count as taken (hugetlb: hold pages for nothing).
	 */
	uintptr_t first_unit = *start & ~(uintptr_t)(PS_UNIT - 1);
	*back_from = backed_end > first_unit ? backed_end : first_unit;
	*back_to = round_up(*start + len, PS_UNIT);
}

/*
 * Under the lock: the bytes of the backed range resident now, by mincore
 * over it (16 MiB per call with a 4 KiB vector): live blocks, free blocks
 * not yet purged, the hugepages around them.  The whole backed size when
 * it cannot be told.
 */
static uint64_t resident_locked(void)
{
	unsigned char vec[4096];
	uint64_t pages = 0;

	for (uintptr_t a = ps_pool_lo; a < backed_end; a += sizeof(vec) * PS_PAGE) {
		size_t n = backed_end - a < sizeof(vec) * PS_PAGE ? backed_end - a : sizeof(vec) * PS_PAGE;
		if (PS_SYSCALL(SYS_mincore, a, n, vec) != 0)
			return info.backed;
		for (size_t k = 0; k < n / PS_PAGE; k++)
			pages += vec[k] & 1;
	}
	return pages * PS_PAGE;
}

/* Under the lock: would backing n more bytes take the pool past its cap? */
static bool over_cap(size_t n)
{
	if (info.backed + n <= info.cap)
		return false;
	/* Mapped is past the cap; what counts is what is resident. */
	return resident_locked() + n > info.cap;
}

uintptr_t ps_pool_next(void)
{
	pthread_mutex_lock(&pool_lock);
	uintptr_t next = pool_next;
	pthread_mutex_unlock(&pool_lock);
	return next;
}

void *ps_pool_take(size_t len, size_t align, size_t need, bool *zeroed, enum ps_pool_fail *why)
{
	int saved_errno = errno;
	enum ps_pool_fail fail = PS_FAIL_NONE;
	enum ps_backing backing;
	uintptr_t start = 0, end = 0, back_from = 0, back_to = 0;
	bool small = false;

	len = round_up(len, PS_PAGE);
	align = align > PS_PAGE ? align : PS_PAGE;

	pthread_mutex_lock(&pool_lock);
	/* A slab inside memory already backed has the last backing (read under the lock). */
	backing = last_backing;
	if (test_delay_us)
		delay_us(test_delay_us);
	if (prepare_locked() < 0) {
		fail = PS_FAIL_NO_ADDRESS;
	} else if (len > PS_SLAB_MAX) {
		fail = PS_FAIL_TOO_LARGE;
	} else {
		place(len, align, &start, &back_from, &back_to, &small);
		end = start + len;
		if (start > range_max || back_to > range_max)
			fail = PS_FAIL_NO_ADDRESS;
		else if (back_to > back_from && over_cap(back_to - back_from))
			fail = PS_FAIL_POOL_FULL;
		else if (reserve_to(round_up(back_to, PS_UNIT)) < 0)
			fail = PS_FAIL_NO_ADDRESS;
	}

	if (fail == PS_FAIL_NONE && back_to > back_from) {
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
			/*
			 * A slab for a request above POOLSHIM_HUGEPAGE_MAX gets
			 * 4 KiB pages: a program that allocates a table that big
			 * tends to touch it here and there (xz -9's 512 MiB match
			 * finder, sort -S's buffer), and on THP every touch makes
			 * 2 MiB resident: xz -9 of 512 KiB 76 MB against glibc's
			 * 9 MB, 9.7 MB on 4 KiB pages.  Buffers a server fills
			 * whole are smaller, and keep their hugepages.
			 */
			bool thp = try_thp && len <= thp_max && thp_still_allowed();
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
			if (small)
				info.small_backed += n;
			for (uintptr_t u = (back_from - ps_pool_lo) >> PS_UNIT_SHIFT,
				       last = (back_to - 1 - ps_pool_lo) >> PS_UNIT_SHIFT; u <= last; u++)
				unit_kind[u] = (uint8_t)(backing + 1);
		}
	}
	/*
	 * POOLSHIM_PREFAULT=on: prefault what the request needs: the extent jemalloc carves for it
	 * is the slab, and its block starts the extent (alloc.c turns
	 * jemalloc's cache-colouring offset off).  A purged or never-touched
	 * part of an older unit is faulted in too.
	 */
	if (fail == PS_FAIL_NONE && prefault) {
		size_t want = need ? round_up(need, PS_PAGE) : len;
		populate(start, want < len ? want : len);
	}

	/*
	 * A slab that starts where the last one ended, on the same pages, is
	 * the last one grown: the table holds runs of like memory, not each
	 * request that took some (a 4 KiB threshold with the top of the pool
	 * live took a slab per request and ran out of the 65535 numbers).
	 * Not a slab the program protected: its mark is not the new memory's.
	 */
	struct ps_slab *prev = fail == PS_FAIL_NONE && nslabs > 0 ? slab_at(nslabs - 1) : NULL;
	bool grow = prev && prev->base + prev->len == start && prev->backing == backing &&
		    !__atomic_load_n(&prev->protected, __ATOMIC_RELAXED);
	if (fail == PS_FAIL_NONE && !grow && (nslabs >= PS_MAX_SLABS || slab_room(nslabs) < 0))
		fail = PS_FAIL_NO_ADDRESS;   /* the memory backed stays for the next slab */
	if (fail == PS_FAIL_NONE) {
		int idx = grow ? nslabs - 1 : nslabs;
		if (grow) {
			/* Readers may look at it meanwhile: the new memory is nobody's yet. */
			__atomic_store_n(&prev->len, prev->len + len, __ATOMIC_RELEASE);
		} else {
			/* A slab that starts where the last one ended continues its run. */
			int run = prev && prev->base + prev->len == start ? prev->run : idx;
			*slab_at(idx) = (struct ps_slab){ .base = start, .len = len, .backing = backing,
						       .run = (uint16_t)run };
		}
		for (uintptr_t u = (start - ps_pool_lo) >> PS_UNIT_SHIFT,
			       last = (end - 1 - ps_pool_lo) >> PS_UNIT_SHIFT; u <= last; u++)
			__atomic_store_n(&unit_slab[u], (uint16_t)(idx + 1), __ATOMIC_RELEASE);
		__atomic_store_n(&nslabs, idx + 1, __ATOMIC_RELEASE);
		pool_next = end;
		/* The mode is the first slab's past the small region, if any. */
		if (info.slabs == 0 || (!small && first_small))
			info.first_mode = backing;
		first_small = info.slabs == 0 ? small : first_small && small;
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
	while (i >= 0 && a < slab_at(i)->base)
		i--;
	/* len grows under the lock while readers look (a slab grown in place). */
	if (i < 0 || a - slab_at(i)->base >= __atomic_load_n(&slab_at(i)->len, __ATOMIC_ACQUIRE))
		return -1;
	return i;
}

bool ps_pool_slab(int i, struct ps_slab *out)
{
	if (i < 0 || i >= __atomic_load_n(&nslabs, __ATOMIC_ACQUIRE))
		return false;
	/* Field by field: len grows and protected is marked while readers look. */
	const struct ps_slab *s = slab_at(i);
	out->base = s->base;
	out->len = __atomic_load_n(&s->len, __ATOMIC_ACQUIRE);
	out->backing = s->backing;
	out->run = s->run;
	out->protected = __atomic_load_n(&s->protected, __ATOMIC_ACQUIRE);
	return true;
}

/* Set once any slab is marked protected: until then the test is one load. */
static int any_protected;

void ps_pool_note_mprotect(const void *addr, size_t len, int prot)
{
	uintptr_t a = (uintptr_t)addr, end = a + len;
	uintptr_t hi = __atomic_load_n(&ps_pool_hi, __ATOMIC_ACQUIRE);

	if (end < a)
		end = UINTPTR_MAX;   /* a length that wraps reaches every slab above addr */
	if (prot == (PROT_READ | PROT_WRITE) || len == 0 || hi == 0 || end <= ps_pool_lo || a >= hi)
		return;
	int n = ps_pool_nslabs();
	for (int i = 0; i < n; i++) {
		struct ps_slab *s = slab_at(i);
		if (s->base < end && a < s->base + __atomic_load_n(&s->len, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&s->protected, 1, __ATOMIC_RELEASE);
			__atomic_store_n(&any_protected, 1, __ATOMIC_RELEASE);
		}
	}
}

/* The slab holding the last byte of [p, p + len), or -1 (none, or the length wraps). */
static int last_slab_of(const void *p, size_t len)
{
	uintptr_t last = (uintptr_t)p + len - 1;
	if (len == 0)
		return ps_pool_slab_of(p);
	if (last < (uintptr_t)p)
		return -1;
	return ps_pool_slab_of((const void *)last);
}

int ps_pool_nslabs(void)
{
	return __atomic_load_n(&nslabs, __ATOMIC_ACQUIRE);
}

bool ps_pool_range_of(const void *p, size_t len, struct ps_pool_range *out)
{
	*out = (struct ps_pool_range){ .first = -1, .last = -1 };
	int i = ps_pool_slab_of(p);
	if (i < 0)
		return false;
	int j = last_slab_of(p, len);
	out->first = i;
	out->last = j;
	out->backing = slab_at(i)->backing;
	/*
	 * Both ends in slabs of one run: the slabs between follow each other
	 * without a gap (a run is consecutive slabs, each starting where the
	 * one before ends).
	 */
	out->within = j >= i && slab_at(j)->run == slab_at(i)->run;
	if (__atomic_load_n(&any_protected, __ATOMIC_ACQUIRE)) {
		/* Slabs are numbered in address order: those between hold the rest. */
		for (int k = i; k <= (j < i ? i : j) && !out->protected; k++)
			out->protected = __atomic_load_n(&slab_at(k)->protected, __ATOMIC_ACQUIRE);
	}
	return out->within;
}

bool ps_pool_within_slabs(const void *p, size_t len)
{
	struct ps_pool_range r;
	return ps_pool_range_of(p, len, &r);
}

bool ps_pool_range_protected(const void *p, size_t len)
{
	struct ps_pool_range r;
	ps_pool_range_of(p, len, &r);
	return r.protected;
}

/*
 * Give [from, to) back (page aligned, 4 KiB or whole THP units); true if
 * done.  Counted as purged if counted.
 */
static bool give_back(uintptr_t from, uintptr_t to, bool counted, size_t *done)
{
	if (to <= from)
		return true;
	/* Raw: the program's own madvise (if anything wraps it) is not ours to call. */
	if (PS_SYSCALL(SYS_madvise, from, to - from, MADV_DONTNEED) != 0)
		return false;
	if (counted)
		__atomic_add_fetch(&info.purged, to - from, __ATOMIC_RELAXED);
	*done += to - from;
	return true;
}

static int give_back_range(void *addr, size_t len, bool counted, bool split, size_t *done)
{
	uintptr_t a = (uintptr_t)addr, end = a + len;
	uintptr_t lo = __atomic_load_n(&ps_pool_lo, __ATOMIC_ACQUIRE);
	uintptr_t run = 0, run_end = 0;      /* the range to give back in one call */
	bool all = true;

	if (len == 0 || !ps_pool_contains(addr) || !ps_pool_contains((void *)(end - 1)))
		return -EINVAL;
	for (uintptr_t u = a; u < end;) {
		uintptr_t ubase = u & ~(PS_UNIT - 1), uend = ubase + PS_UNIT;
		uintptr_t seg_end = uend < end ? uend : end;
		int kind = (int)__atomic_load_n(&unit_kind[(ubase - lo) >> PS_UNIT_SHIFT],
						__ATOMIC_RELAXED) - 1;
		/*
		 * THP: whole units only, else the kernel splits the hugepage;
		 * under a cgroup's limit, resident memory counts more than the
		 * TLB, and a split unit's free pages go back too.
		 */
		bool ok = kind == PS_BACK_4K ||
			  (kind == PS_BACK_THP &&
			   ((u == ubase && seg_end == uend) || split ||
			    __atomic_load_n(&purge_split, __ATOMIC_RELAXED)));
		if (ok) {
			if (run_end != u) {
				all &= give_back(run, run_end, counted, done);
				run = u;
			}
			run_end = seg_end;
		} else {
			all = false;
		}
		u = seg_end;
	}
	all &= give_back(run, run_end, counted, done);
	return all ? 0 : -EAGAIN;
}

int ps_pool_purge(void *addr, size_t len)
{
	size_t done = 0;
	return give_back_range(addr, len, true, false, &done);
}

size_t ps_pool_give_back(uintptr_t addr, size_t len)
{
	size_t done = 0;
	give_back_range((void *)addr, len, false, true, &done);
	return done;
}

void ps_pool_count_purge(void)
{
	__atomic_add_fetch(&info.purges, 1, __ATOMIC_RELAXED);
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

/*
 * Counted for the report's hugetlb advice: a parent that forked shares its
 * pool with a child, where hugetlb pages are a risk (the fork caveat).
 * _Fork and raw clones run no handlers and are not counted.
 */
void ps_pool_atfork_parent(void)
{
	info.forks++;
	pthread_mutex_unlock(&pool_lock);
}

/* The child has one thread, the one that locked it; it has forked no one. */
void ps_pool_atfork_child(void)
{
	info.forks = 0;
	pthread_mutex_unlock(&pool_lock);
}

void ps_pool_reset_for_tests(void)
{
	if (ps_pool_hi != ps_pool_lo)
		munmap((void *)ps_pool_lo, ps_pool_hi - ps_pool_lo);
	for (size_t c = 0; c < SLAB_CHUNKS; c++)
		if (slab_chunk[c]) {
			munmap(slab_chunk[c], SLAB_CHUNK * sizeof(struct ps_slab));
			slab_chunk[c] = NULL;
		}
	if (unit_slab)
		munmap(unit_slab, unit_tables_len);
	unit_slab = NULL;
	unit_kind = NULL;
	unit_tables_len = 0;
	range_max = 0;
	nslabs = 0;
	pool_next = backed_end = small_end = 0;
	prepared = false;
	prepare_error = 0;
	purge_split = false;
	first_small = false;
	any_protected = 0;
	memset(&cgroup, 0, sizeof(cgroup));
	ps_pool_lo = ps_pool_hi = ps_pool_span = 0;
	memset(&info, 0, sizeof(info));
}
