/* SPDX-License-Identifier: MIT */
/*
 * The per-process report: gathered from the merged counters, the pool and
 * getrusage() (gather.c, runtime), rendered as a text table or as JSON
 * (schema "poolshim-report", version PS_REPORT_VERSION, documented in
 * poolshim(7); report.c, formatting only), and written to stderr or to a
 * per-process file (report_out.c, runtime).  Rendering is separate from
 * gathering so unit tests and poolshim-stat can feed it known numbers.
 */
#ifndef PS_REPORT_H
#define PS_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pool.h"
#include "stats.h"

/* 2: pool.heap_owner, pool mode "foreign"; 3: meta, config, advice,
 * uring.fallbacks.unaligned, and frame path, build_id, rel, file, line */
#define PS_REPORT_VERSION 3

struct ps_buf;
struct ps_emit;

/* The names the report gives pool events and io_uring fallback reasons. */

struct ps_report_data {
	int pid;
	const char *program;
	const struct ps_tstats *totals;   /* merged counters */
	struct ps_pool_info pool;
	bool pool_ready;
	const char *heap_owner;           /* malloc's file when not ours, or NULL */
	uint64_t pool_in_use, pool_peak;
	uint64_t pool_min;
	uint64_t minflt, majflt;
	uint64_t utime_us, stime_us;
	int threads;                      /* counter blocks ever created */
	int uring_state;                  /* enum ps_uring_state */
	const char *uring_reason;
	uint64_t uring_rings;
	/* What makes two reports comparable: where and how the run happened. */
	const char *version;
	char host[65], kernel[65];
	int64_t start_time;               /* seconds since the epoch, or -1 */
	const struct ps_config *cfg;      /* effective configuration, or NULL */
	uint64_t memlock;                 /* RLIMIT_MEMLOCK soft limit, UINT64_MAX = unlimited */
	/*
	 * The call-site section, written by the runtime's call-site table
	 * (ps_callsite_render), or NULL for none; symbolize as it takes it.
	 */
	void (*callsites)(struct ps_emit *e, bool symbolize);
	bool symbolize;
};

/* Fill d from the live process; scratch receives the merged counters. */
void ps_report_gather(struct ps_report_data *d, struct ps_tstats *scratch);

/*
 * Room for one report's merged counters: a block reserved in the library's
 * .bss, so a program that has used up its address space (RLIMIT_AS) still
 * gets its report, or, while another report holds that block (a dump
 * signal during the exit report), a fresh mapping.  NULL if neither.
 * Leaves errno alone.  Give it back with ps_report_scratch_put().
 */
struct ps_tstats *ps_report_scratch_get(void);
void ps_report_scratch_put(struct ps_tstats *scratch);

void ps_report_render(struct ps_buf *b, const struct ps_report_data *d,
		      enum ps_stats_format format);

/*
 * Expand %p (pid), %e (program name) and %% in pattern into out[cap].
 * 0, or -ENAMETOOLONG when it does not fit, -EINVAL for another %x.
 */
int ps_report_path(char *out, size_t cap, const char *pattern, int pid, const char *program);

/* The pid and the kept program name a report names (keeping it now if not yet). */
void ps_report_ident(int *pid, const char **program);

/*
 * Gather a report and write it to fd in format: through a stack buffer
 * flushed as it fills, or with bounded set (a non-blocking FIFO), rendered
 * in memory first and written within a bounded wait.  0 or -errno
 * (-ENOMEM without a scratch block); errno is left alone.
 */
int ps_report_write(int fd, enum ps_stats_format format, bool bounded);

/* Remember the program's name now, before the program can rewrite argv. */
void ps_report_keep_name(void);
/* That name ("" before ps_report_keep_name). */
const char *ps_report_program(void);

/*
 * Remember what fd 2 is now (device, inode, type, access mode), and when
 * the report goes to stderr keep a private duplicate of it (close-on-exec,
 * at 600 or above) for reports written after the program closed its own
 * fd 2, as programs using gnulib's close_stdout do at exit.  The report and
 * the shim's messages about it go to fd 2 only while it still is that open
 * file, else to the duplicate while it still is, else nowhere.  Call once
 * at start, whatever POOLSHIM_STATS is (without the call, fd 2 is trusted
 * whenever it is open).
 */
void ps_report_keep_stderr(void);

/*
 * The descriptor a message for the user may be written to: fd 2 while it
 * still is the stderr seen by ps_report_keep_stderr(), else the kept copy,
 * else -1.  Raw system calls only; callable from a signal handler.
 */
int ps_report_stderr_fd(void);

/*
 * Gather and write the report where cfg says ("off" writes nothing).  A
 * path is opened without following a symbolic link and without blocking;
 * it must be a regular file owned by us with no other hard link, or a FIFO
 * owned by us with a reader (written within a bounded wait).  A %p path is
 * created anew, or reused only when it holds an earlier report of this pid
 * (a dump, the image before exec).  SIGPIPE is held off while writing.
 * 0 or -errno (also said once on stderr, as above).
 */
int ps_report_emit(const struct ps_config *cfg);

#endif
