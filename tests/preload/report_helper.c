// SPDX-License-Identifier: MIT
/*
 * For report_fd2.sh and report_path.sh: programs that do to their own
 * descriptors what real programs do (close stderr and open a file that then
 * gets fd 2, put a socket there, close everything and reopen files), so the
 * scripts can check that the shim's exit report never lands in the
 * program's data; and the other ends the report may be written to (a FIFO
 * reader that reads, stalls or hangs up, a stderr pipe with no reader).
 *
 *   fd2 closeopen FILE    close(2), open FILE (it gets 2), write a line to it
 *   fd2 dup2 FILE         open FILE, dup2 it onto 2, write a line to it
 *   fd2 startclosed FILE  started with fd 2 closed: open FILE (it gets 2)
 *   fd2 socket FILE       a socket at fd 2; a child copies what arrives on
 *                         the other end into FILE, then creates FILE.done
 *   fd2 closeall DIR [keep2]  close every fd >= 3 (and 2 unless keep2),
 *                         open DIR/N at every number up to 640, a line each
 *   busy FILE             reads and writes of every size from 1 byte to
 *                         512 KiB on /dev/null, /dev/zero and FILE, for a
 *                         report well over one page
 *   dump                  raise(SIGUSR2) (POOLSHIM_DUMP_SIGNAL=USR2), then
 *                         print "after dump"
 *   fifo-reader FIFO OUT READY all|stall|hangup
 *                         open FIFO for reading (without waiting for a
 *                         writer), create READY, then: all: copy everything
 *                         to OUT until the writer is gone; stall: shrink
 *                         the pipe to one page and never read; hangup: the
 *                         same, but close as soon as the page is full.
 *                         Writes "full" to OUT.full when the pipe filled.
 *   broken-stderr LIB PROG ARGS...  exec PROG with LD_PRELOAD=LIB and fd 2
 *                         a pipe whose reader is already closed
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define LINE "program data\n"

static void die(const char *what)
{
	/* fd 2 may be anything here: say it on stdout. */
	printf("report_helper: %s: %s\n", what, strerror(errno));
	fflush(stdout);
	_exit(3);
}

static void put_line(int fd)
{
	if (write(fd, LINE, strlen(LINE)) != (ssize_t)strlen(LINE))
		die("write");
}

static int open_data(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die(path);
	return fd;
}

static int want_fd2(int fd)
{
	if (fd != 2) {
		errno = 0;
		die("the file did not get fd 2");
	}
	return fd;
}

static int socket_at_2(const char *out)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		die("socketpair");
	if (dup2(sv[0], 2) < 0)
		die("dup2");
	close(sv[0]);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		/* Our own copy of the socket must not keep the stream open. */
		close(2);
		int o = open_data(out);
		char buf[4096];
		ssize_t n;
		while ((n = read(sv[1], buf, sizeof(buf))) > 0)
			if (write(o, buf, (size_t)n) != n)
				_exit(1);
		close(o);
		char done[4096];
		snprintf(done, sizeof(done), "%s.done", out);
		close(open_data(done));
		_exit(0);   /* no exit report from the copier */
	}
	close(sv[1]);
	put_line(2);
	return 0;
}

static int close_all(const char *dir, int keep2)
{
	char path[4096];

	if (!keep2)
		close(2);
	for (int fd = 3; fd < 2048; fd++)
		close(fd);
	for (int want = keep2 ? 3 : 2; want <= 640; want++) {
		snprintf(path, sizeof(path), "%s/%d", dir, want);
		int fd = open_data(path);
		if (fd != want) {
			errno = 0;
			die("descriptor numbers not dense");
		}
		put_line(fd);
	}
	return 0;
}

static int fd2(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *mode = argv[0], *arg = argv[1];

	if (!strcmp(mode, "closeopen")) {
		close(2);
		put_line(want_fd2(open_data(arg)));
	} else if (!strcmp(mode, "dup2")) {
		int fd = open_data(arg);
		if (dup2(fd, 2) < 0)
			die("dup2");
		close(fd);
		put_line(2);
	} else if (!strcmp(mode, "startclosed")) {
		if (fcntl(2, F_GETFD) >= 0) {
			errno = 0;
			die("fd 2 is open at start");
		}
		put_line(want_fd2(open_data(arg)));
	} else if (!strcmp(mode, "socket")) {
		return socket_at_2(arg);
	} else if (!strcmp(mode, "closeall")) {
		return close_all(arg, argc > 2 && !strcmp(argv[2], "keep2"));
	} else {
		return 2;
	}
	return 0;
}

static void touch(const char *path, const char *text)
{
	int fd = open_data(path);
	if (text && write(fd, text, strlen(text)) < 0)
		die("write");
	close(fd);
}

static int fifo_reader(char **argv)
{
	const char *fifo = argv[0], *out = argv[1], *ready = argv[2], *mode = argv[3];
	char full[4096];

	snprintf(full, sizeof(full), "%s.full", out);
	/* Not waiting for a writer: READY must mean "a reader is there". */
	int fd = open(fifo, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		die(fifo);
	int o = open_data(out);
	int size = 0;
	/* One page: the report (over a page, see busy) cannot fit. */
	if (strcmp(mode, "all") != 0 && (size = fcntl(fd, F_SETPIPE_SZ, 4096)) < 0)
		die("F_SETPIPE_SZ");
	touch(ready, NULL);

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 30000) <= 0)
			die("poll: no writer came");
		if (!strcmp(mode, "all")) {
			char buf[4096];
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n > 0) {
				if (write(o, buf, (size_t)n) != n)
					die("write");
				continue;
			}
			if (n == 0 && (p.revents & POLLHUP))
				break;
			if (n < 0 && errno != EAGAIN)
				die("read");
			continue;
		}
		/* stall/hangup: wait until the writer has filled the page. */
		int avail = 0;
		if (ioctl(fd, FIONREAD, &avail) < 0)
			die("FIONREAD");
		if (avail >= size) {
			touch(full, "full\n");
			if (!strcmp(mode, "hangup"))
				break;
			pause();   /* killed by the script */
		}
		if (p.revents & POLLHUP)
			break;
		usleep(10000);
	}
	close(fd);
	close(o);
	return 0;
}

static int busy(const char *file)
{
	static char buf[1 << 19];
	int null = open("/dev/null", O_WRONLY), zero = open("/dev/zero", O_RDONLY);
	int f = open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (null < 0 || zero < 0 || f < 0)
		die("open");
	for (size_t n = 1; n <= sizeof(buf); n *= 2) {
		struct iovec iov = { buf, n };
		if (read(zero, buf, n) < 0 || pread(zero, buf, n, 0) < 0 || readv(zero, &iov, 1) < 0 ||
		    write(null, buf, n) < 0 || pwrite(null, buf, n, 0) < 0 || writev(null, &iov, 1) < 0 ||
		    pwrite(f, buf, n, 0) < 0 || pread(f, buf, n, 0) < 0)
			die("busy I/O");
		if (pwritev(f, &iov, 1, 0) < 0 || preadv(f, &iov, 1, 0) < 0)
			die("busy vector I/O");
	}
	int p[2], sv[2];
	if (pipe(p) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		die("pipe/socketpair");
	for (size_t n = 1; n <= 32768; n *= 2)
		if (write(p[1], buf, n) != (ssize_t)n || read(p[0], buf, n) != (ssize_t)n ||
		    send(sv[0], buf, n, 0) != (ssize_t)n || recv(sv[1], buf, n, MSG_WAITALL) != (ssize_t)n)
			die("busy pipe/socket I/O");
	close(f);
	unlink(file);
	printf("busy ok\n");
	return 0;
}

static int broken_stderr(char **argv)
{
	int p[2];

	if (pipe(p) < 0)
		die("pipe");
	close(p[0]);
	if (dup2(p[1], 2) < 0)
		die("dup2");
	close(p[1]);
	/* SIGPIPE at its default, as in most programs. */
	signal(SIGPIPE, SIG_DFL);
	setenv("LD_PRELOAD", argv[0], 1);
	execv(argv[1], &argv[1]);
	die("execv");
	return 3;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "fd2"))
		return fd2(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "dump")) {
		raise(SIGUSR2);
		printf("after dump\n");
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "busy"))
		return busy(argv[2]);
	if (argc >= 6 && !strcmp(argv[1], "fifo-reader"))
		return fifo_reader(argv + 2);
	if (argc >= 4 && !strcmp(argv[1], "broken-stderr"))
		return broken_stderr(argv + 2);
	fprintf(stderr, "usage: report_helper fd2|dump|fifo-reader|broken-stderr ...\n");
	return 2;
}
