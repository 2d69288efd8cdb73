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
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "alloc.h"
#include "callsite.h"
#include "fmt.h"
#include "sys.h"
#include "uring.h"

static const char *const event_names[PS_EV__COUNT] = {
	"pool_alloc", "pool_free", "pool_full", "too_large", "no_memory",
	"no_address_space", "not_ready",
};

static char program_name[64];

void ps_report_keep_name(void)
{
	const char *n = program_invocation_short_name;
	size_t k = 0;

	/* Copied now: some servers (nginx) rewrite argv, and with it this name. */
	for (; n && n[k] && k < sizeof(program_name) - 1; k++)
		program_name[k] = n[k] == '/' ? '_' : n[k];
	program_name[k] = '\0';
}

static const char *name_of(int v, const char *const *names, int n)
{
	return v >= 0 && v < n ? names[v] : "?";
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

static const char *const huge_names[] = { "auto", "hugetlb", "thp", "none" };

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
}

static const char *const uring_state_names[] = { "ok", "off", "unavailable" };
static const char *const uring_fb_names[PS_UFB__COUNT] = {
	"setup", "register", "not_pooled", "small", "error", "protected", "nested",
};

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

static void render_text(struct ps_buf *b, const struct ps_report_data *d)
{
	const struct ps_tstats *t = d->totals;
	const struct ps_pool_info *p = &d->pool;

	ps_buf_printf(b, "==== poolshim report: pid %d (%s) ====\n", d->pid, d->program);
	if (d->heap_owner)
		ps_buf_printf(b, "heap     owned by %s (preloaded ahead of the shim); nothing pooled\n",
			      d->heap_owner);
	ps_buf_printf(b, "pool     mode %s (requested %s); %lu slabs, ", pool_mode(d),
		      name_of((int)p->requested, huge_names, 4), (unsigned long)p->slabs);
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
		ps_buf_printf(b, " %s %lu", event_names[e], (unsigned long)t->events[e]);
	ps_buf_putc(b, '\n');
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
		      " fallbacks:", name_of(d->uring_state, uring_state_names, 3),
		      d->uring_reason ? ": " : "", d->uring_reason ? d->uring_reason : "",
		      (unsigned long)d->uring_rings, (unsigned long)u->enters,
		      (unsigned long)u->sqes, (unsigned long)u->fixed, (unsigned long)u->split_calls);
	for (int i = 0; i < PS_UFB__COUNT; i++)
		ps_buf_printf(b, " %s %lu", uring_fb_names[i], (unsigned long)u->fallbacks[i]);
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
		      name_of((int)p->requested, huge_names, 4));
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
		ps_buf_printf(b, "%s\"%s\":%lu", e == PS_EV_FB_POOL_FULL ? "" : ",", event_names[e],
			      (unsigned long)t->events[e]);
	ps_buf_printf(b, "}},\"process\":{\"minflt\":%lu,\"majflt\":%lu,\"utime_us\":%lu,"
		      "\"stime_us\":%lu,\"threads\":%d}",
		      (unsigned long)d->minflt, (unsigned long)d->majflt,
		      (unsigned long)d->utime_us, (unsigned long)d->stime_us, d->threads);

	const struct ps_uring_counts *u = &t->uring;
	ps_buf_printf(b, ",\"uring\":{\"state\":\"%s\"", name_of(d->uring_state, uring_state_names, 3));
	json_reason(b, "reason", d->uring_reason);
	ps_buf_printf(b, ",\"rings\":%lu,\"enters\":%lu,\"sqes\":%lu,\"fixed\":%lu,\"split_calls\":%lu",
		      (unsigned long)d->uring_rings, (unsigned long)u->enters, (unsigned long)u->sqes,
		      (unsigned long)u->fixed, (unsigned long)u->split_calls);
	json_hist(b, "sqes_per_enter", u->sqes_per_enter, PS_SQE_BUCKETS);
	ps_buf_puts(b, ",\"fallbacks\":{");
	for (int i = 0; i < PS_UFB__COUNT; i++)
		ps_buf_printf(b, "%s\"%s\":%lu", i ? "," : "", uring_fb_names[i],
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

/* Open path for the report without following links or clobbering others' files. */
static int open_report(const char *path)
{
	struct stat st;
	long fd = ps_sys_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return (int)fd;
	if (PS_SYSCALL(SYS_fstat, fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != (uid_t)PS_SYSCALL(SYS_geteuid)) {
		ps_sys_close((int)fd);
		return -EPERM;
	}
	PS_SYSCALL(SYS_ftruncate, fd, 0);
	return (int)fd;
}

static int saved_stderr = -1;
static dev_t saved_dev;
static ino_t saved_ino;

void ps_report_keep_stderr(void)
{
	struct stat st;
	long fd = PS_SYSCALL(SYS_fcntl, 2, F_DUPFD_CLOEXEC, 600);

	if (fd < 0)
		return;
	if (PS_SYSCALL(SYS_fstat, fd, &st) < 0) {
		ps_sys_close((int)fd);
		return;
	}
	saved_dev = st.st_dev;
	saved_ino = st.st_ino;
	saved_stderr = (int)fd;
}

/*
 * fd 2 if the program still has one; else our duplicate, if it still is the
 * file we saved (the program may have closed or reused that number).
 */
static int stderr_fd(void)
{
	struct stat st;

	if (PS_SYSCALL(SYS_fcntl, 2, F_GETFD) >= 0)
		return 2;
	if (saved_stderr >= 0 && PS_SYSCALL(SYS_fstat, saved_stderr, &st) == 0 &&
	    st.st_dev == saved_dev && st.st_ino == saved_ino)
		return saved_stderr;
	return -1;
}

int ps_report_emit(const struct ps_config *cfg)
{
	struct ps_report_data d;
	char storage[4096];
	char path[PS_PATH_MAX + 64];
	struct ps_buf b;
	bool to_stderr = strcmp(cfg->stats, "stderr") == 0;
	int fd = 2, r;

	if (strcmp(cfg->stats, "off") == 0)
		return 0;
	if (to_stderr && (fd = stderr_fd()) < 0)
		return -EBADF;

	int saved_errno = errno;
	struct ps_tstats *scratch = mmap(NULL, sizeof(*scratch), PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (scratch == MAP_FAILED) {
		errno = saved_errno;
		return -ENOMEM;
	}
	ps_report_gather(&d, scratch);

	if (!to_stderr) {
		r = ps_report_path(path, sizeof(path), cfg->stats, d.pid, d.program);
		if (r == 0)
			r = fd = open_report(path);
		if (r < 0) {
			ps_log("cannot write the report to %s: %s", cfg->stats,
			       ps_errno_name(-r) ? ps_errno_name(-r) : "error");
			munmap(scratch, sizeof(*scratch));
			errno = saved_errno;
			return r;
		}
	}
	ps_buf_init(&b, storage, sizeof(storage), fd);
	ps_report_render(&b, &d, cfg->stats_format);
	r = ps_buf_flush(&b);
	if (!to_stderr)
		ps_sys_close(fd);
	munmap(scratch, sizeof(*scratch));
	errno = saved_errno;
	return r;
}
