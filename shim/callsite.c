// SPDX-License-Identifier: MIT
/*
 * Call-site capture and aggregation.
 *
 * The table is an open-addressing hash of stacks in mmap'd memory: a slot
 * is claimed with one CAS on its hash, filled, then published; counters
 * are atomic adds.  No lock, no allocation.  Unwinding (libunwind's local
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
#include "callsite.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/mman.h>

#include "emit.h"
#include "fmt.h"
#include "sys.h"

#define SLOTS 16384                /* power of two; 4.9 MiB of address space, paged in as used */
#define DEPTH_MAX 32
#define PROBES 64

struct site {
	uint64_t hash;              /* 0 = empty */
	int ready;                  /* frames filled in */
	uint16_t kind, call;
	uint32_t depth;
	void *frames[DEPTH_MAX];
	/* Estimates: calls in 1/WEIGHT_ONE units, bytes, nanoseconds (see the top). */
	uint64_t count, bytes, nsec;
};

/* Estimated calls are kept in fixed point: 1/p to a 1024th. */
#define WEIGHT_ONE 1024

bool ps_callsite_on;
static struct site *sites;
static int depth;
static uint64_t sample;         /* mean bytes between captures; 1: every call */
static unsigned top;
static const char *debuginfo_path;   /* POOLSHIM_DEBUGINFO_PATH, NULL: elfutils' default */
static uintptr_t self_lo, self_hi;     /* our own code, skipped in stacks */
static uint64_t captures, dropped;
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
	void *p = mmap(NULL, sizeof(struct site) * SLOTS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	sites = p;
	depth = (int)cfg->backtrace;
	sample = cfg->backtrace_sample;
	top = (unsigned)cfg->backtrace_top;
	debuginfo_path = cfg->debuginfo_path[0] ? cfg->debuginfo_path : NULL;
	if (dladdr((void *)ps_callsite_init, &di) && di.dli_fbase)
		dl_iterate_phdr(find_self, di.dli_fbase);
	__atomic_store_n(&ps_callsite_on, true, __ATOMIC_RELEASE);
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

void ps_callsite_capture(enum ps_site_kind kind, enum ps_call call, uint64_t bytes,
			 uint64_t nsec)
{
	void *raw[DEPTH_MAX + 16];
	double p;

	if (guard || !sites)
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
	uint64_t h = hash_frames(f, n, kind, call);
	for (unsigned i = 0; i < PROBES; i++) {
		struct site *s = &sites[(h + i) & (SLOTS - 1)];
		uint64_t cur = __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE);
		if (cur == 0) {
			uint64_t expected = 0;
			if (__atomic_compare_exchange_n(&s->hash, &expected, h, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
				memcpy(s->frames, f, sizeof(void *) * (size_t)n);
				s->depth = (uint32_t)n;
				s->kind = (uint16_t)kind;
				s->call = (uint16_t)call;
				__atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
				cur = h;
			} else {
				cur = expected;
			}
		}
		if (cur == h) {
			__atomic_add_fetch(&s->count, w_count, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->bytes, w_bytes, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->nsec, w_nsec, __ATOMIC_RELAXED);
			__atomic_add_fetch(&captures, 1, __ATOMIC_RELAXED);
			guard--;
			return;
		}
	}
	__atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
	guard--;
}

void ps_callsite_hold(bool on)
{
	guard += on ? 1 : -1;
}

uint64_t ps_callsite_captures(void)
{
	return __atomic_load_n(&captures, __ATOMIC_RELAXED);
}

uint64_t ps_callsite_dropped(void)
{
	return __atomic_load_n(&dropped, __ATOMIC_RELAXED);
}

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path ? path : "?";
}

/*
 * Objects mapped in the process, read once per report: path, load bias,
 * executable range and GNU build id (from PT_NOTE), so each frame carries
 * what offline symbolization needs (object, build id, object-relative
 * address).  Filled with dl_iterate_phdr, so never from the signal handler.
 */
#define OBJS_MAX 128
struct obj {
	uintptr_t lo, hi, bias;
	char path[256];
	char build_id[2 * 40 + 1];
};
static struct obj objs[OBJS_MAX];
static unsigned nobjs;

static void note_build_id(struct obj *o, const struct dl_phdr_info *info, const ElfW(Phdr) *ph)
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

static int add_obj(struct dl_phdr_info *info, size_t size, void *unused)
{
	(void)size, (void)unused;
	if (nobjs >= OBJS_MAX)
		return 1;
	struct obj *o = &objs[nobjs];
	memset(o, 0, sizeof(*o));
	o->bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
			if (!o->lo || lo < o->lo)
				o->lo = lo;
			if (lo + ph->p_memsz > o->hi)
				o->hi = lo + ph->p_memsz;
		} else if (ph->p_type == PT_NOTE && !o->build_id[0]) {
			note_build_id(o, info, ph);
		}
	}
	if (!o->lo)
		return 0;
	const char *name = info->dlpi_name;
	if (!name || !name[0]) {
		/* the main program */
		ssize_t n = readlink("/proc/self/exe", o->path, sizeof(o->path) - 1);
		o->path[n > 0 ? n : 0] = 0;
	} else {
		size_t n = strlen(name);
		if (n >= sizeof(o->path))
			n = sizeof(o->path) - 1;
		memcpy(o->path, name, n);
		o->path[n] = 0;
	}
	nobjs++;
	return 0;
}

static const struct obj *obj_of(uintptr_t a)
{
	for (unsigned i = 0; i < nobjs; i++)
		if (a >= objs[i].lo && a < objs[i].hi)
			return &objs[i];
	return NULL;
}

/*
 * Naming with elfutils libdwfl (.symtab, separate debug info by build id
 * and debuglink, DWARF lines), as perf does.  libdw is dlopen'd only when a
 * report has call sites to name, so the shim has no DT_NEEDED on it and
 * works (naming with dladdr) where it is not installed.  The handful of
 * functions is declared here rather than from <elfutils/libdwfl.h> so that
 * the build does not need libdw-dev either.
 */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
struct dwfl_callbacks {
	void *find_elf, *find_debuginfo, *section_address;
	char **debuginfo_path;
};
static struct {
	bool tried;
	Dwfl *dwfl;
	Dwfl *(*begin)(const struct dwfl_callbacks *);
	int (*proc_report)(Dwfl *, pid_t);
	int (*report_end)(Dwfl *, void *, void *);
	Dwfl_Module *(*addrmodule)(Dwfl *, uintptr_t);
	const char *(*addrinfo)(Dwfl_Module *, uintptr_t, uintptr_t *, void *, void *, void *,
				void *);
	Dwfl_Line *(*getsrc)(Dwfl_Module *, uintptr_t);
	const char *(*lineinfo)(Dwfl_Line *, uintptr_t *, int *, int *, void *, void *);
	int (*module_build_id)(Dwfl_Module *, const unsigned char **, uint64_t *);
	void (*end)(Dwfl *);
	struct dwfl_callbacks cb;
	char *path;
} dw;

/* Open path for the caller of local_debuginfo(), or -1. */
static int try_debug_file(const char *path, const char *object, char **name_out)
{
	if (object && strcmp(path, object) == 0)
		return -1;
	long fd = ps_sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	*name_out = strdup(path);
	return (int)fd;
}

/*
 * Separate debug info for a module, from the local disk only: by build id
 * under each absolute directory of the debug-info path (elfutils' syntax;
 * ":.debug:/usr/lib/debug" by default, POOLSHIM_DEBUGINFO_PATH), and, for
 * an object without a build id, by its .gnu_debuglink next to it, in its
 * .debug/ and under each absolute directory.  Not elfutils'
 * dwfl_standard_find_debuginfo: that one falls back on debuginfod, which
 * loads libcurl into the host at exit (radosgw crashed in curl's start-up,
 * after it had torn down its TLS library) and, where DEBUGINFOD_URLS is set
 * (Debian sets it in every login shell), asks servers on the network about
 * every object it cannot name, from inside the program.
 */
/*
 * The debug file for one directory d of the debug-info path: by build id
 * (hex, id0: the first byte) under an absolute d; or, when the object has
 * no build id, by its debuglink under d, in d relative to the object, or
 * next to the object (d empty).  An open descriptor, or -1.
 */
static int debug_in_dir(const char *d, unsigned id0, const char *hex, const char *file_name,
			const char *debuglink, char **name_out)
{
	char path[PATH_MAX];
	int w = -1;

	if (hex) {
		if (d[0] == '/')
			w = snprintf(path, sizeof(path), "%s/.build-id/%02x/%s.debug", d, id0, hex);
	} else if (debuglink && file_name) {
		const char *slash = strrchr(file_name, '/');
		int dl = slash ? (int)(slash - file_name) : 0;
		w = d[0] == '/' ? snprintf(path, sizeof(path), "%s%.*s/%s", d, dl, file_name, debuglink)
		    : d[0] ? snprintf(path, sizeof(path), "%.*s/%s/%s", dl, file_name, d, debuglink)
		    : snprintf(path, sizeof(path), "%.*s/%s", dl, file_name, debuglink);
	}
	if (w <= 0 || w >= (int)sizeof(path))
		return -1;
	return try_debug_file(path, hex ? NULL : file_name, name_out);
}

static int local_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			   uint64_t base, const char *file_name, const char *debuglink,
			   uint32_t crc, char **debuginfo_file_name)
{
	const char *list = debuginfo_path ? debuginfo_path : ":.debug:/usr/lib/debug";
	const unsigned char *id = NULL;
	uint64_t vaddr;
	char hex[2 * 64 + 1], d[PATH_MAX];
	int n = dw.module_build_id(mod, &id, &vaddr);
	bool by_id = n > 1 && n <= 64;

	(void)userdata, (void)modname, (void)base, (void)crc;
	for (int i = 1; by_id && i < n; i++)
		snprintf(hex + 2 * (i - 1), 3, "%02x", id[i]);
	/* Objects with a build id are looked up by it alone: nothing to check a debuglink by. */
	if (n > 0 && !by_id)
		return -1;
	for (const char *e = list;; e++) {
		const char *end = strchrnul(e, ':');
		/* elfutils' CRC-checking marks (+, -) say nothing about where to look. */
		while (e < end && (*e == '+' || *e == '-'))
			e++;
		size_t len = (size_t)(end - e);
		if (len < sizeof(d)) {
			memcpy(d, e, len);
			d[len] = '\0';
			int fd = debug_in_dir(d, by_id ? id[0] : 0, by_id ? hex : NULL, file_name,
					      debuglink, debuginfo_file_name);
			if (fd >= 0)
				return fd;
		}
		if (!*end)
			return -1;
		e = end;
	}
}

static void dw_open(void)
{
	if (dw.tried)
		return;
	dw.tried = true;
	void *h = dlopen("libdw.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&dw.begin = dlsym(h, "dwfl_begin");
	*(void **)&dw.proc_report = dlsym(h, "dwfl_linux_proc_report");
	*(void **)&dw.report_end = dlsym(h, "dwfl_report_end");
	*(void **)&dw.addrmodule = dlsym(h, "dwfl_addrmodule");
	*(void **)&dw.addrinfo = dlsym(h, "dwfl_module_addrinfo");
	*(void **)&dw.getsrc = dlsym(h, "dwfl_module_getsrc");
	*(void **)&dw.lineinfo = dlsym(h, "dwfl_lineinfo");
	*(void **)&dw.end = dlsym(h, "dwfl_end");
	*(void **)&dw.module_build_id = dlsym(h, "dwfl_module_build_id");
	dw.cb.find_elf = dlsym(h, "dwfl_linux_proc_find_elf");
	dw.cb.find_debuginfo = (void *)local_debuginfo;
	if (!dw.begin || !dw.proc_report || !dw.report_end || !dw.addrmodule || !dw.addrinfo ||
	    !dw.getsrc || !dw.lineinfo || !dw.end || !dw.cb.find_elf || !dw.module_build_id)
		return;
	/* elfutils' own syntax: ":.debug:/usr/lib/debug" is its default */
	if (debuginfo_path) {
		dw.path = strdup(debuginfo_path);
		dw.cb.debuginfo_path = &dw.path;
	}
	Dwfl *d = dw.begin(&dw.cb);
	if (!d)
		return;
	if (dw.proc_report(d, getpid()) != 0 || dw.report_end(d, NULL, NULL) != 0) {
		dw.end(d);
		return;
	}
	dw.dwfl = d;
}

struct frame_name {
	const char *fn, *file;
	uintptr_t off;
	int line;
};

static bool dw_name(uintptr_t a, struct frame_name *out)
{
	uintptr_t off = 0;
	dw_open();
	if (!dw.dwfl)
		return false;
	Dwfl_Module *m = dw.addrmodule(dw.dwfl, a);
	if (!m)
		return false;
	Elf64_Sym sym;
	uint32_t shndx;
	void *elf;
	uint64_t bias;
	const char *fn = dw.addrinfo(m, a, &off, &sym, &shndx, &elf, &bias);
	if (!fn)
		return false;
	out->fn = fn;
	out->off = off;
	Dwfl_Line *l = dw.getsrc(m, a);
	int line = 0, col = 0;
	uintptr_t la = 0;
	uint64_t mtime = 0, len = 0;
	const char *file = l ? dw.lineinfo(l, &la, &line, &col, &mtime, &len) : NULL;
	if (file && line > 0) {
		out->file = file;
		out->line = line;
	}
	return true;
}

/*
 * A symbol's name without its version: elfutils names a libc symbol from
 * .dynsym as "__libc_start_main@@GLIBC_2.34", a report should say
 * "__libc_start_main".  The name as it came when buf cannot hold it.
 */
static const char *unversioned(const char *fn, char *buf, size_t cap)
{
	const char *at = strchr(fn, '@');
	if (!at || at == fn || (size_t)(at - fn) >= cap)
		return fn;
	memcpy(buf, fn, (size_t)(at - fn));
	buf[at - fn] = '\0';
	return buf;
}

/*
 * One frame: function+0xoff (object) file:line, or the raw address.  In the
 * signal handler (symbolize = false) only the address is known.
 */
static void emit_frame(struct ps_emit *e, void *addr, bool symbolize)
{
	Dl_info di;
	uintptr_t a = (uintptr_t)addr;
	const struct obj *o = symbolize ? obj_of(a) : NULL;
	uint64_t rel = o ? a - o->bias : a;
	struct frame_name nm = { 0 };

	/* A return address points after the call: look up the byte before. */
	if (symbolize && dw_name(a - 1, &nm)) {
		nm.off++;
	} else if (symbolize && dladdr((char *)addr - 1, &di) && di.dli_sname) {
		nm.fn = di.dli_sname;
		nm.off = a - (uintptr_t)di.dli_saddr;
	}
	char plain[256];
	if (nm.fn)
		nm.fn = unversioned(nm.fn, plain, sizeof(plain));
	else
		nm.off = rel;
	const char *obj = o ? base_name(o->path) : "?";
	const char *path = o && o->path[0] ? o->path : NULL;
	const char *build_id = o && o->build_id[0] ? o->build_id : NULL;
	const char *no_line = NULL;
	uint64_t off = nm.off;
	char hex[24];
	struct ps_buf hb;
	ps_buf_init(&hb, hex, sizeof(hex), -1);
	ps_buf_printf(&hb, "0x%lx", (unsigned long)a);
	const char *address = ps_buf_str(&hb);

	ps_emit_object_begin(e, NULL);
	ps_emit_kv(e, "function", PS_EMIT_STR, &nm.fn);
	if (nm.fn)
		ps_emit_text(e, "%s+0x%lx", nm.fn, (unsigned long)nm.off);
	else
		ps_emit_text(e, "%s", address);
	ps_emit_kv(e, "offset", PS_EMIT_U64, &off);
	ps_emit_text(e, " (");
	ps_emit_col(e, "object", 0, PS_EMIT_STR, &obj);
	ps_emit_text(e, ")");
	ps_emit_kv(e, "path", PS_EMIT_STR, &path);
	ps_emit_kv(e, "build_id", PS_EMIT_STR, &build_id);
	ps_emit_kv(e, "rel", PS_EMIT_U64, &rel);
	ps_emit_kv(e, "file", PS_EMIT_STR, &nm.file);
	if (nm.file) {
		ps_emit_text(e, " %s:%d", nm.file, nm.line);
		ps_emit_kv(e, "line", PS_EMIT_INT, &nm.line);
	} else {
		ps_emit_kv(e, "line", PS_EMIT_STR, &no_line);
	}
	ps_emit_kv(e, "address", PS_EMIT_NAME, &address);
	ps_emit_object_end(e);
}

/*
 * Counters are added to while a report is written (the dump signal, or exit
 * with threads still running): every read of them is an atomic load.
 */
static uint64_t site_key(const struct site *s, bool by_bytes)
{
	return __atomic_load_n(by_bytes ? &s->bytes : &s->count, __ATOMIC_RELAXED);
}

/* Indices of the top sites by bytes (by_bytes) or count, into out[top]. */
static unsigned pick_top(unsigned *out, bool by_bytes)
{
	unsigned n = 0;

	for (unsigned i = 0; i < SLOTS; i++) {
		const struct site *s = &sites[i];
		if (!__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE))
			continue;
		uint64_t key = site_key(s, by_bytes);
		unsigned pos = n < top ? n++ : top;
		/* insertion into a short sorted list */
		while (pos > 0) {
			const struct site *o = &sites[out[pos - 1]];
			if (site_key(o, by_bytes) >= key)
				break;
			if (pos < top)
				out[pos] = out[pos - 1];
			pos--;
		}
		if (pos < top)
			out[pos] = i;
	}
	return n;
}

/* One site: its call, count and bytes, and its frames. */
static void emit_site(struct ps_emit *e, const struct site *s, bool symbolize)
{
	uint64_t count = (site_key(s, false) + WEIGHT_ONE / 2) / WEIGHT_ONE, bytes = site_key(s, true);
	uint64_t nsec = __atomic_load_n(&s->nsec, __ATOMIC_RELAXED);
	const char *kind = s->kind == PS_SITE_ALLOC ? "alloc" : "io";
	const char *call = ps_call_name((enum ps_call)s->call);

	ps_emit_object_begin(e, NULL);
	ps_emit_text(e, s->kind == PS_SITE_ALLOC ? "  alloc " : "  io    ");
	ps_emit_kv(e, "kind", PS_EMIT_NAME, &kind);
	ps_emit_col(e, "call", -15, PS_EMIT_NAME, &call);
	ps_emit_col(e, "count", 8, PS_EMIT_U64, &count);
	ps_emit_text(e, " calls, ");
	ps_emit_col(e, "bytes", 0, PS_EMIT_SIZE, &bytes);
	ps_emit_kv(e, "nsec", PS_EMIT_U64, &nsec);
	if (s->kind == PS_SITE_IO && count)
		ps_emit_text(e, " avg %lu ns", (unsigned long)(nsec / count));
	ps_emit_text(e, "\n");
	ps_emit_array_begin(e, "frames");
	for (uint32_t f = 0; f < s->depth; f++) {
		ps_emit_text(e, "      #%u ", f);
		emit_frame(e, s->frames[f], symbolize);
		ps_emit_text(e, "\n");
	}
	ps_emit_array_end(e);
	ps_emit_object_end(e);
}

/*
 * Text: the top sites by bytes, then by count, each list under its own
 * heading.  JSON: the union of both lists, each site once.
 */
static void emit_sites(struct ps_emit *e, bool symbolize)
{
	unsigned by_bytes[64], by_count[64], list[128];
	unsigned nb = pick_top(by_bytes, true), nc = pick_top(by_count, false), n = 0;
	uint64_t every = sample;

	ps_emit_kv(e, "callsite_sample", PS_EMIT_U64, &every);
	ps_emit_array_begin(e, "callsites");
	for (int pass = 0; pass < 2 && !e->json; pass++) {
		bool bytes = pass == 0;
		unsigned k = bytes ? nb : nc;
		ps_emit_text(e, "call sites by %s (top %u; sampled every %lu bytes on average, "
			     "calls and bytes estimated; %lu captures, %lu dropped)\n",
			     bytes ? "bytes" : "count", k, (unsigned long)sample,
			     (unsigned long)ps_callsite_captures(), (unsigned long)ps_callsite_dropped());
		for (unsigned i = 0; i < k; i++)
			emit_site(e, &sites[bytes ? by_bytes[i] : by_count[i]], symbolize);
	}
	for (unsigned i = 0; i < nb && e->json; i++)
		list[n++] = by_bytes[i];
	for (unsigned i = 0; i < nc && e->json; i++) {
		bool dup = false;
		for (unsigned j = 0; j < nb; j++)
			dup |= by_count[i] == by_bytes[j];
		if (!dup)
			list[n++] = by_count[i];
	}
	for (unsigned k = 0; k < n; k++)
		emit_site(e, &sites[list[k]], symbolize);
	ps_emit_array_end(e);
}

void ps_callsite_emit(struct ps_emit *e, bool symbolize)
{
	if (!sites || top == 0)
		return;
	/* naming allocates (libdw): keep those allocations out of the table */
	guard++;
	if (symbolize) {
		nobjs = 0;
		dl_iterate_phdr(add_obj, NULL);
	}
	emit_sites(e, symbolize);
	guard--;
}

void ps_callsite_render(struct ps_buf *b, bool json, bool symbolize)
{
	struct ps_emit e;

	ps_emit_continue(&e, b, json);
	ps_callsite_emit(&e, symbolize);
}
