// SPDX-License-Identifier: MIT
/*
 * Report rendering: the text table and the JSON document from a struct
 * ps_report_data, and the expansion of a report path.  Pure formatting
 * over a ps_buf: nothing here reads the allocator, the pool, io_uring or
 * the call-site table (gather.c fills the data; report_out.c writes it),
 * so poolshim-stat links this without the runtime.
 */
#include "format/report.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "format/emit.h"
#include "format/fmt.h"
#include "format/names.h"
#include "format/sites.h"

static const char *pool_mode(const struct ps_report_data *d)
{
	/* Asked for by the user (POOLSHIM_POOL=off): said before whose heap it is. */
	if (d->pool_off)
		return "off";
	if (d->heap_owner)
		return "foreign";
	if (!d->pool_ready)
		return "unavailable";
	if (d->pool.slabs == 0)
		return "unused";
	int kinds = 0;
	for (int i = 0; i < PS_BACK__COUNT; i++)
		kinds += d->pool.backed_by[i] > (i == PS_BACK_4K ? d->pool.small_backed : 0);
	return kinds > 1 ? "mixed" : ps_backing_name(d->pool.first_mode);   /* bounds-checked */
}

/* Whether a row of the totals has calls, without touching the others' pages where known. */
static bool row_used(const struct ps_report_data *d, int call, int k)
{
	return d->rows_known ? d->rows.used[call][k] : d->totals->c[call][k].calls != 0;
}

/* The errno with the most failures for a call, or 0. */
static int top_errno(const struct ps_tstats *t, int call, uint32_t *count)
{
	int best = 0;
	*count = 0;
	for (int e = 1; e < PS_ERRNO_MAX; e++)
		if (t->errnos[call][e] > *count) {
			*count = t->errnos[call][e];
			best = e;
		}
	return best;
}

/* Seconds since the epoch as ISO 8601 UTC, from the civil-date arithmetic
 * (days to year/month/day), since gmtime_r is not async-signal-safe. */
static void put_iso8601(struct ps_buf *b, int64_t t)
{
	int64_t days = t / 86400, secs = t % 86400;
	int64_t z = days + 719468, era = z / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9;
	int64_t year = yoe + era * 400 + (month <= 2);

	int64_t parts[6] = { year, month, day, secs / 3600, secs / 60 % 60, secs % 60 };
	static const char seps[] = "--T::Z";

	for (int i = 0; i < 6; i++) {
		if (i && parts[i] < 10)
			ps_buf_putc(b, '0');
		ps_buf_i64(b, parts[i]);
		ps_buf_putc(b, seps[i]);
	}
}

/*
 * Advice: what the report's own numbers say the user should change.  Each
 * item names the knob and a value, so a reader can act without knowing
 * the shim's internals.
 */
#define ADVICE_MAX 12   /* at least one per rule: advisors[] below, checked there */

struct advice {
	const char *id;
	const char *variable;
	char message[640];
	char suggested[48];
};

struct advice_list {
	int n;
	struct advice a[ADVICE_MAX];
};

static struct ps_buf *advice_add(struct advice_list *l, const char *id, const char *variable,
				 struct ps_buf *msg)
{
	struct advice *a = &l->a[l->n++];

	a->id = id;
	a->variable = variable;
	a->suggested[0] = '\0';
	ps_buf_init(msg, a->message, sizeof(a->message), -1);
	return msg;
}

static void advice_suggest_size(struct advice_list *l, uint64_t v)
{
	struct ps_buf b;

	ps_buf_init(&b, l->a[l->n - 1].suggested, sizeof(l->a[0].suggested), -1);
	ps_buf_size(&b, v);
	ps_buf_str(&b);
}

static void advice_suggest(struct advice_list *l, const char *v)
{
	struct ps_buf b;

	ps_buf_init(&b, l->a[l->n - 1].suggested, sizeof(l->a[0].suggested), -1);
	ps_buf_puts(&b, v);
	ps_buf_str(&b);
}

#define SIZE_TEXT 16   /* "1023.9G" and more */

/* A byte count as ps_buf_size writes it, into out[SIZE_TEXT]. */
static const char *size_text(char *out, uint64_t v)
{
	struct ps_buf b;

	ps_buf_init(&b, out, SIZE_TEXT, -1);
	ps_buf_size(&b, v);
	return ps_buf_str(&b);
}

/* glibc's mmap threshold, as the saved line (emit_saved) reads it. */
#define SAVED_STATIC_MIN ((uint64_t)128 << 10)  /* glibc's M_MMAP_THRESHOLD default */
#define SAVED_DYNAMIC_MAX ((uint64_t)32 << 20)  /* its dynamic ceiling on 64-bit */

#define ADVICE_MIN_ALLOCS 16   /* fewer large-looking allocations are not worth a line */
#define PS_HUGE_2M (2ULL << 20)

static void advise_pool_min(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_tstats *t = d->totals;
	struct ps_buf m;

	/*
	 * Allocations from a quarter of the threshold up to it look like I/O
	 * buffers; when they outnumber what reached the pool, the threshold is
	 * what keeps them out.  A power of two at or below the smallest such
	 * bucket pools them all (bucket k holds sizes from 2^k).  Only sizes
	 * glibc would map and unmap (from its mmap threshold, SAVED_STATIC_MIN,
	 * the rule of the saved line) count: smaller blocks glibc reuses from
	 * its own heap, so pooling them saves nothing (haproxy's 16K buffers,
	 * kept in its own pools: pooled, none was ever reused).
	 */
	uint64_t below = 0, lowest = 0, at_or_above = 0;
	for (int call = PS_CALL_MALLOC; call < PS_CALL_FREE; call++) {
		const struct ps_counter *c = &t->c[call][PS_FD_NONE];
		if (!row_used(d, call, PS_FD_NONE))
			continue;
		for (int k = 12; k < PS_SIZE_BUCKETS; k++) {
			uint64_t lo = 1ULL << k;
			if (!c->size_hist[k])
				continue;
			if (lo >= d->pool_min) {
				at_or_above += c->size_hist[k];
			} else if (lo >= d->pool_min / 4 && (lo << 1) <= d->pool_min &&
				   lo >= SAVED_STATIC_MIN) {
				below += c->size_hist[k];
				if (!lowest || lo < lowest)
					lowest = lo;
			}
		}
	}
	if (!d->heap_owner && !d->pool_off && below >= ADVICE_MIN_ALLOCS && below > at_or_above) {
		char lo[SIZE_TEXT], min[SIZE_TEXT];
		advice_add(l, "pool_min", "POOLSHIM_POOL_MIN", &m);
		ps_buf_printf(&m, "%lu of %lu large-looking allocations were %s or more but below "
			      "POOLSHIM_POOL_MIN=%s, so they were not pooled; POOLSHIM_POOL_MIN=%s "
			      "would pool them", (unsigned long)below, (unsigned long)(below + at_or_above),
			      size_text(lo, lowest), size_text(min, d->pool_min), lo);
		ps_buf_str(&m);
		advice_suggest_size(l, lowest);
	}
}

static void advise_unaligned(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_uring_counts *u = &t->uring;
	struct ps_buf m;

	if (u->fallbacks[PS_UFB_UNALIGNED]) {
		advice_add(l, ps_uring_fb_name(PS_UFB_UNALIGNED), "O_DIRECT alignment", &m);
		ps_buf_printf(&m, "%lu O_DIRECT calls on pooled buffers skipped io_uring because the buffer, "
			      "length or offset was not a multiple of 4 KiB; align them "
			      "(posix_memalign(..., 4096, ...), 4 KiB-multiple sizes and offsets)",
			      (unsigned long)u->fallbacks[PS_UFB_UNALIGNED]);
		ps_buf_str(&m);
		advice_suggest(l, "4K");
	}
}

static void advise_pool_full(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;
	struct ps_buf m;

	if (t->events[PS_EV_FB_POOL_FULL]) {
		uint64_t want = p->cap * 2 > 32ULL << 30 ? 32ULL << 30 : p->cap * 2;
		char cap[SIZE_TEXT], peak[SIZE_TEXT], w[SIZE_TEXT];
		advice_add(l, ps_event_name(PS_EV_FB_POOL_FULL), "POOLSHIM_POOL_SIZE", &m);
		ps_buf_printf(&m, "%lu allocations fell back to glibc's heap because the pool "
			      "reached its cap of %s (peak in use %s); POOLSHIM_POOL_SIZE=%s would hold them",
			      (unsigned long)t->events[PS_EV_FB_POOL_FULL], size_text(cap, p->cap),
			      size_text(peak, d->pool_peak), size_text(w, want));
		ps_buf_str(&m);
		advice_suggest_size(l, want);
	}
}

static void advise_hugetlb_none(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_pool_info *p = &d->pool;
	struct ps_buf m;

	if (p->requested == PS_HUGE_HUGETLB && p->slabs && !p->backed_by[PS_BACK_HUGETLB]) {
		uint64_t pages = (p->backed + PS_HUGE_2M - 1) / PS_HUGE_2M;
		char n[24];
		struct ps_buf nb;
		advice_add(l, "hugetlb_none", "vm.nr_hugepages", &m);
		ps_buf_printf(&m, "POOLSHIM_HUGEPAGES=hugetlb was asked for but no pool memory came from "
			      "hugetlb pages (%s); reserve at least %lu 2 MiB pages "
			      "(sysctl vm.nr_hugepages=%lu)",
			      p->hugetlb_reason ? p->hugetlb_reason : "none free",
			      (unsigned long)pages, (unsigned long)pages);
		ps_buf_str(&m);
		ps_buf_init(&nb, n, sizeof(n), -1);
		ps_buf_u64(&nb, pages);
		advice_suggest(l, ps_buf_str(&nb));
	}
}

static void advise_thp_disabled(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_pool_info *p = &d->pool;
	struct ps_buf m;

	if (p->thp_reason && strncmp(p->thp_reason, "THP disabled", 12) == 0 && p->slabs &&
	    !p->backed_by[PS_BACK_HUGETLB]) {
		advice_add(l, "thp_disabled", "transparent_hugepage/enabled", &m);
		ps_buf_puts(&m, "transparent hugepages are disabled system-wide "
			    "(/sys/kernel/mm/transparent_hugepage/enabled is never), so the pool "
			    "used 4 KiB pages; set it to madvise");
		ps_buf_str(&m);
		advice_suggest(l, "madvise");
	}
}

/*
 * O_DIRECT reads and writes went through io_uring from a THP or 4 KiB
 * pool, the process never forked, and enough hugetlb pages are free now
 * to hold the whole pool: POOLSHIM_HUGEPAGES=hugetlb would back it with
 * them.  Not the default because a fork child that writes inherited
 * hugetlb pages dies (SIGBUS) when none are free for its copy.
 */
static void advise_hugetlb_pays(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_pool_info *p = &d->pool;
	uint64_t other = p->backed_by[PS_BACK_THP] + p->backed_by[PS_BACK_4K];
	uint64_t pages = (p->backed + PS_HUGE_2M - 1) / PS_HUGE_2M;
	struct ps_buf m;

	if (d->heap_owner || p->requested == PS_HUGE_HUGETLB || p->backed_by[PS_BACK_HUGETLB] ||
	    !other || p->forks || !d->totals->uring.sqes || !pages || d->hugetlb_free < pages)
		return;
	advice_add(l, "hugetlb_pays", "POOLSHIM_HUGEPAGES", &m);
	ps_buf_printf(&m, "O_DIRECT I/O (%lu io_uring requests) used pool memory on %s pages while "
		      "%lu hugetlb pages are free and this process never forked: "
		      "POOLSHIM_HUGEPAGES=hugetlb puts the pool on them (2 MiB pages that are never "
		      "split or compacted); not the default as a forked child writing them "
		      "dies of SIGBUS when none are free",
		      (unsigned long)d->totals->uring.sqes,
		      p->backed_by[PS_BACK_THP] ? "THP" : "4 KiB", (unsigned long)d->hugetlb_free);
	ps_buf_str(&m);
	advice_suggest(l, "hugetlb");
}

/*
 * "Why nothing": the pool served next to nothing.  The size histograms say
 * whether the threshold is why (the largest allocation fell below it), and
 * for programs known by name, which of their own settings make buffers
 * large, with what docs/results.md's "Should I deploy it?" table measured
 * once they did, against what the program runs without the shim.
 */
#define ADVICE_IDLE_ALLOCS ADVICE_MIN_ALLOCS   /* pool allocations that count as "little" */

/* The pooled allocations made on memory the pool already held: what it saved. */
static uint64_t pool_reused(const struct ps_report_data *d)
{
	uint64_t allocs = d->totals->events[PS_EV_POOL_ALLOC], fresh = d->totals->events[PS_EV_POOL_FRESH];

	return fresh < allocs ? allocs - fresh : 0;
}

/*
 * The pool saved (next to) nothing: it served few allocations, or reused
 * memory for few of those it served (blocks a program allocates once and
 * keeps, as haproxy its buffers: pooled, each took fresh memory, as from
 * glibc).  With the pool off it served nothing on purpose: pool_off says so.
 */
static bool pool_idle(const struct ps_report_data *d)
{
	return !d->heap_owner && !d->pool_off && pool_reused(d) < ADVICE_IDLE_ALLOCS;
}

/* The highest size bucket any malloc-family call reached, or -1 for none. */
static int largest_alloc_bucket(const struct ps_report_data *d, uint64_t *count)
{
	int top = -1;

	*count = 0;
	for (int call = PS_CALL_MALLOC; call < PS_CALL_FREE; call++) {
		if (!row_used(d, call, PS_FD_NONE))
			continue;
		const struct ps_counter *c = &d->totals->c[call][PS_FD_NONE];
		for (int k = PS_SIZE_BUCKETS - 1; k >= 0; k--) {
			if (!c->size_hist[k])
				continue;
			if (k > top) {
				top = k;
				*count = 0;
			}
			if (k == top)
				*count += c->size_hist[k];
			break;
		}
	}
	return top;
}

/* The programs whose buffer settings the advice knows: by name, or name-suffix ("nginx-debug"). */
enum known_program { PROG_OTHER, PROG_NGINX, PROG_HAPROXY, PROG_RADOSGW };

static enum known_program known_program(const char *program)
{
	static const struct { const char *name; enum known_program p; } known[] = {
		{ "nginx", PROG_NGINX }, { "haproxy", PROG_HAPROXY }, { "radosgw", PROG_RADOSGW },
	};

	for (size_t i = 0; program && i < sizeof(known) / sizeof(known[0]); i++) {
		size_t n = strlen(known[i].name);
		if (strncmp(program, known[i].name, n) == 0 &&
		    (program[n] == '\0' || program[n] == '-' || program[n] == '.' || program[n] == '_'))
			return known[i].p;
	}
	return PROG_OTHER;
}

static void advise_pool_idle(const struct ps_report_data *d, struct advice_list *l)
{
	uint64_t count;
	int top = largest_alloc_bucket(d, &count);
	char min[SIZE_TEXT], lo[SIZE_TEXT], hi[SIZE_TEXT];
	struct ps_buf m;

	if (!pool_idle(d) || (top >= 0 && (1ULL << top) >= d->pool_min))
		return;
	/* Allocations just below the threshold: pool_min already says why, and what to set. */
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->a[i].id, "pool_min"))
			return;
	advice_add(l, "pool_idle", "POOLSHIM_POOL_MIN", &m);
	ps_buf_printf(&m, "the pool served %lu allocations: ",
		      (unsigned long)d->totals->events[PS_EV_POOL_ALLOC]);
	if (top < 0)
		ps_buf_puts(&m, "this process made no counted allocation");
	else
		ps_buf_printf(&m, "the largest allocations this process made were %s-%s "
			      "(%lu of them)", size_text(lo, 1ULL << top),
			      size_text(hi, 2ULL << top), (unsigned long)count);
	ps_buf_printf(&m, ", below POOLSHIM_POOL_MIN=%s, the size from which the pool takes "
		      "allocations; only a program (or its settings) that allocates buffers "
		      "of %s or more gives the pool work", size_text(min, d->pool_min), min);
	ps_buf_str(&m);
}

static void advise_program(const struct ps_report_data *d, struct advice_list *l)
{
	char min[SIZE_TEXT];
	struct ps_buf m;

	if (!pool_idle(d))
		return;
	size_text(min, d->pool_min);
	switch (known_program(d->program)) {
	case PROG_NGINX:
		advice_add(l, "program_settings", "nginx: proxy_buffers", &m);
		ps_buf_printf(&m, "nginx allocates large buffers only where its settings ask: "
			      "proxy_buffer_size and proxy_buffers (proxying), output_buffers with "
			      "directio (files read past the page cache), client_body_buffer_size "
			      "(request bodies); its defaults (4K or 8K proxy buffers, 2 32k output "
			      "buffers, 8K or 16K body buffer) stay below POOLSHIM_POOL_MIN=%s.  "
			      "Against Debian's nginx without the shim (docs/results.md, \"Should "
			      "I deploy it?\"): directio 1m with output_buffers 2 16m measured "
			      "0.55x [0.47-0.60] sendfile on, MISSED (5 rounds); "
			      "proxy_buffers 16 1m under it 1.11x [1.02-1.14] the better of "
			      "the default buffers and 16 1m without it, met",
			      min);
		ps_buf_str(&m);
		advice_suggest(l, "16 1m");
		break;
	case PROG_HAPROXY:
		advice_add(l, "program_settings", "haproxy: tune.bufsize", &m);
		ps_buf_puts(&m, "haproxy moves data through its own buffers of tune.bufsize "
			    "(16K by default), allocated once and kept in its own pools");
		if (d->totals->events[PS_EV_POOL_ALLOC])
			ps_buf_printf(&m, ": the pool served %lu allocations and reused memory for "
				      "%lu (POOLSHIM_POOL_MIN=%s), which saves nothing",
				      (unsigned long)d->totals->events[PS_EV_POOL_ALLOC],
				      (unsigned long)pool_reused(d), min);
		else
			ps_buf_printf(&m, ", below POOLSHIM_POOL_MIN=%s: the pool has nothing "
				      "to serve", min);
		ps_buf_puts(&m, ", and every socket call still passes the "
			      "interposer.  Measured (docs/results.md, \"Should I deploy it?\", "
			      "GET 16 MiB): the shim in haproxy alone at par, 0.99x [0.95-1.02] the "
			      "same haproxy without it; the 1.33x with the shim also in the storage "
			      "node behind it was the node's");
		ps_buf_str(&m);
		break;
	case PROG_RADOSGW:
		advice_add(l, "program_settings", "radosgw: rgw_max_chunk_size", &m);
		ps_buf_printf(&m, "radosgw's large buffers are object data in pieces of "
			      "rgw_max_chunk_size and rgw_obj_stripe_size (4M each by default); "
			      "the pool serves them when they are at least POOLSHIM_POOL_MIN=%s and "
			      "objects that large are read or written.  Measured against radosgw's "
			      "defaults without the shim (docs/results.md, \"Should I deploy it?\"): "
			      "GET 16 MiB 1.20x, GET 1 MiB 1.22x (256 -> 1 faults per GET), "
			      "PUT at par", min);
		ps_buf_str(&m);
		break;
	case PROG_OTHER:
		break;
	}
}

/* File data the kernel moved between descriptors: no buffer in the process to pool. */
static void advise_sendfile(const struct ps_report_data *d, struct advice_list *l)
{
	uint64_t calls = 0, bytes = 0;
	char moved[SIZE_TEXT];
	struct ps_buf m;

	if (!pool_idle(d))
		return;
	for (int call = PS_CALL_SENDFILE; call <= PS_CALL_SPLICE; call++)
		for (int k = 0; k < PS_FD__COUNT; k++)
			if (row_used(d, call, k)) {
				calls += d->totals->c[call][k].calls;
				bytes += d->totals->c[call][k].bytes;
			}
	if (!bytes)
		return;
	bool nginx = known_program(d->program) == PROG_NGINX;
	advice_add(l, "sendfile", nginx ? "nginx: sendfile" : "sendfile", &m);
	ps_buf_printf(&m, "%lu sendfile/splice calls moved %s inside the kernel, from descriptor "
		      "to descriptor, through no buffer of this process: nothing for the pool "
		      "to serve", (unsigned long)calls, size_text(moved, bytes));
	if (nginx)
		ps_buf_puts(&m, "; nginx with `sendfile on` (Debian's nginx.conf sets it) serves static "
			    "files this way, and that is cheap already; files read with directio into "
			    "output_buffers "
			    "(sendfile does not apply to them) are where the pool works, but "
			    "switching does not pay: directio 1m, output_buffers 2 16m under "
			    "the shim measured 0.55x [0.47-0.60] sendfile on without it, MISSED "
			    "(docs/results.md, \"Should I deploy it?\")");
	ps_buf_str(&m);
}

/*
 * POOLSHIM_POOL=off: the run is a baseline.  Say so, instead of why the
 * pool did nothing, with what the pool would have had to serve: the
 * allocating calls at or above the threshold (exact; from the bucket at
 * or above it, so "at least" when the threshold is not a power of two).
 */
static void advise_pool_off(const struct ps_report_data *d, struct advice_list *l)
{
	uint64_t large = 0;
	char min[SIZE_TEXT];
	struct ps_buf m;

	if (!d->pool_off)
		return;
	for (int call = PS_CALL_MALLOC; call < PS_CALL_FREE; call++) {
		if (!row_used(d, call, PS_FD_NONE))
			continue;
		for (int k = 0; k < PS_SIZE_BUCKETS; k++)
			if ((1ULL << k) >= d->pool_min)
				large += d->totals->c[call][PS_FD_NONE].size_hist[k];
	}
	advice_add(l, "pool_off", "POOLSHIM_POOL", &m);
	ps_buf_printf(&m, "the pool was off (POOLSHIM_POOL=off): every allocation went to the "
		      "program's own heap, as without the shim, and the calls were counted as "
		      "with the pool (free only for pooled blocks: none here); %s%lu allocating "
		      "calls were of POOLSHIM_POOL_MIN=%s or more, "
		      "which the pool would serve.  This report is a baseline: run the same work "
		      "with the pool on and compare with `poolshim report --diff THIS NEW`",
		      d->pool_min & (d->pool_min - 1) ? "at least " : "", (unsigned long)large,
		      size_text(min, d->pool_min));
	ps_buf_str(&m);
	advice_suggest(l, "on");
}

static uint64_t window_mib_s(const struct ps_route_window *w);
static uint64_t window_cpu_us_gib(const struct ps_route_window *w);

/*
 * The router (POOLSHIM_URING=auto) chose the same route on every slot it
 * measured and never changed it, and the calls that measured the other
 * route cost, at the measured rates, at least 1% of the process's CPU
 * time and 1 ms: forcing the route would have saved that (a short
 * process, or few calls per device).
 */
static void advise_uring_route(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_route_table *rt = d->routes;
	const struct ps_uring_counts *u = &d->totals->uring;
	int chosen = 0, at = -1;
	double lost_ns = 0;

	if (!rt || rt->mode != PS_URING_AUTO)
		return;
	for (uint32_t i = 0; i < rt->nslots && i < PS_ROUTE_SLOTS; i++) {
		const struct ps_route_slot *s = &rt->slot[i];
		if (!s->key || !s->decisions)
			continue;
		if (s->changes || (chosen && (int)s->chosen != chosen) || !s->chosen ||
		    s->chosen > PS_ROUTE__COUNT)
			return;
		chosen = (int)s->chosen;
		int win = chosen - 1, lose = 1 - win;
		const struct ps_route_window *w = &s->chose[win], *x = &s->chose[lose];
		if (!w->bytes || !x->bytes)
			continue;
		double extra = (double)x->cpu_ns / (double)x->bytes - (double)w->cpu_ns / (double)w->bytes;
		if (extra > 0)
			lost_ns += extra * (double)u->route_bytes[i][lose];
		if (at < 0)
			at = (int)i;
	}
	double cpu_ns = (double)(d->utime_us + d->stime_us) * 1e3;
	if (!chosen || at < 0 || lost_ns < 1e6 || lost_ns < cpu_ns / 100)
		return;
	const struct ps_route_slot *s = &rt->slot[at];
	int win = chosen - 1;
	uint64_t cw = window_cpu_us_gib(&s->chose[win]), cl = window_cpu_us_gib(&s->chose[1 - win]);
	struct ps_buf m;
	advice_add(l, "uring_route", "POOLSHIM_URING", &m);
	ps_buf_printf(&m, "every device's O_DIRECT calls went to the %s (%lu.%lu against %lu.%lu ms "
		      "CPU/GiB the last time it was measured); measuring the %s cost about %lu ms of "
		      "CPU, %lu%% of this process's: POOLSHIM_URING=%s skips the measurement",
		      win ? "ring" : "plain call", (unsigned long)(cw / 1000),
		      (unsigned long)(cw % 1000 / 100), (unsigned long)(cl / 1000),
		      (unsigned long)(cl % 1000 / 100), win ? "plain call" : "ring",
		      (unsigned long)(lost_ns / 1e6),
		      (unsigned long)(cpu_ns > 0 ? lost_ns * 100 / cpu_ns : 0), win ? "on" : "off");
	ps_buf_str(&m);
	advice_suggest(l, win ? "on" : "off");
}

/*
 * Each rule adds at most one item; the report lists them in this order.
 * What the program's own settings say comes before the generic rules, so
 * that it is never lost behind them.
 */
static void (*const advisors[])(const struct ps_report_data *d, struct advice_list *l) = {
	advise_pool_off, advise_program, advise_sendfile, advise_pool_min, advise_unaligned,
	advise_pool_full, advise_hugetlb_none, advise_thp_disabled, advise_hugetlb_pays,
	advise_uring_route, advise_pool_idle,
};
_Static_assert(sizeof(advisors) / sizeof(advisors[0]) <= ADVICE_MAX, "room for every rule's item");

static void gather_advice(const struct ps_report_data *d, struct advice_list *l)
{
	l->n = 0;
	for (size_t i = 0; i < sizeof(advisors) / sizeof(advisors[0]); i++)
		advisors[i](d, l);
}

/* An errno's name ("EAGAIN", or "errno123") into out[16]. */
static const char *errno_key(char *out, int e)
{
	const char *name = ps_errno_name(e);
	struct ps_buf b;

	if (name)
		return name;
	ps_buf_init(&b, out, 16, -1);
	ps_buf_printf(&b, "errno%d", e);
	return ps_buf_str(&b);
}

/*
 * Where and how the run happened.  Text: a "run" line and a "config" line,
 * none for a live file (poolshim stat), which carries no metadata.  JSON:
 * the "meta" and "config" objects, always.
 */
static void emit_meta(struct ps_emit *e, const struct ps_report_data *d)
{
	char when[32];
	struct ps_buf wb;
	const char *unknown = e->json ? "" : "?";

	if (!e->json && !d->version && !d->host[0] && !d->cfg)
		return;
	ps_buf_init(&wb, when, sizeof(when), -1);
	if (d->start_time >= 0)
		put_iso8601(&wb, d->start_time);
	const char *version = d->version ? d->version : unknown;
	const char *host = d->host[0] ? d->host : unknown;
	const char *kernel = d->kernel[0] ? d->kernel : unknown;
	const char *start = d->start_time >= 0 ? ps_buf_str(&wb) : e->json ? NULL : "?";

	ps_emit_object_begin(e, "meta");
	ps_emit_line(e, "run      poolshim %{version}s; host %{host}s; kernel %{kernel}s; "
		     "started %{start_time}s\n", version, host, kernel, start);
	ps_emit_object_end(e);
	if (!e->json && !d->cfg)
		return;
	ps_emit_object_begin(e, "config");
	ps_emit_text(e, "config  ");
	const char *name;
	for (size_t i = 0; d->cfg; i++) {
		char storage[PS_PATH_MAX + 8];
		struct ps_buf v;
		ps_buf_init(&v, storage, sizeof(storage), -1);
		if (!ps_config_option(d->cfg, i, &name, &v))
			break;
		const char *value = ps_buf_str(&v);
		ps_emit_text(e, " %s=", name);
		ps_emit_col(e, name, 0, PS_EMIT_STR, &value);
	}
	ps_emit_text(e, "\n");
	ps_emit_object_end(e);
}

/* Text: an "advice" section, none when there is none.  JSON: the array, always. */
static void emit_advice(struct ps_emit *e, const struct ps_report_data *d)
{
	struct advice_list list, *l = &list;

	gather_advice(d, l);
	if (!e->json && !l->n)
		return;
	ps_emit_array_begin(e, "advice");
	ps_emit_text(e, "advice\n");
	for (int i = 0; i < l->n; i++) {
		const struct advice *a = &l->a[i];
		const char *message = a->message, *suggested = a->suggested[0] ? a->suggested : NULL;
		ps_emit_object_begin(e, NULL);
		ps_emit_kv(e, "id", PS_EMIT_NAME, &a->id);
		ps_emit_text(e, "  - ");
		ps_emit_col(e, "message", 0, PS_EMIT_STR, &message);
		ps_emit_text(e, "\n");
		ps_emit_kv(e, "variable", PS_EMIT_STR, &a->variable);
		ps_emit_kv(e, "suggested", PS_EMIT_STR, &suggested);
		ps_emit_object_end(e);
	}
	ps_emit_array_end(e);
}

/* A histogram's non-empty buckets: JSON [[bound,count],...]; text " bound:count"... */
static void emit_hist(struct ps_emit *e, const char *key, const uint64_t *h, int n, bool sizes)
{
	ps_emit_array_begin(e, key);
	for (int i = 0; i < n; i++) {
		if (!h[i])
			continue;
		uint64_t bound = 1ULL << i;
		ps_emit_text(e, " ");
		ps_emit_cell(e, 0, sizes ? PS_EMIT_SIZE : PS_EMIT_U64, &bound);
		ps_emit_text(e, ":%lu", (unsigned long)h[i]);
		ps_emit_pair(e, bound, h[i]);
	}
	ps_emit_array_end(e);
}

/* Counts v[from..to) by name: JSON {"name":n,...}, text " name n"... */
static void emit_counts(struct ps_emit *e, const char *key, const char *(*name_of)(unsigned),
			const uint64_t *v, unsigned from, unsigned to)
{
	ps_emit_object_begin(e, key);
	for (unsigned i = from; i < to; i++) {
		const char *name = name_of(i);
		ps_emit_text(e, " %s ", name);
		ps_emit_col(e, name, 0, PS_EMIT_U64, &v[i]);
	}
	ps_emit_object_end(e);
}

static void emit_pool(struct ps_emit *e, const struct ps_report_data *d)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;
	const char *mode = pool_mode(d), *requested = ps_hugepage_name(p->requested);

	if (d->heap_owner)
		ps_emit_text(e, "heap     owned by %s (preloaded ahead of the shim); nothing pooled\n",
			     d->heap_owner);
	ps_emit_object_begin(e, "pool");
	ps_emit_text(e, "pool     mode ");
	ps_emit_col(e, "mode", 0, PS_EMIT_NAME, &mode);
	ps_emit_text(e, " (requested ");
	ps_emit_col(e, "requested", 0, PS_EMIT_NAME, &requested);
	ps_emit_kv(e, "heap_owner", PS_EMIT_STR, &d->heap_owner);
	ps_emit_kv(e, "hugetlb_reason", PS_EMIT_STR, &p->hugetlb_reason);
	ps_emit_kv(e, "thp_reason", PS_EMIT_STR, &p->thp_reason);
	/* JSON null where the configuration is not known (a record without it). */
	ps_emit_text(e, "); placement %s", d->allocator ? d->allocator : "unknown");
	ps_emit_kv(e, "allocator", PS_EMIT_STR, &d->allocator);
	/*
	 * The page placement's arenas: in the text once threads spread over
	 * more than one; null in JSON where not known (jemalloc's placement,
	 * the pool off, a live record, which does not carry them).
	 */
	if (d->arenas_used && !d->pool_off) {
		ps_emit_object_begin(e, "arenas");
		if (d->arenas_used > 1) {
			ps_emit_line(e, " (%{used}u of %{max}u arenas)", d->arenas_used, d->arenas_max);
		} else {
			ps_emit_kv(e, "used", PS_EMIT_U64, &d->arenas_used);
			ps_emit_kv(e, "max", PS_EMIT_U64, &d->arenas_max);
		}
		ps_emit_object_end(e);
	} else {
		const char *none = NULL;
		ps_emit_kv(e, "arenas", PS_EMIT_STR, &none);
	}
	ps_emit_line(e, "; %{slabs}u slabs, %{backed}z backed [", p->slabs, p->backed);
	ps_emit_object_begin(e, "backed_by");
	for (int i = 0; i < PS_BACK__COUNT; i++) {
		const char *name = ps_backing_name((enum ps_backing)i);
		ps_emit_text(e, "%s%s ", i ? ", " : "", name);
		ps_emit_col(e, name, 0, PS_EMIT_SIZE, &p->backed_by[i]);
	}
	ps_emit_object_end(e);
	ps_emit_line(e, "]; in use %{in_use}z, peak %{peak}z, cap %{cap}z, threshold %{threshold}z",
		     d->pool_in_use, d->pool_peak, p->cap, d->pool_min);
	ps_emit_kv(e, "reserve", PS_EMIT_U64, &p->reserve);
	/*
	 * With the pool off, the text says no more of it (what it keeps free,
	 * what it served: nothing, by design; the saved line says so).  The
	 * JSON keeps every member, so a baseline reads like any report.
	 */
	if (d->pool_off && !e->json) {
		ps_emit_text(e, "\n");
		ps_emit_object_end(e);
		return;
	}
	ps_emit_line(e, "\npool     keeps up to %{retain}z free for %{decay_ms}u ms; gave back "
		     "%{purged}z in %{purges}u purges", p->retain, p->decay_ms, p->purged, p->purges);
	if (p->cgroup_version) {
		ps_emit_line(e, "; memory cgroup limit %{cgroup_limit}z (v%{cgroup_version}d)",
			     p->cgroup_limit, p->cgroup_version);
	} else {
		/* The JSON keeps both fields (0); the text says it in words. */
		ps_emit_text(e, "; no memory cgroup limit");
		ps_emit_kv(e, "cgroup_limit", PS_EMIT_SIZE, &p->cgroup_limit);
		ps_emit_kv(e, "cgroup_version", PS_EMIT_INT, &p->cgroup_version);
	}
	/*
	 * The free blocks (page-exact placement): what the pool holds and the
	 * program does not, and how much of it is resident (not known zero).
	 * null in JSON where not known (jemalloc's placement, older records).
	 */
	if (d->free_known) {
		uint64_t resident = d->free_bytes - d->free_zero_bytes;
		ps_emit_object_begin(e, "free");
		ps_emit_line(e, "\npool     free blocks %{blocks}u, %{bytes}z", d->free_blocks,
			     d->free_bytes);
		if (d->free_largest)
			ps_emit_line(e, " (largest %{largest}z)", d->free_largest);
		else
			ps_emit_kv(e, "largest", PS_EMIT_SIZE, &d->free_largest);
		ps_emit_line(e, "; up to %{resident_max}z of it resident, %{zero}z known to be given "
			     "back or never touched", resident, d->free_zero_bytes);
		ps_emit_object_end(e);
	} else {
		const char *none = NULL;
		ps_emit_kv(e, "free", PS_EMIT_STR, &none);
	}
	ps_emit_line(e, "\npool     %{allocations}u allocations served (%{cached}u from the CPUs' "
		     "caches", t->events[PS_EV_POOL_ALLOC], t->events[PS_EV_POOL_CACHED]);
	if (d->cached_known)
		ps_emit_line(e, ", %{cached_bytes}z held in them", d->cached_bytes);
	ps_emit_line(e, "; %{paced}u frees went past them, their CPUs slower than the pace",
		     t->events[PS_EV_POOL_PACED]);
	/* POOLSHIM_POOL_TAILS (core/blocks.h): pages past a freed block's first ones, unwritten. */
	ps_emit_line(e, "; %{tails}u gave back their block's unwritten tail", t->events[PS_EV_POOL_TAIL]);
	ps_emit_line(e, "), %{frees}u freed; fallbacks to glibc's heap:", t->events[PS_EV_POOL_FREE]);
	emit_counts(e, "fallbacks", ps_event_name, t->events, PS_EV_FB_POOL_FULL, PS_EV__COUNT);
	ps_emit_text(e, "\n");
	ps_emit_object_end(e);
}

/*
 * What the pool saved, from the counts alone (so a report rendered by
 * `poolshim collect` or `poolshim stat` says the same).  Exact: the pooled
 * allocations, those that took the pool past its peak (fresh memory) and
 * those that did not (memory it already held), and the pages the pool took
 * from the kernel.  Estimated, by the rule in poolshim(7) THE REPORT: what
 * glibc would have needed for allocations of those sizes.  glibc mmaps a
 * block at or above its mmap threshold and unmaps it at free; the threshold
 * starts at 128 KiB and, unless set, rises to the size of each mapped block
 * freed, up to 32 MiB.  So at most every allocating call of 128 KiB or more
 * is an mmap and a munmap, and at least every one of 32 MiB or more is;
 * each maps fresh pages, faulted in as written (all of them, assumed),
 * sizes taken at their histogram bucket's lower bound, and the counts
 * capped at the pool's allocations, the largest first (the histograms hold
 * glibc's fallbacks too).
 */

static void glibc_would(const struct ps_tstats *t, uint64_t from, uint64_t cap,
			uint64_t *maps, uint64_t *faults)
{
	uint64_t n = 0;
	unsigned __int128 bytes = 0;

	/*
	 * Largest sizes first, up to the cap: the wider estimate (from 128 KiB)
	 * then always holds the narrower one (from 32 MiB), and neither bound
	 * can cross the other.
	 */
	for (int k = PS_SIZE_SLOTS - 1; k >= 0 && n < cap; k--) {
		if (((uint64_t)1 << k) < from)
			break;
		uint64_t in = 0;
		for (int call = 0; call < PS_CALL__COUNT; call++)
			if (ps_call_estimate_event((enum ps_call)call) != PS_EV__COUNT)
				in += t->c[call][PS_FD_NONE].size_hist[k];
		if (in > cap - n)
			in = cap - n;
		n += in;
		bytes += (unsigned __int128)in << k;
	}
	*maps = n;
	*faults = (uint64_t)(bytes >> 12);
}

static void emit_saved(struct ps_emit *e, const struct ps_report_data *d)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;
	uint64_t allocs = t->events[PS_EV_POOL_ALLOC];
	uint64_t fresh = t->events[PS_EV_POOL_FRESH] < allocs ? t->events[PS_EV_POOL_FRESH] : allocs;
	uint64_t reused = allocs - fresh;
	uint64_t pages = (p->backed_by[PS_BACK_HUGETLB] + p->backed_by[PS_BACK_THP]) / ((uint64_t)2 << 20) +
			 p->backed_by[PS_BACK_4K] / 4096;
	uint64_t lo_maps, lo_faults, hi_maps, hi_faults;

	glibc_would(t, SAVED_DYNAMIC_MAX, allocs, &lo_maps, &lo_faults);
	glibc_would(t, SAVED_STATIC_MIN, allocs, &hi_maps, &hi_faults);
	/*
	 * The pool off: nothing saved, on purpose.  The JSON keeps its members
	 * (all 0); the text says why, as a zero line would not.
	 */
	if (d->pool_off && !e->json) {
		ps_emit_text(e, "saved    nothing: the pool was off (POOLSHIM_POOL=off), every "
			     "allocation went to the program's heap\n");
		return;
	}
	ps_emit_object_begin(e, "saved");
	ps_emit_line(e, "saved    %{allocations}u pooled allocations: %{reused}u on memory the pool "
		     "held, %{fresh}u past its peak; it took %{taken}z from the kernel in "
		     "%{pages}u pages; glibc would have needed (estimate) %{glibc_mmaps_min}u-"
		     "%{glibc_mmaps_max}u mmap+munmap pairs and %{glibc_faults_min}u-"
		     "%{glibc_faults_max}u page faults\n", allocs, reused, fresh, p->backed, pages,
		     lo_maps, hi_maps, lo_faults, hi_faults);
	ps_emit_object_end(e);
}


/* The advice item with this id, or NULL. */
static const struct advice *advice_find(const struct advice_list *l, const char *id)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->a[i].id, id))
			return &l->a[i];
	return NULL;
}

/*
 * Why the pool saved nothing, in a few words, from the items the advice
 * rules gave (the program's own first, as in the advice), else from the
 * counts.  Into m; false when the shim did other work here (io_uring),
 * so that "only counts" would not be true.
 */
static void verdict_idle(struct ps_buf *m, const struct ps_report_data *d,
			 const struct advice_list *l)
{
	enum known_program prog = known_program(d->program);
	const struct advice *a;
	uint64_t allocs = d->totals->events[PS_EV_POOL_ALLOC];
	char min[SIZE_TEXT], lo[SIZE_TEXT], hi[SIZE_TEXT];

	size_text(min, d->pool_min);
	ps_buf_puts(m, "pool idle: ");
	if (advice_find(l, "sendfile")) {
		ps_buf_printf(m, "%s sends with sendfile", prog == PROG_NGINX ? "nginx" : "the data moved by");
		if (prog != PROG_NGINX)
			ps_buf_puts(m, "/splice, through no buffer of this process");
	} else if (prog == PROG_HAPROXY && advice_find(l, "program_settings")) {
		if (allocs)
			ps_buf_printf(m, "haproxy keeps its buffers in its own pools (%lu pooled, "
				      "%lu reused)", (unsigned long)allocs, (unsigned long)pool_reused(d));
		else
			ps_buf_printf(m, "haproxy's buffers (tune.bufsize) stay below "
				      "POOLSHIM_POOL_MIN=%s", min);
	} else if ((a = advice_find(l, "pool_min"))) {
		ps_buf_printf(m, "allocations just below POOLSHIM_POOL_MIN=%s; "
			      "POOLSHIM_POOL_MIN=%s would pool them", min, a->suggested);
	} else if (advice_find(l, "program_settings")) {
		ps_buf_printf(m, "%s's buffers stay below POOLSHIM_POOL_MIN=%s with its settings; "
			      "the advice names those that make them larger",
			      prog == PROG_NGINX ? "nginx" : "radosgw", min);
	} else if (allocs < ADVICE_IDLE_ALLOCS) {
		uint64_t count;
		int top = largest_alloc_bucket(d, &count);
		if (top < 0)
			ps_buf_puts(m, "no counted allocation");
		else if ((1ULL << top) < d->pool_min)
			ps_buf_printf(m, "the largest allocations were %s-%s, below "
				      "POOLSHIM_POOL_MIN=%s", size_text(lo, 1ULL << top),
				      size_text(hi, 2ULL << top), min);
		else
			ps_buf_printf(m, "only %lu allocations reached the pool", (unsigned long)allocs);
	} else {
		ps_buf_printf(m, "the pool served %lu allocations and reused memory for %lu, "
			      "which saves nothing", (unsigned long)allocs, (unsigned long)pool_reused(d));
	}
}

/*
 * The verdict: one line that says the answer, from the numbers the saved
 * line and the advice use.  Text: a "verdict" line under the header.
 * JSON: "verdict" {"kind", "text"}, kind one of no_work, baseline,
 * foreign, idle, saved.
 */
static void emit_verdict(struct ps_emit *e, const struct ps_report_data *d)
{
	/*
	 * The advice is gathered here and again at the end (emit_advice), the
	 * same from the same numbers: the list (some 8 KiB) is on the stack
	 * only while each needs it, not across the call sites between.
	 */
	struct advice_list list, *l = &list;
	const struct ps_tstats *t = d->totals;
	uint64_t sqes = t->uring.sqes;
	char text[400];
	const char *kind, *line;
	struct ps_buf m;

	gather_advice(d, l);
	ps_buf_init(&m, text, sizeof(text), -1);
	if (ps_stats_idle(t, d->rows_known ? &d->rows : NULL, d->pool_min / 4)) {
		char big[SIZE_TEXT];
		kind = "no_work";
		ps_buf_printf(&m, "no work: no counted I/O call and no allocation of %s or more; "
			      "nothing for the shim to do here", size_text(big, d->pool_min / 4));
	} else if (d->pool_off) {
		kind = "baseline";
		ps_buf_printf(&m, "baseline: the pool was off (POOLSHIM_POOL=off), every call "
			      "counted as without it; compare a pooled run with "
			      "`poolshim report --diff THIS NEW`");
	} else if (d->heap_owner) {
		kind = "foreign";
		ps_buf_printf(&m, "nothing pooled: the heap is %s's (preloaded ahead of the shim); "
			      "the shim only counts here", d->heap_owner);
	} else if (pool_idle(d)) {
		kind = "idle";
		verdict_idle(&m, d, l);
		if (sqes)
			ps_buf_printf(&m, "; O_DIRECT through io_uring: %lu requests",
				      (unsigned long)sqes);
		else
			ps_buf_puts(&m, "; the shim only counts here");
	} else {
		uint64_t lo_maps, lo_faults, hi_maps, hi_faults, allocs = t->events[PS_EV_POOL_ALLOC];
		kind = "saved";
		glibc_would(t, SAVED_DYNAMIC_MAX, allocs, &lo_maps, &lo_faults);
		glibc_would(t, SAVED_STATIC_MIN, allocs, &hi_maps, &hi_faults);
		ps_buf_printf(&m, "pool reused memory for %lu of %lu large allocations; glibc would "
			      "have needed %lu-%lu mmap+munmap pairs and %lu-%lu page faults (estimate)",
			      (unsigned long)pool_reused(d), (unsigned long)allocs,
			      (unsigned long)lo_maps, (unsigned long)hi_maps,
			      (unsigned long)lo_faults, (unsigned long)hi_faults);
		if (sqes)
			ps_buf_printf(&m, "; O_DIRECT through io_uring: %lu requests", (unsigned long)sqes);
	}
	/* The first knob the advice suggests, when it says one. */
	for (int i = 0; i < l->n && !d->pool_off; i++) {
		const struct advice *a = &l->a[i];
		/* An idle verdict names pool_min's value already. */
		if (a->suggested[0] && !strncmp(a->variable, "POOLSHIM_", 9) &&
		    (strcmp(a->id, "pool_min") || strcmp(kind, "idle"))) {
			ps_buf_printf(&m, "; try %s=%s", a->variable, a->suggested);
			break;
		}
	}
	line = ps_buf_str(&m);
	ps_emit_object_begin(e, "verdict");
	ps_emit_kv(e, "kind", PS_EMIT_NAME, &kind);
	ps_emit_text(e, "verdict  ");
	ps_emit_col(e, "text", 0, PS_EMIT_STR, &line);
	ps_emit_text(e, "\n");
	ps_emit_object_end(e);
}

static void emit_process(struct ps_emit *e, const struct ps_report_data *d)
{
	ps_emit_object_begin(e, "process");
	ps_emit_line(e, "process  page faults %{minflt}u minor, %{majflt}u major; "
		     "cpu %{utime_us}t user, %{stime_us}t sys; at most %{threads}d threads at once\n",
		     d->minflt, d->majflt, d->utime_us, d->stime_us, d->threads);
	ps_emit_object_end(e);
}

static const char *const route_names[PS_ROUTE__COUNT] = { "plain", "ring" };
static const char *const route_state_names[] = { "measuring", "plain", "ring", "forced_ring" };
static const char *const route_mode_names[] = { "auto", "off", "on" };

/* MiB/s and CPU microseconds per GiB of a measurement (0 when it has none). */
static uint64_t window_mib_s(const struct ps_route_window *w)
{
	return w->wall_ns ? (uint64_t)((double)w->bytes * 1e9 / (double)w->wall_ns / 1048576.0) : 0;
}

static uint64_t window_cpu_us_gib(const struct ps_route_window *w)
{
	return w->bytes ? (uint64_t)((double)w->cpu_ns / 1e3 * 1073741824.0 / (double)w->bytes) : 0;
}

/* "plain 812 MiB/s, 25.4 ms CPU/GiB (32 samples)", and its members. */
static void emit_route_window(struct ps_emit *e, int r, const struct ps_route_window *w)
{
	uint64_t mib_s = window_mib_s(w), cpu = window_cpu_us_gib(w);

	ps_emit_object_begin(e, route_names[r]);
	ps_emit_kv(e, "samples", PS_EMIT_U64, &w->samples);
	ps_emit_kv(e, "bytes", PS_EMIT_U64, &w->bytes);
	ps_emit_kv(e, "cpu_ns", PS_EMIT_U64, &w->cpu_ns);
	ps_emit_kv(e, "wall_ns", PS_EMIT_U64, &w->wall_ns);
	ps_emit_kv(e, "mib_s", PS_EMIT_U64, &mib_s);
	ps_emit_kv(e, "cpu_us_per_gib", PS_EMIT_U64, &cpu);
	ps_emit_text(e, "%s %lu MiB/s, %lu.%lu ms CPU/GiB (%lu samples)", route_names[r],
		     (unsigned long)mib_s, (unsigned long)(cpu / 1000), (unsigned long)(cpu % 1000 / 100),
		     (unsigned long)w->samples);
	ps_emit_object_end(e);
}

/*
 * One line per slot of the router (device and direction): the route its
 * calls take, the measurement that chose it, and its calls and bytes by
 * route.  JSON: uring.route_mode and the uring.devices array.
 */
static void emit_routes(struct ps_emit *e, const struct ps_report_data *d)
{
	const struct ps_route_table *rt = d->routes;
	const struct ps_uring_counts *u = &d->totals->uring;
	uint32_t n = rt ? rt->nslots : 0;
	const char *mode = rt && rt->mode < PS_ARRAY_SIZE(route_mode_names) ? route_mode_names[rt->mode]
									      : NULL;

	ps_emit_kv(e, "route_mode", PS_EMIT_STR, &mode);
	ps_emit_array_begin(e, "devices");
	for (uint32_t i = 0; i < n && i < PS_ROUTE_SLOTS; i++) {
		const struct ps_route_slot *s = &rt->slot[i];
		if (!s->key)
			continue;
		uint64_t dev = (s->key >> 1) - 1;
		char name[32];
		struct ps_buf nb;
		ps_buf_init(&nb, name, sizeof(name), -1);
		/* glibc's dev_t encoding, as major(3) and minor(3) read it. */
		ps_buf_printf(&nb, "%u:%u", (unsigned)(((dev >> 32) & 0xfffff000u) | ((dev >> 8) & 0xfffu)),
			      (unsigned)(((dev >> 12) & 0xffffff00u) | (dev & 0xffu)));
		const char *dev_name = ps_buf_str(&nb);
		const char *op = s->key & 1 ? "write" : "read";
		const char *state = s->state < PS_ARRAY_SIZE(route_state_names) ? route_state_names[s->state]
										   : "?";
		uint64_t decisions = s->decisions, changes = s->changes;

		ps_emit_row_begin(e);
		ps_emit_text(e, "io_uring route ");
		ps_emit_col(e, "device", 0, PS_EMIT_STR, &dev_name);
		ps_emit_text(e, " %ss: ", op);
		ps_emit_kv(e, "op", PS_EMIT_NAME, &op);
		ps_emit_col(e, "route", 0, PS_EMIT_NAME, &state);
		const char *chosen = s->chosen >= 1 && s->chosen <= PS_ROUTE__COUNT
					     ? route_names[s->chosen - 1] : NULL;
		ps_emit_kv(e, "route_chosen", PS_EMIT_STR, &chosen);
		if (s->state == PS_ROUTE_STATE_MEASURING && chosen)
			ps_emit_text(e, " again (%s before)", chosen);
		ps_emit_line(e, " after %{route_decisions}u measurements (%{route_changes}u changes)",
			     decisions, changes);
		ps_emit_object_begin(e, "route_measured");
		if (decisions) {
			ps_emit_text(e, ", the last: ");
			emit_route_window(e, PS_ROUTE_PLAIN, &s->chose[PS_ROUTE_PLAIN]);
			ps_emit_text(e, " against ");
			emit_route_window(e, PS_ROUTE_RING, &s->chose[PS_ROUTE_RING]);
		}
		ps_emit_object_end(e);
		/* "; calls plain 4012 ring 84 (3.9G, 84M bytes)" */
		ps_emit_text(e, "; calls");
		ps_emit_object_begin(e, "route_calls");
		for (int r = 0; r < PS_ROUTE__COUNT; r++) {
			ps_emit_text(e, " %s ", route_names[r]);
			ps_emit_col(e, route_names[r], 0, PS_EMIT_U64, &u->route_calls[i][r]);
		}
		ps_emit_object_end(e);
		ps_emit_object_begin(e, "route_bytes");
		for (int r = 0; r < PS_ROUTE__COUNT; r++) {
			ps_emit_text(e, r ? ", " : " (");
			ps_emit_col(e, route_names[r], 0, PS_EMIT_SIZE, &u->route_bytes[i][r]);
		}
		ps_emit_object_end(e);
		ps_emit_text(e, " bytes)");
		ps_emit_row_end(e);
	}
	ps_emit_array_end(e);
}

static void emit_uring(struct ps_emit *e, const struct ps_report_data *d)
{
	const struct ps_uring_counts *u = &d->totals->uring;
	const char *state = ps_uring_state_name(d->uring_state);

	ps_emit_object_begin(e, "uring");
	ps_emit_text(e, "io_uring ");
	ps_emit_col(e, "state", 0, PS_EMIT_NAME, &state);
	if (d->uring_reason)
		ps_emit_text(e, ": %s", d->uring_reason);
	ps_emit_kv(e, "reason", PS_EMIT_STR, &d->uring_reason);
	ps_emit_line(e, "; %{rings}u rings, %{enters}u enters, %{sqes}u SQEs (%{fixed}u fixed), "
		     "%{split_calls}u split calls; fallbacks:", d->uring_rings, u->enters, u->sqes,
		     u->fixed, u->split_calls);
	/* JSON has the histogram before the fallbacks, text on a line after them. */
	if (e->json)
		emit_hist(e, "sqes_per_enter", u->sqes_per_enter, PS_SQE_BUCKETS, false);
	emit_counts(e, "fallbacks", ps_uring_fb_name, u->fallbacks, 0, PS_UFB__COUNT);
	ps_emit_text(e, "\n");
	emit_routes(e, d);
	ps_emit_object_end(e);
	if (!e->json && u->enters) {
		ps_emit_text(e, "io_uring SQEs per enter:");
		emit_hist(e, NULL, u->sqes_per_enter, PS_SQE_BUCKETS, false);
		ps_emit_text(e, "\n");
	}
}

/* One row of the call table: a call on one kind of descriptor. */
static void emit_call(struct ps_emit *e, const struct ps_report_data *d, int call, int k)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_counter *c = &t->c[call][k];
	const char *name = ps_call_name((enum ps_call)call);
	const char *kind = ps_fdkind_name((enum ps_fdkind)k);
	const char *json_kind = k == PS_FD_NONE ? "none" : kind;
	char key[16];

	ps_emit_row_begin(e);
	ps_emit_col(e, "call", -16, PS_EMIT_NAME, &name);
	ps_emit_kv(e, "kind", PS_EMIT_NAME, &json_kind);
	ps_emit_cell(e, -8, PS_EMIT_NAME, &kind);
	ps_emit_col(e, "calls", 10, PS_EMIT_U64, &c->calls);
	ps_emit_col(e, "bytes", 11, PS_EMIT_SIZE, &c->bytes);
	ps_emit_col(e, "errors", 9, PS_EMIT_U64, &c->errors);
	ps_emit_col(e, "eagain", 9, PS_EMIT_U64, &c->eagain);
	ps_emit_kv(e, "timed", PS_EMIT_U64, &c->timed);
	ps_emit_kv(e, "nsec", PS_EMIT_U64, &c->nsec);
	/* Small allocations are counted one in about PS_ALLOC_SAMPLE (names.h). */
	enum ps_alloc_event est = ps_call_estimate_event((enum ps_call)call);
	uint64_t estimated = k == PS_FD_NONE && est != PS_EV__COUNT ? t->events[est] : 0;
	ps_emit_kv(e, "estimated", PS_EMIT_U64, &estimated);
	uint64_t avg = c->timed ? c->nsec / c->timed : 0;
	const char *none = "-";
	if (c->timed)
		ps_emit_cell(e, 9, PS_EMIT_U64, &avg);
	else
		ps_emit_cell(e, 9, PS_EMIT_NAME, &none);
	uint32_t n;
	int top = top_errno(t, call, &n);
	if (top)
		ps_emit_text(e, "  %s:%u", errno_key(key, top), n);
	else
		ps_emit_text(e, "  -");
	/* The histograms have text tables of their own (emit_hist_table). */
	if (e->json) {
		emit_hist(e, "size_hist", c->size_hist, PS_SIZE_BUCKETS, true);
		emit_hist(e, "lat_hist", c->lat_hist, PS_LAT_BUCKETS, false);
	}
	ps_emit_object_begin(e, "errnos");
	/* errnos are per call, so list them on the call's first row only */
	bool first_row = true;
	for (int kk = 0; kk < k; kk++)
		first_row &= !row_used(d, call, kk);
	for (int er = 1; er < PS_ERRNO_MAX && first_row; er++) {
		uint64_t count = t->errnos[call][er];
		if (count)
			ps_emit_kv(e, errno_key(key, er), PS_EMIT_U64, &count);
	}
	ps_emit_object_end(e);
	ps_emit_row_end(e);
}

/* Text only: the size or the latency histogram of every call that has one. */
static void emit_hist_table(struct ps_emit *e, const struct ps_report_data *d, bool latency)
{
	const struct ps_tstats *t = d->totals;
	bool any = !latency;

	for (int call = 0; call < PS_CALL__COUNT && !any; call++)
		for (int k = 0; k < PS_FD__COUNT; k++)
			any |= row_used(d, call, k) && t->c[call][k].nsec != 0;
	if (!any)
		return;
	ps_emit_text(e, latency ? "latency histogram (bucket = lower bound in ns: calls)\n" :
			 "size histogram (bucket = lower bound in bytes: calls)\n");
	for (int call = 0; call < PS_CALL__COUNT; call++) {
		for (int k = 0; k < PS_FD__COUNT; k++) {
			const struct ps_counter *c = &t->c[call][k];
			uint64_t in_hist = 0;
			if (!row_used(d, call, k))
				continue;
			for (int i = 0; i < PS_SIZE_BUCKETS; i++)
				in_hist += c->size_hist[i];
			if (latency ? !c->nsec : !in_hist)
				continue;
			const char *name = ps_call_name((enum ps_call)call);
			const char *kind = ps_fdkind_name((enum ps_fdkind)k);
			ps_emit_cell(e, -16, PS_EMIT_NAME, &name);
			ps_emit_cell(e, -8, PS_EMIT_NAME, &kind);
			if (latency)
				emit_hist(e, NULL, c->lat_hist, PS_LAT_BUCKETS, false);
			else
				emit_hist(e, NULL, c->size_hist, PS_SIZE_BUCKETS, true);
			ps_emit_text(e, "\n");
		}
	}
}

/* "SIGKILL" for 9 into rt[16], or NULL. */
static const char *signal_abbrev(char *rt, int sig)
{
	const char *a = sig > 0 && sig < 65 ? sigabbrev_np(sig) : NULL;
	struct ps_buf b;

	if (a) {
		ps_buf_init(&b, rt, 16, -1);
		ps_buf_printf(&b, "SIG%s", a);
		return ps_buf_str(&b);
	}
	return NULL;
}

/*
 * How the process ended: text, one "ended" line; JSON, the "ended"
 * object.  Nothing for a report that does not say (PS_ENDED_UNSAID).
 */
static void emit_end(struct ps_emit *e, const struct ps_report_data *d)
{
	static const char *const how_names[] = { NULL, "exit", "signal", "unseen" };
	const char *how, *sig = NULL, *as_of = NULL;
	char when[32], sigbuf[16];
	struct ps_buf wb;
	int status = d->end_status;

	if (d->ended <= PS_ENDED_UNSAID || d->ended > PS_ENDED_UNSEEN)
		return;
	how = how_names[d->ended];
	ps_buf_init(&wb, when, sizeof(when), -1);
	if (d->ended == PS_ENDED_UNSEEN && d->end_usage_time >= 0) {
		put_iso8601(&wb, d->end_usage_time);
		as_of = ps_buf_str(&wb);
	}
	ps_emit_object_begin(e, "ended");
	ps_emit_kv(e, "how", PS_EMIT_NAME, &how);
	ps_emit_text(e, "ended    ");
	switch (d->ended) {
	case PS_ENDED_EXIT:
		if (d->end_known)
			ps_emit_text(e, "exit status %d", status);
		else
			ps_emit_text(e, "exited (status unknown)");
		break;
	case PS_ENDED_SIGNAL:
		sig = signal_abbrev(sigbuf, status);
		ps_emit_text(e, "killed by signal %d (%s)%s", status, sig ? sig : "?",
			     d->end_core ? ", core dumped" : "");
		break;
	default:
		ps_emit_text(e, "no exit seen: ended by a signal (TERM or KILL left at their default, the OOM killer, a crash)");
		if (as_of)
			ps_emit_text(e, "; page faults and CPU time as of %s", as_of);
		break;
	}
	if (d->ended == PS_ENDED_EXIT && d->end_known)
		ps_emit_kv(e, "status", PS_EMIT_INT, &status);
	else
		ps_emit_kv(e, "status", PS_EMIT_STR, &(const char *){ NULL });
	ps_emit_kv(e, "signal", PS_EMIT_STR, &sig);
	ps_emit_kv(e, "usage_as_of", PS_EMIT_STR, &as_of);
	ps_emit_kv(e, "rendered_by", PS_EMIT_STR, &d->rendered_by);
	if (d->rendered_by)
		ps_emit_text(e, "; report rendered by %s", d->rendered_by);
	ps_emit_text(e, "\n");
	ps_emit_object_end(e);
}

void ps_report_render_end(struct ps_buf *b, const struct ps_report_data *d)
{
	struct ps_emit e;

	ps_emit_init(&e, b, false);
	emit_end(&e, d);
}

void ps_report_render(struct ps_buf *b, const struct ps_report_data *d,
		      enum ps_stats_format format)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;
	struct ps_emit em, *e = &em;
	const char *schema = "poolshim-report";
	int version = PS_REPORT_VERSION;

	ps_emit_init(e, b, format == PS_FORMAT_JSON);
	ps_emit_object_begin(e, NULL);
	ps_emit_kv(e, "schema", PS_EMIT_NAME, &schema);
	ps_emit_kv(e, "version", PS_EMIT_INT, &version);
	ps_emit_text(e, "==== poolshim report: pid %d (%s) ====\n", d->pid, d->program);
	ps_emit_kv(e, "pid", PS_EMIT_INT, &d->pid);
	ps_emit_kv(e, "program", PS_EMIT_STR, &d->program);
	emit_verdict(e, d);
	emit_end(e, d);
	emit_pool(e, d);
	emit_saved(e, d);
	/* Text puts the run's metadata under the pool lines, JSON at the end. */
	if (!e->json)
		emit_meta(e, d);
	if (p->hugetlb_reason)
		ps_emit_text(e, "pool     hugetlb not used: %s\n", p->hugetlb_reason);
	if (p->thp_reason)
		ps_emit_text(e, "pool     THP not used: %s\n", p->thp_reason);
	emit_process(e, d);
	emit_uring(e, d);

	ps_emit_text(e, "call            kind         calls      bytes   errors   eagain   avg-ns  top-errno\n");
	ps_emit_array_begin(e, "calls");
	for (int call = 0; call < PS_CALL__COUNT; call++)
		for (int k = 0; k < PS_FD__COUNT; k++)
			if (row_used(d, call, k))
				emit_call(e, d, call, k);
	ps_emit_array_end(e);
	uint64_t est = 0, sampled_calls = 0;
	for (int call = 0; call < PS_CALL__COUNT; call++) {
		enum ps_alloc_event ev = ps_call_estimate_event((enum ps_call)call);
		if (ev != PS_EV__COUNT) {
			est += t->events[ev];
			if (row_used(d, call, PS_FD_NONE))
				sampled_calls += t->c[call][PS_FD_NONE].calls;
		}
	}
	if (est)
		ps_emit_text(e, "note     malloc-family calls below %lu bytes are sampled, one call in "
			     "about %d: %lu of their %lu calls, and those calls' sizes and bytes, are "
			     "an estimate\n", (unsigned long)(d->pool_min / 16), PS_ALLOC_SAMPLE,
			     (unsigned long)est, (unsigned long)sampled_calls);
	if (d->small_uncounted_below)
		ps_emit_text(e, "note     malloc-family calls below %lu bytes are not counted "
			     "(POOLSHIM_COUNT_SMALL=on counts them)\n",
			     (unsigned long)d->small_uncounted_below);
	if (!e->json) {
		emit_hist_table(e, d, false);
		emit_hist_table(e, d, true);
	}
	if (d->callsites)
		d->callsites(e, d->symbolize);
	else if (d->sites)
		ps_sites_emit(e, d->sites);
	else if (d->sites_refused)
		ps_emit_text(e, "call sites: not shown, the record's table is damaged (%s)\n",
			     d->sites_refused);
	if (e->json)
		emit_meta(e, d);
	emit_advice(e, d);
	ps_emit_text(e, "==== end of poolshim report ====\n");
	ps_emit_object_end(e);
}

int ps_report_path(char *out, size_t cap, const char *pattern, int pid, const char *program)
{
	struct ps_buf b;

	ps_buf_init(&b, out, cap, -1);
	for (const char *s = pattern; *s; s++) {
		if (*s != '%') {
			ps_buf_putc(&b, *s);
			continue;
		}
		switch (*++s) {
		case 'p': ps_buf_i64(&b, pid); break;
		case 'e': ps_buf_puts(&b, program); break;
		case '%': ps_buf_putc(&b, '%'); break;
		default: return -EINVAL;
		}
	}
	ps_buf_str(&b);
	return b.truncated ? -ENAMETOOLONG : 0;
}

bool ps_report_path_names_pid(const char *pattern)
{
	for (const char *s = pattern; *s; s++)
		if (*s == '%' && *++s == 'p')
			return true;
		else if (!*s)
			break;
	return false;
}
