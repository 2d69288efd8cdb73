// SPDX-License-Identifier: MIT
/*
 * poolshim-run: the `poolshim` command's last step.  The script has
 * exported the program's POOLSHIM_* settings and worked out LD_PRELOAD;
 * this marks the run (POOLSHIM_RUN=<pid>-<helper>-<random>, in the program's
 * environment and so in everything it starts), starts a detached helper,
 * and then execs the program in place:
 *
 *   poolshim-run --preload LIST [--] program [args ...]
 *
 * The program is the process its caller started: the same pid, parent,
 * process group, session, descriptors, signal mask and dispositions,
 * PR_SET_PDEATHSIG, limits; its caller's wait sees its own status (exit
 * code, signal, core flag), its stops and continues, and whatever signal
 * anyone sends it arrives once, as without the wrapper.  Nothing sits
 * between the program and its caller (issue 45: a parent in between
 * could not tell a signal sent to the process group from one sent to it
 * alone, hung when the caller ignored SIGCHLD, and could not be PID 1).
 *
 * The helper (strace -D's design) is a grandchild, in a session and
 * process group of its own, so that job control, a terminal's signals and
 * a kill of the program's process group never reach it.  It holds a
 * pidfd of the program (pidfd_open works on a process that is not one's
 * child), the wrapper's stderr and nothing else (stdin and stdout are
 * /dev/null, its directory is /).  While the program runs it delivers,
 * every PS_RUN_SWEEP_MS, the reports of the run's processes that have
 * ended (a worker, a compiler a shell ran, one SIGKILL ended) and removes
 * their records, so records do not pile up during a long run.  When the
 * program ends it reads the program's wait status from /proc while the
 * program is a zombie (its caller may reap it first: then the report says
 * it was not seen), delivers what is left of the run, and exits.
 *
 * When each report arrives (poolshim(1), "The wrapper", says it for
 * users): a process writes its own report at a clean end, as without the
 * wrapper, where it can and where that is the wrapper's stderr or a path
 * (shim/doors/end.c); the helper writes the others within PS_RUN_BUSY_MS
 * of their end (PS_RUN_SWEEP_MS for one killed), and the program, ending
 * cleanly, waits for it to have written those of every process ended by
 * then, so that they are there before its caller's wait returns.  The
 * program's own report, when it is killed or cannot write it, follows
 * within milliseconds after that wait.  A caller reading the wrapper's
 * stderr through a pipe ($(poolshim prog 2>&1), a pipeline) gets every
 * report before end-of-file: the helper holds the pipe until it is done.
 *
 * A program that is PID 1 of a pid namespace has no helper (the kernel
 * kills a namespace's processes when its first one ends): the run is not
 * marked, each process delivers its own report as without the wrapper,
 * and the records of killed ones are left for `poolshim collect`.
 *
 * It runs no code of the shim (it is never preloaded) and links only the
 * format layer and the collect code.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "format/livefmt.h"
#include "record.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/*
 * How often the helper delivers the reports of the run's ended processes:
 * every PS_RUN_SWEEP_MS, and PS_RUN_BUSY_MS after a sweep that found some
 * (a shell loop, make: more are likely to follow) or after a process of
 * the run said it kept one (SIGUSR1: it is ending).
 */
#define PS_RUN_SWEEP_MS 100
#define PS_RUN_BUSY_MS 20

static const char *me = "poolshim";
/* The helper's signalfd for SIGUSR1, or -1. */
static int asked = -1;

static void usage(FILE *f)
{
	fprintf(f, "usage: poolshim-run --preload LIST [--] program [args ...]\n"
		   "Runs program in its own place with LD_PRELOAD=LIST and a detached helper\n"
		   "that delivers the reports of the run's processes as they end.  `poolshim`\n"
		   "runs it; it is not meant to be run by hand.\n");
}

/* 32 random bits (from the clock and pid when getrandom cannot say). */
static unsigned int random_bits(void)
{
	unsigned int r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (unsigned int)ts.tv_nsec ^ (unsigned int)getpid() << 16;
	}
	return r;
}

/*
 * The run id, "PID-HELPER-RANDOM" ([A-Za-z0-9._-], well under 63
 * characters): the program's pid and the helper's, which the shim reads
 * (shim/doors/end.c): the program writes its own report, and so does a
 * process whose stderr is the helper's, or that outlives the helper.
 */
static void make_run_id(char *out, size_t cap, int pid, int helper_pid, unsigned int r)
{
	snprintf(out, cap, "%d-%d-%08x", pid, helper_pid, r);
}

/*
 * The fields of /proc/PID/stat after the name: into f[0..n) from the
 * state (field 3) on.  How many were read (0: none, the process gone).
 */
static int stat_fields_at(int fd, unsigned long long *f, int n, char *state)
{
	char buf[2048];
	ssize_t len = pread(fd, buf, sizeof(buf) - 1, 0);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	/* The name may hold anything, ")" too: the fields follow the last ")". */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	*state = p[2];
	p += 3;
	int k = 0;
	while (k < n && *p == ' ') {
		char *end;
		errno = 0;
		/* Some are -1, some 2^64 - 1 (rsslim): strtoull takes both, wrapped. */
		unsigned long long v = strtoull(p + 1, &end, 10);
		if (end == p + 1 || errno)
			break;
		f[k++] = v;
		p = end;
	}
	return k;
}

static int stat_fields(int pid, unsigned long long *f, int n, char *state)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int k = stat_fields_at(fd, f, n, state);
	close(fd);
	return k;
}

/* Fields of /proc/PID/stat, numbered as proc(5) numbers them, in f[field - 4]. */
#define F_MINFLT 10
#define F_MAJFLT 12
#define F_UTIME 14
#define F_STIME 15
#define F_START 22
#define F_EXIT_CODE 52

/* When pid started (clock ticks after boot), or 0 when it is gone. */
static unsigned long long start_of(int pid)
{
	unsigned long long f[F_START - 3];
	char state;
	return stat_fields(pid, f, F_START - 3, &state) == F_START - 3 ? f[F_START - 4] : 0;
}

/*
 * The program's wait status and usage, read while it is a zombie: only a
 * pidfd that still signals (the process not yet reaped, so the pid not
 * reused) vouches that /proc described it.  false when its caller reaped
 * it first, or this kernel does not say (exit_code: Linux 3.5).
 */
static bool zombie_status(int statfd, int pidfd, int *status, struct rusage *ru)
{
	unsigned long long f[F_EXIT_CODE - 3];
	char state;
	if (statfd < 0 || stat_fields_at(statfd, f, F_EXIT_CODE - 3, &state) != F_EXIT_CODE - 3 ||
	    state != 'Z')
		return false;
	/*
	 * /proc shows the status only to whoever may trace the process, and
	 * 0 to others: a program that exec'd a setuid file is not ours.
	 */
	struct stat owner;
	if (fstat(statfd, &owner) < 0 || (geteuid() != 0 && owner.st_uid != geteuid()))
		return false;
	if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) != 0)
		return false;
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	*status = (int)f[F_EXIT_CODE - 4];
	memset(ru, 0, sizeof(*ru));
	ru->ru_minflt = (long)f[F_MINFLT - 4];
	ru->ru_majflt = (long)f[F_MAJFLT - 4];
	unsigned long long ut = f[F_UTIME - 4] * 1000000ULL / (unsigned long long)hz;
	unsigned long long st = f[F_STIME - 4] * 1000000ULL / (unsigned long long)hz;
	ru->ru_utime.tv_sec = (time_t)(ut / 1000000);
	ru->ru_utime.tv_usec = (suseconds_t)(ut % 1000000);
	ru->ru_stime.tv_sec = (time_t)(st / 1000000);
	ru->ru_stime.tv_usec = (suseconds_t)(st % 1000000);
	return true;
}

/*
 * The pids of this pid namespace's records of the run whose processes
 * have ended, into *out (malloc'd); how many.  *foreign is set when the
 * run has records of another pid namespace that has ended.  Only the start of each
 * header is read (its run id and start time): a sweep every
 * PS_RUN_SWEEP_MS costs a directory read and a page per record, and the
 * collect code reads whole records only of the run's ended processes.
 */
/*
 * The pids whose records a sweep could not deliver (refused, damaged, a
 * report that could not be written: said in one line): tried again only
 * by the last sweep, not every 20 ms.
 */
static int tried[256];
static int ntried;

static bool was_tried(int pid)
{
	for (int i = 0; i < ntried; i++)
		if (tried[i] == pid)
			return true;
	return false;
}

static int ended_of_run(const char *run, int **out, bool *foreign, bool last)
{
	static struct ps_live_header h;
	const size_t want = offsetof(struct ps_live_header, run) + sizeof(h.run);
	struct ps_record_id *ids = NULL;
	uint64_t my_ns = ps_live_pidns();
	int n = ps_record_scan(&ids), k = 0;

	*out = NULL;
	if (n <= 0 || !(*out = calloc((size_t)n, sizeof(int)))) {
		free(ids);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		char path[PS_LIVE_DIR_MAX + 64];
		ps_live_path_tagged(path, sizeof(path), ids[i].pid, ids[i].ns, ids[i].tag);
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(&h, 0, sizeof(h));
		ssize_t got = pread(fd, &h, want, 0);
		close(fd);
		if (got != (ssize_t)want || memcmp(h.magic, PS_LIVE_MAGIC, sizeof(h.magic)) != 0 ||
		    strncmp(h.run, run, sizeof(h.run)) != 0)
			continue;
		/* Another pid namespace's (the program ran unshare -p), seen ended from here. */
		if (ids[i].ns != my_ns) {
			if (ps_collect_foreign_ended(h.pid, h.starttime, my_ns))
				*foreign = true;
			continue;
		}
		if (!last && was_tried(ids[i].pid))
			continue;
		/* As ps_record_judge has it: gone, another process now, or a zombie. */
		unsigned long long f[F_START - 3];
		char state = '?';
		if (stat_fields(ids[i].pid, f, F_START - 3, &state) != F_START - 3 ||
		    (h.starttime && f[F_START - 4] != h.starttime) || state == 'Z')
			(*out)[k++] = ids[i].pid;
	}
	free(ids);
	return k;
}

/*
 * Deliver the run's ended processes' reports; the program's with its end
 * when known.  How many records were found.
 */
static int sweep(const char *run, int pid, bool last, bool known, int status, const struct rusage *ru)
{
	struct ps_collect_opts o;
	memset(&o, 0, sizeof(o));
	o.live_dir = getenv("POOLSHIM_LIVE_DIR");
	if (o.live_dir && !*o.live_dir)
		o.live_dir = NULL;
	int *pids;
	bool foreign = false;
	int found = ended_of_run(run, &pids, &foreign, last);
	/* Records of a namespace that has ended are collected by run, not by pid. */
	o.npids = foreign ? 0 : found;
	o.pids = foreign ? NULL : pids;
	o.run = run;
	o.run_secret = true;         /* make_run_id()'s random part */
	o.out = stderr;
	o.who = me;
	o.known_pid = known ? pid : 0;
	o.known_status = status;
	o.known_rusage = known ? ru : NULL;
	if (found > 0 || foreign)
		(void)ps_collect(&o);
	uint64_t my_ns = ps_live_pidns();
	for (int i = 0; i < found && !last; i++) {
		char path[PS_LIVE_DIR_MAX + 64];
		struct stat st;
		ps_live_path(path, sizeof(path), pids[i], my_ns);
		if (lstat(path, &st) == 0 && ntried < (int)(sizeof(tried) / sizeof(tried[0])))
			tried[ntried++] = pids[i];
	}
	free(pids);
	fflush(stderr);
	return found + foreign;
}

/*
 * The helper's life: wait for the program (pid) to end, sweeping the
 * run's ended processes meanwhile, then deliver the rest.  pidfd < 0: a
 * kernel without pidfd_open (before 5.3): the program's start time, read
 * each sweep, tells it has gone.
 */
static void helper(int pid, int pidfd, unsigned long long started, const char *run)
{
	const char *dir = getenv("POOLSHIM_LIVE_DIR");
	if (dir && *dir && ps_live_set_dir(dir) < 0)
		return;
	/*
	 * Each sweep's reports leave in one write() (flushed after each
	 * sweep): the run's processes write theirs on the same stderr
	 * meanwhile, and neither cuts the other's.
	 */
	static char out[1 << 20];
	setvbuf(stderr, out, _IOFBF, sizeof(out));
	/* Opened now: the race with the caller's wait is read alone, not path lookups. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int statfd = open(path, O_RDONLY | O_CLOEXEC);
	int wait_ms = PS_RUN_SWEEP_MS;
	for (;;) {
		bool ended, poked = false;
		if (pidfd >= 0) {
			struct pollfd p[2] = { { .fd = pidfd, .events = POLLIN },
					       { .fd = asked, .events = POLLIN } };
			int r = poll(p, asked >= 0 ? 2 : 1, wait_ms);
			ended = r > 0 && (p[0].revents & POLLIN);
			poked = r > 0 && (p[1].revents & POLLIN);
			if (r < 0 && errno != EINTR)
				ended = true;
			struct signalfd_siginfo si;
			while (asked >= 0 && read(asked, &si, sizeof(si)) == (ssize_t)sizeof(si))
				;
		} else {
			struct timespec ts = { 0, wait_ms * 1000000L };
			nanosleep(&ts, NULL);
			char state = '?';
			unsigned long long f[F_START - 3];
			ended = stat_fields(pid, f, F_START - 3, &state) != F_START - 3 ||
				f[F_START - 4] != started || state == 'Z';
		}
		if (!ended) {
			/* Found some, or a process of the run is ending: more soon. */
			wait_ms = sweep(run, pid, false, false, 0, NULL) > 0 || poked ? PS_RUN_BUSY_MS :
											 PS_RUN_SWEEP_MS;
			continue;
		}
		int status = 0;
		struct rusage ru;
		bool known = zombie_status(statfd, pidfd, &status, &ru);
		(void)sweep(run, pid, true, known, status, &ru);
		return;
	}
}

/*
 * The helper's command line: "poolshim-run helper PID" in place of the
 * program's, so that `pgrep -f`, `pkill -f` and ps aimed at the program
 * find the program alone.  The kernel shows /proc/PID/cmdline from the
 * argument strings' memory, which is contiguous from argv[0] on.
 */
static char **arg_v;
static int arg_c;

static void rename_args(int pid)
{
	if (arg_c < 1)
		return;
	char *start = arg_v[0], *end = arg_v[arg_c - 1] + strlen(arg_v[arg_c - 1]);
	size_t room = (size_t)(end - start);
	char name[64];
	int n = snprintf(name, sizeof(name), "poolshim-run%chelper%c%d", 0, 0, pid);
	memset(start, 0, room);
	if (n > 0 && (size_t)n <= room)
		memcpy(start, name, (size_t)n);
}

/*
 * Start the helper for the program this process is about to become:
 * fork, the child starts a session of its own and forks the helper, and
 * exits (so the helper is nobody's child here: the caller never waits for
 * it, and it never waits for the caller).  Returns once the helper holds
 * its pidfd; false (said in one line) when it could not be started.
 */
static bool start_helper(char *run, size_t cap)
{
	unsigned int r = random_bits();
	int self = (int)getpid();
	unsigned long long started = start_of(self);
	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0) {
		fprintf(stderr, "%s: no helper (pipe: %s): reports of processes that do not write "
			"their own stay in their records for `poolshim collect`\n", me, strerror(errno));
		return false;
	}
	/*
	 * An ignored SIGCHLD would have the kernel reap the middle process
	 * itself; waitpid then waits for it all the same and says ECHILD.
	 */
	fflush(stderr);
	pid_t mid = fork();
	if (mid == 0) {
		close(ready[0]);
		if (setsid() < 0)
			_exit(1);
		pid_t h = fork();
		if (h != 0)
			_exit(h < 0);
		/* No pidfd (before Linux 5.3, or a seccomp filter): the start time, polled. */
		int pidfd = (int)syscall(SYS_pidfd_open, self, 0);
		/* Nothing of the caller's but stderr: a pipe's reader sees end-of-file when the helper ends. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0)
			_exit(1);
		int keep = pidfd > ready[1] ? pidfd : ready[1];
		for (int fd = 3; fd <= keep; fd++)
			if (fd != pidfd && fd != ready[1])
				close(fd);
		if (syscall(SYS_close_range, keep + 1, ~0U, 0) < 0) {
			long max = sysconf(_SC_OPEN_MAX);
			for (long fd = keep + 1; fd < max && fd < 65536; fd++)
				close((int)fd);
		}
		if (chdir("/") < 0)
			_exit(1);
		/*
		 * Default dispositions and nothing blocked, but the signals
		 * that end a whole unit or session (systemd's KillMode=
		 * control-group sends SIGTERM to every process of the cgroup,
		 * the helper too) are ignored: the helper ends by itself once
		 * the program has, after delivering its report.  A stderr whose
		 * reader went (SIGPIPE): the report fails, the record stays
		 * for `poolshim collect`.
		 */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			if (s != SIGKILL && s != SIGSTOP)
				signal(s, SIG_DFL);
		static const int ignored[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE };
		for (size_t k = 0; k < sizeof(ignored) / sizeof(ignored[0]); k++)
			signal(ignored[k], SIG_IGN);
		/* SIGUSR1: the program, ending, asks for a look now (shim/doors/end.c). */
		sigset_t usr1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		sigprocmask(SIG_BLOCK, &usr1, NULL);
		asked = signalfd(-1, &usr1, SFD_CLOEXEC | SFD_NONBLOCK);
		int me_pid = (int)getpid();
		make_run_id(run, cap, self, me_pid, r);
		if (write(ready[1], &me_pid, sizeof(me_pid)) != (ssize_t)sizeof(me_pid))
			_exit(1);
		close(ready[1]);
		rename_args(self);
		helper(self, pidfd, started, run);
		_exit(0);
	}
	close(ready[1]);
	if (mid < 0) {
		fprintf(stderr, "%s: no helper (fork: %s): reports of processes that do not write "
			"their own stay in their records for `poolshim collect`\n", me, strerror(errno));
		close(ready[0]);
		return false;
	}
	while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
		;
	int helper_pid = 0;
	ssize_t n;
	while ((n = read(ready[0], &helper_pid, sizeof(helper_pid))) < 0 && errno == EINTR)
		;
	close(ready[0]);
	if (n != (ssize_t)sizeof(helper_pid) || helper_pid <= 0) {
		fprintf(stderr, "%s: no helper (it could not start): reports of processes that do not "
			"write their own stay in their records for `poolshim collect`\n", me);
		return false;
	}
	make_run_id(run, cap, self, helper_pid, r);
	return true;
}

int main(int argc, char **argv)
{
	const char *preload = NULL;
	int i = 1;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--preload") && i + 1 < argc) {
			preload = argv[++i];
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "%s: unknown option '%s'\n", me, argv[i]);
			usage(stderr);
			return 2;
		} else {
			break;
		}
	}
	if (i >= argc || !preload) {
		usage(stderr);
		return 2;
	}
	char **prog = argv + i;
	arg_v = argv;
	arg_c = argc;

	/*
	 * PID 1 of a pid namespace: a helper there would die with the
	 * namespace when the program ends, and would be the program's child
	 * meanwhile.  The run is not marked: each process writes its own
	 * report, as without the wrapper.
	 */
	char run[64];
	if (getpid() != 1 && start_helper(run, sizeof(run))) {
		if (setenv("POOLSHIM_RUN", run, 1) < 0) {
			fprintf(stderr, "%s: %s\n", me, strerror(errno));
			return 127;
		}
	} else {
		unsetenv("POOLSHIM_RUN");
	}
	if (setenv("LD_PRELOAD", preload, 1) < 0) {
		fprintf(stderr, "%s: %s\n", me, strerror(errno));
		return 127;
	}
	execvp(prog[0], prog);
	int e = errno;
	fprintf(stderr, "%s: %s: %s\n", me, prog[0], strerror(e));
	return e == ENOENT ? 127 : 126;
}
