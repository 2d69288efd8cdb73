// SPDX-License-Identifier: MIT
/*
 * Page faults at start, for tests/preload/alloc_faults.sh.  Two roles:
 *   alloc_faults buf SIZE        allocate SIZE bytes, write them, free, exit
 *   alloc_faults measure N LIB -- PROG ARGS...
 *                                run PROG N times (with LD_PRELOAD=LIB in
 *                                the child only, none for "-") and print the
 *                                fewest minor faults one run took
 * The fewest of a few runs, as faults only ever get added by noise.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int buf(size_t size)
{
	char *p = malloc(size);
	if (!p)
		return 1;
	memset(p, 1, size);
	free(p);
	return 0;
}

static int measure(int runs, const char *lib, char **argv)
{
	long best = -1;

	for (int i = 0; i < runs; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			int null = open("/dev/null", O_WRONLY);
			dup2(null, 1);
			if (strcmp(lib, "-") == 0)
				unsetenv("LD_PRELOAD");
			else
				setenv("LD_PRELOAD", lib, 1);
			execvp(argv[0], argv);
			_exit(127);
		}
		int status;
		struct rusage ru;
		if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "alloc_faults: %s failed (status %d)\n", argv[0], status);
			return 2;
		}
		if (best < 0 || ru.ru_minflt < best)
			best = ru.ru_minflt;
	}
	printf("%ld\n", best);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "buf") == 0)
		return buf(strtoul(argv[2], NULL, 0));
	if (argc >= 6 && strcmp(argv[1], "measure") == 0 && strcmp(argv[4], "--") == 0)
		return measure(atoi(argv[2]), argv[3], argv + 5);
	fprintf(stderr, "usage: alloc_faults buf SIZE | measure N LIB -- PROG ARGS...\n");
	return 2;
}
