// SPDX-License-Identifier: MIT
/*
 * Call-site capture and aggregation.
 *
 * The table (sites.h's layout) is an open-addressing hash of stacks: a slot
 * is claimed with one CAS on its hash, filled, then published; counters
 * are atomic adds.  No lock, no allocation.  It starts in anonymous memory
 * and moves into the process's live record when the record is made
 * (ps_callsite_move: a region of the file, mapped shared), so a reader
 * renders the call sites of a process that was killed; a fork child moves
 * it back to private memory.  Beside the stacks it lists the modules their
 * frames fall in (path, load bias, build id), brought up to date when a new
 * stack has a frame outside the listed ones (a library dlopen'd since).
 * Footprint, only with POOLSHIM_BACKTRACE: PS_SITES_LEN (4.8 MiB) of
 * address space, anonymous pages as they are touched; once in the record,
 * the same reserved in the live directory with fallocate.  The anonymous
 * table's pages are given back when it moves (its mapping stays: a thread
 * may still be in it).  A fork child reads the whole shared table once to
 * copy it into private memory.
 * Unwinding (libunwind's local
 * unw_backtrace) may allocate or take the loader's lock: a thread-local
 * guard keeps those allocations from being captured in turn, and a capture
 * is never attempted from the report's signal handler.  Frames inside the
 * shim itself are dropped so stacks start at the program's call.
 *
 * Calls are sampled by bytes, as jemalloc's lg_prof_sample and tcmalloc's
 * sampling period do: each thread counts down, per kind, a gap drawn from
 * an exponential distribution of mean POOLSHIM_BACKTRACE_SAMPLE bytes, and
 * the call that crosses it is captured.  A call of s bytes is so captured
 * with probability p = 1 - exp(-s / mean), whatever came before it (the
 * gap is memoryless): a 4 MiB allocation almost always, a 4 KiB read
 * rarely.  Each capture adds 1/p calls, s/p bytes and t/p nanoseconds to
 * its site, so a site's numbers are unbiased estimates of its calls,
 * bytes and time.  (Counting calls at a fixed gap, as before, landed on
 * the same site every time when two sites alternate.)  A mean of 1
 * captures every call.
 *
 * libunwind is opened with dlopen(RTLD_LOCAL) when POOLSHIM_BACKTRACE asks
 * for stacks, never linked: as a dependency of a preloaded library its
 * _Unwind_RaiseException and backtrace() would come before libgcc's and
 * glibc's for the whole program, so every C++ exception of the host would
 * unwind through it (two sigprocmask calls per frame, ~17x slower throws).
 */
#include "core/callsite.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/mman.h>

#include "format/emit.h"
#include "format/fmt.h"
#include "format/sites.h"
#include "format/sys.h"

#define SLOTS PS_SITES_SLOTS       /* 4.9 MiB of address space, paged in as used */
#define DEPTH_MAX PS_SITES_DEPTH
#define PROBES 64
#define WEIGHT_ONE PS_SITES_WEIGHT_ONE

bool ps_callsite_on;
/* The region (sites.h) and its parts; `region` changes when the table moves. */
static void *region;
static bool region_shared;     /* in the live record (mapped from its file) */
static int depth;
static uint64_t sample;         /* mean bytes between captures; 1: every call */
static unsigned top;
static const char *debuginfo_path;   /* POOLSHIM_DEBUGINFO_PATH, NULL: elfutils' default */
static uintptr_t self_lo, self_hi;     /* our own code, skipped in stacks */
static __thread int guard;
static int (*unw_backtrace_fn)(void **, int);
static double (*log_fn)(double), (*expm1_fn)(double);  /* libm's, opened with libunwind */
static __thread uint64_t gap_left[2];   /* bytes before the next capture; 0: none drawn */
static __thread uint64_t rng;

static int find_self(struct dl_phdr_info *info, size_t size, void *base)
{
	if ((void *)info->dlpi_addr != base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (!self_lo || lo < self_lo)
			self_lo = lo;
		if (lo + ph->p_memsz > self_hi)
			self_hi = lo + ph->p_memsz;
	}
	return 1;
}

/*
 * A function of a library the shim does not link, opened the first time it
 * is asked for (dlopen allocates and takes the loader's lock: never from a
 * signal handler or under the pool lock).  RTLD_LOCAL: the library's names
 * do not join the program's.  NULL if it cannot be had.
 */
void *ps_late_sym(const char *lib, const char *name)
{
	void *h = dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
	return h ? dlsym(h, name) : NULL;
}

void ps_callsite_init(const struct ps_config *cfg)
{
	Dl_info di;

	if (cfg->backtrace == 0)
		return;
	void *u = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
	if (u)
		*(void **)&unw_backtrace_fn = dlsym(u, "unw_backtrace");
	if (!unw_backtrace_fn) {
		ps_log("POOLSHIM_BACKTRACE: libunwind.so.8 cannot be loaded (%s); no call sites "
		       "(Debian package libunwind8)", u ? "no unw_backtrace" : "not installed");
		return;
	}
	/* The sampling gap's logarithm: libm is not linked, so that a process
	 * that asks for no stacks does not load it (issue 26). */
	*(void **)&log_fn = ps_late_sym("libm.so.6", "log");
	*(void **)&expm1_fn = ps_late_sym("libm.so.6", "expm1");
	if (!log_fn || !expm1_fn) {
		ps_log("POOLSHIM_BACKTRACE: libm.so.6 cannot be loaded; no call sites");
		return;
	}
	void *p = mmap(NULL, PS_SITES_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED)
		return;
	ps_sites_format(p);
	__atomic_store_n(&region, p, __ATOMIC_RELEASE);
	depth = (int)cfg->backtrace;
	sample = cfg->backtrace_sample;
	top = (unsigned)cfg->backtrace_top;
	debuginfo_path = cfg->debuginfo_path[0] ? cfg->debuginfo_path : NULL;
	if (dladdr((void *)ps_callsite_init, &di) && di.dli_fbase)
		dl_iterate_phdr(find_self, di.dli_fbase);
	__atomic_store_n(&ps_callsite_on, true, __ATOMIC_RELEASE);
}

/*
 * The modules mapped now, appended to the region's list where not listed
 * yet (the list only grows, so a reader never sees an entry change; a
 * library loaded again elsewhere is listed again, and the latest entry
 * wins).  One thread at a time; another one finding it busy goes on
 * without.  dl_iterate_phdr takes the loader's lock, as unwinding does:
 * called where unw_backtrace may be, never from a signal handler.
 */
static void note_build_id(struct ps_site_module *o, const struct dl_phdr_info *info,
			  const ElfW(Phdr) *ph)
{
	const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
	const unsigned char *end = p + ph->p_memsz;
	size_t align = ph->p_align > 4 ? ph->p_align : 4;

	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
		const unsigned char *name = p + sizeof(*nh);
		const unsigned char *desc = name + ((nh->n_namesz + align - 1) & ~(align - 1));
		if (desc + nh->n_descsz > end)
			return;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    memcmp(name, "GNU", 4) == 0 && nh->n_descsz <= 40) {
			static const char hex[] = "0123456789abcdef";
			for (unsigned i = 0; i < nh->n_descsz; i++) {
				o->build_id[2 * i] = hex[desc[i] >> 4];
				o->build_id[2 * i + 1] = hex[desc[i] & 15];
			}
			o->build_id[2 * nh->n_descsz] = 0;
			return;
		}
		p = desc + ((nh->n_descsz + align - 1) & ~(align - 1));
	}
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	void *r = arg;
	struct ps_sites_head *h = ps_sites_head(r);
	struct ps_site_module *mods = ps_sites_modules(r), o;

	(void)size;
	uint32_t n = h->nmodules;
	if (n >= PS_SITES_MODULES)
		return 1;
	memset(&o, 0, sizeof(o));
	o.bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
			if (!o.lo || lo < o.lo)
				o.lo = lo;
			if (lo + ph->p_memsz > o.hi)
				o.hi = lo + ph->p_memsz;
		} else if (ph->p_type == PT_NOTE && !o.build_id[0]) {
			note_build_id(&o, info, ph);
		}
	}
	if (!o.lo)
		return 0;
	const char *name = info->dlpi_name;
	if (!name || !name[0]) {
		/* the main program */
		ssize_t len = readlink("/proc/self/exe", o.path, sizeof(o.path) - 1);
		o.path[len > 0 ? len : 0] = 0;
	} else {
		size_t len = strlen(name);
		if (len >= sizeof(o.path))
			len = sizeof(o.path) - 1;
		memcpy(o.path, name, len);
		o.path[len] = 0;
	}
	for (uint32_t i = 0; i < n; i++)
		if (mods[i].lo == o.lo && mods[i].hi == o.hi && mods[i].bias == o.bias &&
		    strcmp(mods[i].path, o.path) == 0)
			return 0;
	mods[n] = o;
	__atomic_store_n(&h->nmodules, n + 1, __ATOMIC_RELEASE);
	return 0;
}

static void refresh_modules(void *r)
{
	struct ps_sites_head *h = ps_sites_head(r);

	if (__atomic_exchange_n(&h->modules_busy, 1, __ATOMIC_ACQUIRE))
		return;
	dl_iterate_phdr(add_module, r);
	__atomic_store_n(&h->modules_busy, 0, __ATOMIC_RELEASE);
}

/* Whether every frame falls in a listed module. */
static bool modules_known(void *r, void *const *f, int n)
{
	const struct ps_sites_head *h = ps_sites_head(r);
	const struct ps_site_module *mods = ps_sites_modules(r);
	uint32_t nm = __atomic_load_n(&h->nmodules, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)f[i];
		uint32_t k = 0;
		while (k < nm && !(a >= mods[k].lo && a < mods[k].hi))
			k++;
		if (k == nm)
			return false;
	}
	return true;
}

static uint64_t hash_frames(void *const *f, int n, unsigned kind, unsigned call)
{
	uint64_t h = 1469598103934665603ULL ^ (kind << 8 | call);
	for (int i = 0; i < n; i++) {
		h ^= (uint64_t)(uintptr_t)f[i];
		h *= 1099511628211ULL;
	}
	return h ? h : 1;
}

/* An exponential gap of mean `sample` bytes (xorshift64*, seeded by the clock). */
static uint64_t draw_gap(void)
{
	if (!rng)
		rng = __builtin_ia32_rdtsc() ^ ((uint64_t)(uintptr_t)&rng << 16) ^ 0x9e3779b97f4a7c15ULL;
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	uint64_t r = rng * 2685821657736338717ULL;
	double u = ((double)(r >> 11) + 0.5) * 0x1.0p-53;     /* (0, 1) */
	double g = -log_fn(u) * (double)sample;
	return g < 1 ? 1 : g > 0x1p62 ? (uint64_t)1 << 62 : (uint64_t)g + 1;
}

/*
 * Whether this call of w bytes is captured, and with what probability
 * (*p) a call of its size is.
 */
static bool sampled(enum ps_site_kind kind, uint64_t w, double *p)
{
	*p = 1;
	if (sample <= 1)
		return true;
	uint64_t left = gap_left[kind];
	if (!left)
		left = draw_gap();
	if (left > w) {
		gap_left[kind] = left - w;
		return false;
	}
	gap_left[kind] = draw_gap();
	*p = -expm1_fn(-(double)w / (double)sample);
	return true;
}

/*
 * Add a capture (or a site's totals, when the table moves) to the stack's
 * slot of region r, claiming one for a stack not seen yet (*added).  0, or
 * -ENOSPC when its probes are all taken by other stacks.
 */
static int add_site(void *r, const uint64_t *f, int n, uint64_t h, unsigned kind, unsigned call,
		    uint64_t w_count, uint64_t w_bytes, uint64_t w_nsec, bool *added)
{
	struct ps_site *sites = ps_sites_table(r);

	*added = false;
	for (unsigned i = 0; i < PROBES; i++) {
		struct ps_site *s = &sites[(h + i) & (SLOTS - 1)];
		uint64_t cur = __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE);
		if (cur == 0) {
			uint64_t expected = 0;
			if (__atomic_compare_exchange_n(&s->hash, &expected, h, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				memcpy(s->frames, f, sizeof(uint64_t) * (size_t)n);
				s->depth = (uint32_t)n;
				s->kind = (uint16_t)kind;
				s->call = (uint16_t)call;
				__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
				cur = h;
				*added = true;
			} else {
				cur = expected;
			}
		}
		if (cur == h) {
			__atomic_add_fetch(&s->count, w_count, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->bytes, w_bytes, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->nsec, w_nsec, __ATOMIC_RELAXED);
			return 0;
		}
	}
	return -ENOSPC;
}

void ps_callsite_capture(enum ps_site_kind kind, enum ps_call call, uint64_t bytes,
			 uint64_t nsec)
{
	void *raw[DEPTH_MAX + 16];
	double p;

	if (guard || !__atomic_load_n(&region, __ATOMIC_RELAXED))
		return;
	/* A call that moved nothing (EOF, an error) weighs one byte. */
	if (!sampled(kind, bytes ? bytes : 1, &p))
		return;
	if (p < 1e-12)
		p = 1e-12;
	uint64_t w_count = (uint64_t)(WEIGHT_ONE / p + 0.5);
	uint64_t w_bytes = (uint64_t)((double)bytes / p + 0.5);
	uint64_t w_nsec = (uint64_t)((double)nsec / p + 0.5);
	guard++;
	int n = unw_backtrace_fn(raw, depth + 16 < (int)PS_ARRAY_SIZE(raw) ? depth + 16
									   : (int)PS_ARRAY_SIZE(raw));
	int skip = 0;
	while (skip < n && (uintptr_t)raw[skip] >= self_lo && (uintptr_t)raw[skip] < self_hi)
		skip++;
	n -= skip;
	if (n > depth)
		n = depth;
	if (n <= 0) {
		guard--;
		return;
	}
	void **f = raw + skip;
	void *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
	if (!r) {
		guard--;
		return;
	}
	uint64_t h = hash_frames(f, n, kind, call);
	bool added;
	if (add_site(r, (const uint64_t *)(void *)f, n, h, kind, call, w_count, w_bytes, w_nsec,
		     &added) == 0) {
		__atomic_add_fetch(&ps_sites_head(r)->captures, 1, __ATOMIC_RELAXED);
		/* A new stack in code loaded since the list was made (dlopen): list it. */
		if (added && !modules_known(r, f, n))
			refresh_modules(r);
	} else {
		__atomic_add_fetch(&ps_sites_head(r)->dropped, 1, __ATOMIC_RELAXED);
	}
	guard--;
}

void ps_callsite_hold(bool on)
{
	guard += on ? 1 : -1;
}

uint64_t ps_callsite_captures(void)
{
	void *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
	return r ? __atomic_load_n(&ps_sites_head(r)->captures, __ATOMIC_RELAXED) : 0;
}

uint64_t ps_callsite_dropped(void)
{
	void *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);
	return r ? __atomic_load_n(&ps_sites_head(r)->dropped, __ATOMIC_RELAXED) : 0;
}

/*
 * Everything of table `from` into table `to` (formatted, empty or not):
 * its modules, then each site's totals added to the same stack's slot.
 */
static void merge(void *to, void *from)
{
	struct ps_sites_head *fh = ps_sites_head(from), *th = ps_sites_head(to);
	const struct ps_site_module *fm = ps_sites_modules(from);
	struct ps_site_module *tm = ps_sites_modules(to);
	uint32_t n = __atomic_load_n(&fh->nmodules, __ATOMIC_ACQUIRE);

	/* As an appender (refresh_modules): a capture on the new table may be listing too. */
	if (!__atomic_exchange_n(&th->modules_busy, 1, __ATOMIC_ACQUIRE)) {
		if (!th->nmodules && n <= PS_SITES_MODULES) {
			memcpy(tm, fm, sizeof(*fm) * n);
			__atomic_store_n(&th->nmodules, n, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&th->modules_busy, 0, __ATOMIC_RELEASE);
	}
	const struct ps_site *fs = ps_sites_table(from);
	for (unsigned i = 0; i < SLOTS; i++) {
		const struct ps_site *s = &fs[i];
		bool added;
		if (!__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE))
			continue;
		if (add_site(to, s->frames, (int)s->depth, s->hash, s->kind, s->call,
			     __atomic_load_n(&s->count, __ATOMIC_RELAXED),
			     __atomic_load_n(&s->bytes, __ATOMIC_RELAXED),
			     __atomic_load_n(&s->nsec, __ATOMIC_RELAXED), &added) < 0)
			__atomic_add_fetch(&th->dropped, 1, __ATOMIC_RELAXED);
	}
	__atomic_add_fetch(&th->captures, __atomic_load_n(&fh->captures, __ATOMIC_RELAXED),
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(&th->dropped, __atomic_load_n(&fh->dropped, __ATOMIC_RELAXED),
			   __ATOMIC_RELAXED);
}

bool ps_callsite_move(void *to)
{
	void *from = __atomic_load_n(&region, __ATOMIC_ACQUIRE);

	if (!from || !ps_callsite_on)
		return false;
	ps_sites_format(to);
	/*
	 * New captures go to the new table from here; the old one's totals
	 * follow.  A capture that read the old address just before and adds
	 * to a site already copied is lost: a few calls at most, once.  The
	 * old table stays mapped (another thread may still be in it), its
	 * anonymous pages given back.
	 */
	__atomic_store_n(&region, to, __ATOMIC_RELEASE);
	merge(to, from);
	if (!region_shared)
		madvise(from, PS_SITES_LEN, MADV_DONTNEED);
	region_shared = true;
	return true;
}

void ps_callsite_after_fork_child(void)
{
	void *from = __atomic_load_n(&region, __ATOMIC_ACQUIRE);

	if (!from || !region_shared)
		return;
	/* One thread now: the parent's record is copied out of and let go. */
	void *p = mmap(NULL, PS_SITES_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED) {
		/* Never write the parent's record: no call sites in this child. */
		__atomic_store_n(&region, NULL, __ATOMIC_RELEASE);
	} else {
		ps_sites_format(p);
		__atomic_store_n(&region, p, __ATOMIC_RELEASE);
		merge(p, from);
	}
	munmap(from, PS_SITES_LEN);
	region_shared = false;
}

void ps_callsite_emit(struct ps_emit *e, bool symbolize)
{
	void *r = __atomic_load_n(&region, __ATOMIC_ACQUIRE);

	if (!r || top == 0)
		return;
	/* naming allocates (libdw): keep those allocations out of the table */
	guard++;
	if (symbolize)
		refresh_modules(r);
	struct ps_sites_view v = {
		.region = r, .sample = sample, .top = top, .symbolize = symbolize,
		.offline = false, .debuginfo_path = debuginfo_path,
	};
	ps_sites_emit(e, &v);
	guard--;
}

void ps_callsite_render(struct ps_buf *b, bool json, bool symbolize)
{
	struct ps_emit e;

	ps_emit_continue(&e, b, json);
	ps_callsite_emit(&e, symbolize);
}
