// SPDX-License-Identifier: MIT
/*
 * poolshim-run: the `poolshim` command's last step.  The script has
 * exported the program's POOLSHIM_* settings and worked out LD_PRELOAD;
 * this stays the parent of the program so that it sees the program end,
 * however it ends, and can deliver the reports that the program's
 * processes left in their live records.
 *
 *   poolshim-run --preload LIST [--] program [args ...]
 *
 * It marks the run (POOLSHIM_RUN=<pid>-<random>, in the program's
 * environment and so in everything it starts), forks, and the child execs
 * the program with LD_PRELOAD=LIST, in the same process group, with the
 * same descriptors and with the signal mask and dispositions the wrapper
 * was started with: the program sees what it would see without the
 * wrapper (its parent's pid aside).  The wrapper keeps every signal
 * blocked and reads them from a signalfd, so none is lost or raced; each
 * one is passed on to the program, except SIGCHLD (the wrapper's own),
 * signals the kernel sent (si_code SI_KERNEL: a terminal's ^C or hang-up
 * reached the whole process group, the program included) and signals
 * the program's own processes sent (kill(0, ...) reaches the wrapper
 * too).  SIGCONT resumes a stopped program; a program stopped by a
 * signal stops the wrapper too, so a shell's job control works.
 *
 * When the program ends, ps_collect() renders the records of the run's
 * processes that have ended (the program, the workers it started):
 * reports meant for stderr go to the wrapper's stderr, the others where
 * their POOLSHIM_STATS named.  Processes of the run still running (a
 * daemon the program started) keep their records for `poolshim collect`.
 * Then the wrapper ends as the program did: its exit code, or the same
 * signal at its default disposition (no core file of its own).  Collect's
 * failures never change that status.
 *
 * It runs no code of the shim (it is never preloaded) and links only the
 * format layer and the collect code.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"

static const char *me = "poolshim";

static void usage(FILE *f)
{
	fprintf(f, "usage: poolshim-run --preload LIST [--] program [args ...]\n"
		   "Runs program with LD_PRELOAD=LIST as its parent, passes signals on,\n"
		   "delivers the reports of the run's processes when it ends, and exits\n"
		   "as it did.  `poolshim` runs it; it is not meant to be run by hand.\n");
}

/* The parent pid of pid from /proc (0 when it cannot tell). */
static int parent_of(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The name may hold anything, ")" too: the fields follow the last ")". */
	char *p = strrchr(buf, ')');
	int ppid;
	char state;
	if (!p || sscanf(p + 1, " %c %d", &state, &ppid) != 2)
		return 0;
	return ppid;
}

/* Whether pid is child or one of its descendants (as far as /proc tells). */
static bool of_the_run(int pid, int child)
{
	for (int depth = 0; pid > 1 && depth < 64; depth++) {
		if (pid == child)
			return true;
		pid = parent_of(pid);
	}
	return false;
}

/* The state letter of pid from /proc ('?' when it cannot tell). */
static char state_of(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Pass one signal the wrapper received on to the program, or not. */
static void forward(const struct signalfd_siginfo *si, int child)
{
	int sig = (int)si->ssi_signo;
	if (sig == SIGCHLD || si->ssi_code == SI_KERNEL)
		return;
	/* The program's own kill(0, ...) or killpg() reached it already. */
	if ((si->ssi_code == SI_USER || si->ssi_code == SI_QUEUE || si->ssi_code == SI_TKILL) &&
	    si->ssi_pid > 0 && of_the_run((int)si->ssi_pid, child))
		return;
	/*
	 * SIGCONT: whoever continues a job sends it to the whole process
	 * group; the wrapper only resumes a program that is still stopped.
	 */
	if (sig == SIGCONT) {
		if (state_of(child) == 'T')
			kill(child, SIGCONT);
		return;
	}
	if (si->ssi_code == SI_QUEUE) {
		union sigval v = { .sival_ptr = (void *)(uintptr_t)si->ssi_ptr };
		if (sigqueue(child, sig, v) == 0)
			return;
	}
	kill(child, sig);
}

/* End as the program did: its exit code, or its signal at the default. */
static void exit_like(int status)
{
	fflush(stdout);
	fflush(stderr);
	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);   /* the program dumped its own, if any */
		signal(sig, SIG_DFL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		kill(getpid(), sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		/* Only a signal whose default is to be ignored gets here: none ends a process. */
		_exit(128 + sig);
	}
	_exit(1);
}

/* A fresh run id, "PID-RANDOM": [A-Za-z0-9._-], well under 63 characters. */
static void make_run_id(char *out, size_t cap)
{
	unsigned int r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (unsigned int)ts.tv_nsec ^ (unsigned int)getpid() << 16;
	}
	snprintf(out, cap, "%d-%08x", (int)getpid(), r);
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

	char run[64];
	make_run_id(run, sizeof(run));
	if (setenv("POOLSHIM_RUN", run, 1) < 0) {
		fprintf(stderr, "%s: %s\n", me, strerror(errno));
		return 127;
	}

	/*
	 * Every signal blocked from before the fork, so that none sent to the
	 * wrapper in between is lost (it stays pending, and is read below);
	 * the child puts back the mask the wrapper inherited.  Dispositions
	 * are left alone: the wrapper installs no handler, so the child
	 * inherits exactly the default and ignored ones it was given.
	 */
	sigset_t all, orig;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &orig);
	int sfd = signalfd(-1, &all, SFD_CLOEXEC);
	if (sfd < 0) {
		fprintf(stderr, "%s: signalfd: %s\n", me, strerror(errno));
		sigprocmask(SIG_SETMASK, &orig, NULL);
		return 127;
	}

	fflush(stderr);
	pid_t child = fork();
	if (child < 0) {
		fprintf(stderr, "%s: fork: %s\n", me, strerror(errno));
		return 127;
	}
	if (child == 0) {
		close(sfd);
		if (setenv("LD_PRELOAD", preload, 1) < 0)
			_exit(127);
		sigprocmask(SIG_SETMASK, &orig, NULL);
		execvp(prog[0], prog);
		int e = errno;
		fprintf(stderr, "%s: %s: %s\n", me, prog[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}

	int status = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	for (;;) {
		pid_t r = wait4(child, &status, WNOHANG | WUNTRACED, &ru);
		if (r == child) {
			if (!WIFSTOPPED(status))
				break;
			/* Stopped (^Z): stop with it; resumed, resume it. */
			kill(getpid(), SIGSTOP);
			if (state_of(child) == 'T')
				kill(child, SIGCONT);
			continue;
		}
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, "%s: wait4: %s\n", me, strerror(errno));
			status = 127 << 8;
			break;
		}
		struct signalfd_siginfo si;
		ssize_t n = read(sfd, &si, sizeof(si));
		if (n != (ssize_t)sizeof(si))
			continue;
		forward(&si, child);
	}
	close(sfd);

	struct ps_collect_opts o;
	memset(&o, 0, sizeof(o));
	o.live_dir = getenv("POOLSHIM_LIVE_DIR");
	if (o.live_dir && !*o.live_dir)
		o.live_dir = NULL;
	o.run = run;
	o.out = stderr;
	o.who = me;
	o.known_pid = child;
	o.known_status = status;
	o.known_rusage = &ru;
	(void)ps_collect(&o);
	exit_like(status);
}
