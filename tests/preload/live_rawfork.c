// SPDX-License-Identifier: MIT
/*
 * A child made without atfork handlers, for live_rawfork.sh: the parent
 * forks with syscall(SYS_fork) (or glibc's _Fork() when HOW is _Fork), the child writes CHILD times to /dev/null
 * from a thread of its own and ends with exit(); the parent, having
 * written PARENT times itself, waits for it and then stops (SIGSTOP) so the
 * test can read its live file; after SIGCONT it exits.  Progress is told
 * with raw write syscalls, which the shim does not count.  The parent
 * first takes and frees a pooled buffer: the shim makes a process's live
 * file on its first pool slab (or after a second), and the file must
 * exist before the fork.
 *
 *   live_rawfork PARENT CHILD [syscall|_Fork]
 */
#include <fcntl.h>
#include <features.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int fd, child_writes;

static void say(const char *s, size_t n)
{
	syscall(SYS_write, 1, s, n);
}

static void *child_io(void *arg)
{
	char c = 'x';
	(void)arg;
	for (int i = 0; i < child_writes; i++)
		if (write(fd, &c, 1) != 1)
			exit(3);
	return NULL;
}

int main(int argc, char **argv)
{
	int parent_writes = argc > 2 ? atoi(argv[1]) : 7;
	char c = 'x';
	child_writes = argc > 2 ? atoi(argv[2]) : 1000;

	void *(*volatile alloc)(size_t) = malloc;    /* not elided with the free */
	char *pooled = alloc(1 << 20);
	if (!pooled)
		return 2;
	pooled[0] = 1;
	free(pooled);
	fd = open("/dev/null", O_WRONLY);
	if (fd < 0)
		return 2;
	for (int i = 0; i < parent_writes; i++)
		if (write(fd, &c, 1) != 1)
			return 2;
	long pid;
	if (argc > 3 && !strcmp(argv[3], "_Fork")) {
#if __GLIBC_PREREQ(2, 34)
		pid = _Fork();
#else
		return 77;
#endif
	} else {
		pid = syscall(SYS_fork);
	}
	if (pid < 0)
		return 2;
	if (pid == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, child_io, NULL) != 0)
			exit(4);
		pthread_join(t, NULL);
		exit(0);
	}
	int status;
	if (waitpid((pid_t)pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 5;
	say("child done\n", 11);
	raise(SIGSTOP);
	return 0;
}
