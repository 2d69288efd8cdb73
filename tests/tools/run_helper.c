// SPDX-License-Identifier: MIT
/*
 * For wrapper_end.sh: programs that end the ways the `poolshim` wrapper
 * must see, each doing counted work first (reads of /dev/zero and writes
 * to /dev/null, 64 KiB each) so that its report has numbers to check.
 *
 *   work N READY          N reads and N writes, create READY, wait for a signal
 *   worker N READY        fork a worker that does the work of `work N READY`
 *                         (READY gets its pid); wait for it; exit 0
 *   countterm N READY OUT [self]
 *                         the work, a SIGTERM handler that counts; create
 *                         READY (self: then send SIGTERM to its own process
 *                         group); after the first TERM wait 1 s for more,
 *                         write the count to OUT, exit 0
 *   countint N READY OUT  the same for SIGINT (a terminal's ^C)
 *   countrt N READY OUT [self]  the same for SIGRTMIN+1, which queues: two
 *                         sent are two delivered, never merged into one
 *   daemon N READY        fork a child that starts its own session, does
 *                         the work, writes its pid to READY and waits for a
 *                         signal; the parent exits 0 at once
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char buf[65536];

static void work(int n)
{
	int z = open("/dev/zero", O_RDONLY), w = open("/dev/null", O_WRONLY);
	if (z < 0 || w < 0)
		exit(90);
	for (int i = 0; i < n; i++)
		if (read(z, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
		    write(w, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			exit(91);
	close(z);
	close(w);
}

/* Create path holding text, atomically (a reader never sees it half written). */
static void ready(const char *path, const char *text)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
		exit(92);
}

static volatile sig_atomic_t terms;
static void on_term(int sig)
{
	(void)sig;
	terms++;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: run_helper work|worker|countterm|countint|countrt|daemon N READY [OUT]\n");
		return 2;
	}
	const char *mode = argv[1];
	int n = atoi(argv[2]);
	char pid[32];

	if (!strcmp(mode, "work")) {
		work(n);
		ready(argv[3], "ready\n");
		for (;;)
			pause();
	} else if (!strcmp(mode, "worker")) {
		pid_t c = fork();
		if (c == 0) {
			work(n);
			snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
			ready(argv[3], pid);
			for (;;)
				pause();
		}
		int st;
		return c > 0 && waitpid(c, &st, 0) == c ? 0 : 93;
	} else if ((!strcmp(mode, "countterm") || !strcmp(mode, "countint") ||
		    !strcmp(mode, "countrt")) && argc >= 5) {
		int sig = !strcmp(mode, "countint") ? SIGINT :
			  !strcmp(mode, "countrt") ? SIGRTMIN + 1 : SIGTERM;
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_term;
		sigaction(sig, &sa, NULL);
		work(n);
		ready(argv[3], "ready\n");
		if (argc >= 6 && !strcmp(argv[5], "self"))
			kill(0, sig);
		while (!terms)
			pause();
		sleep(1);   /* a second copy arrives in this time, if one was sent */
		char out[32];
		snprintf(out, sizeof(out), "%d\n", (int)terms);
		ready(argv[4], out);
		return 0;
	} else if (!strcmp(mode, "daemon")) {
		pid_t c = fork();
		if (c == 0) {
			setsid();
			work(n);
			snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
			ready(argv[3], pid);
			for (;;)
				pause();
		}
		return c > 0 ? 0 : 93;
	}
	fprintf(stderr, "run_helper: unknown mode %s\n", mode);
	return 2;
}
