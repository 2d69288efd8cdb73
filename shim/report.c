// SPDX-License-Identifier: MIT
/*
 * Report rendering and writing.  Nothing here allocates through the shim:
 * the merged counters live in an mmap'd scratch block, text goes through a
 * stack ps_buf that flushes with raw write(2), and files are opened with
 * raw openat(2).
 */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "alloc.h"
#include "callsite.h"
#include "heap.h"
#include "fmt.h"
#include "sys.h"
#include "uring.h"

#define PS_KCMP_FILE 0   /* KCMP_FILE of <linux/kcmp.h> (an enum there) */

static char program_name[64];
static int64_t start_time = -1;

void ps_report_keep_name(void)
{
	struct timespec now;

	/* libc's clock_gettime: the vDSO, no system call at start-up. */
	if (clock_gettime(CLOCK_REALTIME, &now) == 0)
		start_time = now.tv_sec;
	/* Copied now: some servers (nginx) rewrite argv, and with it this name. */
	ps_program_clean(program_name, sizeof(program_name), program_invocation_short_name);
}

const char *ps_report_program(void)
{
	return program_name;
}

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

/* Untouched, so it costs no memory, until the first report fills it. */
static struct ps_tstats reserved_scratch;
static int reserved_taken;

struct ps_tstats *ps_report_scratch_get(void)
{
	if (!__atomic_exchange_n(&reserved_taken, 1, __ATOMIC_ACQUIRE))
		return &reserved_scratch;
	int saved_errno = errno;
	struct ps_tstats *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	errno = saved_errno;
	return s == MAP_FAILED ? NULL : s;
}

void ps_report_scratch_put(struct ps_tstats *scratch)
{
	if (scratch == &reserved_scratch) {
		__atomic_store_n(&reserved_taken, 0, __ATOMIC_RELEASE);
		return;
	}
	int saved_errno = errno;
	munmap(scratch, sizeof(*scratch));
	errno = saved_errno;
}

void ps_report_gather(struct ps_report_data *d, struct ps_tstats *scratch)
{
	struct rusage ru;

	memset(d, 0, sizeof(*d));
	d->pid = (int)PS_SYSCALL(SYS_getpid);
	if (!program_name[0])
		ps_report_keep_name();
	d->program = program_name;
	ps_stats_merge(scratch);
	d->totals = scratch;
	d->pool_ready = ps_alloc_pool_ready();
	if (__atomic_load_n(&ps_heap, __ATOMIC_ACQUIRE) == PS_HEAP_OTHER)
		d->heap_owner = ps_heap_owner ? ps_heap_owner : "?";
	ps_pool_get_info(&d->pool);
	d->pool_in_use = PS_LOAD(ps_gauges->pool_in_use);
	d->pool_peak = PS_LOAD(ps_gauges->pool_peak);
	d->pool_min = ps_cfg.pool_min;
	if (PS_SYSCALL(SYS_getrusage, RUSAGE_SELF, &ru) == 0) {
		d->minflt = (uint64_t)ru.ru_minflt;
		d->majflt = (uint64_t)ru.ru_majflt;
		d->utime_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec;
		d->stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
	}
	d->threads = ps_stats_blocks();
	d->uring_state = ps_uring_state();
	d->uring_reason = ps_uring_reason();
	d->uring_rings = ps_uring_rings();
	d->version = PACKAGE_VERSION;
	struct utsname un;
	if (PS_SYSCALL(SYS_uname, &un) == 0) {
		memcpy(d->host, un.nodename, sizeof(d->host) - 1);
		memcpy(d->kernel, un.release, sizeof(d->kernel) - 1);
	}
	d->start_time = start_time;
	d->cfg = &ps_cfg;
	struct rlimit rl;
	d->memlock = PS_SYSCALL(SYS_prlimit64, 0, RLIMIT_MEMLOCK, NULL, &rl) == 0 &&
			     rl.rlim_cur != RLIM_INFINITY ? (uint64_t)rl.rlim_cur : UINT64_MAX;
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
	ps_callsite_render(b, false, !ps_in_signal);
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
	ps_callsite_render(b, true, !ps_in_signal);
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

/*
 * What fd 2 was when the shim started.  A program may close its stderr and
 * open something that then gets number 2 (its data file, a socket); the
 * report written there would end up in the program's data.  So fd 2 is
 * written only while it still is the open file it was at start, and our
 * duplicate only while it still is that file and still ours.
 */
enum err_state { ERR_UNSEEN, ERR_NONE, ERR_SEEN };
static struct {
	enum err_state state;
	int copy;                 /* our duplicate (close-on-exec, >= 600), or -1 */
	dev_t dev, rdev;
	ino_t ino;
	mode_t type;
	int accmode;
} err0 = { .state = ERR_UNSEEN, .copy = -1 };

void ps_report_keep_stderr(void)
{
	struct stat st;
	long fl;

	if (err0.state != ERR_UNSEEN)
		return;
	fl = PS_SYSCALL(SYS_fcntl, 2, F_GETFL);
	if (fl < 0 || PS_SYSCALL(SYS_fstat, 2, &st) < 0) {
		/* Whatever gets number 2 later is the program's, never our stderr. */
		err0.state = ERR_NONE;
		return;
	}
	err0.dev = st.st_dev;
	err0.ino = st.st_ino;
	err0.rdev = st.st_rdev;
	err0.type = st.st_mode & S_IFMT;
	err0.accmode = (int)(fl & O_ACCMODE);
	err0.state = ERR_SEEN;
	/* Only a report to stderr needs a copy; messages need only the identity. */
	if (strcmp(ps_cfg.stats, "stderr") != 0)
		return;
	long fd = PS_SYSCALL(SYS_fcntl, 2, F_DUPFD_CLOEXEC, 600);
	if (fd >= 0)
		err0.copy = (int)fd;
}

/* fd refers to the same file as fd 2 did at start, opened the same way. */
static bool like_stderr_at_start(int fd)
{
	struct stat st;
	long fl = PS_SYSCALL(SYS_fcntl, fd, F_GETFL);

	return fl >= 0 && PS_SYSCALL(SYS_fstat, fd, &st) == 0 && st.st_dev == err0.dev &&
	       st.st_ino == err0.ino && st.st_rdev == err0.rdev &&
	       (st.st_mode & S_IFMT) == err0.type && (int)(fl & O_ACCMODE) == err0.accmode;
}

/*
 * Our copy is still ours: the program may have closed it and put its own
 * file at that number (close-all loops do).  open(2) and dup2(2) give the
 * new descriptor no close-on-exec flag, which ours has.
 */
static bool copy_is_ours(void)
{
	if (err0.copy < 0)
		return false;
	long fdfl = PS_SYSCALL(SYS_fcntl, err0.copy, F_GETFD);
	return fdfl >= 0 && (fdfl & FD_CLOEXEC) && like_stderr_at_start(err0.copy);
}

/* 1 if a and b share one open file description, 0 if not, -1 if unknown. */
static int same_description(int a, int b)
{
#ifdef SYS_kcmp
	long pid = PS_SYSCALL(SYS_getpid);
	long k = PS_SYSCALL(SYS_kcmp, pid, pid, PS_KCMP_FILE, a, b);
	if (k >= 0)
		return k == 0;
#endif
	/* No kcmp(2) (seccomp, CONFIG_KCMP=n): status flags differ only across descriptions. */
	return PS_SYSCALL(SYS_fcntl, a, F_GETFL) != PS_SYSCALL(SYS_fcntl, b, F_GETFL) ? 0 : -1;
}

/*
 * Where a line or a report for stderr may go: fd 2 while it is the file it
 * was at start (the same open file as our copy, where the kernel can tell);
 * else our copy if it still is that file; else nowhere.
 */
static int stderr_fd(void)
{
	switch (err0.state) {
	case ERR_UNSEEN:
		/* Never looked (no report to stderr): fd 2, as any message. */
		return PS_SYSCALL(SYS_fcntl, 2, F_GETFD) >= 0 ? 2 : -1;
	case ERR_NONE:
		return -1;
	case ERR_SEEN:
		break;
	}
	bool copy = copy_is_ours();
	if (like_stderr_at_start(2) && (!copy || same_description(2, err0.copy) != 0))
		return 2;
	return copy ? err0.copy : -1;
}

int ps_report_stderr_fd(void)
{
	return stderr_fd();
}

#define SAY_MAX 16

/* One line for the user where stderr_fd() allows it, a few per process at most. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	static int said;
	char storage[PS_PATH_MAX + 160];
	struct ps_buf b;
	va_list ap;

	if (__atomic_add_fetch(&said, 1, __ATOMIC_RELAXED) > SAY_MAX)
		return;
	int fd = stderr_fd();
	if (fd < 0)
		return;
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_buf_log_prefix(&b);
	va_start(ap, fmt);
	ps_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (b.len >= sizeof(storage) - 2)
		b.len = sizeof(storage) - 2;
	b.p[b.len++] = '\n';
	ps_sys_write_all(fd, b.p, b.len);
}

/*
 * SIGPIPE held off while we write: a reader that went away (a FIFO, a
 * stderr pipe) must not end the program with a signal it would not have
 * got.  The kernel sends it to the writing thread, so this thread's mask is
 * enough; one that we raised is taken back before the mask is restored.
 */
#define KSIGSET_SIZE (_NSIG / 8)

struct pipe_guard {
	sigset_t old;
	bool was_pending;
};

static bool sigpipe_pending(void)
{
	sigset_t pend;

	sigemptyset(&pend);
	return PS_SYSCALL(SYS_rt_sigpending, &pend, KSIGSET_SIZE) == 0 && sigismember(&pend, SIGPIPE);
}

static void pipe_guard_on(struct pipe_guard *g)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigemptyset(&g->old);
	PS_SYSCALL(SYS_rt_sigprocmask, SIG_BLOCK, &set, &g->old, KSIGSET_SIZE);
	g->was_pending = sigpipe_pending();
}

static void pipe_guard_off(struct pipe_guard *g)
{
	if (!g->was_pending && sigpipe_pending()) {
		sigset_t set;
		struct timespec now = { 0, 0 };
		siginfo_t si;

		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		PS_SYSCALL(SYS_rt_sigtimedwait, &set, &si, &now, KSIGSET_SIZE);
	}
	PS_SYSCALL(SYS_rt_sigprocmask, SIG_SETMASK, &g->old, NULL, KSIGSET_SIZE);
}

/* The start of an earlier report of this pid (a dump, the image before exec). */
static bool earlier_report(int fd, int pid)
{
	static const char json[] = "{\"schema\":\"poolshim-report\",\"version\":";
	char head[128], want[64];
	struct ps_buf b;
	long n = PS_SYSCALL(SYS_pread64, fd, head, sizeof(head) - 1, 0);

	if (n <= 0)
		return false;
	head[n] = '\0';
	ps_buf_init(&b, want, sizeof(want), -1);
	ps_buf_printf(&b, "==== poolshim report: pid %d (", pid);
	ps_buf_str(&b);
	if (strncmp(head, want, strlen(want)) == 0)
		return true;
	if (strncmp(head, json, sizeof(json) - 1) != 0)
		return false;
	const char *s = head + sizeof(json) - 1;
	while (*s >= '0' && *s <= '9')
		s++;
	ps_buf_init(&b, want, sizeof(want), -1);
	ps_buf_printf(&b, ",\"pid\":%d,", pid);
	ps_buf_str(&b);
	return strncmp(s, want, strlen(want)) == 0;
}

/*
 * Open path for the report: never through a symbolic link, never blocking
 * (a FIFO with no reader fails with ENXIO), never into a file that is not
 * ours alone.  A regular file must be owned by us with no other hard link
 * (truncating a link would clobber the file it points to); a per-process
 * name (%p) must be new, or hold an earlier report of this same pid.  A
 * FIFO owned by us is written, non-blocking (*fifo set).  fd or -errno,
 * with *why saying what was wrong when the errno alone would not.
 */
static int open_report(const char *path, bool per_process, int pid, bool *fifo, const char **why)
{
	const int how = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat st;
	bool fresh = false;
	long fd;
	int r = 0;

	*fifo = false;
	*why = NULL;
	if (per_process) {
		fd = ps_sys_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | how, 0600);
		fresh = fd >= 0;
		/* Read access to look for our own earlier report in it. */
		if (fd == -EEXIST)
			fd = ps_sys_openat(AT_FDCWD, path, O_RDWR | how, 0);
	} else {
		fd = ps_sys_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | how, 0600);
	}
	if (fd < 0) {
		if (fd == -ENXIO)
			*why = "a FIFO with no reader";
		return (int)fd;
	}
	if (PS_SYSCALL(SYS_fstat, fd, &st) < 0) {
		r = -EIO;
	} else if (st.st_uid != (uid_t)PS_SYSCALL(SYS_geteuid)) {
		r = -EPERM;
		*why = "not owned by this user";
	} else if (S_ISFIFO(st.st_mode) && !per_process) {
		*fifo = true;
	} else if (!S_ISREG(st.st_mode)) {
		r = -EPERM;
		*why = per_process ? "not a regular file" : "not a regular file or FIFO";
	} else if (st.st_nlink != 1) {
		r = -EPERM;
		*why = "a file with other hard links";
	} else if (per_process && !fresh && !earlier_report((int)fd, pid)) {
		r = -EEXIST;
		*why = "someone else's file";
	}
	if (r == 0 && !*fifo) {
		/* O_NONBLOCK was for FIFOs; a file may see EAGAIN under a lock. */
		long fl = PS_SYSCALL(SYS_fcntl, fd, F_GETFL);
		if (fl >= 0)
			PS_SYSCALL(SYS_fcntl, fd, F_SETFL, fl & ~O_NONBLOCK);
		if (!fresh)
			PS_SYSCALL(SYS_ftruncate, fd, 0);
	}
	if (r < 0) {
		ps_sys_close((int)fd);
		return r;
	}
	return (int)fd;
}

#define FIFO_REPORT_MAX (8UL << 20)   /* address space only; pages as used */
#define FIFO_WAIT_MS 2000

/*
 * All of p[len] into a non-blocking fd, waiting for room at most
 * FIFO_WAIT_MS in all: a reader that stops reading must not keep the
 * program from exiting.  0 or -errno (-ETIMEDOUT).
 */
static int write_bounded(int fd, const char *p, size_t len)
{
	/* Linux's ppoll(2) leaves the time not waited in left: one budget for all. */
	struct timespec left = { FIFO_WAIT_MS / 1000, (FIFO_WAIT_MS % 1000) * 1000000L };

	while (len > 0) {
		long n = ps_sys_write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == -EINTR)
			continue;
		if (n != -EAGAIN)
			return n < 0 ? (int)n : -EIO;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		long k = PS_SYSCALL(SYS_ppoll, &pfd, 1, &left, NULL, 0);
		if (k == 0)
			return -ETIMEDOUT;
		if (k < 0 && k != -EINTR)
			return (int)k;
	}
	return 0;
}

/* Render into memory first: the stream to a FIFO must be able to give up. */
static int write_fifo(int fd, const struct ps_report_data *d, enum ps_stats_format format)
{
	struct ps_buf b;
	char *mem = mmap(NULL, FIFO_REPORT_MAX, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (mem == MAP_FAILED)
		return -ENOMEM;
	ps_buf_init(&b, mem, FIFO_REPORT_MAX, -1);
	ps_report_render(&b, d, format);
	int r = b.truncated ? -EFBIG : write_bounded(fd, b.p, b.len);
	munmap(mem, FIFO_REPORT_MAX);
	return r;
}

/* The pattern names the pid: each process makes its own file. */
static bool names_pid(const char *pattern)
{
	for (const char *s = pattern; *s; s++)
		if (*s == '%' && *++s == 'p')
			return true;
		else if (!*s)
			break;
	return false;
}

static const char *err_name(int r)
{
	const char *n = ps_errno_name(-r);
	return n ? n : "error";
}

int ps_report_emit(const struct ps_config *cfg)
{
	struct ps_report_data d;
	struct pipe_guard g;
	char storage[4096];
	char path[PS_PATH_MAX + 64];
	struct ps_buf b;
	bool to_stderr = strcmp(cfg->stats, "stderr") == 0, fifo = false;
	const char *why = NULL;
	int fd = 2, r;

	if (strcmp(cfg->stats, "off") == 0)
		return 0;
	if (to_stderr && (fd = stderr_fd()) < 0)
		return -EBADF;

	int saved_errno = errno;
	struct ps_tstats *scratch = ps_report_scratch_get();
	if (!scratch)
		return -ENOMEM;
	ps_report_gather(&d, scratch);

	if (!to_stderr) {
		r = ps_report_path(path, sizeof(path), cfg->stats, d.pid, d.program);
		if (r == 0)
			r = fd = open_report(path, names_pid(cfg->stats), d.pid, &fifo, &why);
		if (r < 0) {
			say("cannot write the report to %s: %s%s%s%s", cfg->stats, err_name(r),
			    why ? " (" : "", why ? why : "", why ? ")" : "");
			ps_report_scratch_put(scratch);
			errno = saved_errno;
			return r;
		}
	}
	pipe_guard_on(&g);
	if (fifo) {
		r = write_fifo(fd, &d, cfg->stats_format);
	} else {
		ps_buf_init(&b, storage, sizeof(storage), fd);
		ps_report_render(&b, &d, cfg->stats_format);
		r = ps_buf_flush(&b);
	}
	pipe_guard_off(&g);
	if (!to_stderr) {
		ps_sys_close(fd);
		if (r < 0)
			say("cannot write the report to %s: %s%s", cfg->stats, err_name(r),
			    r == -ETIMEDOUT ? " (the reader stopped reading)" :
			    r == -EPIPE ? " (the reader went away)" : "");
	}
	ps_report_scratch_put(scratch);
	errno = saved_errno;
	return r;
}
