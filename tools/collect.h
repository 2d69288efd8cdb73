/* SPDX-License-Identifier: MIT */
/*
 * Collecting the records of processes that ended (`poolshim collect`, and
 * the `poolshim` wrapper when its program ends): each record in the live
 * directory whose process is gone is rendered into its report, delivered
 * where the process's POOLSHIM_STATS said (or into a directory given
 * here), and removed.  Records are untrusted (record.h); a report for a
 * path is written as the record's owner, never through a symbolic link.
 */
#ifndef PS_COLLECT_H
#define PS_COLLECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/resource.h>

struct ps_collect_opts {
	const char *live_dir;        /* where records are, or NULL: as set (POOLSHIM_LIVE_DIR, /dev/shm) */
	const char *run;             /* only records whose run (POOLSHIM_RUN) is this, or NULL */
	/*
	 * With run: whose records may print a "stderr" report here, besides
	 * root's and the caller's own (a unit's User=, for its ExecStopPost=+).
	 */
	bool run_user_set;
	uid_t run_user;
	/*
	 * With run: the run id is the run's secret (the wrapper's, with 32
	 * random bits, given to its processes in their environment only), so
	 * a record that names it is the run's whoever owns it: workers that
	 * switched to another user print their "stderr" reports too.
	 */
	bool run_secret;
	const int *pids;             /* only these pids (of our pid namespace), or NULL */
	int npids;
	const char *into;            /* every report into this directory as PROGRAM-PID.json|.txt, or NULL */
	bool keep;                   /* leave the records in place */
	FILE *out;                   /* reports whose destination is "stderr" (NULL: stdout) */
	const char *who;             /* messages' prefix and the reports' rendered_by (NULL: "poolshim collect") */
	/* The one process whose end the caller saw (the wrapper's child), or 0: */
	pid_t known_pid;
	int known_status;            /* its wait status */
	const struct rusage *known_rusage;   /* its usage from wait4, or NULL */
};

/*
 * Collect what o selects.  Messages (one line each) go to stderr.  0 when
 * every record looked at was collected, 1 when there was nothing to
 * collect, 3 when some were refused or could not be delivered (kept), 2
 * when the live directory cannot be used.
 */
int ps_collect(const struct ps_collect_opts *o);

/*
 * Whether the process of another pid namespace's record (its pid there,
 * and its start time) has ended: no process in /proc has that pid in its
 * innermost namespace (NSpid) and that start time.  Judged only from the
 * initial pid namespace (my_ns), whose /proc shows every process of every
 * namespace; false whenever it cannot be told.
 */
bool ps_collect_foreign_ended(int pid, uint64_t starttime, uint64_t my_ns);

/*
 * openat(dir, path, flags, mode) without following a symbolic link
 * anywhere along path: openat2's RESOLVE_NO_SYMLINKS, or, on a kernel
 * without it (before 5.6; walk forces this way, for tests), one component
 * at a time, each directory opened O_PATH | O_NOFOLLOW.  fd, or -errno
 * (ELOOP or ENOTDIR for a link on the way).
 */
int ps_collect_open_no_links(int dir, const char *path, int flags, mode_t mode, bool walk);

#endif
