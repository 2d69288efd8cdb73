// SPDX-License-Identifier: MIT
/*
 * What a fork child costs, for report_faults.sh: makes one counted call,
 * then forks N children that make one counted call each and _exit, and
 * prints the children's minor page faults per child (getrusage of the
 * reaped children).  Under the shim each child starts its counters from
 * zero (its parent's work is not its own).  With "pool", the parent first
 * takes and frees a 1 MiB buffer, so that under the shim it has a live
 * file its children must leave alone.
 *
 *   fork_cost N [pool]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	char c = 0;

	if (n <= 0)
		return 2;
	if (argc > 2 && strcmp(argv[2], "pool") == 0) {
		/* Through a volatile pointer: the compiler may not drop the pair. */
		void *(*volatile alloc)(size_t) = malloc;
		char *p = alloc(1 << 20);
		if (!p)
			return 2;
		memset(p, 1, 1 << 20);
		free(p);
	}
	if (write(1, &c, 0) != 0)
		return 2;
	for (int i = 0; i < n; i++) {
		int status;
		pid_t pid = fork();
		if (pid == 0)
			_exit(write(1, &c, 0) == 0 ? 0 : 1);
		if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
			return 1;
	}
	struct rusage ru;
	if (getrusage(RUSAGE_CHILDREN, &ru) != 0)
		return 1;
	printf("%ld\n", ru.ru_minflt / n);
	return 0;
}
