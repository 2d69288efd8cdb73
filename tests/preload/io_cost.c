// SPDX-License-Identifier: MIT
/*
 * Loops of pass-through I/O for tests/preload/io_cost.sh, which runs this
 * under valgrind's callgrind with collection switched on only inside the
 * cost_* functions and a dump after each: every dump then holds the user
 * instructions of exactly N iterations of one loop, and the difference
 * with and without the shim is what counting one call costs.  The first
 * use of each descriptor and of each call (lazy resolution, the thread's
 * first counter block) happens in warm(), outside the collected functions.
 *
 *   io_cost N DIR
 *   cost_devnull   write 1 byte to /dev/null
 *   cost_file      open + pread 1 KiB + close of DIR/f
 *   cost_sock      send 1 byte on a socketpair, recv it on the other end
 * Exit 1 when a call fails.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[1024];
static char path[4096];
static int null_fd, sp[2];

/* noinline: callgrind's --toggle-collect needs the functions to exist. */
__attribute__((noinline)) static long cost_devnull(long n)
{
	long i;
	for (i = 0; i < n; i++)
		if (write(null_fd, buf, 1) != 1)
			break;
	return i;
}

__attribute__((noinline)) static long cost_file(long n)
{
	long i;
	for (i = 0; i < n; i++) {
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			break;
		ssize_t r = pread(fd, buf, sizeof(buf), 0);
		if (close(fd) != 0 || r != (ssize_t)sizeof(buf))
			break;
	}
	return i;
}

__attribute__((noinline)) static long cost_sock(long n)
{
	long i;
	for (i = 0; i < n; i++)
		if (send(sp[0], buf, 1, 0) != 1 || recv(sp[1], buf, 1, 0) != 1)
			break;
	return i;
}

/* Each call once, outside the measured functions. */
static int warm(void)
{
	int fd = open(path, O_RDONLY);
	return write(null_fd, buf, 1) == 1 && fd >= 0 &&
	       pread(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) && close(fd) == 0 &&
	       send(sp[0], buf, 1, 0) == 1 && recv(sp[1], buf, 1, 0) == 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: io_cost N DIR\n");
		return 2;
	}
	long n = strtol(argv[1], NULL, 10);
	snprintf(path, sizeof(path), "%s/f", argv[2]);
	memset(buf, 'c', sizeof(buf));
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) || close(fd) != 0 ||
	    (null_fd = open("/dev/null", O_WRONLY)) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0 || !warm()) {
		perror("io_cost: setup");
		return 1;
	}
	if (cost_devnull(n) != n || cost_file(n) != n || cost_sock(n) != n) {
		perror("io_cost: loop");
		return 1;
	}
	return 0;
}
