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
 */
#define UNW_LOCAL_ONLY
#include "callsite.h"

#include <dlfcn.h>
#include <link.h>
#include <libunwind.h>
#include <string.h>
#include <sys/mman.h>

#include "fmt.h"

#define SLOTS 4096                 /* power of two */
#define DEPTH_MAX 32
#define PROBES 64

struct site {
	uint64_t hash;              /* 0 = empty */
	int ready;                  /* frames filled in */
	uint16_t kind, call;
	uint32_t depth;
	void *frames[DEPTH_MAX];
	uint64_t count, bytes, nsec;
};

bool ps_callsite_on;
__thread int ps_in_signal;
static struct site *sites;
static int depth;
static uint32_t sample;
static unsigned top;
static uintptr_t self_lo, self_hi;     /* our own code, skipped in stacks */
static uint64_t captures, dropped;
static __thread int guard;
static __thread uint32_t tick[2];

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

void ps_callsite_init(const struct ps_config *cfg)
{
	Dl_info di;

	if (cfg->backtrace == 0)
		return;
	void *p = mmap(NULL, sizeof(struct site) * SLOTS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	sites = p;
	depth = (int)cfg->backtrace;
	sample = (uint32_t)cfg->backtrace_sample;
	top = (unsigned)cfg->backtrace_top;
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

void ps_callsite_capture(enum ps_site_kind kind, enum ps_call call, uint64_t bytes,
			 uint64_t nsec)
{
	void *raw[DEPTH_MAX + 16];

	if (guard || ps_in_signal || !sites)
		return;
	if (++tick[kind] < sample)
		return;
	tick[kind] = 0;
	guard++;
	int n = unw_backtrace(raw, depth + 16 < (int)PS_ARRAY_SIZE(raw) ? depth + 16
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
			__atomic_add_fetch(&s->count, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->bytes, bytes, __ATOMIC_RELAXED);
			__atomic_add_fetch(&s->nsec, nsec, __ATOMIC_RELAXED);
			__atomic_add_fetch(&captures, 1, __ATOMIC_RELAXED);
			guard--;
			return;
		}
	}
	__atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
	guard--;
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

/* One frame: function+0xoff (object), or the raw address. */
static void put_frame(struct ps_buf *b, void *addr, bool json, bool symbolize)
{
	Dl_info di;
	/* A return address points after the call: look up the byte before. */
	bool found = symbolize && dladdr((char *)addr - 1, &di);
	const char *fn = found && di.dli_sname ? di.dli_sname : NULL;
	uintptr_t off = found ? (uintptr_t)addr - (uintptr_t)(fn ? di.dli_saddr : di.dli_fbase) : 0;
	const char *obj = found ? base_name(di.dli_fname) : "?";

	if (json) {
		ps_buf_puts(b, "{\"function\":");
		if (fn)
			ps_buf_json_str(b, fn);
		else
			ps_buf_puts(b, "null");
		ps_buf_printf(b, ",\"offset\":%lu,\"object\":", (unsigned long)off);
		ps_buf_json_str(b, obj);
		ps_buf_printf(b, ",\"address\":\"0x%lx\"}", (unsigned long)(uintptr_t)addr);
		return;
	}
	if (fn)
		ps_buf_printf(b, "%s+0x%lx", fn, (unsigned long)off);
	else
		ps_buf_printf(b, "0x%lx", (unsigned long)(uintptr_t)addr);
	ps_buf_printf(b, " (%s)", obj);
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

static void render_text(struct ps_buf *b, bool symbolize)
{
	unsigned idx[64];

	for (int pass = 0; pass < 2; pass++) {
		bool by_bytes = pass == 0;
		unsigned n = pick_top(idx, by_bytes);
		ps_buf_printf(b, "call sites by %s (top %u; one call in %u sampled, %lu captures, "
			      "%lu dropped)\n", by_bytes ? "bytes" : "count", n, sample,
			      (unsigned long)ps_callsite_captures(),
			      (unsigned long)ps_callsite_dropped());
		for (unsigned k = 0; k < n; k++) {
			const struct site *s = &sites[idx[k]];
			uint64_t count = site_key(s, false), bytes = site_key(s, true);
			uint64_t nsec = __atomic_load_n(&s->nsec, __ATOMIC_RELAXED);
			ps_buf_puts(b, s->kind == PS_SITE_ALLOC ? "  alloc " : "  io    ");
			ps_buf_pad(b, ps_call_name((enum ps_call)s->call), 15, false);
			ps_buf_u64w(b, count, 8);
			ps_buf_puts(b, " samples, ");
			ps_buf_size(b, bytes);
			if (s->kind == PS_SITE_IO && count)
				ps_buf_printf(b, " avg %lu ns", (unsigned long)(nsec / count));
			ps_buf_putc(b, '\n');
			for (uint32_t f = 0; f < s->depth; f++) {
				ps_buf_printf(b, "      #%u ", f);
				put_frame(b, s->frames[f], false, symbolize);
				ps_buf_putc(b, '\n');
			}
		}
	}
}

static void render_json(struct ps_buf *b, bool symbolize)
{
	unsigned by_bytes[64], by_count[64], list[128];
	unsigned nb = pick_top(by_bytes, true), nc = pick_top(by_count, false), n = 0;

	/* The union of both lists, each site once. */
	for (unsigned i = 0; i < nb; i++)
		list[n++] = by_bytes[i];
	for (unsigned i = 0; i < nc; i++) {
		bool dup = false;
		for (unsigned j = 0; j < nb; j++)
			dup |= by_count[i] == by_bytes[j];
		if (!dup)
			list[n++] = by_count[i];
	}
	ps_buf_printf(b, ",\"callsite_sample\":%u,\"callsites\":[", sample);
	for (unsigned k = 0; k < n; k++) {
		const struct site *s = &sites[list[k]];
		ps_buf_printf(b, "%s{\"kind\":\"%s\",\"call\":\"%s\",\"count\":%lu,\"bytes\":%lu,"
			      "\"nsec\":%lu,\"frames\":[", k ? "," : "",
			      s->kind == PS_SITE_ALLOC ? "alloc" : "io",
			      ps_call_name((enum ps_call)s->call), (unsigned long)site_key(s, false),
			      (unsigned long)site_key(s, true),
			      (unsigned long)__atomic_load_n(&s->nsec, __ATOMIC_RELAXED));
		for (uint32_t f = 0; f < s->depth; f++) {
			if (f)
				ps_buf_putc(b, ',');
			put_frame(b, s->frames[f], true, symbolize);
		}
		ps_buf_puts(b, "]}");
	}
	ps_buf_putc(b, ']');
}

void ps_callsite_render(struct ps_buf *b, bool json, bool symbolize)
{
	if (!sites || top == 0)
		return;
	if (json)
		render_json(b, symbolize);
	else
		render_text(b, symbolize);
}
