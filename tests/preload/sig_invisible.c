// SPDX-License-Identifier: MIT
/*
 * What a program sees of its signals, for sig_invisible.sh to compare with
 * and without the shim (issue 34: the shim takes no signal by default).
 *
 *   sig_invisible status            this process's SigBlk/SigIgn/SigCgt, then
 *                                   the same of a program it execs (grep)
 *   sig_invisible vfork-fifo FIFO   block in vfork() while the child blocks
 *                                   opening FIFO; prints "ready" first
 *   sig_invisible race SIG2 N CMD.. start CMD (which prints "ready" and
 *                                   waits) N times, send TERM then SIG2
 *                                   30 us later; print how each ended
 *   sig_invisible wait-usr1         print "ready", then wait; a USR1
 *                                   handler prints "usr1 handler ran"
 *   sig_invisible errno-oneshot     errno set in a one-shot TERM handler
 *                                   (SA_RESETHAND) as seen after it returns
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void status(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		exit(2);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "SigBlk", 6) == 0 || strncmp(line, "SigIgn", 6) == 0 ||
		    strncmp(line, "SigCgt", 6) == 0)
			printf("self %s", line);
	fclose(f);
	fflush(stdout);
	execlp("grep", "grep", "-E", "^Sig(Blk|Ign|Cgt)", "/proc/self/status", (char *)NULL);
	exit(3);
}

static void vfork_fifo(const char *fifo)
{
	printf("ready\n");
	fflush(stdout);
	pid_t pid = vfork();
	if (pid == 0) {
		/* Blocks until a writer comes: the parent waits in vfork meanwhile. */
		int fd = open(fifo, O_RDONLY);
		_exit(fd < 0 ? 4 : 0);
	}
	/* Reached only if the child ended. */
	printf("vfork returned\n");
	exit(0);
}

static void on_usr1(int sig)
{
	static const char msg[] = "usr1 handler ran\n";
	(void)sig;
	write(1, msg, sizeof(msg) - 1);
}

static void wait_usr1(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

static int sig_by_name(const char *s)
{
	if (strcmp(s, "INT") == 0)
		return SIGINT;
	if (strcmp(s, "USR1") == 0)
		return SIGUSR1;
	if (strcmp(s, "HUP") == 0)
		return SIGHUP;
	return atoi(s);
}

static void race(int sig2, int n, char **cmd)
{
	for (int i = 0; i < n; i++) {
		int p[2];
		if (pipe(p) < 0)
			exit(2);
		pid_t pid = fork();
		if (pid == 0) {
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
			execvp(cmd[0], cmd);
			_exit(127);
		}
		close(p[1]);
		char buf[256];
		ssize_t k, got = 0;
		/* Wait for "ready". */
		while (got < 6 && (k = read(p[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
			got += k;
		kill(pid, SIGTERM);
		struct timespec ts = { 0, 30000 };
		nanosleep(&ts, NULL);
		kill(pid, sig2);
		int st;
		waitpid(pid, &st, 0);
		/* Anything the handler printed after "ready". */
		while ((k = read(p[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
			got += k;
		buf[got] = '\0';
		close(p[0]);
		if (WIFSIGNALED(st))
			printf("signal %d%s\n", WTERMSIG(st), strstr(buf, "handler") ? " handler-ran" : "");
		else
			printf("exit %d%s\n", WEXITSTATUS(st), strstr(buf, "handler") ? " handler-ran" : "");
	}
}

static volatile sig_atomic_t handled;

static void set_errno(int sig)
{
	(void)sig;
	errno = ERANGE;
	handled = 1;
}

static void errno_oneshot(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = set_errno;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGTERM, &sa, NULL);
	errno = 0;
	/* raise() returns through the handler: errno is whatever the handler left. */
	kill(getpid(), SIGTERM);
	int e = errno;
	printf("handled=%d errno=%d\n", (int)handled, e);
	sysv_signal(SIGHUP, set_errno);
	handled = 0;
	errno = 0;
	kill(getpid(), SIGHUP);
	e = errno;
	printf("sysv handled=%d errno=%d\n", (int)handled, e);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "status") == 0)
		status();
	else if (argc >= 3 && strcmp(argv[1], "vfork-fifo") == 0)
		vfork_fifo(argv[2]);
	else if (argc >= 5 && strcmp(argv[1], "race") == 0)
		race(sig_by_name(argv[2]), atoi(argv[3]), argv + 4);
	else if (argc >= 2 && strcmp(argv[1], "wait-usr1") == 0)
		wait_usr1();
	else if (argc >= 2 && strcmp(argv[1], "errno-oneshot") == 0)
		errno_oneshot();
	else {
		fprintf(stderr, "usage: sig_invisible status|vfork-fifo FIFO|race SIG N CMD...|wait-usr1|errno-oneshot\n");
		return 2;
	}
	return 0;
}
