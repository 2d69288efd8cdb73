// SPDX-License-Identifier: MIT
/*
 * Ends in the ways that skip atexit handlers and destructors, for
 * exit_abrupt.sh.  Every mode first writes "unflushed" to stdout through
 * stdio without a newline (which _exit must not flush) and makes WRITES
 * write(2) calls of 1 byte to FILE, then:
 *   _exit      _exit(7)
 *   _Exit      _Exit(9)
 *   signal     _exit(4) from a SIGALRM handler
 *   thread     a second thread calls _exit(6) while this one keeps writing
 *   fork       a fork child makes 3 writes and _exits(0); the parent waits
 *              and returns 0 from main
 *   vfork      a vfork child _exits(0) at once; the parent then _exit(5)
 * Prints "child PID" (fork, vfork) on stderr.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITES 10

static int fd = -1;

static void put(int n)
{
	for (int i = 0; i < n; i++)
		if (write(fd, "x", 1) != 1)
			abort();
}

static void on_alarm(int sig)
{
	(void)sig;
	_exit(4);
}

static void *ender(void *arg)
{
	(void)arg;
	usleep(20000);
	_exit(6);
}

/* A child that _exits: a fork child after 3 writes, a vfork child at once. */
static __attribute__((noinline)) int forked(bool v)
{
	pid_t pid = v ? vfork() : fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		if (!v)
			put(3);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 3;
	fprintf(stderr, "child %d\n", (int)pid);
	if (v)
		_exit(5);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return 2;
	fputs("unflushed", stdout);
	put(WRITES);
	const char *m = argv[1];
	if (strcmp(m, "_exit") == 0)
		_exit(7);
	if (strcmp(m, "_Exit") == 0)
		_Exit(9);
	if (strcmp(m, "signal") == 0) {
		signal(SIGALRM, on_alarm);
		alarm(1);
		for (;;)
			pause();
	}
	if (strcmp(m, "thread") == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, ender, NULL) != 0)
			return 2;
		for (;;) {
			put(1);
			usleep(1000);
		}
	}
	if (strcmp(m, "fork") == 0)
		return forked(false);
	if (strcmp(m, "vfork") == 0)
		return forked(true);
	return 2;
}
