/* SPDX-License-Identifier: MIT */
/*
 * The live record's runtime (live.c): making the file, publishing the
 * counters and gauges into it, its fate across fork, exec, setuid and
 * chroot, and what is written into it when the process ends.  The
 * record's layout and where records live are the format layer's
 * (format/livefmt.h), shared with the tools that read it.
 */
#ifndef PS_LIVE_H
#define PS_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/config.h"
#include "format/livefmt.h"

/*
 * Set up the live view: the file itself is made later (ps_live_tick,
 * ps_live_pool_changed).  0, or -errno when POOLSHIM_LIVE_DIR is unusable.
 */
int ps_live_init(const struct ps_config *cfg);
/* The pool changed (a slab was added): make the file if due, then publish. */
void ps_live_pool_changed(void);
/* Copy the pool and io_uring state into the header (after they change). */
void ps_live_publish(void);
/*
 * In a fork child: move the counters over the parent's file into private
 * memory, and arm ps_live_file_due.
 */
void ps_live_after_fork_child(void);

/*
 * Nonzero in a process that has no file of its own yet: the one that
 * started the shim, and a fork child.  It publishes one when it is still
 * counting PS_LIVE_FILE_DELAY_NS after start or fork (ps_live_tick(),
 * called from the I/O path's slow branch), or, the process that started
 * the shim, at its first pool slab.  A server's long-lived workers show in
 * `poolshim stat`; short processes, and the many children that _exit()
 * soon after fork, make no file.
 */
extern int ps_live_file_due;
#define PS_LIVE_FILE_DELAY_NS 1000000000ull
/* Files made, ever, and the count a thread has seen: its block moves in when they differ. */
extern uint32_t ps_live_gen;
extern __thread uint32_t ps_live_gen_seen;
static inline bool ps_live_tick_wanted(void)
{
	return __atomic_load_n(&ps_live_file_due, __ATOMIC_RELAXED) ||
	       ps_live_gen_seen != __atomic_load_n(&ps_live_gen, __ATOMIC_RELAXED);
}
void ps_live_tick(void);
/* A thread ends: its counts move into the file if they are not there yet. */
void ps_live_thread_exit(void);
/* Around an exec: the file goes before it, and a new one comes after a failure. */
void ps_live_before_exec(void);
void ps_live_after_failed_exec(void);
/* At exit: remove the file. */
void ps_live_remove(void);
/*
 * Remove the records of this euid's ended processes in this pid namespace
 * (self: this process's pid) that have not changed for POOLSHIM_RECORD_TTL
 * (sweep.c), when this process makes its record.  Async-signal-safe.
 */
void ps_live_sweep(int self, uint64_t my_ns);

/*
 * The end (end.c).  Whether this process has a record of its own now;
 * make it now (a process about to end that had none yet); its path into
 * out[cap] (0, or -ENOENT without one).
 */
bool ps_live_exists(void);
void ps_live_make_now(void);
int ps_live_where(char *out, size_t cap);
/*
 * Page faults and CPU time into the header: at the end, and from the
 * counting slow path at most every PS_LIVE_USAGE_NS (ps_live_usage_tick),
 * so a record left by a killed process is at most that old.
 */
#define PS_LIVE_USAGE_NS 1000000000ull
void ps_live_usage(void);
void ps_live_usage_tick(void);
/* How the process ended (enum ps_live_end), with its status when known. */
void ps_live_end(int end, int status, bool status_known);
/* The process wrote its report itself. */
void ps_live_delivered(void);
/*
 * Render the report (format: enum ps_stats_format; how: report_out.h's
 * flags) into the record for a reader to deliver, with why the process
 * did not (NULL: the wrapper delivers).  0 or -errno.  Async-signal-safe.
 */
int ps_live_keep_report(int format, unsigned how, const char *why);

/*
 * Around a change of the effective uid to euid ((uid_t)-1: unchanged):
 * before, the file is handed to euid, so that the process can still
 * remove it from the sticky directory (or, if it may not, removed now);
 * after, changed says whether the call succeeded (if not, the file goes
 * back).  Keep errno.
 */
void ps_live_before_uid(uid_t euid);
void ps_live_after_uid(bool changed);

/*
 * Around chroot(root): before says whether the new root leaves the file
 * out of reach by its path (1) or not (-1); after, told whether the
 * chroot succeeded, stops every use of the path (the record itself stays,
 * mapped, and is rendered by `poolshim collect` after the process ends).
 * Keep errno.
 */
int ps_live_before_chroot(const char *root);
void ps_live_after_chroot(int dir, bool changed);

#endif
