// SPDX-License-Identifier: MIT
/*
 * Rendering the call-site table (sites.h): the top sites by bytes and by
 * count, each frame named as function+offset (object) file:line.  The
 * process names its own frames with libdw over /proc/self (dladdr where
 * libdw is not installed); the tools name a gone process's frames offline,
 * from the modules the table lists, each object read at its path and used
 * only when its build id is the one the process had, so another build at
 * the same path never names a frame.  A frame that cannot be named keeps
 * its object, build id and object-relative address, which is what
 * `poolshim report` needs to name it later.
 *
 * Counters are added to while the table is rendered (a live process):
 * every read of them is an atomic load.
 */
#include "format/sites.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/emit.h"
#include "format/fmt.h"
#include "format/names.h"
#include "format/sys.h"

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path ? path : "?";
}

/* The modules of the rendering now, and which of them may name (offline). */
static const struct ps_site_module *mods;
static unsigned nmods;
static bool offline;
static bool mod_ok[PS_SITES_MODULES];
static const struct ps_site *sites;
static uint64_t sample, captures, dropped;
static unsigned top;

/* The module a holds a (the latest listed: a library loaded again elsewhere), or -1. */
static int module_of(uintptr_t a)
{
	for (unsigned i = nmods; i-- > 0;)
		if (a >= mods[i].lo && a < mods[i].hi)
			return (int)i;
	return -1;
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
	bool tried, loaded;
	Dwfl *live;                 /* this process, from /proc/self (made once) */
	Dwfl *dwfl;                 /* the one naming now: live, or an offline one */
	Dwfl *(*begin)(const struct dwfl_callbacks *);
	int (*proc_report)(Dwfl *, pid_t);
	void (*report_begin)(Dwfl *);
	Dwfl_Module *(*report_elf)(Dwfl *, const char *, const char *, int, uint64_t, bool);
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

static const char *debuginfo_path;   /* of the rendering now: NULL, elfutils' default */

/*
 * The most an object or debug file handed to libdw may be: larger ones
 * (a sparse file made to look like debug info) are left alone.
 */
#define DEBUG_FILE_MAX (4ull << 30)

/*
 * Whether the file open at fd may be given to libdw: a regular file (not a
 * FIFO or device another user put at the path: it was opened without
 * blocking) of a size libdw can read through.
 */
static bool parsable(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	       (uint64_t)st.st_size <= DEBUG_FILE_MAX;
}

/*
 * Open path for the caller of local_debuginfo(), or -1: without blocking
 * (a FIFO at .build-id/xx/rest.debug), not through a symbolic link at its
 * end, a regular file of a bounded size.
 */
static int try_debug_file(const char *path, const char *object, char **name_out)
{
	if (object && strcmp(path, object) == 0)
		return -1;
	long fd = ps_sys_openat(AT_FDCWD, path,
				O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (!parsable((int)fd)) {
		close((int)fd);
		return -1;
	}
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

/* libdw's functions, looked up once.  Whether they all are there. */
static bool dw_load(void)
{
	if (dw.tried)
		return dw.loaded;
	dw.tried = true;
	void *h = dlopen("libdw.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return false;
	*(void **)&dw.begin = dlsym(h, "dwfl_begin");
	*(void **)&dw.proc_report = dlsym(h, "dwfl_linux_proc_report");
	*(void **)&dw.report_begin = dlsym(h, "dwfl_report_begin");
	*(void **)&dw.report_elf = dlsym(h, "dwfl_report_elf");
	*(void **)&dw.report_end = dlsym(h, "dwfl_report_end");
	*(void **)&dw.addrmodule = dlsym(h, "dwfl_addrmodule");
	*(void **)&dw.addrinfo = dlsym(h, "dwfl_module_addrinfo");
	*(void **)&dw.getsrc = dlsym(h, "dwfl_module_getsrc");
	*(void **)&dw.lineinfo = dlsym(h, "dwfl_lineinfo");
	*(void **)&dw.end = dlsym(h, "dwfl_end");
	*(void **)&dw.module_build_id = dlsym(h, "dwfl_module_build_id");
	dw.cb.find_elf = dlsym(h, "dwfl_linux_proc_find_elf");
	dw.cb.find_debuginfo = (void *)local_debuginfo;
	dw.loaded = dw.begin && dw.proc_report && dw.report_begin && dw.report_elf &&
		    dw.report_end && dw.addrmodule && dw.addrinfo && dw.getsrc && dw.lineinfo &&
		    dw.end && dw.cb.find_elf && dw.module_build_id;
	return dw.loaded;
}

/* This process's modules, as /proc/self/maps has them (made once). */
static void dw_open_live(void)
{
	static bool tried;

	dw.dwfl = dw.live;
	if (tried)
		return;
	tried = true;
	if (!dw_load())
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
	dw.dwfl = dw.live = d;
}

static bool same_build_id(Dwfl_Module *m, const char *hex)
{
	const unsigned char *id = NULL;
	uint64_t vaddr;
	int n = dw.module_build_id(m, &id, &vaddr);
	char have[2 * 40 + 1];

	if (n <= 0 || n > 40)
		return hex[0] == '\0';
	for (int i = 0; i < n; i++)
		snprintf(have + 2 * i, 3, "%02x", id[i]);
	return strcmp(have, hex) == 0;
}

/*
 * Offline, every object is reported by its path (dwfl_report_elf): libdw
 * never needs to look for one, and must not (its own search by build id
 * may ask debuginfod servers on the network).
 */
static int no_elf(Dwfl_Module *mod, void **userdata, const char *name, uint64_t base,
		  char **file_name, void **elfp)
{
	(void)mod, (void)userdata, (void)name, (void)base, (void)file_name, (void)elfp;
	return -1;
}

/*
 * A process's modules offline, from the region's list: each object read at
 * its path (as whoever renders may read it) and reported at the load bias
 * the process had, so the frames' addresses fall in it as they did there;
 * one whose build id is not the one the process had is not used (ok[i]
 * false: its frames stay unnamed).  NULL when libdw is not there.
 */
static Dwfl *dw_open_offline(const struct ps_site_module *list, unsigned n, bool *ok)
{
	/* libdw keeps a pointer to its callbacks: these live as long as it does. */
	static struct dwfl_callbacks cb;
	static char *path;

	if (!dw_load())
		return NULL;
	free(path);
	path = debuginfo_path ? strdup(debuginfo_path) : NULL;
	cb = dw.cb;
	cb.find_elf = (void *)no_elf;
	cb.debuginfo_path = path ? &path : NULL;
	Dwfl *d = dw.begin(&cb);
	if (!d)
		return NULL;
	dw.report_begin(d);
	for (unsigned i = 0; i < n; i++) {
		ok[i] = false;
		if (!list[i].path[0] || list[i].path[0] != '/')
			continue;
		/*
		 * Opened here, not by libdw: without blocking (a FIFO put at
		 * the path) and only a regular file of a bounded size.  libdw
		 * keeps the descriptor when it takes the module.  A link is
		 * followed here: the loader's names are links
		 * (libz.so.1 -> libz.so.1.2.13); the tools name call sites
		 * of another user's record only in a child that has become
		 * that user (tools/record.c), so a link reaches nothing its
		 * owner could not read.
		 */
		int fd = (int)ps_sys_openat(AT_FDCWD, list[i].path,
					    O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0);
		if (fd < 0)
			continue;
		if (!parsable(fd)) {
			close(fd);
			continue;
		}
		Dwfl_Module *m = dw.report_elf(d, base_name(list[i].path), list[i].path, fd,
					      list[i].bias, false);
		if (!m)
			close(fd);
		ok[i] = m && same_build_id(m, list[i].build_id);
	}
	if (dw.report_end(d, NULL, NULL) != 0) {
		dw.end(d);
		return NULL;
	}
	return d;
}

/*
 * libdw opened on the first frame to name (a report without sites never
 * loads it), for the process itself or offline from the region's modules.
 */
static bool dw_pending;
static Dwfl *dw_own;

static void dw_ready(void)
{
	if (!dw_pending)
		return;
	dw_pending = false;
	if (!offline)
		dw_open_live();
	else
		dw.dwfl = dw_own = dw_open_offline(mods, nmods, mod_ok);
}

struct frame_name {
	const char *fn, *file;
	uintptr_t off;
	int line;
};

static bool dw_name(uintptr_t a, struct frame_name *out)
{
	uintptr_t off = 0;
	dw_ready();
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
static void emit_frame(struct ps_emit *e, uint64_t addr, bool symbolize)
{
	Dl_info di;
	uintptr_t a = (uintptr_t)addr;
	if (symbolize)
		dw_ready();    /* before mod_ok is read: the offline view fills it */
	int mi = symbolize ? module_of(a) : -1;
	const struct ps_site_module *o = mi >= 0 ? &mods[mi] : NULL;
	bool nameable = symbolize && (!offline || (o && mod_ok[mi]));
	uint64_t rel = o ? a - o->bias : a;
	struct frame_name nm = { 0 };

	/* A return address points after the call: look up the byte before. */
	if (nameable && dw_name(a - 1, &nm)) {
		nm.off++;
	} else if (nameable && !offline && dladdr((char *)a - 1, &di) && di.dli_sname) {
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
static uint64_t site_key(const struct ps_site *s, bool by_bytes)
{
	return __atomic_load_n(by_bytes ? &s->bytes : &s->count, __ATOMIC_RELAXED);
}

/* Indices of the top sites by bytes (by_bytes) or count, into out[top]. */
static unsigned pick_top(unsigned *out, bool by_bytes)
{
	unsigned n = 0;

	for (unsigned i = 0; i < PS_SITES_SLOTS; i++) {
		const struct ps_site *s = &sites[i];
		if (!__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE))
			continue;
		uint64_t key = site_key(s, by_bytes);
		unsigned pos = n < top ? n++ : top;
		/* insertion into a short sorted list */
		while (pos > 0) {
			const struct ps_site *o = &sites[out[pos - 1]];
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
static void emit_site(struct ps_emit *e, const struct ps_site *s, bool symbolize)
{
	uint64_t count = (site_key(s, false) + PS_SITES_WEIGHT_ONE / 2) / PS_SITES_WEIGHT_ONE, bytes = site_key(s, true);
	uint64_t nsec = __atomic_load_n(&s->nsec, __ATOMIC_RELAXED);
	const char *kind = s->kind == 0 ? "alloc" : "io";
	const char *call = ps_call_name((enum ps_call)s->call);

	ps_emit_object_begin(e, NULL);
	ps_emit_text(e, s->kind == 0 ? "  alloc " : "  io    ");
	ps_emit_kv(e, "kind", PS_EMIT_NAME, &kind);
	ps_emit_col(e, "call", -15, PS_EMIT_NAME, &call);
	ps_emit_col(e, "count", 8, PS_EMIT_U64, &count);
	ps_emit_text(e, " calls, ");
	ps_emit_col(e, "bytes", 0, PS_EMIT_SIZE, &bytes);
	ps_emit_kv(e, "nsec", PS_EMIT_U64, &nsec);
	if (s->kind == 1 && count)
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
			     (unsigned long)captures, (unsigned long)dropped);
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


void ps_sites_emit(struct ps_emit *e, const struct ps_sites_view *v)
{
	struct ps_sites_head *h = ps_sites_head(v->region);

	if (v->top == 0)
		return;
	sites = ps_sites_table(v->region);
	mods = ps_sites_modules(v->region);
	nmods = __atomic_load_n(&h->nmodules, __ATOMIC_ACQUIRE);
	if (nmods > PS_SITES_MODULES)
		nmods = PS_SITES_MODULES;
	sample = v->sample;
	top = v->top < 64 ? v->top : 64;
	captures = __atomic_load_n(&h->captures, __ATOMIC_RELAXED);
	dropped = __atomic_load_n(&h->dropped, __ATOMIC_RELAXED);
	debuginfo_path = v->debuginfo_path && v->debuginfo_path[0] ? v->debuginfo_path : NULL;
	offline = v->offline;
	dw.dwfl = dw_own = NULL;
	dw_pending = v->symbolize;
	emit_sites(e, v->symbolize);
	if (dw_own)
		dw.end(dw_own);
	dw.dwfl = dw_own = NULL;
	dw_pending = false;
}

void ps_sites_format(void *region)
{
	struct ps_sites_head *h = ps_sites_head(region);

	memcpy(h->magic, PS_SITES_MAGIC, 8);
	h->slots = PS_SITES_SLOTS;
	h->depth_max = PS_SITES_DEPTH;
	h->site_size = sizeof(struct ps_site);
	h->module_size = sizeof(struct ps_site_module);
	h->max_modules = PS_SITES_MODULES;
}

const char *ps_sites_check(void *region)
{
	struct ps_sites_head *h = ps_sites_head(region);

	if (memcmp(h->magic, PS_SITES_MAGIC, 8) != 0 || h->slots != PS_SITES_SLOTS ||
	    h->depth_max != PS_SITES_DEPTH || h->site_size != sizeof(struct ps_site) ||
	    h->module_size != sizeof(struct ps_site_module) || h->max_modules != PS_SITES_MODULES)
		return "not a call-site table of this layout";
	if (h->nmodules > PS_SITES_MODULES)
		return "more modules than the table holds";
	const struct ps_site_module *m = ps_sites_modules(region);
	for (uint32_t i = 0; i < h->nmodules; i++)
		if (!memchr(m[i].path, '\0', sizeof(m[i].path)) ||
		    !memchr(m[i].build_id, '\0', sizeof(m[i].build_id)) || m[i].lo > m[i].hi)
			return "a module's path, build id or range is damaged";
	const struct ps_site *t = ps_sites_table(region);
	for (uint32_t i = 0; i < PS_SITES_SLOTS; i++) {
		if (!t[i].ready)
			continue;
		if (t[i].ready != 1 || t[i].depth == 0 || t[i].depth > PS_SITES_DEPTH ||
		    t[i].kind > 1 || t[i].call >= PS_CALL__COUNT || t[i].hash == 0)
			return "a site's depth, kind or call is out of range";
	}
	return NULL;
}
