// SPDX-License-Identifier: MIT
/*
 * For exec_fail.sh: a program whose exec calls fail (a missing path, a
 * PATH search that finds nothing, a directory, a file that is not
 * executable) and which then goes on: pooled allocations and --writes
 * writes to /dev/null, and exits normally.  It prints each exec's errno on
 * stdout and, on stderr, whether its live-stats file exists after the
 * failed execs and just before exit (the shim must keep it, or make it
 * again after an exec that failed in the kernel: the process is still
 * running).  Its first pooled buffers make the file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

static void live(const char *when)
{
	char path[96];
	struct stat ns;

	/* Named by pid and pid namespace (the inode of /proc/self/ns/pid, 0 without /proc). */
	if (stat("/proc/self/ns/pid", &ns) != 0)
		ns.st_ino = 0;
	snprintf(path, sizeof(path), "/dev/shm/poolshim-%d-%lu.stats", (int)getpid(),
		 (unsigned long)ns.st_ino);
	fprintf(stderr, "live file %s: %s\n", when, access(path, F_OK) == 0 ? "yes" : "no");
}

/* Through a volatile pointer: a malloc, memset and free the compiler sees would go. */
static void *(*volatile alloc)(size_t) = malloc;

static void said(const char *what, int r)
{
	printf("%s: %d %s\n", what, r, r < 0 ? strerror(errno) : "");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int writes = argc > 2 && !strcmp(argv[1], "--writes") ? atoi(argv[2]) : 100;
	char *args[] = { "x", NULL };
	const char *plain = getenv("EXEC_FAIL_PLAIN");   /* a non-executable file */

	for (int i = 0; i < 3; i++) {
		void *p = alloc(1 << 20);
		memset(p, i, 4096);
		free(p);
	}
	said("execv missing", execv("/nonexistent/poolshim/exec_fail", args));
	said("execvp missing", execvp("poolshim-exec-fail-no-such-program", args));
	said("execv directory", execv("/", args));
	if (plain)
		said("execv not executable", execv(plain, args));
	live("after the failed execs");

	int fd = open("/dev/null", O_WRONLY);
	for (int i = 0; i < writes; i++)
		if (write(fd, "x", 1) != 1)
			return 1;
	close(fd);
	for (int i = 0; i < 3; i++) {
		void *p = alloc(1 << 20);
		memset(p, i, 4096);
		free(p);
	}
	live("before exit");
	return 0;
}
