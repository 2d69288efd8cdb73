/* SPDX-License-Identifier: MIT */
/*
 * The report at run time: gathered from the live process (gather.c) and
 * written where POOLSHIM_STATS says (report_out.c), at exit, before exec,
 * on the dump signal and for poolshim_report_fd().  Part of the runtime;
 * the renderer it feeds is report.h's, in the format layer.
 */
#ifndef PS_REPORT_OUT_H
#define PS_REPORT_OUT_H

#include <stdbool.h>

#include "format/report.h"

/* How a report is written (ps_report_write, ps_report_emit). */
enum {
	/* fd is a non-blocking FIFO: render in memory, write within a bounded wait */
	PS_REPORT_BOUNDED = 1 << 0,
	/* from a signal handler: name no frames (that allocates, takes locks) */
	PS_REPORT_IN_SIGNAL = 1 << 1,
};

/*
 * Fill d from the live process; scratch receives the merged counters.
 * symbolize: the call-site section may name frames.
 */
void ps_report_gather(struct ps_report_data *d, struct ps_tstats *scratch, bool symbolize);

/*
 * Room for one report's merged counters: a block reserved in the library's
 * .bss, so a program that has used up its address space (RLIMIT_AS) still
 * gets its report, or, while another report holds that block (a dump
 * signal during the exit report), a fresh mapping.  NULL if neither.
 * Leaves errno alone.  Give it back with ps_report_scratch_put().
 */
struct ps_tstats *ps_report_scratch_get(void);
void ps_report_scratch_put(struct ps_tstats *scratch);
/* Fill it with the process's merged counters; rows (or NULL) learns which rows have calls. */
void ps_report_scratch_fill(struct ps_tstats *scratch, struct ps_rows *rows);

/*
 * Remember when the program started and, if start-up has not yet, its
 * name (ps_program, fmt.h), before the program can rewrite argv.
 */
void ps_report_keep_name(void);
/* The pid reports name, once the end has checked it (end.c); 0: ask the kernel. */
extern int ps_report_pid;
/* When the program started (seconds since the epoch), or -1. */
int64_t ps_report_start_time(void);
/* The pid and the kept program name a report names (keeping it now if not yet). */
void ps_report_ident(int *pid, const char **program);

/*
 * Gather a report and write it to fd in format: through a stack buffer
 * flushed as it fills, or, with PS_REPORT_BOUNDED in how, rendered in
 * memory first and written within a bounded wait.  0 or -errno (-ENOMEM
 * without a scratch block); errno is left alone.
 */
int ps_report_write(int fd, enum ps_stats_format format, unsigned how);

/*
 * Remember what fd 2 is now (device, inode, type, access mode), and when
 * the report goes to stderr keep a private duplicate of it (close-on-exec,
 * at 600 or above) for reports written after the program closed its own
 * fd 2, as programs using gnulib's close_stdout do at exit.  The report and
 * the shim's messages about it go to fd 2 only while it still is that open
 * file, else nowhere (no copy of it is kept).  Call once
 * at start, whatever POOLSHIM_STATS is (without the call, fd 2 is trusted
 * whenever it is open).
 */
void ps_report_keep_stderr(void);

/*
 * Exit has begun (the main thread's exit, before the atexit handlers): if
 * a report is wanted and fd 2 is still the stderr of the start, keep a
 * copy of it for the report, or for the line saying where the report went
 * (a path that cannot be written), in case a handler closes fd 2.  The
 * only descriptor the shim ever keeps, for the process's last moments.
 */
void ps_report_exit_begins(void);

/*
 * The descriptor a message for the user may be written to: fd 2 while it
 * still is the stderr seen by ps_report_keep_stderr(), else the copy taken
 * at exit while it still is, else -1.  Raw system calls only; callable from a signal handler.
 */
int ps_report_stderr_fd(void);

/*
 * Gather and write the report where cfg says ("off" writes nothing).  A
 * path is opened without following a symbolic link and without blocking;
 * it must be a regular file owned by us with no other hard link, or a FIFO
 * owned by us with a reader (written within a bounded wait).  A %p path is
 * created anew, or reused only when it holds an earlier report of this pid
 * (a dump, the image before exec).  SIGPIPE is held off while writing.
 * how: PS_REPORT_IN_SIGNAL from a signal handler, else 0.
 * 0 or -errno (also said once on stderr, as above).
 */
int ps_report_emit(const struct ps_config *cfg, unsigned how);

/*
 * One line for the user about the report: on fd 2 while it is still the
 * stderr of the start, else to the system log; a few per process at most.
 * Async-signal-safe.
 */
void ps_report_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One line to the system log only (about other processes: not this one's stderr).  Async-signal-safe. */
void ps_report_syslog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
