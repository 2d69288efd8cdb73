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
 * line can go.  Under the `poolshim` wrapper (POOLSHIM_RUN set) a report
 * that is not the program's, nor for a path or the wrapper's own stderr,
 * goes into the record, and the wrapper's helper, which outlives the
 * process, prints or writes it (ps_end says the rules); in a systemd
 * unit's run what cannot be written waits in the record for the unit's
 * ExecStopPost=.  A process that ends any other way (SIGKILL, the
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
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>
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

/*
 * The pids in the wrapper's run id, "PID-HELPER-" and 8 hex digits
 * (poolshim-run makes it: the program it exec'd in place, and its
 * helper); false when the run is another's (a systemd unit's name).
 */
static bool run_pids(int *program, int *helper)
{
	const char *p = ps_cfg.run;
	int v[2] = { 0, 0 };
	for (int k = 0; k < 2; k++) {
		if (*p < '1' || *p > '9')
			return false;
		for (; *p >= '0' && *p <= '9' && v[k] < 100000000; p++)
			v[k] = v[k] * 10 + (*p - '0');
		if (*p++ != '-')
			return false;
	}
	int n = 0;
	for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
		n++;
	*program = v[0];
	*helper = v[1];
	return n == 8 && *p == '\0';
}

/* "/proc/PID" and then tail into path (48 bytes). */
static void proc_path(char *path, int pid, const char *tail)
{
	char digits[12];
	int n = 0, len = 6;
	memcpy(path, "/proc/", 6);
	do
		digits[n++] = (char)('0' + pid % 10);
	while ((pid /= 10) > 0);
	while (n > 0)
		path[len++] = digits[--n];
	size_t t = strlen(tail);
	memcpy(path + len, tail, t + 1);
}

/* /proc/PID/stat into buf[cap], terminated: its length, or <= 0.  Raw calls only. */
static long read_proc_stat(int pid, char *buf, size_t cap)
{
	char path[48];
	proc_path(path, pid, "/stat");
	long fd = ps_sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	long n = PS_SYSCALL(SYS_read, fd, buf, cap - 1);
	ps_sys_close((int)fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/*
 * Whether the wrapper's helper (pid) still runs: its /proc/PID/stat names
 * poolshim-run, and it is no zombie (its parent, init or a subreaper,
 * may take a while to reap it).  No /proc (a chroot): taken as gone.
 */
static bool helper_runs(int pid)
{
	char buf[256];
	if (read_proc_stat(pid, buf, sizeof(buf)) <= 0)
		return false;
	static const char comm[] = " (poolshim-run) ";
	char *p = strstr(buf, comm);
	if (!p)
		return false;
	char state = p[sizeof(comm) - 1];
	return state != 'Z' && state != 'X' && state != 'x';
}

/*
 * State and start time (clock ticks after boot) of pid from /proc; false
 * when it is gone.  Raw calls only.
 */
static bool proc_state(int pid, char *state, uint64_t *start)
{
	char buf[512];
	if (read_proc_stat(pid, buf, sizeof(buf)) <= 0)
		return false;
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return false;
	*state = p[2];
	p += 3;
	/* Field 22 (starttime) is the 19th after the state. */
	for (int field = 4; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	uint64_t v = 0;
	if (p)
		for (p++; *p >= '0' && *p <= '9'; p++)
			v = v * 10 + (uint64_t)(*p - '0');
	*start = v;
	return true;
}

/*
 * How many records of the run, in this pid namespace, belong to
 * processes that have ended (gone, a zombie, or their pid now another
 * process's): what the wrapper's helper still has to deliver.  Only the
 * start of each header is read.  Raw calls only.
 */
static int run_records_ended(int self)
{
	static struct ps_live_header h;
	const size_t want = offsetof(struct ps_live_header, run) + sizeof(h.run);
	char dents[4096], path[PS_LIVE_DIR_MAX + 64];
	uint64_t ns = ps_live_pidns();
	int pending = 0;
	long dir = ps_sys_openat(AT_FDCWD, ps_live_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);

	if (dir < 0)
		return 0;
	for (;;) {
		long n = PS_SYSCALL(SYS_getdents64, dir, dents, sizeof(dents));
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			const char *name = dents + off + 19;   /* struct linux_dirent64: d_name at 19 */
			unsigned short reclen;
			memcpy(&reclen, dents + off + 16, sizeof(reclen));
			off += reclen;
			int pid;
			uint64_t rns, tag;
			/* A record's name (plain or tagged: livefmt.h), of this namespace. */
			if (ps_live_parse_name(name, &pid, &rns, &tag) != 1 || pid == self || rns != ns)
				continue;
			ps_live_path_tagged(path, sizeof(path), pid, ns, tag);
			long fd = ps_sys_openat(AT_FDCWD, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
			if (fd < 0)
				continue;
			long got = PS_SYSCALL(SYS_pread64, fd, &h, want, 0);
			ps_sys_close((int)fd);
			if (got != (long)want || memcmp(h.magic, PS_LIVE_MAGIC, sizeof(h.magic)) != 0 ||
			    strncmp(h.run, ps_cfg.run, sizeof(h.run)) != 0)
				continue;
			char state;
			uint64_t start;
			if (!proc_state(pid, &state, &start) || state == 'Z' ||
			    (h.starttime && start != h.starttime))
				pending++;
		}
	}
	ps_sys_close((int)dir);
	return pending;
}

/*
 * The wrapper's program, ending: the reports its helper delivers (workers
 * killed, or whose stderr was elsewhere) are written before the program
 * ends, and so before its caller's wait returns, as they were when the
 * wrapper was its parent.  The helper is asked to look now (SIGUSR1, which
 * it reads from a signalfd) and the program waits while the run's ended
 * records go: at most 5 s, and 1.5 s without one going (a record the
 * helper cannot deliver is left for `poolshim collect`).  A helper on a
 * busy machine can go half a second without the CPU; 300 ms lost a
 * report now and then in a loaded `make check`.
 */
static void wait_for_helper(int helper, int self)
{
	struct timespec t0, now, step = { 0, 2000000 };
	int last = run_records_ended(self);
	if (last == 0)
		return;
	PS_SYSCALL(SYS_kill, helper, SIGUSR1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct timespec moved = t0;
	for (;;) {
		PS_SYSCALL(SYS_nanosleep, &step, NULL);
		int left = run_records_ended(self);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (left == 0)
			return;
		if (left < last) {
			last = left;
			moved = now;
		}
		long since_moved = (now.tv_sec - moved.tv_sec) * 1000 + (now.tv_nsec - moved.tv_nsec) / 1000000;
		long since_start = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (since_moved >= 1500 || since_start >= 5000)
			return;
	}
}

/* Whether fd 2 is the file the process pid has as its fd 2 (raw calls only). */
static bool same_stderr(int pid)
{
	char path[48];
	proc_path(path, pid, "/fd/2");
	struct stat mine, theirs;
	return PS_SYSCALL(SYS_fstat, 2, &mine) == 0 &&
	       PS_SYSCALL(SYS_newfstatat, AT_FDCWD, path, &theirs, 0) == 0 &&
	       mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino;
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
	 * POOLSHIM_POOL_MIN up: `sh -c 'exit 5'`, every `true` or `cp` a
	 * wrapped script runs) writes no text report and says nothing: its
	 * stderr is what it would be without the shim.  POOLSHIM_VERBOSE says
	 * why in one line.  A JSON report asked for is still written: it is
	 * data a script reads, and says the same in its verdict.  With
	 * POOLSHIM_COUNT_SMALL the small allocations were asked for: they are
	 * work the report is about.
	 */
	if (due && ps_cfg.stats_format == PS_FORMAT_TEXT && !ps_cfg.count_small && did_nothing()) {
		due = false;
		if (ps_cfg.verbose) {
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
	/*
	 * In a systemd unit's run (POOLSHIM_RUN the unit's name) a process
	 * writes its own report as without the run, where it can, and its
	 * record goes with it; what it cannot write it keeps in the record,
	 * saying so (in the journal, or the system log), for the unit's
	 * ExecStopPost= (`poolshim collect --run`).
	 * Records then last, until the unit stops, only for processes
	 * killed or unable to write (a stderr changed since start).
	 *
	 * Under the wrapper its helper delivers, from the record, and the
	 * process only renders.  But where the report goes to a path, or to
	 * a stderr that is the helper's (the wrapper's own), the process
	 * writes it itself, as without the wrapper, so that it is there when the
	 * process ends (the program's before its caller's wait returns) and
	 * the record goes with it; the program itself writes its own in any
	 * case; and a process that outlives the helper (a daemon), or one in
	 * a pid namespace of its own where the helper's pid names nothing,
	 * writes its own as without the wrapper.  What cannot be written so
	 * is kept in the record for the helper while it lives.
	 */
	int w_program = 0, w_helper = 0;
	bool wrapped = ps_cfg.run[0] && run_pids(&w_program, &w_helper);
	bool helper_lives = wrapped && helper_runs(w_helper);
	bool to_stderr = strcmp(ps_cfg.stats, "stderr") == 0;
	if (wrapped && w_program == pid && helper_lives && end == PS_END_EXIT)
		wait_for_helper(w_helper, pid);
	bool unit = ps_cfg.run[0] && !wrapped;
	bool direct = !ps_cfg.run[0] || unit ||
		      w_program == pid || !helper_lives || !to_stderr || same_stderr(w_helper);
	if (!direct) {
		make_record_now();
		if (ps_live_keep_report(ps_cfg.stats_format, how, NULL) == 0) {
			/* The helper looks again 20 ms from now, when this process has ended. */
			if (helper_lives)
				PS_SYSCALL(SYS_kill, w_helper, SIGUSR1);
			errno = saved_errno;
			return;
		}
	}
	int r = ps_report_emit(&ps_cfg, how);
	if (r < 0 && helper_lives) {
		make_record_now();
		if (ps_live_keep_report(ps_cfg.stats_format, how, NULL) == 0) {
			errno = saved_errno;
			return;
		}
	}
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
