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
};

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
	char path[PS_LIVE_DIR_MAX + 64];
	struct stat st;

	ps_live_path(path, sizeof(path), pid, ns);
	return lstat(path, &st) == 0;
}

/* 0 shown, -1 refused (said why), 1 skipped quietly (another user's). */
static int open_target(struct target *t, int pid, uint64_t ns, bool named)
{
	const char *why;

	memset(t, 0, sizeof(*t));
	if (ps_record_open(&t->r, pid, ns, &why) < 0) {
		if (t->r.fd < 0 && named)
			fprintf(stderr, "poolshim stat: %d: no live statistics (%s): not running "
					"under the shim, POOLSHIM_LIVE=off, or nothing to show yet (a "
					"process publishes once it has taken a pooled buffer, or "
					"counted calls past its first second)\n", pid, why);
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
	t->prev = calloc(1, sizeof(struct ps_tstats));
	if (!t->prev) {
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

static void totals(const struct target *t, struct ps_tstats *out, struct ps_tstats *tmp)
{
	ps_record_totals(&t->r, out, tmp);
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

static void show(struct target *t, const struct ps_tstats *counters, const char *what, bool delta)
{
	const struct ps_live_header *h = t->r.hdr;
	struct ps_report_data d;
	char storage[4096];
	struct ps_buf b;

	ps_record_data(&t->r, &d, counters);
	/* The live view's table: the run's metadata belongs to the report. */
	d.version = NULL;
	d.host[0] = d.kernel[0] = '\0';
	d.cfg = NULL;
	d.start_time = -1;
	proc_usage(t, &d, delta);

	fflush(stdout);
	if (!opt_json) {
		printf("---- pid %d (%s): %s%s ----\n", t->r.pid, h->program, what,
		       t->r.dead ? " [process gone: `poolshim collect` writes its report]" :
		       t->r.foreign_ns ? " [another pid namespace: not judged, left in place]" : "");
		if (h->unpublished)
			printf("(%u thread counter blocks are outside this file: the live directory "
			       "had less than a quarter free, or the file's blocks were all taken; "
			       "the exit report has them)\n",
			       (unsigned)h->unpublished);
	}
	fflush(stdout);
	if (opt_json) {
		/* In memory, so the line can open with when it was read. */
		static char *big;
		const size_t cap = 16u << 20;
		if (!big && !(big = malloc(cap)))
			return;
		ps_buf_init(&b, big, cap, -1);
		ps_record_as_owner(&t->r, true);
		ps_report_render(&b, &d, PS_FORMAT_JSON);
		ps_record_as_owner(&t->r, false);
		char *j = (char *)ps_buf_str(&b);
		/* One line per report: raw newlines in JSON are only layout. */
		size_t o = 0;
		for (size_t k = 0; j[k]; k++)
			if (j[k] != '\n')
				j[o++] = j[k];
		j[o] = '\0';
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (*j == '{')
			printf("{\"timestamp\":%lld.%03ld,%s\n", (long long)now.tv_sec,
			       now.tv_nsec / 1000000, j + 1);
		else
			puts(j);
		fflush(stdout);
		return;
	}
	ps_buf_init(&b, storage, sizeof(storage), 1);
	ps_record_as_owner(&t->r, true);
	ps_report_render(&b, &d, PS_FORMAT_TEXT);
	ps_record_as_owner(&t->r, false);
	ps_buf_flush(&b);
}

/* Label values may hold anything the writer put there; escape as the format asks. */
static void prom_label(FILE *f, const char *s)
{
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

static void prom_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
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
		if (t[i].r.fd < 0)
			continue;
		const char *prog = t[i].r.hdr->program;
		bool seen = false;
		for (int j = 0; j < i && !opt_per_pid; j++)
			seen |= t[j].r.fd >= 0 && !strcmp(t[j].r.hdr->program, prog);
		if (seen)
			continue;
		g[ng] = (struct prom_series){ prog, opt_per_pid ? t[i].r.pid : -1, nm, 0 };
		for (int j = i; j < n; j++)
			if (t[j].r.fd >= 0 && (opt_per_pid ? j == i : !strcmp(t[j].r.hdr->program, prog))) {
				m[nm++] = j;
				g[ng].n++;
			}
		ng++;
	}
	*out = g;
	*member = m;
	return ng;
}

/* The sum of a uint64_t at byte offset off in each member's tot[] (a call row, an event...). */
static uint64_t prom_sum(const struct prom_series *g, const int *member, const struct ps_tstats *tot,
			 size_t off)
{
	uint64_t v = 0;

	for (int x = g->first; x < g->first + g->n; x++)
		v += *(const uint64_t *)((const char *)&tot[member[x]] + off);
	return v;
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
 * One scrape of all targets.  The format wants every sample of a family
 * together under its HELP and TYPE, so families are the outer loop.
 * Series whose call never happened are left out: they would be most of
 * the output and say nothing.
 */
static void prometheus(FILE *f, struct target *t, int n, struct ps_tstats *tot)
{
	struct prom_series *grp;
	int *member;
	int ng = prom_group(t, n, &grp, &member);

	if (ng < 0) {
		fprintf(stderr, "poolshim stat: --prometheus: out of memory\n");
		return;
	}
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
		prom_family(f, cnt[m].name, "counter", cnt[m].help);
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
	prom_family(f, "poolshim_calls_estimated_total", "counter",
		    "Of poolshim_calls_total, the calls that are a sampled estimate: malloc-family "
		    "calls below POOLSHIM_POOL_MIN/16, counted one call in about 128.");
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
	prom_family(f, "poolshim_call_duration_seconds", "histogram",
		    "Time in the call, of the sampled calls (buckets every factor of 4 from 1 us).");
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
	prom_family(f, "poolshim_pool_events_total", "counter",
		    "Pool allocations, frees and fallbacks to glibc's heap, by reason.");
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
		prom_family(f, use[m].name, "counter", use[m].help);
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
		prom_family(f, g[m].name, "gauge", g[m].help);
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
		prom_family(f, fb_name[m], "gauge", fb_help[m]);
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
		prom_family(f, u[m].name, "counter", u[m].help);
		for (int i = 0; i < ng; i++) {
			fprintf(f, "%s{", u[m].name);
			prom_id(f, &grp[i]);
			fprintf(f, "} %llu\n", (unsigned long long)prom_sum(&grp[i], member, tot,
									   TOT_OFF(uring) + u[m].off));
		}
	}
	prom_family(f, "poolshim_uring_fallbacks_total", "counter",
		    "Eligible-looking calls that went to libc instead of io_uring, by reason.");
	for (int i = 0; i < ng; i++)
		for (int r = 0; r < PS_UFB__COUNT; r++) {
			fputs("poolshim_uring_fallbacks_total{", f);
			prom_id(f, &grp[i]);
			fprintf(f, ",reason=\"%s\"} %llu\n", ps_uring_fb_name(r), (unsigned long long)
				prom_sum(&grp[i], member, tot, TOT_OFF(uring) + offsetof(struct ps_uring_counts,
										  fallbacks) +
					 (size_t)r * sizeof(uint64_t)));
		}
	free(grp);
	free(member);
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
static int write_textfile(struct target *t, int n, struct ps_tstats *tot)
{
	char tmp[4096], dst[4096];
	snprintf(dst, sizeof(dst), "%s/poolshim.prom", opt_textfile);
	snprintf(tmp, sizeof(tmp), "%s/.poolshim.prom.XXXXXX", opt_textfile);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "poolshim stat: --textfile %s: cannot write there: %s\n",
			opt_textfile, strerror(errno));
		return -1;
	}
	fchmod(fd, 0644);   /* node_exporter often runs as another user */
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return -1;
	}
	prometheus(f, t, n, tot);
	int bad = fflush(f) != 0 || fsync(fd) != 0;
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

	struct target *t = calloc((size_t)(nids ? nids : 1), sizeof(*t));
	struct ps_tstats *now = calloc(1, sizeof(*now)), *tmp = calloc(1, sizeof(*tmp));
	struct ps_tstats *delta = calloc(1, sizeof(*delta));
	if (!t || !now || !tmp || !delta) {
		fprintf(stderr, "poolshim stat: out of memory\n");
		return 1;
	}
	int ok = 0, refused = 0, others = 0;
	for (int i = 0; i < nids; i++) {
		/*
		 * A process makes its file once it works (its first pooled
		 * buffer, or counted calls past its first second): with -i, one
		 * named and running without one yet is waited for.
		 */
		if (named && interval > 0 && !file_exists(ids[i].pid, ids[i].ns) &&
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
		int r = open_target(&t[ok], ids[i].pid, ids[i].ns, named);
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
	if (ok == 0 && (named || interval <= 0)) {
		if (!refused)
			fprintf(stderr, "poolshim stat: none of the files in %s is yours\n",
				ps_live_dir());
		return 1;
	}

	struct ps_tstats *tot = NULL;
	if (opt_prom || opt_textfile) {
		tot = calloc((size_t)(ok ? ok : 1), sizeof(*tot));
		if (!tot) {
			fprintf(stderr, "poolshim stat: out of memory\n");
			return 1;
		}
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
						t[i].r.fd >= 0;
				if (known)
					continue;
				struct target *nt = realloc(t, sizeof(*t) * (size_t)(ok + 1));
				if (!nt)
					break;
				t = nt;
				memset(&t[ok], 0, sizeof(*t));
				if (tot) {
					struct ps_tstats *ntot = realloc(tot, sizeof(*tot) * (size_t)(ok + 1));
					if (!ntot)
						break;
					tot = ntot;
				}
				if (open_target(&t[ok], more[j].pid, more[j].ns, false) == 0 &&
				    !t[ok].r.dead)
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
			int pid = t[i].r.pid;
			uint64_t ns = t[i].r.ns;
			if (open_target(&t[i], pid, ns, true) == 0) {
				t[i].pending = false;
				t[i].fresh = true;
			} else {
				close_target(&t[i]);
				t[i].r.pid = pid;
				refused++;
			}
		}
		for (int i = 0; tot && i < ok; i++) {
			const char *why = t[i].r.fd >= 0 && round > 0 && !t[i].fresh ? snapshot(&t[i]) : NULL;
			if (why) {
				refuse(&t[i], why);
				close(t[i].r.fd);
				t[i].r.fd = -1;
			}
			if (t[i].r.fd >= 0)
				totals(&t[i], &tot[i], tmp);
		}
		if (opt_textfile) {
			if (write_textfile(t, ok, tot) < 0)
				return 1;
		} else if (opt_prom) {
			prometheus(stdout, t, ok, tot);
			fflush(stdout);
		}
		for (int i = 0; !tot && i < ok; i++) {
			if (t[i].r.fd < 0)
				continue;
			const char *why = round > 0 && !t[i].fresh ? snapshot(&t[i]) : NULL;
			if (why) {
				/* Changed under us: stop following it; it is no longer shown. */
				refuse(&t[i], why);
				close(t[i].r.fd);
				t[i].r.fd = -1;
				continue;
			}
			totals(&t[i], now, tmp);
			if (interval > 0 && round > 0 && !t[i].fresh) {
				memcpy(delta, now, sizeof(*now));
				ps_stats_add(delta, t[i].prev, -1);
				char what[64];
				snprintf(what, sizeof(what), "change over %.3gs", interval);
				show(&t[i], delta, what, true);
			} else {
				show(&t[i], now, interval > 0 ? "totals so far" : "totals", false);
			}
			memcpy(t[i].prev, now, sizeof(*now));
		}
		if (interval <= 0)
			break;
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
