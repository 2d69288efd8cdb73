// SPDX-License-Identifier: MIT
/*
 * Report rendering: the text table and the JSON document from a struct
 * ps_report_data, and the expansion of a report path.  Pure formatting
 * over a ps_buf: nothing here reads the allocator, the pool, io_uring or
 * the call-site table (gather.c fills the data; report_out.c writes it),
 * so poolshim-stat links this without the runtime.
 */
#include "report.h"

#include <errno.h>
#include <string.h>

#include "fmt.h"
#include "names.h"

static const char *pool_mode(const struct ps_report_data *d)
{
	if (d->heap_owner)
		return "foreign";
	if (!d->pool_ready)
		return "unavailable";
	if (d->pool.slabs == 0)
		return "unused";
	int kinds = 0;
	for (int i = 0; i < PS_BACK__COUNT; i++)
		kinds += d->pool.backed_by[i] != 0;
	return kinds > 1 ? "mixed" : ps_backing_name(d->pool.first_mode);   /* bounds-checked */
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

static void put_errno(struct ps_buf *b, int e)
{
	const char *name = ps_errno_name(e);
	if (name)
		ps_buf_puts(b, name);
	else
		ps_buf_printf(b, "errno%d", e);
}

static void put_size_cell(struct ps_buf *b, uint64_t v, int width)
{
	char storage[32];
	struct ps_buf cell;

	ps_buf_init(&cell, storage, sizeof(storage), -1);
	ps_buf_size(&cell, v);
	ps_buf_pad(b, ps_buf_str(&cell), width, true);
}

static void put_us(struct ps_buf *b, uint64_t us)
{
	ps_buf_fixed1(b, us, 1000000);
	ps_buf_putc(b, 's');
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
#define ADVICE_MAX 8

struct advice {
	const char *id;
	const char *variable;
	char message[320];
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

#define ADVICE_MIN_ALLOCS 16   /* fewer large-looking allocations are not worth a line */
#define PS_HUGE_2M (2ULL << 20)

static void gather_advice(const struct ps_report_data *d, struct advice_list *l)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;
	const struct ps_uring_counts *u = &t->uring;
	struct ps_buf m;

	l->n = 0;
	/*
	 * Allocations from a quarter of the threshold up to it look like I/O
	 * buffers; when they outnumber what reached the pool, the threshold is
	 * what keeps them out.  A power of two at or below the smallest such
	 * bucket pools them all (bucket k holds sizes from 2^k).
	 */
	uint64_t below = 0, lowest = 0, at_or_above = 0;
	for (int call = PS_CALL_MALLOC; call < PS_CALL_FREE; call++) {
		const struct ps_counter *c = &t->c[call][PS_FD_NONE];
		for (int k = 12; k < PS_SIZE_BUCKETS; k++) {
			uint64_t lo = 1ULL << k;
			if (!c->size_hist[k])
				continue;
			if (lo >= d->pool_min) {
				at_or_above += c->size_hist[k];
			} else if (lo >= d->pool_min / 4 && (lo << 1) <= d->pool_min) {
				below += c->size_hist[k];
				if (!lowest || lo < lowest)
					lowest = lo;
			}
		}
	}
	if (!d->heap_owner && below >= ADVICE_MIN_ALLOCS && below > at_or_above) {
		advice_add(l, "pool_min", "POOLSHIM_POOL_MIN", &m);
		ps_buf_printf(&m, "%lu of %lu large-looking allocations were ", (unsigned long)below,
			      (unsigned long)(below + at_or_above));
		ps_buf_size(&m, lowest);
		ps_buf_puts(&m, " or more but below POOLSHIM_POOL_MIN=");
		ps_buf_size(&m, d->pool_min);
		ps_buf_puts(&m, ", so they were not pooled; POOLSHIM_POOL_MIN=");
		ps_buf_size(&m, lowest);
		ps_buf_puts(&m, " would pool them");
		ps_buf_str(&m);
		advice_suggest_size(l, lowest);
	}

	if (u->fallbacks[PS_UFB_REGISTER]) {
		/* The pool's memory is what fixed buffers pin: a limit above it suffices. */
		uint64_t want = p->backed > d->pool_peak ? p->backed : d->pool_peak;
		want = (want + PS_HUGE_2M - 1) & ~(PS_HUGE_2M - 1);
		if (want < PS_HUGE_2M)
			want = PS_HUGE_2M;
		advice_add(l, "memlock", "RLIMIT_MEMLOCK", &m);
		ps_buf_printf(&m, "%lu O_DIRECT calls used the plain calls because the pool's buffers "
			      "could not be registered with io_uring: RLIMIT_MEMLOCK is ",
			      (unsigned long)u->fallbacks[PS_UFB_REGISTER]);
		if (d->memlock == UINT64_MAX)
			ps_buf_puts(&m, "unlimited");
		else
			ps_buf_printf(&m, "%lu KiB", (unsigned long)(d->memlock >> 10));
		ps_buf_printf(&m, "; raise it to at least %lu KiB (LimitMEMLOCK=", (unsigned long)(want >> 10));
		ps_buf_size(&m, want);
		ps_buf_printf(&m, " in the systemd unit, or ulimit -l %lu) or grant CAP_IPC_LOCK",
			      (unsigned long)(want >> 10));
		ps_buf_str(&m);
		advice_suggest_size(l, want);
	}

	if (u->fallbacks[PS_UFB_UNALIGNED]) {
		advice_add(l, "unaligned", "O_DIRECT alignment", &m);
		ps_buf_printf(&m, "%lu O_DIRECT calls on pooled buffers skipped io_uring because the buffer, "
			      "length or offset was not a multiple of 4 KiB; align them "
			      "(posix_memalign(..., 4096, ...), 4 KiB-multiple sizes and offsets)",
			      (unsigned long)u->fallbacks[PS_UFB_UNALIGNED]);
		ps_buf_str(&m);
		advice_suggest(l, "4K");
	}

	if (t->events[PS_EV_FB_POOL_FULL]) {
		uint64_t want = p->cap * 2 > 32ULL << 30 ? 32ULL << 30 : p->cap * 2;
		advice_add(l, "pool_full", "POOLSHIM_POOL_SIZE", &m);
		ps_buf_printf(&m, "%lu allocations fell back to the ordinary arenas because the pool "
			      "reached its cap of ", (unsigned long)t->events[PS_EV_FB_POOL_FULL]);
		ps_buf_size(&m, p->cap);
		ps_buf_puts(&m, " (peak in use ");
		ps_buf_size(&m, d->pool_peak);
		ps_buf_puts(&m, "); POOLSHIM_POOL_SIZE=");
		ps_buf_size(&m, want);
		ps_buf_puts(&m, " would hold them");
		ps_buf_str(&m);
		advice_suggest_size(l, want);
	}

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

static void render_meta_text(struct ps_buf *b, const struct ps_report_data *d)
{
	/* A live file (poolshim stat) carries no run metadata: no line of question marks. */
	if (!d->version && !d->host[0] && !d->cfg)
		return;
	ps_buf_printf(b, "run      poolshim %s; host %s; kernel %s; started ", d->version ? d->version : "?",
		      d->host[0] ? d->host : "?", d->kernel[0] ? d->kernel : "?");
	if (d->start_time >= 0)
		put_iso8601(b, d->start_time);
	else
		ps_buf_putc(b, '?');
	ps_buf_putc(b, '\n');
	if (!d->cfg)
		return;
	ps_buf_puts(b, "config  ");
	const char *name;
	for (size_t i = 0; ; i++) {
		char storage[PS_PATH_MAX + 8];
		struct ps_buf v;
		ps_buf_init(&v, storage, sizeof(storage), -1);
		if (!ps_config_option(d->cfg, i, &name, &v))
			break;
		ps_buf_printf(b, " %s=%s", name, ps_buf_str(&v));
	}
	ps_buf_putc(b, '\n');
}

static void render_advice_text(struct ps_buf *b, const struct ps_report_data *d)
{
	struct advice_list l;

	gather_advice(d, &l);
	if (!l.n)
		return;
	ps_buf_puts(b, "advice\n");
	for (int i = 0; i < l.n; i++)
		ps_buf_printf(b, "  - %s\n", l.a[i].message);
}

static void render_meta_json(struct ps_buf *b, const struct ps_report_data *d)
{
	ps_buf_puts(b, ",\"meta\":{\"version\":");
	ps_buf_json_str(b, d->version ? d->version : "");
	ps_buf_puts(b, ",\"host\":");
	ps_buf_json_str(b, d->host);
	ps_buf_puts(b, ",\"kernel\":");
	ps_buf_json_str(b, d->kernel);
	ps_buf_puts(b, ",\"start_time\":");
	if (d->start_time >= 0) {
		ps_buf_putc(b, '"');
		put_iso8601(b, d->start_time);
		ps_buf_putc(b, '"');
	} else {
		ps_buf_puts(b, "null");
	}
	ps_buf_puts(b, "},\"config\":{");
	const char *name;
	for (size_t i = 0; d->cfg; i++) {
		char storage[PS_PATH_MAX + 8];
		struct ps_buf v;
		ps_buf_init(&v, storage, sizeof(storage), -1);
		if (!ps_config_option(d->cfg, i, &name, &v))
			break;
		ps_buf_printf(b, "%s\"%s\":", i ? "," : "", name);
		ps_buf_json_str(b, ps_buf_str(&v));
	}
	ps_buf_putc(b, '}');
}

static void render_advice_json(struct ps_buf *b, const struct ps_report_data *d)
{
	struct advice_list l;

	gather_advice(d, &l);
	ps_buf_puts(b, ",\"advice\":[");
	for (int i = 0; i < l.n; i++) {
		ps_buf_printf(b, "%s{\"id\":\"%s\",\"message\":", i ? "," : "", l.a[i].id);
		ps_buf_json_str(b, l.a[i].message);
		ps_buf_puts(b, ",\"variable\":");
		ps_buf_json_str(b, l.a[i].variable);
		ps_buf_puts(b, ",\"suggested\":");
		if (l.a[i].suggested[0])
			ps_buf_json_str(b, l.a[i].suggested);
		else
			ps_buf_puts(b, "null");
		ps_buf_putc(b, '}');
	}
	ps_buf_putc(b, ']');
}

static void render_text(struct ps_buf *b, const struct ps_report_data *d)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;

	ps_buf_printf(b, "==== poolshim report: pid %d (%s) ====\n", d->pid, d->program);
	if (d->heap_owner)
		ps_buf_printf(b, "heap     owned by %s (preloaded ahead of the shim); nothing pooled\n",
			      d->heap_owner);
	ps_buf_printf(b, "pool     mode %s (requested %s); %lu slabs, ", pool_mode(d),
		      ps_hugepage_name(p->requested), (unsigned long)p->slabs);
	ps_buf_size(b, p->backed);
	ps_buf_puts(b, " backed [");
	for (int i = 0; i < PS_BACK__COUNT; i++) {
		ps_buf_printf(b, "%s%s ", i ? ", " : "", ps_backing_name((enum ps_backing)i));
		ps_buf_size(b, p->backed_by[i]);
	}
	ps_buf_puts(b, "]; in use ");
	ps_buf_size(b, d->pool_in_use);
	ps_buf_puts(b, ", peak ");
	ps_buf_size(b, d->pool_peak);
	ps_buf_puts(b, ", cap ");
	ps_buf_size(b, p->cap);
	ps_buf_puts(b, ", threshold ");
	ps_buf_size(b, d->pool_min);
	ps_buf_putc(b, '\n');
	ps_buf_printf(b, "pool     %lu allocations served, %lu freed; fallbacks to ordinary arenas:",
		      (unsigned long)t->events[PS_EV_POOL_ALLOC],
		      (unsigned long)t->events[PS_EV_POOL_FREE]);
	for (int e = PS_EV_FB_POOL_FULL; e < PS_EV__COUNT; e++)
		ps_buf_printf(b, " %s %lu", ps_event_name(e), (unsigned long)t->events[e]);
	ps_buf_putc(b, '\n');
	render_meta_text(b, d);
	if (p->hugetlb_reason)
		ps_buf_printf(b, "pool     hugetlb not used: %s\n", p->hugetlb_reason);
	if (p->thp_reason)
		ps_buf_printf(b, "pool     THP not used: %s\n", p->thp_reason);
	ps_buf_printf(b, "process  page faults %lu minor, %lu major; cpu ", (unsigned long)d->minflt,
		      (unsigned long)d->majflt);
	put_us(b, d->utime_us);
	ps_buf_puts(b, " user, ");
	put_us(b, d->stime_us);
	ps_buf_printf(b, " sys; %d thread counter blocks\n", d->threads);
	const struct ps_uring_counts *u = &t->uring;
	ps_buf_printf(b, "io_uring %s%s%s; %lu rings, %lu enters, %lu SQEs (%lu fixed), %lu split calls;"
		      " fallbacks:", ps_uring_state_name(d->uring_state),
		      d->uring_reason ? ": " : "", d->uring_reason ? d->uring_reason : "",
		      (unsigned long)d->uring_rings, (unsigned long)u->enters,
		      (unsigned long)u->sqes, (unsigned long)u->fixed, (unsigned long)u->split_calls);
	for (int i = 0; i < PS_UFB__COUNT; i++)
		ps_buf_printf(b, " %s %lu", ps_uring_fb_name(i), (unsigned long)u->fallbacks[i]);
	ps_buf_putc(b, '\n');
	if (u->enters) {
		ps_buf_puts(b, "io_uring SQEs per enter:");
		for (int i = 0; i < PS_SQE_BUCKETS; i++)
			if (u->sqes_per_enter[i])
				ps_buf_printf(b, " %lu:%lu", 1UL << i, (unsigned long)u->sqes_per_enter[i]);
		ps_buf_putc(b, '\n');
	}

	ps_buf_puts(b, "call            kind         calls      bytes   errors   eagain   avg-ns  top-errno\n");
	for (int call = 0; call < PS_CALL__COUNT; call++) {
		for (int k = 0; k < PS_FD__COUNT; k++) {
			const struct ps_counter *c = &t->c[call][k];
			if (!c->calls)
				continue;
			ps_buf_pad(b, ps_call_name((enum ps_call)call), 16, false);
			ps_buf_pad(b, ps_fdkind_name((enum ps_fdkind)k), 8, false);
			ps_buf_u64w(b, c->calls, 10);
			put_size_cell(b, c->bytes, 11);
			ps_buf_u64w(b, c->errors, 9);
			ps_buf_u64w(b, c->eagain, 9);
			if (c->timed)
				ps_buf_u64w(b, c->nsec / c->timed, 9);
			else
				ps_buf_pad(b, "-", 9, true);
			uint32_t n;
			int e = top_errno(t, call, &n);
			ps_buf_puts(b, "  ");
			if (e) {
				put_errno(b, e);
				ps_buf_printf(b, ":%u", n);
			} else {
				ps_buf_putc(b, '-');
			}
			ps_buf_putc(b, '\n');
		}
	}

	ps_buf_puts(b, "size histogram (bucket = lower bound in bytes: calls)\n");
	for (int call = 0; call < PS_CALL__COUNT; call++) {
		for (int k = 0; k < PS_FD__COUNT; k++) {
			const struct ps_counter *c = &t->c[call][k];
			uint64_t in_hist = 0;
			for (int i = 0; i < PS_SIZE_BUCKETS; i++)
				in_hist += c->size_hist[i];
			if (!in_hist)
				continue;
			ps_buf_pad(b, ps_call_name((enum ps_call)call), 16, false);
			ps_buf_pad(b, ps_fdkind_name((enum ps_fdkind)k), 8, false);
			for (int i = 0; i < PS_SIZE_BUCKETS; i++) {
				if (!c->size_hist[i])
					continue;
				ps_buf_putc(b, ' ');
				ps_buf_size(b, (uint64_t)1 << i);
				ps_buf_printf(b, ":%lu", (unsigned long)c->size_hist[i]);
			}
			ps_buf_putc(b, '\n');
		}
	}

	bool timed = false;
	for (int call = 0; call < PS_CALL__COUNT && !timed; call++)
		for (int k = 0; k < PS_FD__COUNT; k++)
			timed |= t->c[call][k].nsec != 0;
	if (timed) {
		ps_buf_puts(b, "latency histogram (bucket = lower bound in ns: calls)\n");
		for (int call = 0; call < PS_CALL__COUNT; call++) {
			for (int k = 0; k < PS_FD__COUNT; k++) {
				const struct ps_counter *c = &t->c[call][k];
				if (!c->nsec)
					continue;
				ps_buf_pad(b, ps_call_name((enum ps_call)call), 16, false);
				ps_buf_pad(b, ps_fdkind_name((enum ps_fdkind)k), 8, false);
				for (int i = 0; i < PS_LAT_BUCKETS; i++)
					if (c->lat_hist[i])
						ps_buf_printf(b, " %lu:%lu", 1UL << i,
							      (unsigned long)c->lat_hist[i]);
				ps_buf_putc(b, '\n');
			}
		}
	}
	if (d->callsites)
		d->callsites(b, false, d->symbolize);
	render_advice_text(b, d);
	ps_buf_puts(b, "==== end of poolshim report ====\n");
}

static void json_hist(struct ps_buf *b, const char *key, const uint64_t *h, int n)
{
	bool first = true;

	ps_buf_printf(b, ",\"%s\":[", key);
	for (int i = 0; i < n; i++) {
		if (!h[i])
			continue;
		ps_buf_printf(b, "%s[%lu,%lu]", first ? "" : ",", 1UL << i, (unsigned long)h[i]);
		first = false;
	}
	ps_buf_putc(b, ']');
}

static void json_reason(struct ps_buf *b, const char *key, const char *reason)
{
	ps_buf_printf(b, ",\"%s\":", key);
	if (reason)
		ps_buf_json_str(b, reason);
	else
		ps_buf_puts(b, "null");
}

static void render_json(struct ps_buf *b, const struct ps_report_data *d)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;

	ps_buf_printf(b, "{\"schema\":\"poolshim-report\",\"version\":%d,\"pid\":%d,\"program\":",
		      PS_REPORT_VERSION, d->pid);
	ps_buf_json_str(b, d->program);
	ps_buf_printf(b, ",\"pool\":{\"mode\":\"%s\",\"requested\":\"%s\"", pool_mode(d),
		      ps_hugepage_name(p->requested));
	json_reason(b, "heap_owner", d->heap_owner);
	json_reason(b, "hugetlb_reason", p->hugetlb_reason);
	json_reason(b, "thp_reason", p->thp_reason);
	ps_buf_printf(b, ",\"slabs\":%lu,\"backed\":%lu,\"backed_by\":{", (unsigned long)p->slabs,
		      (unsigned long)p->backed);
	for (int i = 0; i < PS_BACK__COUNT; i++)
		ps_buf_printf(b, "%s\"%s\":%lu", i ? "," : "", ps_backing_name((enum ps_backing)i),
			      (unsigned long)p->backed_by[i]);
	ps_buf_printf(b, "},\"in_use\":%lu,\"peak\":%lu,\"cap\":%lu,\"threshold\":%lu,\"reserve\":%lu",
		      (unsigned long)d->pool_in_use, (unsigned long)d->pool_peak,
		      (unsigned long)p->cap, (unsigned long)d->pool_min, (unsigned long)p->reserve);
	ps_buf_printf(b, ",\"allocations\":%lu,\"frees\":%lu,\"fallbacks\":{",
		      (unsigned long)t->events[PS_EV_POOL_ALLOC],
		      (unsigned long)t->events[PS_EV_POOL_FREE]);
	for (int e = PS_EV_FB_POOL_FULL; e < PS_EV__COUNT; e++)
		ps_buf_printf(b, "%s\"%s\":%lu", e == PS_EV_FB_POOL_FULL ? "" : ",", ps_event_name(e),
			      (unsigned long)t->events[e]);
	ps_buf_printf(b, "}},\"process\":{\"minflt\":%lu,\"majflt\":%lu,\"utime_us\":%lu,"
		      "\"stime_us\":%lu,\"threads\":%d}",
		      (unsigned long)d->minflt, (unsigned long)d->majflt,
		      (unsigned long)d->utime_us, (unsigned long)d->stime_us, d->threads);

	const struct ps_uring_counts *u = &t->uring;
	ps_buf_printf(b, ",\"uring\":{\"state\":\"%s\"", ps_uring_state_name(d->uring_state));
	json_reason(b, "reason", d->uring_reason);
	ps_buf_printf(b, ",\"rings\":%lu,\"enters\":%lu,\"sqes\":%lu,\"fixed\":%lu,\"split_calls\":%lu",
		      (unsigned long)d->uring_rings, (unsigned long)u->enters, (unsigned long)u->sqes,
		      (unsigned long)u->fixed, (unsigned long)u->split_calls);
	json_hist(b, "sqes_per_enter", u->sqes_per_enter, PS_SQE_BUCKETS);
	ps_buf_puts(b, ",\"fallbacks\":{");
	for (int i = 0; i < PS_UFB__COUNT; i++)
		ps_buf_printf(b, "%s\"%s\":%lu", i ? "," : "", ps_uring_fb_name(i),
			      (unsigned long)u->fallbacks[i]);
	ps_buf_puts(b, "}}");

	ps_buf_puts(b, ",\"calls\":[");
	bool first = true;
	for (int call = 0; call < PS_CALL__COUNT; call++) {
		for (int k = 0; k < PS_FD__COUNT; k++) {
			const struct ps_counter *c = &t->c[call][k];
			if (!c->calls)
				continue;
			ps_buf_printf(b, "%s\n{\"call\":\"%s\",\"kind\":\"%s\",\"calls\":%lu,\"bytes\":%lu,"
				      "\"errors\":%lu,\"eagain\":%lu,\"timed\":%lu,\"nsec\":%lu",
				      first ? "" : ",", ps_call_name((enum ps_call)call),
				      k == PS_FD_NONE ? "none" : ps_fdkind_name((enum ps_fdkind)k),
				      (unsigned long)c->calls, (unsigned long)c->bytes,
				      (unsigned long)c->errors, (unsigned long)c->eagain,
				      (unsigned long)c->timed, (unsigned long)c->nsec);
			json_hist(b, "size_hist", c->size_hist, PS_SIZE_BUCKETS);
			json_hist(b, "lat_hist", c->lat_hist, PS_LAT_BUCKETS);
			ps_buf_puts(b, ",\"errnos\":{");
			bool efirst = true;
			/* errnos are per call, so list them on the call's first row only */
			for (int kk = 0; kk < k; kk++)
				if (t->c[call][kk].calls)
					goto close_errnos;
			for (int e = 1; e < PS_ERRNO_MAX; e++) {
				if (!t->errnos[call][e])
					continue;
				ps_buf_puts(b, efirst ? "\"" : ",\"");
				put_errno(b, e);
				ps_buf_printf(b, "\":%u", t->errnos[call][e]);
				efirst = false;
			}
close_errnos:
			ps_buf_puts(b, "}}");
			first = false;
		}
	}
	ps_buf_putc(b, ']');
	if (d->callsites)
		d->callsites(b, true, d->symbolize);
	render_meta_json(b, d);
	render_advice_json(b, d);
	ps_buf_puts(b, "}\n");
}

void ps_report_render(struct ps_buf *b, const struct ps_report_data *d,
		      enum ps_stats_format format)
{
	if (format == PS_FORMAT_JSON)
		render_json(b, d);
	else
		render_text(b, d);
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
