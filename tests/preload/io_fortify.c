// SPDX-License-Identifier: MIT
/*
 * Built with -O2 -D_FORTIFY_SOURCE=2, so that read, pread, pread64, recv
 * and recvfrom into a buffer of known size become __read_chk,
 * __pread_chk, __pread64_chk, __recv_chk and __recvfrom_chk (the .sh
 * checks with nm that they did).  For tests/preload/io_fortify.sh:
 *
 *   io_fortify ok            every call with a size that fits: right counts
 *                            and data; prints "fortify ok"
 *   io_fortify overflow CALL a child makes CALL with a size one byte over
 *                            the buffer; prints how the child ended and
 *                            whether the data it was offered is untouched
 *                            (the check comes before the read)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUF 64
static volatile size_t fits = BUF, over = BUF + 1;

static int fd_file(void)
{
	char path[] = "/tmp/io_fortify.XXXXXX";
	int fd = mkstemp(path);
	char data[200];
	if (fd < 0)
		exit(99);
	unlink(path);
	for (int k = 0; k < 200; k++)
		data[k] = (char)k;
	if (write(fd, data, 200) != 200)
		exit(99);
	return fd;
}

/* Each returns the call's result; buf is the fortified destination. */
static long do_call(const char *call, int fd, size_t n, char *out)
{
	char buf[BUF];
	long r;
	if (!strcmp(call, "read"))
		r = read(fd, buf, n);
	else if (!strcmp(call, "pread"))
		r = pread(fd, buf, n, 10);
	else if (!strcmp(call, "pread64"))
		r = pread64(fd, buf, n, 20);
	else if (!strcmp(call, "recv"))
		r = recv(fd, buf, n, 0);
	else if (!strcmp(call, "recvfrom"))
		r = recvfrom(fd, buf, n, 0, NULL, NULL);
	else {
		fprintf(stderr, "io_fortify: unknown call %s\n", call);
		exit(2);
	}
	if (r > 0)
		memcpy(out, buf, (size_t)r);
	return r;
}

/* A descriptor with 100 bytes 0..99 waiting (pipe, socket) or a file. */
static int source(const char *call, int *peer)
{
	int fds[2];
	char data[100];
	for (int k = 0; k < 100; k++)
		data[k] = (char)k;
	*peer = -1;
	if (!strncmp(call, "pread", 5))
		return fd_file();
	if (!strcmp(call, "read")) {
		if (pipe(fds))
			exit(99);
	} else if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds)) {
		exit(99);
	}
	if (write(fds[1], data, 100) != 100)
		exit(99);
	*peer = fds[1];
	return fds[0];
}

static const char *calls[] = { "read", "pread", "pread64", "recv", "recvfrom" };

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "ok")) {
		for (size_t k = 0; k < sizeof(calls) / sizeof(*calls); k++) {
			int peer, fd = source(calls[k], &peer);
			char out[BUF];
			errno = 777;
			long r = do_call(calls[k], fd, fits, out);
			int base = !strcmp(calls[k], "pread") ? 10 : !strcmp(calls[k], "pread64") ? 20 : 0;
			if (r != BUF || errno != 777) {
				printf("%s: %ld (errno %d), want %d\n", calls[k], r, errno, BUF);
				return 1;
			}
			for (int i = 0; i < BUF; i++)
				if (out[i] != (char)(base + i)) {
					printf("%s: wrong byte %d\n", calls[k], i);
					return 1;
				}
			close(fd);
			if (peer >= 0)
				close(peer);
		}
		printf("fortify ok\n");
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "overflow")) {
		int peer, fd = source(argv[2], &peer);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			char out[BUF + 1];
			long r = do_call(argv[2], fd, over, out);
			printf("%s returned %ld: not caught\n", argv[2], r);
			_exit(0);
		}
		int st, left = -1;
		if (waitpid(pid, &st, 0) != pid)
			return 99;
		if (peer >= 0 && ioctl(fd, FIONREAD, &left))
			return 99;
		if (WIFSIGNALED(st))
			printf("%s: child killed by signal %d (%s)", argv[2], WTERMSIG(st), strsignal(WTERMSIG(st)));
		else
			printf("%s: child exited %d", argv[2], WEXITSTATUS(st));
		if (peer >= 0)
			printf(", %d of 100 bytes still waiting\n", left);
		else
			printf("\n");
		return 0;
	}
	fprintf(stderr, "usage: io_fortify ok | overflow read|pread|pread64|recv|recvfrom\n");
	return 2;
}
