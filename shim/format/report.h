/* SPDX-License-Identifier: MIT */
/*
 * The per-process report as data, and its renderer: a text table or JSON
 * (schema "poolshim-report", version PS_REPORT_VERSION, documented in
 * poolshim(7)), in report.c, part of the format layer.  Gathering it from
 * the live process and writing it out are the runtime's (report_out.h);
 * keeping them apart lets unit tests and poolshim-stat render known numbers.
 */
#ifndef PS_REPORT_H
#define PS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/config.h"
#include "format/poolinfo.h"
#include "format/stats.h"

/* 2: pool.heap_owner, pool mode "foreign"; 3: meta, config, advice,
 * uring.fallbacks.unaligned, and frame path, build_id, rel, file, line */
#define PS_REPORT_VERSION 3

struct ps_buf;
struct ps_emit;
struct ps_sites_view;

/*
 * How the process ended, said by a report rendered after it (`poolshim
 * collect`, the wrapper).  PS_ENDED_UNSAID, the zero value: the report says
 * nothing about it (a live view, the process's own report).
 */
enum ps_report_ended {
	PS_ENDED_UNSAID = 0,
	PS_ENDED_EXIT,        /* it exited: end_status when end_known */
	PS_ENDED_SIGNAL,      /* a signal ended it: end_status is the signal (end_known) */
	PS_ENDED_UNSEEN,      /* no exit seen: SIGKILL, the OOM killer or a crash */
};

struct ps_report_data {
	int pid;
	const char *program;
	const struct ps_tstats *totals;   /* merged counters */
	/* Which rows of totals have calls, where the merge said (rows_known): read only those. */
	bool rows_known;
	struct ps_rows rows;
	struct ps_pool_info pool;
	bool pool_ready;
	bool pool_off;                    /* POOLSHIM_POOL=off: counted, nothing pooled (mode "off") */
	/* What placed the pooled blocks (POOLSHIM_POOL_ALLOCATOR's name), or NULL: not known. */
	const char *allocator;
	const char *heap_owner;           /* malloc's file when not ours, or NULL */
	uint64_t pool_in_use, pool_peak;
	/*
	 * The pool's free blocks, with the page-exact placement (free_known):
	 * how many, their bytes, those of them known zero (given back or never
	 * touched: not resident) and the largest (0: not known).
	 */
	bool free_known;
	uint64_t free_blocks, free_bytes, free_zero_bytes, free_largest;
	/*
	 * The page placement's arenas threads are bound to (0: not known),
	 * and the most they are spread over (POOLSHIM_POOL_ARENAS, or its
	 * default once counted; 0 before).
	 */
	uint64_t arenas_used, arenas_max;
	/* The bytes in the CPUs' caches of pooled blocks (cached_known: the process's own report). */
	bool cached_known;
	uint64_t cached_bytes;
	uint64_t pool_min;
	uint64_t small_uncounted_below;   /* malloc-family calls below this went uncounted (0: none) */
	uint64_t minflt, majflt;
	uint64_t utime_us, stime_us;
	int threads;                      /* the most threads counting at once */
	int uring_state;                  /* enum ps_uring_state */
	const char *uring_reason;
	uint64_t uring_rings;
	/* The O_DIRECT router's table (route.h), or NULL: a slot's calls by route are in totals. */
	const struct ps_route_table *routes;
	/* What makes two reports comparable: where and how the run happened. */
	const char *version;
	char host[65], kernel[65];
	int64_t start_time;               /* seconds since the epoch, or -1 */
	const struct ps_config *cfg;      /* effective configuration, or NULL */
	uint64_t hugetlb_free;            /* HugePages_Free at report time (pages); 0 unknown */
	/*
	 * The call-site section, written by the runtime's call-site table
	 * (ps_callsite_render), or NULL for none; symbolize as it takes it.
	 */
	void (*callsites)(struct ps_emit *e, bool symbolize);
	bool symbolize;
	/* Or the table of a record (the tools), rendered as its view says (sites.h). */
	const struct ps_sites_view *sites;
	const char *sites_refused;        /* why a record's table was not used (text says so), or NULL */
	/* How it ended (PS_ENDED_UNSAID: not said), and who rendered the report. */
	enum ps_report_ended ended;
	int end_status;                   /* exit status, or the signal */
	bool end_known;                   /* end_status is known */
	bool end_core;                    /* the signal dumped core (known from a wait status) */
	int64_t end_usage_time;           /* PS_ENDED_UNSEEN: faults and CPU time as of (epoch s), or -1 */
	const char *rendered_by;          /* "poolshim collect", the wrapper, or NULL */
};

void ps_report_render(struct ps_buf *b, const struct ps_report_data *d,
		      enum ps_stats_format format);

/*
 * The text report's "ended" line alone (nothing when d->ended is
 * PS_ENDED_UNSAID): for a report the process rendered itself, printed
 * before it by whoever delivers it.
 */
void ps_report_render_end(struct ps_buf *b, const struct ps_report_data *d);

/*
 * Expand %p (pid), %e (program name) and %% in pattern into out[cap].
 * 0, or -ENAMETOOLONG when it does not fit, -EINVAL for another %x.
 */
int ps_report_path(char *out, size_t cap, const char *pattern, int pid, const char *program);

/* Whether pattern names the pid (%p): each process then makes a file of its own. */
bool ps_report_path_names_pid(const char *pattern);

#endif
