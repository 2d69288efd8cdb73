// SPDX-License-Identifier: MIT
/*
 * For advice.sh: programs in the situations the report's advice is about.
 *
 *   alloc COUNT SIZE   malloc COUNT buffers of SIZE bytes and touch them,
 *                      all live at once, then free them
 *   direct FILE        write FILE (4 MiB) with O_DIRECT, then read it back
 *                      in 1 MiB preads into a 4 KiB-aligned malloc'd
 *                      buffer, the I/O the shim sends through io_uring.
 *                      Exits 77 when the directory refuses O_DIRECT.
 *   unaligned FILE     the same, but the preads start 512 bytes into the
 *                      file (not 4 KiB aligned; the kernel may refuse them)
 *   forked FILE        fork a child that exits at once, then as direct
 *   loop COUNT SIZE [kill]  malloc, touch and free one buffer of SIZE
 *                      bytes COUNT times (the pool's reuse, saved.sh);
 *                      with kill, end by SIGKILL (a record left behind)
 *   maps COUNT SIZE    as alloc, but with the buffers live, copy
 *                      /proc/self/maps to stdout (pool_off.sh: no pool range)
 *   forkloop COUNT SIZE  a fork child runs loop COUNT SIZE and ends with
 *                      _exit(0) (a child whose work is its allocations)
 * Prints "advice_helper ok" on success.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024L * 1024)

static int alloc_mode(long count, long size)
{
	char **v = calloc((size_t)count, sizeof(*v));

	for (long i = 0; v && i < count; i++) {
		v[i] = malloc((size_t)size);
		if (!v[i])
			return 1;
		memset(v[i], (int)i, (size_t)size);
	}
	for (long i = 0; v && i < count; i++)
		free(v[i]);
	free(v);
	return v ? 0 : 1;
}

static int direct_mode(const char *path, long skew)
{
	char *buf = NULL;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);

	if (fd < 0)
		return errno == EINVAL ? 77 : 1;
	/* posix_memalign at 2 MiB: pooled, and aligned for O_DIRECT. */
	if (posix_memalign((void **)&buf, 2 * MiB, MiB) != 0)
		return 1;
	memset(buf, 'x', MiB);
	for (int i = 0; i < 4; i++)
		if (pwrite(fd, buf, MiB, i * MiB) != MiB)
			return errno == EINVAL ? 77 : 1;
	for (int i = 0; i < 16; i++) {
		ssize_t n = pread(fd, buf, MiB, (i % 3) * MiB + skew);
		/* A skewed read may be refused (EINVAL) by a 4 KiB-sector device. */
		if (!skew && (n != MiB || buf[MiB - 1] != 'x'))
			return 1;
	}
	free(buf);
	close(fd);
	unlink(path);
	return 0;
}

static int loop_mode(long count, long size, int kill_self)
{
	for (long i = 0; i < count; i++) {
		char *p = malloc((size_t)size);
		if (!p)
			return 1;
		memset(p, (int)i, (size_t)size);
		/* the buffer escapes, so the compiler keeps the malloc */
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
	if (kill_self)
		raise(SIGKILL);
	return 0;
}

static int maps_mode(long count, long size)
{
	char **v = calloc((size_t)count, sizeof(*v));
	char buf[4096];
	ssize_t n;
	int fd, r = 0;

	for (long i = 0; v && i < count; i++) {
		v[i] = malloc((size_t)size);
		if (!v[i])
			return 1;
		memset(v[i], (int)i, (size_t)size);
	}
	if (!v || (fd = open("/proc/self/maps", O_RDONLY)) < 0)
		return 1;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			r = 1;
	close(fd);
	for (long i = 0; i < count; i++)
		free(v[i]);
	free(v);
	return n < 0 ? 1 : r;
}

static int forkloop_mode(long count, long size)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(loop_mode(count, size, 0));
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int forked_mode(const char *path)
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1;
	return direct_mode(path, 0);
}

int main(int argc, char **argv)
{
	int r = 2;

	if (argc == 4 && strcmp(argv[1], "alloc") == 0)
		r = alloc_mode(atol(argv[2]), atol(argv[3]));
	else if (argc == 4 && strcmp(argv[1], "forkloop") == 0)
		r = forkloop_mode(atol(argv[2]), atol(argv[3]));
	else if (argc == 4 && strcmp(argv[1], "maps") == 0)
		r = maps_mode(atol(argv[2]), atol(argv[3]));
	else if (argc == 3 && strcmp(argv[1], "direct") == 0)
		r = direct_mode(argv[2], 0);
	else if (argc == 3 && strcmp(argv[1], "unaligned") == 0)
		r = direct_mode(argv[2], 512);
	else if (argc == 3 && strcmp(argv[1], "forked") == 0)
		r = forked_mode(argv[2]);
	else if ((argc == 4 || (argc == 5 && strcmp(argv[4], "kill") == 0)) &&
		 strcmp(argv[1], "loop") == 0)
		r = loop_mode(atol(argv[2]), atol(argv[3]), argc == 5);
	else
		fprintf(stderr, "usage: advice_helper alloc COUNT SIZE | direct FILE | unaligned FILE | forked FILE | "
			"loop COUNT SIZE [kill] | maps COUNT SIZE | forkloop COUNT SIZE\n");
	if (r == 0)
		printf("advice_helper ok\n");
	return r;
}
