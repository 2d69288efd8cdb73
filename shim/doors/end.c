// SPDX-License-Identifier: MIT
/*
 * The end of a process under the shim: what it leaves, and for whom.
 *
 * The live record (live.c) is the truth about a process while it runs;
 * this file only finishes it.  At a clean end (exit(), a return from main,
 * _exit(), _Exit()) the process brings the record's last numbers up to
 * date, says how it ended, and then, where it still can, writes its own
 * report where POOLSHIM_STATS says and removes the record.  Where it
 * cannot (fd 2 is no longer the stderr it started with, the path is not
 * writable from its chroot or by its new user), it renders the report into
 * the record and leaves it there for `poolshim collect`, saying so where a
 * line can go.  Under the `poolshim` wrapper (POOLSHIM_RUN set) the report
 * always goes into the record: the wrapper, which outlives the program,
 * prints or writes it.  A process that ends any other way (SIGKILL, the
 * OOM killer, a crash, a signal it left at its default) does nothing at
 * all: its record, with the counters as they were, is rendered by whoever
 * is left.  No signal is taken for any of this.
 *
 * Everything here runs once per process, may run in a signal handler
 * (_exit from one), allocates nothing and keeps errno.
 */
#include "doors/end.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/config.h"
#include "format/fmt.h"
#include "doors/start.h"
#include "core/live.h"
#include "doors/real.h"
#include "core/report_out.h"
#include "format/stats.h"
#include "format/sys.h"

int ps_start_pid;
static int ended;                 /* the end's work is done (or being done) */
static int exit_status;           /* what exit() was called with */
static int exit_status_known;

/*
 * Whether a process did work of its own worth a report: fio's job
 * processes and prefork servers' workers do all the I/O and end with
 * _exit() or a signal, while a child that only failed an exec, or ran a
 * few calls before _exit, would add noise.  The child's counters start at
 * zero at fork (ps_stats_after_fork_child), so this is its own work:
 * counted I/O calls and pooled allocations, or the bytes they moved.
 * `poolshim collect` applies the same rule to a record left behind.
 */
static bool child_worked(bool if_unknown)
{
	struct ps_tstats *s = ps_report_scratch_get();
	if (!s)
		return if_unknown;
	struct ps_rows rows;
	ps_report_scratch_fill(s, &rows);
	bool worked = ps_stats_worked(s, &rows, ps_cfg.pool ? 0 : ps_cfg.pool_min);
	ps_report_scratch_put(s);
	return worked;
}

/* Whether this process did nothing a report is about (ps_stats_idle); false when not known. */
static bool did_nothing(void)
{
	struct ps_tstats *s = ps_report_scratch_get();
	if (!s)
		return false;
	struct ps_rows rows;
	ps_report_scratch_fill(s, &rows);
	bool idle = ps_stats_idle(s, &rows, ps_cfg.pool_min / 4);
	ps_report_scratch_put(s);
	return idle;
}

bool ps_report_due(void)
{
	int pid = (int)PS_SYSCALL(SYS_getpid);
	return pid == ps_pid && (pid == ps_start_pid || child_worked(false));
}

/*
 * The report could not go where it should: keep it in the record, making
 * the record now if the process had none yet (a short program whose
 * report path is not writable).  A record that cannot be reached by its
 * path any more (after a chroot) keeps its counters, which the reader
 * renders.  why: what went wrong, for the reader to say.
 */
/* The end's facts, written again into a record made only now (they went nowhere before). */
static int end_how, end_status;
static bool end_status_known;

static void make_record_now(void)
{
	if (ps_live_exists())
		return;
	ps_live_make_now();
	ps_live_publish();
	ps_live_usage();
	ps_live_end(end_how, end_status, end_status_known);
}

static void keep(unsigned how, const char *why)
{
	make_record_now();
	int r = ps_live_keep_report(ps_cfg.stats_format, how, why);
	char where[PS_LIVE_DIR_MAX + 64];
	if (ps_live_where(where, sizeof(where)) == 0)
		ps_report_say("the report is kept in %s%s; `poolshim collect` writes it", where,
			      r < 0 ? " (its counters only)" : "");
}

void ps_end(int end, int status, bool status_known, unsigned how)
{
	if (__atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) != PS_STATE_ON)
		return;
	int saved_errno = errno;
	/*
	 * Before `ended` is touched: a vfork child shares it with its parent.
	 * exit() in a fork child reports as in any process; the work rule is
	 * for the ends a child reaches without it (_exit, _Exit).
	 */
	int pid = (int)PS_SYSCALL(SYS_getpid);
	bool due = (how & PS_END_BY_EXIT) ? pid == ps_pid : ps_report_due();
	how &= ~PS_END_BY_EXIT;
	/*
	 * Under POOLSHIM_PROGRAMS the named program's helper runs (`nginx -t`,
	 * `nginx -s reload`, the parent that only daemonizes) are the noise:
	 * a process started as the program (not a fork child, which has its
	 * own rule above, so nginx's master keeps its report) that did no work
	 * worth a report writes none.  Without the list every process reports,
	 * however little it did, so that a first try says something (and why
	 * the pool did nothing).
	 */
	if (due && ps_cfg.programs[0] && pid == ps_start_pid && !child_worked(true)) {
		due = false;
		if (ps_cfg.verbose)
			ps_report_say("no report: less than %u calls and %u KiB of work, and "
				      "POOLSHIM_PROGRAMS is set", (unsigned)PS_WORK_CALLS,
				      (unsigned)(PS_WORK_BYTES >> 10));
	}
	/*
	 * Whoever started it, a process that did nothing the report is about
	 * (no counted I/O call, no allocation from a quarter of
	 * POOLSHIM_POOL_MIN up: `sh -c 'exit 5'`) writes no text report: one
	 * line says why, where the program was started by the user (not under
	 * POOLSHIM_PROGRAMS, nor in a fork child, where it would be noise).  A
	 * JSON report asked for is still written: it is data a script reads,
	 * and says the same in its verdict.
	 */
	if (due && ps_cfg.stats_format == PS_FORMAT_TEXT && did_nothing()) {
		due = false;
		if (ps_cfg.verbose || (!ps_cfg.programs[0] && pid == ps_start_pid &&
				       strcmp(ps_cfg.stats, "off") != 0)) {
			char min[24];
			struct ps_buf mb;
			ps_buf_init(&mb, min, sizeof(min), -1);
			ps_buf_size(&mb, ps_cfg.pool_min / 4);
			ps_report_say("no report: no counted I/O call and no allocation of %s or more",
				      ps_buf_str(&mb));
		}
	}
	if (!due) {
		/* A vfork child (the record is its parent's) or a fork child with no work of its own. */
		if (pid == ps_pid && !__atomic_exchange_n(&ended, 1, __ATOMIC_ACQ_REL))
			ps_live_remove();
		errno = saved_errno;
		return;
	}
	if (__atomic_exchange_n(&ended, 1, __ATOMIC_ACQ_REL)) {
		errno = saved_errno;
		return;
	}
	/* ps_report_due() found this process's pid to be ps_pid. */
	ps_report_pid = ps_pid;
	if (!status_known && __atomic_load_n(&exit_status_known, __ATOMIC_ACQUIRE)) {
		status = exit_status;
		status_known = true;
	}
	end_how = end;
	end_status = status;
	end_status_known = status_known;
	ps_live_publish();
	ps_live_usage();
	ps_live_end(end, status, status_known);
	if (strcmp(ps_cfg.stats, "off") == 0) {
		ps_live_remove();
		errno = saved_errno;
		return;
	}
	/* Under the wrapper: it delivers, from the record; the process only renders. */
	if (ps_cfg.run[0]) {
		make_record_now();
		if (ps_live_keep_report(ps_cfg.stats_format, how, NULL) == 0) {
			errno = saved_errno;
			return;
		}
	}
	int r = ps_report_emit(&ps_cfg, how);
	if (r == 0) {
		ps_live_delivered();
		ps_live_remove();
	} else if (r == -EBADF && strcmp(ps_cfg.stats, "stderr") == 0) {
		keep(how, "stderr was no longer the one the program started with");
	} else {
		keep(how, ps_errno_name(-r) ? ps_errno_name(-r) : "the report could not be written");
	}
	errno = saved_errno;
}

/* Exported for the status: the destructor that follows does not learn it. */
PS_EXPORT void exit(int status)
{
	exit_status = status;
	__atomic_store_n(&exit_status_known, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) == PS_STATE_ON)
		ps_report_exit_begins();
	REAL(exit)(status);
	for (;;)
		PS_SYSCALL(SYS_exit_group, status);
}
