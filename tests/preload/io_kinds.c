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
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
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

int main(void)
{
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
