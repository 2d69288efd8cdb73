// SPDX-License-Identifier: MIT
/*
 * poolshim-stat: the live view.  Reads the counters that processes under
 * the shim publish in /dev/shm/poolshim-PID-NS.stats and prints the same
 * table as the exit report: once, or every -i seconds as deltas.  A record
 * whose process is gone (killed with SIGKILL, crashed, or unable to write
 * its report) is still read and shown, marked as such, and left for
 * `poolshim collect`, which writes its report and removes it.
 *
 *   poolshim-stat [-i SECONDS] [-c COUNT] [--json | --prometheus | --textfile DIR]
 *                 [--per-pid] [--live-dir DIR] [--all-users] [PID ...]
 *   poolshim-stat --check-config NAME=VALUE ...   (for `poolshim systemd`)
 *
 * Anyone can put a file in /dev/shm, so nothing in one is trusted: records
 * are read and checked by tools/record.c (every size, count, offset,
 * enumeration and string, before any block is looked at).  A file that fails is named on stderr and skipped;
 * the others are still shown.  Only the reading user's files are read
 * unless --all-users is given; root reads everyone's, having the right to
 * anyway and nothing to fear from a file read this way.
 *
 * Whether a process is gone is judged only for files of our own pid
 * namespace (the NS in the name): a pid from another namespace means
 * nothing to kill(2) here, so such files are shown and left alone.
 *
 * Exit status: 0 when every file looked at was shown; 1 when none could
 * be shown (none there, or every one refused); 3 when some were shown and
 * others refused.  Files of other users skipped without --all-users are
 * not refusals.  2 for a bad command line.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/config.h"
#include "format/fmt.h"
#include "format/livefmt.h"
#include "record.h"
#include "format/report.h"
#include "format/stats.h"

struct target {
	struct ps_record r;           /* the record, its latest snapshot (record.h) */
	struct ps_tstats *prev;       /* last totals, for deltas */
	uint64_t prev_usage[4];       /* last /proc usage (minflt majflt utime stime), for deltas */
	bool have_usage;
	bool pending;                 /* named, running, no file yet (-i): opened when it comes */
	bool fresh;                   /* opened this round: its totals, not a change */
	/*
	 * A scrape without -i: the header kept, the descriptor closed (r.fd
	 * -1), opened again only to sum the blocks, so that a scrape of more
	 * records than descriptors works.
	 */
	bool parked;
};

/* Whether t's record is in the scrape: open, or parked. */
static bool scraped(const struct target *t)
{
	return t->r.fd >= 0 || t->parked;
}

static bool opt_json, opt_all_users, opt_prom, opt_per_pid;
static const char *opt_textfile;
static uint64_t my_ns;

static void usage(FILE *f)
{
	fprintf(f, "usage: poolshim stat [-i SECONDS] [-c COUNT] [--json | --prometheus | --textfile DIR]\n"
		   "                     [--per-pid] [--live-dir DIR] [--all-users] [PID ...]\n"
		   "Prints the live counters of processes running under libpoolshim.so\n"
		   "(all of them when no PID is given); with -i, the change every SECONDS.\n"
		   "Records of processes that are gone are shown as such and left in place:\n"
		   "`poolshim collect` writes their reports.  Only your own files are read\n"
		   "unless --all-users (root reads all).  --prometheus prints the Prometheus text\n"
		   "exposition format 0.0.4 (not OpenMetrics: no \"# EOF\" line); --textfile DIR\n"
		   "writes it to DIR/poolshim.prom (atomically) for node_exporter: one series per\n"
		   "program (label program, its processes summed), or with --per-pid one per\n"
		   "process (labels pid and program).  -c COUNT stops\n"
		   "-i after COUNT intervals (without -i it is an error).  --live-dir DIR\n"
		   "(default $POOLSHIM_LIVE_DIR, else /dev/shm) is where files are.  (--keep,\n"
		   "which kept gone processes' files, is still taken.)\n"
		   "Exit status: 0 all shown, 1 none shown, 3 some refused, 2 bad usage.\n");
}

static void refuse(const struct target *t, const char *why)
{
	fprintf(stderr, "poolshim stat: %s: skipped: %s\n", t->r.path, why);
}

/* Read the record afresh into t's snapshot.  NULL, or why it cannot be used. */
static const char *snapshot(struct target *t)
{
	return ps_record_read(&t->r);
}

/* Whether PID's live file is there (of any kind: open_target judges it). */
static bool file_exists(int pid, uint64_t ns)
{
	struct ps_record_id id;

	return ps_record_find(pid, ns, &id) == 0;
}

/*
 * 0 shown, -1 refused (said why), 1 skipped quietly (another user's).
 * A named pid (named) is looked up among its record's names.  The
 * previous totals are kept only for -i deltas (want_prev).
 */
static int open_target(struct target *t, const struct ps_record_id *given, bool named,
		       bool want_prev)
{
	struct ps_record_id id = *given;
	const char *why;

	memset(t, 0, sizeof(*t));
	if (named)
		ps_record_find(given->pid, given->ns, &id);
	if (ps_record_open(&t->r, &id, &why) < 0) {
		if (t->r.fd < 0 && named)
			fprintf(stderr, "poolshim stat: %d: no live statistics (%s): not running "
					"under the shim, POOLSHIM_LIVE=off, or nothing to show yet (a "
					"process publishes once it has taken a pooled buffer, or "
					"counted calls past its first second)\n", id.pid, why);
		else
			refuse(t, why);
		return -1;
	}
	if (t->r.owner != geteuid() && geteuid() != 0 && !opt_all_users) {
		if (named)
			fprintf(stderr, "poolshim stat: %s: belongs to user %u; --all-users reads "
					"it\n", t->r.path, (unsigned)t->r.owner);
		return named ? -1 : 1;
	}
	if (want_prev && !(t->prev = calloc(1, sizeof(struct ps_tstats)))) {
		refuse(t, "out of memory");
		return -1;
	}
	why = snapshot(t);
	if (why) {
		refuse(t, why);
		return -1;
	}
	ps_record_judge(&t->r, my_ns);
	return 0;
}

static void close_target(struct target *t)
{
	ps_record_close(&t->r);
	free(t->prev);
	memset(t, 0, sizeof(*t));
	t->r.fd = -1;
}

/* Its blocks summed into out; NULL, or why not (refused: it stops being followed). */
static const char *totals(const struct target *t, struct ps_tstats *out, struct ps_tstats *tmp)
{
	return ps_record_totals(&t->r, out, tmp);
}

/*
 * Page faults and CPU time from /proc/PID/stat, while the process lives:
 * totals, or with delta their change since the last call, like the
 * counters shown beside them.  A process that is gone keeps the record's.
 */
static void proc_usage(struct target *t, struct ps_report_data *d, bool delta)
{
	static const int fields[] = { 10, 12, 14, 15 };   /* minflt majflt utime stime */
	uint64_t v[4], shown[4];

	if (t->r.dead || t->r.foreign_ns || ps_proc_stat(t->r.pid, fields, v, 4) < 0)
		return;
	for (int i = 0; i < 4; i++)
		shown[i] = delta && t->have_usage && v[i] >= t->prev_usage[i] ? v[i] - t->prev_usage[i]
									       : v[i];
	memcpy(t->prev_usage, v, sizeof(v));
	t->have_usage = true;
	uint64_t hz = (uint64_t)sysconf(_SC_CLK_TCK);
	d->minflt = shown[0];
	d->majflt = shown[1];
	d->utime_us = shown[2] * 1000000u / hz;
	d->stime_us = shown[3] * 1000000u / hz;
}

struct rendering {
	const struct ps_report_data *d;
	enum ps_stats_format format;
};

static void render(struct ps_buf *b, void *arg)
{
	const struct rendering *job = arg;
	ps_report_render(b, job->d, job->format);
}

static void show(struct target *t, const struct ps_tstats *counters, const char *what, bool delta)
{
	const struct ps_live_header *h = t->r.hdr;
	struct ps_report_data d;
	char prog[sizeof(h->program) * 4];

	ps_record_sites(&t->r);
	ps_record_data(&t->r, &d, counters);
	/* The live view's table: the run's metadata belongs to the report. */
	d.version = NULL;
	d.host[0] = d.kernel[0] = '\0';
	d.cfg = NULL;
	d.start_time = -1;
	proc_usage(t, &d, delta);

	ps_term_clean(prog, sizeof(prog), h->program, sizeof(h->program), false);
	fflush(stdout);
	if (!opt_json) {
		printf("---- pid %d (%s): %s%s ----\n", t->r.pid, prog, what,
		       t->r.dead ? " [process gone: `poolshim collect` writes its report]" :
		       t->r.foreign_ns ? " [another pid namespace: not judged, left in place]" : "");
		if (h->unpublished)
			printf("(%u thread counter blocks are outside this file: the live directory "
			       "had less than a quarter free, or the file's blocks were all taken; "
			       "the exit report has them)\n",
			       (unsigned)h->unpublished);
	}
	fflush(stdout);
	/*
	 * Rendered in memory (call sites named in a child: record.h), then
	 * made safe for the terminal: every string in it came from the record
	 * or from files it names.
	 */
	struct rendering job = { &d, opt_json ? PS_FORMAT_JSON : PS_FORMAT_TEXT };
	const char *note;
	char *out = NULL;
	size_t len = 0;
	int e = ps_record_render(&t->r, render, &job, 16u << 20, &out, &len, &note);
	free(t->r.sites);
	t->r.sites = NULL;
	if (note)
		fprintf(stderr, "poolshim stat: %s: %s\n", t->r.path, note);
	if (e < 0) {
		fprintf(stderr, "poolshim stat: %s: cannot render: %s\n", t->r.path, strerror(-e));
		return;
	}
	if (opt_json) {
		/* One line per report: raw newlines in JSON are only layout. */
		size_t o = 0;
		for (size_t k = 0; k < len; k++)
			if (out[k] != '\n')
				out[o++] = out[k];
		out[o] = '\0';
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (*out == '{') {
			printf("{\"timestamp\":%lld.%03ld,", (long long)now.tv_sec,
			       now.tv_nsec / 1000000);
			ps_term_put(stdout, out + 1, o - 1);
		} else {
			ps_term_put(stdout, out, o);
		}
		putchar('\n');
	} else {
		ps_term_put(stdout, out, len);
	}
	fflush(stdout);
	free(out);
}

/*
 * Label values may hold anything the writer put there: made safe (as for
 * a terminal), then escaped as the format asks.
 */
static void prom_label(FILE *f, const char *raw)
{
	char safe[4 * 64];
	const char *s = ps_term_clean(safe, sizeof(safe), raw, strnlen(raw, 64), false);

	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

/* A descriptor kind as the JSON report names it ("none" for calls on no descriptor). */
static const char *prom_kind(int k)
{
	return k == PS_FD_NONE ? "none" : ps_fdkind_name((enum ps_fdkind)k);
}

/*
 * A scrape is made series by series (a series' records read, summed and
 * let go: prom_series_add), but the format wants every sample of a family
 * together under its HELP and TYPE: each family's samples go into a
 * buffer of their own, printed whole at the end (prom_end).  The scrape
 * holds its text, the records' headers and one sum, not every record's
 * counters.
 */
#define PROM_FAMILIES 40
struct prom {
	int n;
	struct {
		const char *name, *type, *help;
		FILE *f;
		char *buf;
		size_t len;
	} fam[PROM_FAMILIES];
	bool failed;
};

static void prom_begin(struct prom *p)
{
	memset(p, 0, sizeof(*p));
}

/* The buffer of family name (made on first use, in the order of first use), or NULL. */
static FILE *prom_family(struct prom *p, const char *name, const char *type, const char *help)
{
	for (int k = 0; k < p->n; k++)
		if (!strcmp(p->fam[k].name, name))
			return p->fam[k].f;
	if (p->n == PROM_FAMILIES) {
		p->failed = true;
		return NULL;
	}
	p->fam[p->n].name = name;
	p->fam[p->n].type = type;
	p->fam[p->n].help = help;
	p->fam[p->n].f = open_memstream(&p->fam[p->n].buf, &p->fam[p->n].len);
	if (!p->fam[p->n].f)
		p->failed = true;
	return p->fam[p->n++].f;
}

/* The scrape to out (NULL: dropped), every family under its HELP and TYPE; p freed.  0 or -1. */
static int prom_end(FILE *out, struct prom *p)
{
	int bad = p->failed ? -1 : 0;

	for (int k = 0; k < p->n; k++)
		if (p->fam[k].f && fclose(p->fam[k].f) != 0)
			bad = -1;
	for (int k = 0; out && !bad && k < p->n; k++) {
		fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", p->fam[k].name, p->fam[k].help,
			p->fam[k].name, p->fam[k].type);
		fwrite(p->fam[k].buf, 1, p->fam[k].len, out);
	}
	for (int k = 0; k < p->n; k++)
		free(p->fam[k].buf);
	memset(p, 0, sizeof(*p));
	return bad;
}

/*
 * A series of the scrape: by default one per program, its processes
 * summed (a reload, a new worker, adds no series); with --per-pid one per
 * process.  member[first .. first + n) are the targets it sums.
 */
struct prom_series {
	const char *program;
	int pid;                      /* -1: per program */
	int first, n;
};

static void prom_id(FILE *f, const struct prom_series *g)
{
	if (g->pid >= 0)
		fprintf(f, "pid=\"%d\",", g->pid);
	fputs("program=\"", f);
	prom_label(f, g->program);
	fputc('"', f);
}

/*
 * The series of targets t[0..n) with a record open, into *out (malloc'd,
 * with member[] the targets in series order); the count, or -1 when out
 * of memory.
 */
static int prom_group(const struct target *t, int n, struct prom_series **out, int **member)
{
	struct prom_series *g = calloc((size_t)n + 1, sizeof(*g));
	int *m = calloc((size_t)n + 1, sizeof(*m));
	int ng = 0, nm = 0;

	if (!g || !m) {
		free(g);
		free(m);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!scraped(&t[i]))
			continue;
		const char *prog = t[i].r.hdr->program;
		bool seen = false;
		for (int j = 0; j < i && !opt_per_pid; j++)
			seen |= scraped(&t[j]) && !strcmp(t[j].r.hdr->program, prog);
		if (seen)
			continue;
		g[ng] = (struct prom_series){ prog, opt_per_pid ? t[i].r.pid : -1, nm, 0 };
		for (int j = i; j < n; j++)
			if (scraped(&t[j]) && (opt_per_pid ? j == i : !strcmp(t[j].r.hdr->program, prog))) {
				m[nm++] = j;
				g[ng].n++;
			}
		ng++;
	}
	*out = g;
	*member = m;
	return ng;
}

/* A uint64_t at byte offset off in the series' summed counters (a call row, an event...). */
static uint64_t prom_sum(const struct prom_series *g, const int *member, const struct ps_tstats *tot,
			 size_t off)
{
	(void)g, (void)member;
	return *(const uint64_t *)((const char *)tot + off);
}

#define TOT_OFF(field) offsetof(struct ps_tstats, field)

/* Page faults and CPU time: from /proc while the process runs, else the record's last. */
static void prom_usage(struct target *t, uint64_t v[4])
{
	struct ps_report_data d;
	const struct ps_live_header *h = t->r.hdr;

	memset(&d, 0, sizeof(d));
	d.minflt = h->minflt;
	d.majflt = h->majflt;
	d.utime_us = h->utime_us;
	d.stime_us = h->stime_us;
	proc_usage(t, &d, false);
	v[0] = d.minflt;
	v[1] = d.majflt;
	v[2] = d.utime_us;
	v[3] = d.stime_us;
}

/*
 * The latency histogram's buckets in the scrape: every other log2 bound
 * from 1.024 us to 4.29 s (le = 2^(b+1) ns for these b), then +Inf: 13
 * lines per call instead of 41; the sums at these bounds are exact.
 */
static const int prom_lat_bounds[] = { 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31 };

/*
 * One series' samples into the scrape's families: grp[0] with members
 * member[] among t[], tot their counters summed.  Series whose call never
 * happened are left out: they would be most of the output and say nothing.
 */
static void prom_series_add(struct prom *p, struct target *t, const struct prom_series *grp,
			    const int *member, const struct ps_tstats *tot)
{
	const int ng = 1;
	FILE *f;
	static const struct { const char *name, *help; size_t off; } cnt[] = {
		{ "poolshim_calls_total", "Calls seen, by call and descriptor kind.",
		  offsetof(struct ps_counter, calls) },
		{ "poolshim_bytes_total", "Bytes moved (or requested) by the calls.",
		  offsetof(struct ps_counter, bytes) },
		{ "poolshim_errors_total", "Calls that failed.",
		  offsetof(struct ps_counter, errors) },
		{ "poolshim_eagain_total", "Calls that failed with EAGAIN.",
		  offsetof(struct ps_counter, eagain) },
	};
	for (size_t m = 0; m < sizeof(cnt) / sizeof(cnt[0]); m++) {
		if (!(f = prom_family(p, cnt[m].name, "counter", cnt[m].help)))
			return;
		for (int i = 0; i < ng; i++)
			for (int c = 0; c < PS_CALL__COUNT; c++)
				for (int k = 0; k < PS_FD__COUNT; k++) {
					size_t row = TOT_OFF(c) + ((size_t)c * PS_FD__COUNT + (size_t)k) *
							 sizeof(struct ps_counter);
					if (!prom_sum(&grp[i], member, tot, row + offsetof(struct ps_counter, calls)))
						continue;
					fprintf(f, "%s{", cnt[m].name);
					prom_id(f, &grp[i]);
					fprintf(f, ",call=\"%s\",kind=\"%s\"} %llu\n",
						ps_call_name((enum ps_call)c), prom_kind(k),
						(unsigned long long)prom_sum(&grp[i], member, tot, row + cnt[m].off));
				}
	}
	/* Small allocations are sampled (shim/core/alloc.h): say how much is an estimate. */
	if (!(f = prom_family(p, "poolshim_calls_estimated_total", "counter",
		    "Of poolshim_calls_total, the calls that are a sampled estimate: malloc-family "
		    "calls below POOLSHIM_POOL_MIN/16, counted one call in about 128.")))
		return;
	for (int i = 0; i < ng; i++)
		for (int c = 0; c < PS_CALL__COUNT; c++) {
			enum ps_alloc_event ev = ps_call_estimate_event((enum ps_call)c);
			size_t row = TOT_OFF(c) + (size_t)c * PS_FD__COUNT * sizeof(struct ps_counter);
			if (ev == PS_EV__COUNT ||
			    !prom_sum(&grp[i], member, tot, row + offsetof(struct ps_counter, calls)))
				continue;
			fputs("poolshim_calls_estimated_total{", f);
			prom_id(f, &grp[i]);
			fprintf(f, ",call=\"%s\",kind=\"%s\"} %llu\n",
				ps_call_name((enum ps_call)c), prom_kind(PS_FD_NONE),
				(unsigned long long)prom_sum(&grp[i], member, tot,
							     TOT_OFF(events) + (size_t)ev * sizeof(uint64_t)));
		}
	if (!(f = prom_family(p, "poolshim_call_duration_seconds", "histogram",
		    "Time in the call, of the sampled calls (buckets every factor of 4 from 1 us).")))
		return;
	for (int i = 0; i < ng; i++)
		for (int c = 0; c < PS_CALL__COUNT; c++)
			for (int k = 0; k < PS_FD__COUNT; k++) {
				size_t row = TOT_OFF(c) + ((size_t)c * PS_FD__COUNT + (size_t)k) *
						 sizeof(struct ps_counter);
				if (!prom_sum(&grp[i], member, tot, row + offsetof(struct ps_counter, calls)))
					continue;
				uint64_t cum = 0;
				int b = 0;
				/* Bucket b holds [2^b, 2^(b+1)) ns: its upper bound is le. */
				for (size_t q = 0; q < sizeof(prom_lat_bounds) / sizeof(prom_lat_bounds[0]); q++) {
					for (; b <= prom_lat_bounds[q]; b++)
						cum += prom_sum(&grp[i], member, tot, row +
								offsetof(struct ps_counter, lat_hist) +
								(size_t)b * sizeof(uint64_t));
					fputs("poolshim_call_duration_seconds_bucket{", f);
					prom_id(f, &grp[i]);
					fprintf(f, ",call=\"%s\",kind=\"%s\",le=\"%.9g\"} %llu\n",
						ps_call_name((enum ps_call)c), prom_kind(k),
						(double)(1ull << (prom_lat_bounds[q] + 1)) * 1e-9,
						(unsigned long long)cum);
				}
				for (; b < PS_LAT_BUCKETS; b++)
					cum += prom_sum(&grp[i], member, tot, row +
							offsetof(struct ps_counter, lat_hist) +
							(size_t)b * sizeof(uint64_t));
				const char *sfx[] = { "_bucket", "_sum", "_count" };
				for (int s = 0; s < 3; s++) {
					fprintf(f, "poolshim_call_duration_seconds%s{", sfx[s]);
					prom_id(f, &grp[i]);
					fprintf(f, ",call=\"%s\",kind=\"%s\"%s} ",
						ps_call_name((enum ps_call)c), prom_kind(k),
						s == 0 ? ",le=\"+Inf\"" : "");
					if (s == 1)
						fprintf(f, "%.9f\n", (double)prom_sum(&grp[i], member, tot, row +
							offsetof(struct ps_counter, nsec)) * 1e-9);
					else
						fprintf(f, "%llu\n", (unsigned long long)cum);
				}
			}
	if (!(f = prom_family(p, "poolshim_pool_events_total", "counter",
		    "Pool allocations, frees and fallbacks to glibc's heap, by reason.")))
		return;
	for (int i = 0; i < ng; i++)
		for (int e = 0; e < PS_EV__COUNT; e++) {
			fputs("poolshim_pool_events_total{", f);
			prom_id(f, &grp[i]);
			fprintf(f, ",event=\"%s\"} %llu\n", ps_event_name(e), (unsigned long long)
				prom_sum(&grp[i], member, tot, TOT_OFF(events) + (size_t)e * sizeof(uint64_t)));
		}
	/* What the process itself cost: the page faults and CPU time the pool is meant to save. */
	static const struct { const char *name, *help, *label, *values[2]; bool seconds; } use[] = {
		{ "poolshim_page_faults_total", "Page faults of the processes (/proc/PID/stat).",
		  "type", { "minor", "major" }, false },
		{ "poolshim_cpu_seconds_total", "CPU time of the processes (/proc/PID/stat).",
		  "mode", { "user", "system" }, true },
	};
	for (size_t m = 0; m < sizeof(use) / sizeof(use[0]); m++) {
		if (!(f = prom_family(p, use[m].name, "counter", use[m].help)))
			return;
		for (int i = 0; i < ng; i++) {
			uint64_t sum[2] = { 0, 0 };
			for (int x = grp[i].first; x < grp[i].first + grp[i].n; x++) {
				uint64_t v[4];
				prom_usage(&t[member[x]], v);
				sum[0] += v[2 * m];
				sum[1] += v[2 * m + 1];
			}
			for (int j = 0; j < 2; j++) {
				fprintf(f, "%s{", use[m].name);
				prom_id(f, &grp[i]);
				if (use[m].seconds)
					fprintf(f, ",%s=\"%s\"} %.6f\n", use[m].label, use[m].values[j],
						(double)sum[j] * 1e-6);
				else
					fprintf(f, ",%s=\"%s\"} %llu\n", use[m].label, use[m].values[j],
						(unsigned long long)sum[j]);
			}
		}
	}
	/* Gauges: summed over a program's processes, but for the limits (the most of any). */
	enum { G_SUM, G_MAX, G_MIN };
	static const struct { const char *name, *help; int how; } g[] = {
		{ "poolshim_pool_in_use_bytes", "Pooled memory held by live allocations.", G_SUM },
		{ "poolshim_pool_peak_bytes", "Most pooled memory in use at once (summed over processes: "
		  "an upper bound of the program's).", G_SUM },
		{ "poolshim_pool_backed_bytes", "Pool memory backed so far.", G_SUM },
		{ "poolshim_pool_cap_bytes", "The pool's size limit (per process; the most of any).", G_MAX },
		{ "poolshim_pool_min_bytes", "Smallest request served from the pool (the most of any "
		  "process).", G_MAX },
		{ "poolshim_threads", "The most threads counting at once (summed over processes).", G_SUM },
		{ "poolshim_uring_rings", "io_uring rings set up.", G_SUM },
		{ "poolshim_processes", "Processes counted in the series.", G_SUM },
		{ "poolshim_process_gone", "Processes that are gone (file left behind).", G_SUM },
		{ "poolshim_pool_on", "0 with POOLSHIM_POOL=off in any of the processes (a baseline: "
		  "counted, nothing pooled), else 1.", G_MIN },
	};
	for (size_t m = 0; m < sizeof(g) / sizeof(g[0]); m++) {
		if (!(f = prom_family(p, g[m].name, "gauge", g[m].help)))
			return;
		for (int i = 0; i < ng; i++) {
			uint64_t acc = g[m].how == G_MIN ? UINT64_MAX : 0;
			for (int x = grp[i].first; x < grp[i].first + grp[i].n; x++) {
				const struct target *ti = &t[member[x]];
				const struct ps_live_header *h = ti->r.hdr;
				uint64_t v[] = { h->gauges.pool_in_use, h->gauges.pool_peak, h->pool.backed,
						 h->pool.cap, h->pool_min,
						 h->threads_peak ? h->threads_peak : ti->r.nblocks,
						 h->uring_rings, 1, ti->r.dead,
						 !(ti->r.cfg_known && !ti->r.cfg.pool) };
				acc = g[m].how == G_SUM ? acc + v[m] : g[m].how == G_MAX
					? (v[m] > acc ? v[m] : acc) : (v[m] < acc ? v[m] : acc);
			}
			fprintf(f, "%s{", g[m].name);
			prom_id(f, &grp[i]);
			fprintf(f, "} %llu\n", (unsigned long long)acc);
		}
	}
	/*
	 * The page-exact placement's free blocks, where the records have them
	 * (blocks.c's mirror): bytes split by what is known of them, so that
	 * the two states add up to the free memory; the count; the largest.
	 */
	static const char *const fb_name[] = { "poolshim_pool_free_bytes", "poolshim_pool_free_blocks",
					       "poolshim_pool_free_largest_bytes" };
	static const char *const fb_help[] = {
		"Free pool memory (page-exact placement): resident_max may be resident, "
		"zero is given back or never touched.",
		"Free blocks the pool holds (page-exact placement).",
		"The largest free block: what one request gets without a new slab (the largest "
		"of any process).",
	};
	for (int m = 0; m < 3; m++) {
		if (!(f = prom_family(p, fb_name[m], "gauge", fb_help[m])))
			return;
		for (int i = 0; i < ng; i++) {
			uint64_t v[2] = { 0, 0 };
			bool known = false;
			for (int x = grp[i].first; x < grp[i].first + grp[i].n; x++) {
				const struct ps_live_header *h = t[member[x]].r.hdr;
				if (h->free.known != 1 || h->free.zero_bytes > h->free.bytes)
					continue;
				known = true;
				if (m == 0) {
					v[0] += h->free.bytes - h->free.zero_bytes;
					v[1] += h->free.zero_bytes;
				} else if (m == 1) {
					v[0] += h->free.blocks;
				} else {
					uint64_t l = h->free.largest <= h->free.bytes ? h->free.largest : 0;
					v[0] = l > v[0] ? l : v[0];
				}
			}
			if (!known)
				continue;
			fprintf(f, "%s{", fb_name[m]);
			prom_id(f, &grp[i]);
			if (m == 0) {
				fprintf(f, ",state=\"resident_max\"} %llu\n%s{", (unsigned long long)v[0],
					fb_name[m]);
				prom_id(f, &grp[i]);
				fprintf(f, ",state=\"zero\"} %llu\n", (unsigned long long)v[1]);
			} else {
				fprintf(f, "} %llu\n", (unsigned long long)v[0]);
			}
		}
	}
	static const struct { const char *name, *help; size_t off; } u[] = {
		{ "poolshim_uring_enters_total", "io_uring_enter calls.",
		  offsetof(struct ps_uring_counts, enters) },
		{ "poolshim_uring_sqes_total", "Submission queue entries.",
		  offsetof(struct ps_uring_counts, sqes) },
		{ "poolshim_uring_fixed_sqes_total", "Entries that used a registered buffer.",
		  offsetof(struct ps_uring_counts, fixed) },
		{ "poolshim_uring_split_calls_total", "Calls split into more than one entry.",
		  offsetof(struct ps_uring_counts, split_calls) },
	};
	for (size_t m = 0; m < sizeof(u) / sizeof(u[0]); m++) {
		if (!(f = prom_family(p, u[m].name, "counter", u[m].help)))
			return;
		for (int i = 0; i < ng; i++) {
			fprintf(f, "%s{", u[m].name);
			prom_id(f, &grp[i]);
			fprintf(f, "} %llu\n", (unsigned long long)prom_sum(&grp[i], member, tot,
									   TOT_OFF(uring) + u[m].off));
		}
	}
	if (!(f = prom_family(p, "poolshim_uring_fallbacks_total", "counter",
		    "Eligible-looking calls that went to libc instead of io_uring, by reason.")))
		return;
	for (int i = 0; i < ng; i++)
		for (int r = 0; r < PS_UFB__COUNT; r++) {
			fputs("poolshim_uring_fallbacks_total{", f);
			prom_id(f, &grp[i]);
			fprintf(f, ",reason=\"%s\"} %llu\n", ps_uring_fb_name(r), (unsigned long long)
				prom_sum(&grp[i], member, tot, TOT_OFF(uring) + offsetof(struct ps_uring_counts,
										  fallbacks) +
					 (size_t)r * sizeof(uint64_t)));
		}
}

/*
 * totals() of a target, opened again for it when parked: the same file
 * (device and inode), its header read and checked afresh, then let go.
 */
static const char *parked_totals(const struct target *t, struct ps_tstats *out,
				 struct ps_tstats *tmp)
{
	if (!t->parked)
		return totals(t, out, tmp);
	struct ps_record_id id = { t->r.pid, t->r.ns, t->r.tag };
	struct target again;
	const char *why = NULL;
	memset(&again, 0, sizeof(again));
	if (ps_record_open(&again.r, &id, &why) < 0)
		why = why ? why : "gone";
	else if (again.r.dev != t->r.dev || again.r.ino != t->r.ino)
		why = "replaced by another file";
	else if (!(why = ps_record_read(&again.r)))
		why = totals(&again, out, tmp);
	ps_record_close(&again.r);
	return why;
}

/*
 * The scrape of t[0..n) (those with a record open or parked) into p, series by
 * series: each series' records summed one block at a time into sum (one
 * and tmp: room for one record's sum and one block).  A record whose
 * blocks cannot be read is refused and left out.  0, or -1 out of memory.
 */
static int scrape(struct prom *p, struct target *t, int n, struct ps_tstats *sum,
		  struct ps_tstats *one, struct ps_tstats *tmp)
{
	struct prom_series *grp;
	int *member;
	int ng = prom_group(t, n, &grp, &member);

	if (ng < 0)
		return -1;
	for (int i = 0; i < ng; i++) {
		memset(sum, 0, sizeof(*sum));
		for (int x = grp[i].first; x < grp[i].first + grp[i].n; x++) {
			const char *why = parked_totals(&t[member[x]], one, tmp);
			if (why)
				refuse(&t[member[x]], why);
			else
				ps_stats_add(sum, one, 1);
		}
		prom_series_add(p, t, &grp[i], member, sum);
	}
	free(grp);
	free(member);
	return p->failed ? -1 : 0;
}

/*
 * Whether a file can be made in dir, by making one and removing it:
 * access(2) says yes to root even where nothing can be created (/proc,
 * a read-only mount).  0, or -1 with errno set.
 */
static int probe_dir(const char *dir)
{
	char tmp[4096];

	if (snprintf(tmp, sizeof(tmp), "%s/.poolshim.prom.XXXXXX", dir) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = mkstemp(tmp);
	if (fd < 0)
		return -1;
	unlink(tmp);
	close(fd);
	return 0;
}

/* DIR/poolshim.prom replaced whole: a collector never reads half a scrape. */
static int write_textfile(struct prom *p)
{
	char tmp[4096], dst[4096];
	snprintf(dst, sizeof(dst), "%s/poolshim.prom", opt_textfile);
	snprintf(tmp, sizeof(tmp), "%s/.poolshim.prom.XXXXXX", opt_textfile);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "poolshim stat: --textfile %s: cannot write there: %s\n",
			opt_textfile, strerror(errno));
		prom_end(NULL, p);
		return -1;
	}
	fchmod(fd, 0644);   /* node_exporter often runs as another user */
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		prom_end(NULL, p);
		return -1;
	}
	int bad = prom_end(f, p) != 0;
	bad |= fflush(f) != 0 || fsync(fd) != 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, dst) != 0) {
		fprintf(stderr, "poolshim stat: --textfile %s: %s\n", dst, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/*
 * A record whose process is gone stays for `poolshim collect`, which
 * writes its report; stat only says so, once per record.
 */
static void say_gone(struct target *t)
{
	if (t->r.dead && !opt_json && !opt_prom && !opt_textfile)
		printf("(pid %d is gone; `poolshim collect %d` writes its report and removes %s)\n",
		       t->r.pid, t->r.pid, t->r.path);
}

/* The assignments check_config() was given: its lookup for ps_config_load(). */
static char **check_vars;
static int check_nvars;

static const char *check_get(const char *name)
{
	size_t n = strlen(name);
	const char *v = NULL;

	for (int i = 0; i < check_nvars; i++)
		if (!strncmp(check_vars[i], name, n) && check_vars[i][n] == '=')
			v = check_vars[i] + n + 1;
	return v;
}

/*
 * --check-config NAME=VALUE ...: the values judged by the shim's own parser
 * (config.c, the table the library reads at start), for `poolshim systemd`,
 * which must not write into a unit a value every process would refuse.
 * Each problem is said in the line the library would print; exit 1 if any.
 */
static int check_config(int n, char **vars)
{
	static struct ps_config cfg;
	char **envp = calloc((size_t)n + 1, sizeof(*envp));

	if (!envp)
		return 1;
	for (int i = 0; i < n; i++) {
		if (!strchr(vars[i], '=')) {
			fprintf(stderr, "poolshim stat: --check-config wants NAME=VALUE, not '%s'\n",
				vars[i]);
			return 2;
		}
		envp[i] = vars[i];
	}
	check_vars = vars;
	check_nvars = n;
	int problems = ps_config_load(&cfg, check_get, envp);
	const char *list = check_get("POOLSHIM_PROGRAMS"), *why;
	bool mentioned;
	if (list && ps_programs_match(list, "", &mentioned, &why) < 0) {
		ps_log("POOLSHIM_PROGRAMS='%s' %s (names separated by commas, as the report's "
		       "program field gives them)", list, why);
		problems++;
	}
	free(envp);
	return problems ? 1 : 0;
}

int main(int argc, char **argv)
{
	double interval = 0;
	long count = -1;
	struct ps_record_id *ids = NULL;
	int nids = 0;

	if (argc > 1 && !strcmp(argv[1], "--check-config"))
		return check_config(argc - 2, argv + 2);
	ids = malloc(sizeof(*ids) * (size_t)(argc > 1 ? argc : 1));
	my_ns = ps_live_pidns();
	const char *dir = getenv("POOLSHIM_LIVE_DIR");
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--live-dir"))
			dir = argv[i + 1];
	if (dir && *dir) {
		int r = ps_live_set_dir(dir);
		if (r < 0) {
			fprintf(stderr, "poolshim stat: live directory %s: %s\n", dir,
				r == -EINVAL ? "not an absolute path of at most 160 characters" :
				strerror(-r));
			return 2;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--json")) {
			opt_json = true;
		} else if (!strcmp(a, "--live-dir") && i + 1 < argc) {
			i++;   /* taken above, before any file is named */
		} else if (!strcmp(a, "--prometheus")) {
			opt_prom = true;
		} else if (!strcmp(a, "--per-pid")) {
			opt_per_pid = true;
		} else if (!strcmp(a, "--textfile") && i + 1 < argc) {
			opt_textfile = argv[++i];
			struct stat st;
			errno = 0;
			if (stat(opt_textfile, &st) < 0 || !S_ISDIR(st.st_mode) ||
			    probe_dir(opt_textfile) < 0) {
				fprintf(stderr, "poolshim stat: --textfile %s: %s\n", opt_textfile,
					errno ? strerror(errno) : "not a directory");
				return 2;
			}
		} else if (!strcmp(a, "--keep")) {
			/* Records are always kept now; the option stays for scripts that give it. */
		} else if (!strcmp(a, "--all-users")) {
			opt_all_users = true;
		} else if ((!strcmp(a, "-i") || !strcmp(a, "-c")) && i + 1 < argc) {
			char *end;
			double v = strtod(argv[++i], &end);
			if (*end || v <= 0 || (a[1] == 'c' && v != (long)v)) {
				fprintf(stderr, "poolshim stat: %s wants a positive %s, not '%s'\n", a,
					a[1] == 'i' ? "number of seconds" : "count", argv[i]);
				return 2;
			}
			if (a[1] == 'i')
				interval = v;
			else
				count = (long)v;
		} else {
			char *end;
			long pid = strtol(a, &end, 10);
			if (*end || pid <= 0 || pid > 1 << 30) {
				fprintf(stderr, "poolshim stat: '%s' is not a pid\n", a);
				usage(stderr);
				return 2;
			}
			ids[nids].pid = (int)pid;
			ids[nids++].ns = my_ns;
		}
	}
	if (count > 0 && interval <= 0) {
		fprintf(stderr, "poolshim stat: -c COUNT counts the intervals of -i SECONDS; "
				"give -i too (without -i, stat prints once)\n");
		return 2;
	}
	if (opt_per_pid && !opt_prom && !opt_textfile) {
		fprintf(stderr, "poolshim stat: --per-pid labels the Prometheus series by process; "
				"give --prometheus or --textfile DIR too\n");
		return 2;
	}
	bool named = nids > 0;
	if (!named) {
		free(ids);
		nids = ps_record_scan(&ids);
		if (nids < 0)
			nids = 0;
		/* With -i, processes that start later are picked up: none yet is fine. */
		if (nids == 0 && interval <= 0) {
			fprintf(stderr, "poolshim stat: no process is publishing live statistics in "
					"%s\n", ps_live_dir());
			return 1;
		}
	}

	struct ps_tstats *now = calloc(1, sizeof(*now)), *tmp = calloc(1, sizeof(*tmp));
	struct ps_tstats *delta = calloc(1, sizeof(*delta));
	bool prom = opt_prom || opt_textfile;
	struct prom P;
	if (!now || !tmp || !delta) {
		fprintf(stderr, "poolshim stat: out of memory\n");
		return 1;
	}
	int ok = 0, refused = 0, others = 0;

	/*
	 * Once, a table: one record at a time, read, shown and let go:
	 * whatever the directory holds, stat holds one record (its header and
	 * one block) and one descriptor.  A scrape keeps the records' headers
	 * (a series sums a program's processes) and reads their blocks series
	 * by series (scrape()).
	 */
	if (interval <= 0) {
		struct target one, *kept = NULL;
		for (int i = 0; i < nids; i++) {
			int r = open_target(&one, &ids[i], named, false);
			const char *why = r == 0 && !prom ? totals(&one, now, tmp) : NULL;
			if (why) {
				refuse(&one, why);
				r = -1;
			}
			if (r == 0 && prom) {
				struct target *k = realloc(kept, sizeof(*kept) * (size_t)(ok + 1));
				if (!k) {
					fprintf(stderr, "poolshim stat: out of memory\n");
					return 1;
				}
				kept = k;
				/* Parked: 8 KiB and no descriptor each, however many. */
				close(one.r.fd);
				one.r.fd = -1;
				one.parked = true;
				kept[ok++] = one;
				continue;
			}
			if (r == 0) {
				ok++;
				show(&one, now, "totals", false);
				say_gone(&one);
			} else if (r < 0) {
				refused++;
			} else {
				others++;
			}
			close_target(&one);
		}
		if (others)
			fprintf(stderr, "poolshim stat: %d files of other users not read (--all-users "
					"reads them)\n", others);
		if (ok == 0) {
			if (!refused)
				fprintf(stderr, "poolshim stat: none of the files in %s is yours\n",
					ps_live_dir());
			return 1;
		}
		if (prom) {
			prom_begin(&P);
			if (scrape(&P, kept, ok, now, delta, tmp) < 0) {
				prom_end(NULL, &P);
				fprintf(stderr, "poolshim stat: --prometheus: out of memory\n");
				return 1;
			}
			if (opt_textfile) {
				if (write_textfile(&P) < 0)
					return 1;
			} else {
				prom_end(stdout, &P);
				fflush(stdout);
			}
			for (int i = 0; i < ok; i++)
				close_target(&kept[i]);
			free(kept);
		}
		return refused ? 3 : 0;
	}

	/* -i: every record followed stays open, with its last totals for the deltas (not for a scrape). */
	struct target *t = calloc((size_t)(nids ? nids : 1), sizeof(*t));
	if (!t) {
		fprintf(stderr, "poolshim stat: out of memory\n");
		return 1;
	}
	for (int i = 0; i < nids; i++) {
		/*
		 * A process makes its file once it works (its first pooled
		 * buffer, or counted calls past its first second): with -i, one
		 * named and running without one yet is waited for.
		 */
		if (named && !file_exists(ids[i].pid, ids[i].ns) &&
		    (kill(ids[i].pid, 0) == 0 || errno == EPERM)) {
			memset(&t[ok], 0, sizeof(t[ok]));
			t[ok].r.pid = ids[i].pid;
			t[ok].r.ns = ids[i].ns;
			t[ok].r.fd = -1;
			t[ok].pending = true;
			fprintf(stderr, "poolshim stat: %d: no live statistics yet (a process "
					"publishes once it has taken a pooled buffer, or counted calls "
					"past its first second); waiting for them\n", ids[i].pid);
			ok++;
			continue;
		}
		int r = open_target(&t[ok], &ids[i], named, !prom);
		if (r == 0) {
			ok++;
			continue;
		}
		close_target(&t[ok]);
		if (r < 0)
			refused++;
		else
			others++;
	}
	if (others)
		fprintf(stderr, "poolshim stat: %d files of other users not read (--all-users "
				"reads them)\n", others);
	if (ok == 0 && named) {
		if (!refused)
			fprintf(stderr, "poolshim stat: none of the files in %s is yours\n",
				ps_live_dir());
		return 1;
	}

	for (long round = 0; count < 0 || round < count; round++) {
		if (round > 0 && !named) {
			/* Processes started since: follow them too; drop those that ended. */
			struct ps_record_id *more = NULL;
			int nm = ps_record_scan(&more);
			for (int j = 0; j < nm; j++) {
				bool known = false;
				for (int i = 0; i < ok && !known; i++)
					known = t[i].r.pid == more[j].pid && t[i].r.ns == more[j].ns &&
						t[i].r.tag == more[j].tag && t[i].r.fd >= 0;
				if (known)
					continue;
				struct target *nt = realloc(t, sizeof(*t) * (size_t)(ok + 1));
				if (!nt)
					break;
				t = nt;
				memset(&t[ok], 0, sizeof(*t));
				if (open_target(&t[ok], &more[j], false, !prom) == 0 && !t[ok].r.dead)
					ok++;
				else
					close_target(&t[ok]);
			}
			free(more);
			for (int i = 0; i < ok; i++)
				if (t[i].r.fd >= 0 && !t[i].r.foreign_ns && kill(t[i].r.pid, 0) < 0 &&
				    errno == ESRCH) {
					t[i].r.dead = true;
					say_gone(&t[i]);
					close(t[i].r.fd);
					t[i].r.fd = -1;
				}
		}
		for (int i = 0; i < ok; i++) {
			t[i].fresh = false;
			if (!t[i].pending)
				continue;
			if (kill(t[i].r.pid, 0) < 0 && errno == ESRCH) {
				t[i].pending = false;   /* ended before it published */
				continue;
			}
			if (!file_exists(t[i].r.pid, t[i].r.ns))
				continue;
			struct ps_record_id id = { t[i].r.pid, t[i].r.ns, 0 };
			if (open_target(&t[i], &id, true, !prom) == 0) {
				t[i].pending = false;
				t[i].fresh = true;
			} else {
				close_target(&t[i]);
				t[i].r.pid = id.pid;
				refused++;
			}
		}
		for (int i = 0; i < ok; i++) {
			if (t[i].r.fd < 0)
				continue;
			const char *why = round > 0 && !t[i].fresh ? snapshot(&t[i]) : NULL;
			if (!why && !prom)
				why = totals(&t[i], now, tmp);
			if (why) {
				/* Changed under us: stop following it; it is no longer shown. */
				refuse(&t[i], why);
				close(t[i].r.fd);
				t[i].r.fd = -1;
				continue;
			}
			if (prom) {
				/* Summed series by series below. */
			} else if (round > 0 && !t[i].fresh) {
				memcpy(delta, now, sizeof(*now));
				ps_stats_add(delta, t[i].prev, -1);
				char what[64];
				snprintf(what, sizeof(what), "change over %.3gs", interval);
				show(&t[i], delta, what, true);
			} else {
				show(&t[i], now, "totals so far", false);
			}
			if (t[i].prev)
				memcpy(t[i].prev, now, sizeof(*now));
		}
		if (prom) {
			prom_begin(&P);
			if (scrape(&P, t, ok, now, delta, tmp) < 0) {
				prom_end(NULL, &P);
				fprintf(stderr, "poolshim stat: --prometheus: out of memory\n");
				return 1;
			}
		}
		if (opt_textfile) {
			if (write_textfile(&P) < 0)
				return 1;
		} else if (prom) {
			prom_end(stdout, &P);
			fflush(stdout);
		}
		bool all_dead = true;
		for (int i = 0; i < ok; i++)
			all_dead &= (t[i].r.fd < 0 && !t[i].pending) || t[i].r.dead ||
				    (!t[i].r.foreign_ns && kill(t[i].r.pid, 0) < 0 && errno == ESRCH);
		if (all_dead && named)
			break;
		struct timespec ts = { (time_t)interval,
				       (long)((interval - (double)(time_t)interval) * 1e9) };
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < ok; i++)
		if (t[i].r.fd >= 0)
			say_gone(&t[i]);
	return refused ? 3 : 0;
}
