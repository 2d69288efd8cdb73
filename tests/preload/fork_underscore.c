// SPDX-License-Identifier: MIT
/*
 * _Fork() (glibc 2.34+) runs no fork handlers (tests/preload/fork_underscore.sh).
 * The parent writes PARENT_BEFORE times to a file, _Fork()s, and writes
 * PARENT_AFTER times more; the child writes CHILD times and ends with
 * exit(), so its report is written.  Each report must be under its own pid
 * and count only its own writes.  Prints "child PID".
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(__GLIBC__) || __GLIBC__ < 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 34)
int main(void)
{
	fprintf(stderr, "no _Fork in this libc\n");
	return 77;
}
#else
enum { PARENT_BEFORE = 3, CHILD = 5, PARENT_AFTER = 7 };

static void writes(int fd, int n)
{
	for (int i = 0; i < n; i++)
		if (write(fd, "x", 1) != 1)
			exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return 2;
	writes(fd, PARENT_BEFORE);
	pid_t pid = _Fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		writes(fd, CHILD);
		exit(0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 3;
	writes(fd, PARENT_AFTER);
	printf("child %d\n", (int)pid);
	return 0;
}
#endif
