// SPDX-License-Identifier: MIT
/*
 * A fixed sequence of I/O calls for tests/preload/io_kinds.sh, which checks
 * the per-call, per-kind counts in the JSON report: each (call, kind) pair
 * below is made a distinct number of times, including on descriptor
 * numbers that changed kind (closed and reused, dup2'd over, O_DIRECT set
 * and cleared with fcntl), where a stale cache would count them under the
 * old kind.  Exit 77 when the filesystem refuses O_DIRECT.
 *
 *   read      pipe 3, socket 4, file 5, direct 6, other 7
 *   pwrite    direct 1 (then the number is closed and reused by a pipe)
 *   pread     pipe 8, all ESPIPE (on that reused number)
 *   readv     file 1, then socket 9 (a socket dup2'd over the file)
 *   preadv    direct 10 (O_DIRECT set by fcntl), file 11 (cleared again)
 *   sendfile  2, splice 3
 *   recv      socket 5, all EAGAIN (an empty non-blocking socket)
 *
 * With arguments, `io_kinds WAY DIR` makes one descriptor in the way named
 * (socket, accept, pipe2, open O_DIRECT, dup2 over a socket, F_SETFL, a
 * descriptor received with SCM_RIGHTS ...; see ways[] below) and makes
 * exactly 3 writev calls on it and no other writev: io_kinds.sh checks the
 * kind they were counted under.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "io_common.h"

#define MiB (1024UL * 1024)

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "io_kinds: %s: %s\n", what, errno ? strerror(errno) : "wrong result");
		exit(1);
	}
}

static void repeat_read(int fd, void *buf, size_t n, int times, const char *what)
{
	for (int k = 0; k < times; k++)
		must(read(fd, buf, n) > 0, what);
}

/* ---- one descriptor, made one way ------------------------------------ */

static const char *way_dir;
static size_t io_len = 4096;

static char *way_path(const char *name)
{
	static char p[4][4096];
	static int next;
	char *out = p[next++ & 3];
	snprintf(out, sizeof(p[0]), "%s/%s", way_dir, name);
	return out;
}

static int a_file(int flags)
{
	int fd = open(way_path("f"), O_RDWR | O_CREAT | flags, 0600);
	must(fd >= 0, "open");
	return fd;
}

static int direct_file(int flags)
{
	int fd = open(way_path("f"), O_RDWR | O_CREAT | O_DIRECT | flags, 0600);
	if (fd < 0 && errno == EINVAL) {
		printf("O_DIRECT not supported under %s: skipped\n", way_dir);
		exit(77);
	}
	must(fd >= 0, "open O_DIRECT");
	return fd;
}

/* A connected pair over a listening AF_UNIX socket: the accepted end. */
static int accepted(bool four)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", way_path("s"));
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	must(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0, "listen");
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	must(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof(a)) == 0, "connect");
	int s = four ? accept4(l, NULL, NULL, SOCK_CLOEXEC) : accept(l, NULL, NULL);
	must(s >= 0, "accept");
	return s;
}

/* A UDP socket connected to a bound one on loopback, so that writev succeeds. */
static int udp_socket(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int r = socket(AF_INET, SOCK_DGRAM, 0), s = socket(AF_INET, SOCK_DGRAM, 0);
	must(r >= 0 && s >= 0 && bind(r, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	     getsockname(r, (struct sockaddr *)&a, &len) == 0 &&
	     connect(s, (struct sockaddr *)&a, sizeof(a)) == 0, "udp");
	return s;
}

static int pipe_end(void)
{
	int p[2];
	must(pipe(p) == 0, "pipe");
	return p[1];
}

static int a_socket(void)
{
	int s[2];
	must(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0, "socketpair");
	return s[0];
}

/*
 * Pass a pipe's write end over a socket pair into a number the shim last
 * saw as a socket and that was closed behind its back (a raw close(2), as
 * a library making its own system calls would): the received descriptor
 * must be taken as of unknown origin.
 */
static int received(bool mmsg)
{
	int sp[2], p[2];
	must(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0 && pipe(p) == 0, "socketpair, pipe");
	/* Made last, so that once closed it is the lowest free number. */
	int stale = a_socket();
	must(write(stale, "x", 1) == 1, "write on the socket");   /* the shim knows it now */
	must(syscall(SYS_close, stale) == 0, "raw close");
	char byte = 'r';
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p[1], sizeof(int));
	must(sendmsg(sp[0], &m, 0) == 1, "sendmsg SCM_RIGHTS");
	memset(u.buf, 0, sizeof(u.buf));
	m.msg_controllen = sizeof(u.buf);
	if (mmsg) {
		struct mmsghdr v = { .msg_hdr = m };
		must(recvmmsg(sp[1], &v, 1, 0, NULL) == 1, "recvmmsg");
		m = v.msg_hdr;
	} else {
		must(recvmsg(sp[1], &m, 0) == 1, "recvmsg");
	}
	c = CMSG_FIRSTHDR(&m);
	must(c && c->cmsg_type == SCM_RIGHTS, "no descriptor received");
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	if (fd != stale) {
		fprintf(stderr, "io_kinds: received %d, not the stale number %d\n", fd, stale);
		exit(1);
	}
	return fd;
}

/* A number closed through the shim, then reused by a call it does not wrap. */
static int reused(bool mem)
{
	int f = a_file(0);
	must(write(f, "x", 1) == 1 && close(f) == 0, "file");
	int fd = mem ? (int)syscall(SYS_memfd_create, "kinds", 0) : eventfd(0, 0);
	must(fd == f, "the closed number was not reused");
	if (!mem)
		io_len = sizeof(uint64_t);   /* an eventfd takes 8 bytes exactly */
	return fd;
}

/* The parent makes a socket and runs this program again to use it. */
static int inherited(char *self)
{
	int s = a_socket();
	must(fcntl(s, F_SETFD, 0) == 0, "clear FD_CLOEXEC");
	char num[16];
	snprintf(num, sizeof(num), "%d", s);
	char *argv[] = { self, "inherited-child", (char *)way_dir, num, NULL };
	execv("/proc/self/exe", argv);
	must(0, "exec");
	return -1;
}

static int by_way(const char *way, char **argv)
{
	int fd, s;
	if (!strcmp(way, "socket")) return udp_socket();
	if (!strcmp(way, "accept")) return accepted(false);
	if (!strcmp(way, "accept4")) return accepted(true);
	if (!strcmp(way, "socketpair")) return a_socket();
	if (!strcmp(way, "pipe")) return pipe_end();
	if (!strcmp(way, "pipe2")) {
		int p[2];
		must(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2");
		return p[1];
	}
	if (!strcmp(way, "open")) return a_file(0);
	if (!strcmp(way, "open-direct")) return direct_file(0);
	if (!strcmp(way, "open-dev")) return open("/dev/null", O_WRONLY);
	if (!strcmp(way, "openat")) {
		int dir = open(way_dir, O_RDONLY | O_DIRECTORY);
		return openat(dir, "f", O_RDWR | O_CREAT, 0600);
	}
	if (!strcmp(way, "openat-direct")) {
		int dir = open(way_dir, O_RDONLY | O_DIRECTORY);
		fd = openat(dir, "f", O_RDWR | O_CREAT | O_DIRECT, 0600);
		if (fd < 0 && errno == EINVAL)
			exit(77);
		return fd;
	}
	if (!strcmp(way, "creat")) return creat(way_path("c"), 0600);
	if (!strcmp(way, "dup")) return dup(a_socket());
	if (!strcmp(way, "dup2-over-socket")) {
		s = a_socket();
		must(write(s, "x", 1) == 1, "write on the socket");
		fd = a_file(0);
		must(dup2(fd, s) == s, "dup2");
		return s;
	}
	if (!strcmp(way, "dup3")) {
		fd = a_file(0);
		return dup3(pipe_end(), fd, O_CLOEXEC);   /* a pipe over a file */
	}
	if (!strcmp(way, "f-dupfd")) return fcntl(pipe_end(), F_DUPFD, 100);
	if (!strcmp(way, "f-dupfd-cloexec")) return fcntl(a_socket(), F_DUPFD_CLOEXEC, 100);
	if (!strcmp(way, "setfl-direct-on")) {
		fd = a_file(0);
		must(pwrite(fd, "x", 1, 0) == 1, "pwrite");   /* offset stays 0, aligned */
		if (fcntl(fd, F_SETFL, O_DIRECT) != 0)
			exit(77);
		return fd;
	}
	if (!strcmp(way, "setfl-direct-off")) {
		fd = direct_file(0);
		must(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "F_SETFL");
		return fd;
	}
	if (!strcmp(way, "setfl-pipe")) {   /* packet mode: still a pipe */
		fd = pipe_end();
		must(fcntl(fd, F_SETFL, O_DIRECT) == 0, "F_SETFL");
		return fd;
	}
	if (!strcmp(way, "fifo-setfl-direct")) {
		/*
		 * A FIFO opened by path is taken for a file, and F_SETFL takes
		 * O_DIRECT on it: a pread on a pooled buffer must still be the
		 * kernel's ESPIPE, never io_uring's read of the pipe.
		 */
		must(mkfifo(way_path("fifo"), 0600) == 0, "mkfifo");
		fd = open(way_path("fifo"), O_RDWR);
		must(fd >= 0 && fcntl(fd, F_SETFL, O_DIRECT) == 0, "FIFO with O_DIRECT");
		must(write(fd, "0123456789", 10) == 10, "fill the FIFO");
		char *big = pio_alloc(1 * MiB);
		errno = 0;
		must(pread(fd, big, 1 * MiB, 0) == -1 && errno == ESPIPE, "pread on the FIFO");
		char ten[10];
		must(read(fd, ten, 10) == 10 && memcmp(ten, "0123456789", 10) == 0, "FIFO data kept");
		return fd;
	}
	if (!strcmp(way, "scm-rights")) return received(false);
	if (!strcmp(way, "scm-rights-mmsg")) return received(true);
	if (!strcmp(way, "reuse-eventfd")) return reused(false);
	if (!strcmp(way, "reuse-memfd")) return reused(true);
	if (!strcmp(way, "inherited")) return inherited(argv[0]);
	if (!strcmp(way, "inherited-child")) return atoi(argv[3]);
	fprintf(stderr, "io_kinds: no way %s\n", way);
	exit(2);
}

static int one_way(char **argv)
{
	way_dir = argv[2];
	int fd = by_way(argv[1], argv);
	must(fd >= 0, argv[1]);
	/* 4 KiB, aligned, starting with an eventfd's 1. */
	void *buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	must(buf != MAP_FAILED, "mmap");
	uint64_t one = 1;
	memcpy(buf, &one, sizeof(one));
	struct iovec iov = { buf, io_len };
	for (int k = 0; k < 3; k++)
		must(writev(fd, &iov, 1) > 0, "writev");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3)
		return one_way(argv);
	char *path = pio_path("kinds");
	pio_make_file(path, 8 * MiB, 1);
	char *buf = pio_alloc(1 * MiB);
	int pfd[2], sp[2];
	must(pipe(pfd) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "pipe/socketpair");
	must(write(pfd[1], "0123456789", 10) == 10, "fill pipe");   /* write/pipe 1 */
	must(send(sp[1], "0123456789", 10, 0) == 10, "fill socket");
	repeat_read(pfd[0], buf, 1, 3, "read pipe");
	repeat_read(sp[0], buf, 1, 4, "read socket");
	int f = open(path, O_RDONLY);
	repeat_read(f, buf, 4096, 5, "read file");
	int d = pio_open_direct(path, O_RDWR);
	repeat_read(d, buf, 1 * MiB, 6, "read direct");
	int z = open("/dev/zero", O_RDONLY);
	repeat_read(z, buf, 100, 7, "read other");

	/* close and reuse: the direct file's number becomes a pipe */
	must(pwrite(d, buf, 1 * MiB, 0) == 1 * MiB, "pwrite direct");
	int num = d, q[2];
	close(d);
	must(pipe(q) == 0, "pipe");
	if (q[0] != num && q[1] != num) {
		fprintf(stderr, "io_kinds: the number %d was not reused (got %d/%d)\n", num, q[0], q[1]);
		return 1;
	}
	/* pread on a pipe: ESPIPE, counted under pipe with its errno */
	for (int k = 0; k < 8; k++)
		must(pread(num, buf, 10, 0) == -1 && errno == ESPIPE, "pread on the reused number");

	/* dup2 a socket over the regular file */
	struct iovec iov = { buf, 1 };
	must(readv(f, &iov, 1) == 1, "readv file");
	must(send(sp[1], "abcdefghij", 10, 0) == 10, "fill socket");
	must(dup2(sp[0], f) == f, "dup2");
	for (int k = 0; k < 9; k++)
		must(readv(f, &iov, 1) == 1, "readv socket");

	/* fcntl: O_DIRECT on, then off */
	int g = open(path, O_RDONLY);
	int fl = fcntl(g, F_GETFL);
	if (fcntl(g, F_SETFL, fl | O_DIRECT) != 0) {
		fprintf(stderr, "io_kinds: F_SETFL O_DIRECT refused\n");
		return 77;
	}
	struct iovec big = { buf, 1 * MiB };
	for (int k = 0; k < 10; k++)
		must(preadv(g, &big, 1, 0) == 1 * MiB, "preadv direct");
	must(fcntl(g, F_SETFL, fl) == 0, "F_SETFL");
	for (int k = 0; k < 11; k++)
		must(preadv(g, &big, 1, 0) == 1 * MiB, "preadv file");

	/* sendfile and splice are counted */
	int h = open(path, O_RDONLY), r[2];
	must(pipe(r) == 0, "pipe");
	for (int k = 0; k < 2; k++) {
		must(sendfile(sp[1], h, NULL, 10) == 10, "sendfile");
	}
	for (int k = 0; k < 3; k++) {
		must(splice(h, NULL, r[1], NULL, 10, 0) == 10, "splice");
	}
	/* EAGAIN from an empty non-blocking socket */
	int e[2];
	must(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, e) == 0, "socketpair");
	for (int k = 0; k < 5; k++)
		must(recv(e[0], buf, 10, 0) == -1 && errno == EAGAIN, "recv on an empty socket");
	free(buf);
	pio_cleanup();
	printf("io_kinds ok\n");
	return 0;
}
