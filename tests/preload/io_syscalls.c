// SPDX-License-Identifier: MIT
/*
 * A loop of small pass-through I/O for tests/preload/io_syscalls.sh, which
 * runs it under strace with N and 2N iterations, with and without the shim:
 * the difference divided by N is the number of system calls one iteration
 * makes, and the shim must not add any.  Every iteration makes its
 * descriptors afresh, so a shim that probes each new descriptor (fstat,
 * fcntl) on its first I/O shows up as extra calls per iteration.  The same
 * loops serve callgrind (instructions per call of the shim's counting).
 *
 *   io_syscalls MODE N DIR
 *   file    open + pread 1 KiB + close (DIR/f, made first); built again with
 *           -D_FORTIFY_SOURCE=2 (io_syscalls_fortify), whose open is __open_2
 *   pipe    pipe + 1-byte write + read + close both
 *   sock    socketpair + 1-byte send + recv + write + read + close both
 *   accept  connect to a listening AF_UNIX socket + accept + 1-byte
 *           send/recv + close both; accept4 every other iteration
 *   dup     dup, dup2, dup3, F_DUPFD of one pipe end + a 1-byte write on each
 *   null    1-byte write to /dev/null + read from /dev/zero (no new descriptors)
 *   high    1-byte write + read on a pipe whose ends are dup2'd to 70000 and
 *           70001, past the first 65536 numbers (exit 77 where RLIMIT_NOFILE
 *           cannot be raised that far)
 *   direct  pread 1 MiB O_DIRECT into a 1 MiB malloc'd buffer (pooled under
 *           the shim, so io_uring's path; exit 77 without O_DIRECT)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <unistd.h>

static void must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "io_syscalls: %s: %s\n", what, strerror(errno));
		exit(1);
	}
}

static void loop_file(long n, const char *dir)
{
	char path[4096], buf[1024];
	snprintf(path, sizeof(path), "%s/f", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	memset(buf, 'x', sizeof(buf));
	must(fd >= 0 && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) && close(fd) == 0,
	     "make the file");
	/* Flags the compiler cannot see: a fortified build calls __open_2. */
	volatile int rdonly = O_RDONLY;
	for (long i = 0; i < n; i++) {
		fd = open(path, rdonly);
		must(fd >= 0, "open");
		must(pread(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf), "pread");
		must(close(fd) == 0, "close");
	}
}

static void loop_pipe(long n)
{
	char c = 'p';
	for (long i = 0; i < n; i++) {
		int p[2];
		must(pipe(p) == 0, "pipe");
		must(write(p[1], &c, 1) == 1 && read(p[0], &c, 1) == 1, "pipe I/O");
		must(close(p[0]) == 0 && close(p[1]) == 0, "close");
	}
}

static void loop_sock(long n)
{
	char c = 's';
	for (long i = 0; i < n; i++) {
		int s[2];
		must(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0, "socketpair");
		must(send(s[0], &c, 1, 0) == 1 && recv(s[1], &c, 1, 0) == 1, "send/recv");
		must(write(s[1], &c, 1) == 1 && read(s[0], &c, 1) == 1, "write/read");
		must(close(s[0]) == 0 && close(s[1]) == 0, "close");
	}
}

static void loop_accept(long n, const char *dir)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char c = 'a';
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/s", dir);
	unlink(a.sun_path);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	must(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 4) == 0,
	     "listen");
	for (long i = 0; i < n; i++) {
		int cl = socket(AF_UNIX, SOCK_STREAM, 0);
		must(cl >= 0 && connect(cl, (struct sockaddr *)&a, sizeof(a)) == 0, "connect");
		int s = i & 1 ? accept4(l, NULL, NULL, SOCK_CLOEXEC) : accept(l, NULL, NULL);
		must(s >= 0, "accept");
		must(send(cl, &c, 1, 0) == 1 && recv(s, &c, 1, 0) == 1, "send/recv");
		must(close(s) == 0 && close(cl) == 0, "close");
	}
	close(l);
	unlink(a.sun_path);
}

static void loop_dup(long n)
{
	char c = 'd';
	int p[2];
	must(pipe(p) == 0, "pipe");
	for (long i = 0; i < n; i++) {
		int d[4];
		d[0] = dup(p[1]);
		d[1] = dup2(p[1], 20);
		d[2] = dup3(p[1], 21, O_CLOEXEC);
		d[3] = fcntl(p[1], F_DUPFD, 22);
		for (int k = 0; k < 4; k++) {
			must(d[k] >= 0 && write(d[k], &c, 1) == 1, "dup + write");
			must(read(p[0], &c, 1) == 1, "read");
		}
		for (int k = 0; k < 4; k++)
			must(close(d[k]) == 0, "close");
	}
}

static void loop_null(long n)
{
	char c = 'n';
	int w = open("/dev/null", O_WRONLY), r = open("/dev/zero", O_RDONLY);
	must(w >= 0 && r >= 0, "open /dev/null, /dev/zero");
	for (long i = 0; i < n; i++) {
		(void)!write(w, &c, 1);
		(void)!read(r, &c, 1);
	}
}

static void loop_high(long n)
{
	struct rlimit rl;
	char c = 'h';
	int p[2];
	must(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 70002)
		exit(77);
	rl.rlim_cur = rl.rlim_max;
	must(setrlimit(RLIMIT_NOFILE, &rl) == 0 && pipe(p) == 0, "setrlimit, pipe");
	must(dup2(p[0], 70000) == 70000 && dup2(p[1], 70001) == 70001, "dup2 past 65536");
	for (long i = 0; i < n; i++)
		must(write(70001, &c, 1) == 1 && read(70000, &c, 1) == 1, "I/O past 65536");
}

static void loop_direct(long n, const char *dir)
{
	char path[4096];
	size_t len = 1 << 20;
	void *buf;
	snprintf(path, sizeof(path), "%s/d", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	must(fd >= 0 && posix_memalign(&buf, 4096, len) == 0, "file, buffer");
	memset(buf, 'd', len);
	must(write(fd, buf, len) == (ssize_t)len && fsync(fd) == 0 && close(fd) == 0, "fill");
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		exit(77);
	must(fd >= 0, "open O_DIRECT");
	for (long i = 0; i < n; i++)
		must(pread(fd, buf, len, 0) == (ssize_t)len, "pread");
	free(buf);
}

/* The vectored form: two halves of a 1 MiB pooled buffer in one preadv. */
static void loop_directv(long n, const char *dir)
{
	char path[4096];
	size_t len = 1 << 20;
	void *buf;
	snprintf(path, sizeof(path), "%s/dv", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	must(fd >= 0 && posix_memalign(&buf, 4096, len) == 0, "file, buffer");
	memset(buf, 'v', len);
	must(write(fd, buf, len) == (ssize_t)len && fsync(fd) == 0 && close(fd) == 0, "fill");
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		exit(77);
	must(fd >= 0, "open O_DIRECT");
	struct iovec iov[2] = { { buf, len / 2 }, { (char *)buf + len / 2, len / 2 } };
	for (long i = 0; i < n; i++)
		must(preadv(fd, iov, 2, 0) == (ssize_t)len, "preadv");
	free(buf);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: io_syscalls file|pipe|sock|accept|dup|null|high|direct|directv N DIR\n");
		return 2;
	}
	const char *mode = argv[1], *dir = argv[3];
	long n = strtol(argv[2], NULL, 10);
	if (!strcmp(mode, "file"))
		loop_file(n, dir);
	else if (!strcmp(mode, "pipe"))
		loop_pipe(n);
	else if (!strcmp(mode, "sock"))
		loop_sock(n);
	else if (!strcmp(mode, "accept"))
		loop_accept(n, dir);
	else if (!strcmp(mode, "dup"))
		loop_dup(n);
	else if (!strcmp(mode, "null"))
		loop_null(n);
	else if (!strcmp(mode, "high"))
		loop_high(n);
	else if (!strcmp(mode, "direct"))
		loop_direct(n, dir);
	else if (!strcmp(mode, "directv"))
		loop_directv(n, dir);
	else
		return 2;
	return 0;
}
