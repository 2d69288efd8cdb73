// SPDX-License-Identifier: MIT
/*
 * For oom_report.sh: does some work the report counts (100 reads of 1 MiB
 * from /dev/zero into a pooled buffer), says "worked", then allocates and
 * writes 1 MiB blocks until the memory cgroup's OOM killer ends it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

int main(void)
{
	size_t len = 1 << 20;
	char *buf = malloc(len);
	int fd = open("/dev/zero", O_RDONLY);

	if (!buf || fd < 0)
		return 2;
	for (int i = 0; i < 100; i++)
		if (read(fd, buf, len) != (ssize_t)len)
			return 3;
	printf("worked\n");
	fflush(stdout);
	for (;;) {
		char *p = malloc(len);
		if (p)
			memset(p, 1, len);
	}
}
