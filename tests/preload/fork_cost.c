// SPDX-License-Identifier: MIT
/*
 * What a fork child costs, for report_faults.sh: makes one counted call,
 * then forks N children that make one counted call each and _exit, and
 * prints the children's minor page faults per child (getrusage of the
 * reaped children).  Under the shim each child starts its counters from
 * zero (its parent's work is not its own).
 *
 *   fork_cost N
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	char c = 0;

	if (n <= 0)
		return 2;
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
