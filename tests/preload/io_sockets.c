// SPDX-License-Identifier: MIT
/*
 * Sockets pass through the shim unchanged: on empty non-blocking sockets
 * (AF_UNIX stream and datagram pairs, a TCP loopback pair) every receive
 * call fails with EAGAIN exactly like the direct system call; on success
 * errno is untouched; send/sendto/sendmsg/sendmmsg/writev/write return the
 * kernel's counts (filling a socket until EAGAIN takes the same bytes
 * through libc as through syscall(2)); MSG_PEEK, MSG_TRUNC and recvmmsg
 * on datagrams; EOF and EPIPE; large pooled buffers over TCP; sendfile and
 * splice.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io_common.h"
#include "lib.h"

#define MiB (1024UL * 1024)
#define SENTINEL 31337

#define SAME(got, want, what) \
	ck_assert_msg((got).ret == (want).ret && (got).err == (want).err, \
		      "%s: %ld/%d, kernel %ld/%d", what, (got).ret, (got).err, (want).ret, (want).err)

/* A success must leave errno alone. */
#define OK(expr, want) do { errno = SENTINEL; long r_ = (long)(expr); \
	ck_assert_msg(r_ == (long)(want), "%s = %ld (errno %d), want %ld", #expr, r_, errno, (long)(want)); \
	ck_assert_msg(errno == SENTINEL, "%s changed errno to %d on success", #expr, errno); } while (0)

static struct pio_res sys(long r)
{
	return (struct pio_res){ r, r < 0 ? errno : 0 };
}

static void tcp_pair(int fds[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(fds[1], (struct sockaddr *)&a, sizeof(a)), 0);
	fds[0] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fds[0], 0);
	close(l);
}

static void nonblock(int fd)
{
	ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* kind 0: unix stream, 1: unix datagram, 2: tcp loopback; both ends non-blocking */
static void make_pair(int kind, int fds[2])
{
	if (kind == 2)
		tcp_pair(fds);
	else
		ck_assert_int_eq(socketpair(AF_UNIX, (kind ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC,
					    0, fds), 0);
	nonblock(fds[0]);
	nonblock(fds[1]);
}

static const char *kinds[] = { "unix stream", "unix dgram", "tcp" };

START_TEST(test_eagain)
{
	int kind = _i, fds[2];
	char buf[256];
	char what[96];
	make_pair(kind, fds);
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct mmsghdr mm = { .msg_hdr = mh };
	struct pio_res want = sys(syscall(SYS_recvfrom, fds[0], buf, sizeof(buf), 0, NULL, NULL));
	ck_assert_int_eq(want.err, EAGAIN);
	for (int rep = 0; rep < 3; rep++) {
		snprintf(what, sizeof(what), "%s: recv", kinds[kind]);
		SAME(PIO_CALL(recv(fds[0], buf, sizeof(buf), 0)), want, what);
		snprintf(what, sizeof(what), "%s: read", kinds[kind]);
		SAME(PIO_CALL(read(fds[0], buf, sizeof(buf))), want, what);
		snprintf(what, sizeof(what), "%s: readv", kinds[kind]);
		SAME(PIO_CALL(readv(fds[0], &iov, 1)), want, what);
		snprintf(what, sizeof(what), "%s: recvfrom", kinds[kind]);
		SAME(PIO_CALL(recvfrom(fds[0], buf, sizeof(buf), 0, NULL, NULL)), want, what);
		snprintf(what, sizeof(what), "%s: recvmsg", kinds[kind]);
		SAME(PIO_CALL(recvmsg(fds[0], &mh, 0)), want, what);
		snprintf(what, sizeof(what), "%s: recvmmsg", kinds[kind]);
		SAME(PIO_CALL(recvmmsg(fds[0], &mm, 1, 0, NULL)), want, what);
		/* and on a blocking socket with MSG_DONTWAIT */
		fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) & ~O_NONBLOCK);
		snprintf(what, sizeof(what), "%s: recv(MSG_DONTWAIT)", kinds[kind]);
		SAME(PIO_CALL(recv(fds[0], buf, sizeof(buf), MSG_DONTWAIT)), want, what);
		nonblock(fds[0]);
	}
	/* a success in between leaves errno alone */
	OK(send(fds[1], "abc", 3, 0), 3);
	if (kind == 2) {
		struct pollfd p = { fds[0], POLLIN, 0 };
		ck_assert_int_eq(poll(&p, 1, 5000), 1);
	}
	OK(recv(fds[0], buf, sizeof(buf), 0), 3);
	snprintf(what, sizeof(what), "%s: recv after data", kinds[kind]);
	SAME(PIO_CALL(recv(fds[0], buf, sizeof(buf), 0)), want, what);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

static void wait_readable(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	ck_assert_int_eq(poll(&p, 1, 5000), 1);
}

/* Every send call's count, errno untouched, and the bytes arrive in order. */
START_TEST(test_send_counts)
{
	int kind = _i, fds[2];
	char out[64], in[512];
	make_pair(kind, fds);
	for (int k = 0; k < 64; k++)
		out[k] = (char)('A' + k % 26);
	struct iovec iov[3] = { { out, 5 }, { out + 5, 7 }, { out + 12, 1 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
	struct mmsghdr mm[3] = { { .msg_hdr = { .msg_iov = &iov[0], .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &iov[1], .msg_iovlen = 1 } },
				 { .msg_hdr = { .msg_iov = &iov[2], .msg_iovlen = 1 } } };
	OK(send(fds[1], out, 10, 0), 10);
	OK(sendto(fds[1], out, 11, 0, NULL, 0), 11);
	OK(sendmsg(fds[1], &mh, 0), 13);
	OK(sendmmsg(fds[1], mm, 3, 0), 3);
	ck_assert_int_eq(mm[0].msg_len, 5);
	ck_assert_int_eq(mm[1].msg_len, 7);
	ck_assert_int_eq(mm[2].msg_len, 1);
	OK(writev(fds[1], iov, 3), 13);
	OK(write(fds[1], out, 12), 12);
	const int lens[] = { 10, 11, 13, 5, 7, 1, 13, 12 };
	if (kind == 1) {
		/* datagrams: one message per send, one per receive */
		for (int k = 0; k < 8; k++)
			OK(recv(fds[0], in, sizeof(in), 0), lens[k]);
	} else {
		long total = 0;
		while (total < 72) {
			wait_readable(fds[0]);
			errno = SENTINEL;
			ssize_t r = read(fds[0], in + total, sizeof(in) - (size_t)total);
			ck_assert_int_gt(r, 0);
			ck_assert_int_eq(errno, SENTINEL);
			total += r;
		}
		ck_assert_int_eq(total, 72);
		long at = 0;
		const int starts[] = { 0, 0, 0, 0, 5, 12, 0, 0 };
		for (int k = 0; k < 8; k++) {
			/* sendmsg and writev send 13 contiguous bytes; sendmmsg 5+7+1 */
			ck_assert_int_eq(memcmp(in + at, out + starts[k], (size_t)lens[k]), 0);
			at += lens[k];
		}
	}
	close(fds[0]);
	close(fds[1]);
}
END_TEST

/* Filling a non-blocking socket: the same number of bytes, the same EAGAIN. */
START_TEST(test_fill_until_eagain)
{
	static char buf[100000];
	long through_libc = 0, through_sys = 0;
	struct pio_res last_libc = { 0, 0 }, last_sys = { 0, 0 };
	for (int way = 0; way < 2; way++) {
		int fds[2];
		make_pair(0, fds);
		long *total = way ? &through_sys : &through_libc;
		for (;;) {
			struct pio_res r = way ? sys(syscall(SYS_sendto, fds[1], buf, sizeof(buf), 0, NULL, 0))
					       : PIO_CALL(send(fds[1], buf, sizeof(buf), 0));
			if (r.ret < 0) {
				*(way ? &last_sys : &last_libc) = r;
				break;
			}
			*total += r.ret;
		}
		close(fds[0]);
		close(fds[1]);
	}
	ck_assert_int_eq(through_libc, through_sys);
	SAME(last_libc, last_sys, "send on a full socket");
}
END_TEST

START_TEST(test_datagram_flags)
{
	int fds[2];
	char msg[100], buf[200];
	make_pair(1, fds);
	for (int k = 0; k < 100; k++)
		msg[k] = (char)k;
	ck_assert_int_eq(send(fds[1], msg, 100, 0), 100);
	/* peek: the whole datagram, still there after */
	OK(recv(fds[0], buf, sizeof(buf), MSG_PEEK), 100);
	OK(recv(fds[0], buf, 10, MSG_PEEK), 10);
	/* MSG_TRUNC: the real length even into a short buffer */
	OK(recv(fds[0], buf, 10, MSG_PEEK | MSG_TRUNC), 100);
	struct pio_res want = sys(syscall(SYS_recvfrom, fds[0], buf, 10, MSG_PEEK | MSG_TRUNC, NULL, NULL));
	ck_assert_int_eq(want.ret, 100);
	/* recvmsg into a short buffer: 10 and MSG_TRUNC in msg_flags */
	struct iovec iov = { buf, 10 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	OK(recvmsg(fds[0], &mh, 0), 10);
	ck_assert(mh.msg_flags & MSG_TRUNC);
	ck_assert_int_eq(memcmp(buf, msg, 10), 0);
	/* consumed: the rest of that datagram is gone */
	ck_assert_int_eq(recv(fds[0], buf, sizeof(buf), 0), -1);
	ck_assert_int_eq(errno, EAGAIN);
	/* recvmmsg of 3 datagrams with room for 4 */
	for (int k = 1; k <= 3; k++)
		ck_assert_int_eq(send(fds[1], msg, (size_t)k * 10, 0), k * 10);
	char b[4][64];
	struct iovec iv[4];
	struct mmsghdr mm[4];
	memset(mm, 0, sizeof(mm));
	for (int k = 0; k < 4; k++) {
		iv[k] = (struct iovec){ b[k], sizeof(b[k]) };
		mm[k].msg_hdr.msg_iov = &iv[k];
		mm[k].msg_hdr.msg_iovlen = 1;
	}
	OK(recvmmsg(fds[0], mm, 4, MSG_DONTWAIT, NULL), 3);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(mm[k].msg_len, (unsigned)(k + 1) * 10);
	/* recvfrom with an address buffer on a socketpair: the kernel's length */
	ck_assert_int_eq(send(fds[1], msg, 7, 0), 7);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss), sl2 = sizeof(ss);
	OK(recvfrom(fds[0], buf, sizeof(buf), MSG_PEEK, (struct sockaddr *)&ss, &sl), 7);
	ck_assert_int_eq(syscall(SYS_recvfrom, fds[0], buf, sizeof(buf), 0, &ss, &sl2), 7);
	ck_assert_int_eq(sl, sl2);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

START_TEST(test_eof_epipe)
{
	int kind = _i == 0 ? 0 : 2, fds[2];
	char buf[16];
	make_pair(kind, fds);
	close(fds[1]);
	if (kind == 2)
		wait_readable(fds[0]);
	OK(recv(fds[0], buf, sizeof(buf), 0), 0);
	OK(read(fds[0], buf, sizeof(buf)), 0);
	close(fds[0]);
	make_pair(kind, fds);
	close(fds[0]);
	signal(SIGPIPE, SIG_IGN);
	/* TCP may take one send to learn of the reset: compare call by call */
	for (int k = 0; k < 3; k++) {
		struct pio_res got = PIO_CALL(send(fds[1], "x", 1, MSG_NOSIGNAL));
		struct pio_res want = sys(syscall(SYS_sendto, fds[1], "x", 1, MSG_NOSIGNAL, NULL, 0));
		if (got.ret < 0)
			ck_assert_msg(got.err == EPIPE || got.err == ECONNRESET, "send to closed: %d", got.err);
		if (got.ret < 0 && want.ret < 0)
			ck_assert_int_eq(got.err == ECONNRESET ? EPIPE : got.err, EPIPE);
	}
	struct pio_res got = PIO_CALL(write(fds[1], "x", 1));
	ck_assert_msg(got.ret == -1 && got.err == EPIPE, "write to closed: %ld/%d", got.ret, got.err);
	close(fds[1]);
}
END_TEST

/* Pooled buffers over TCP: send/recv of 1-8 MiB, data intact. */
START_TEST(test_tcp_large)
{
	int fds[2];
	tcp_pair(fds);
	size_t n = 8 * MiB;
	unsigned char *out = pio_alloc(n), *in = pio_alloc(n);
	pio_fill(out, n, 0, 0x7c9);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t sent = 0;
		while (sent < n) {
			ssize_t w = send(fds[1], out + sent, n - sent, 0);
			if (w <= 0)
				_exit(1);
			sent += (size_t)w;
		}
		_exit(0);
	}
	close(fds[1]);
	size_t got = 0;
	while (got < n) {
		ssize_t r = (got & 1) ? read(fds[0], in + got, n - got) : recv(fds[0], in + got, n - got, 0);
		ck_assert_int_gt(r, 0);
		got += (size_t)r;
	}
	ck_assert_int_eq(recv(fds[0], in, 1, 0), 0);
	ck_assert_int_lt(pio_diff(in, n, 0, 0x7c9), 0);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	free(out);
	free(in);
	close(fds[0]);
}
END_TEST

START_TEST(test_sendfile_splice)
{
	char *path = pio_path("sendfile");
	pio_make_file(path, 3 * MiB + 17, 0x5f);
	int f = open(path, O_RDONLY | O_CLOEXEC);
	int fds[2], p[2];
	ck_assert_int_ge(f, 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
	/* sendfile with an offset pointer: count, offset advanced, file offset untouched */
	off_t off = 1000;
	errno = SENTINEL;
	ssize_t r = sendfile(fds[1], f, &off, 4096);
	ck_assert_int_eq(r, 4096);
	ck_assert_int_eq(off, 1000 + 4096);
	ck_assert_int_eq(errno, SENTINEL);
	ck_assert_int_eq(lseek(f, 0, SEEK_CUR), 0);
	unsigned char buf[8192];
	ck_assert_int_eq(recv(fds[0], buf, 4096, MSG_WAITALL), 4096);
	ck_assert_int_lt(pio_diff(buf, 4096, 1000, 0x5f), 0);
	/* without: the file offset moves */
	ck_assert_int_eq(lseek(f, 3 * MiB, SEEK_SET), 3 * MiB);
	OK(sendfile(fds[1], f, NULL, 4096), 17);
	ck_assert_int_eq(lseek(f, 0, SEEK_CUR), 3 * MiB + 17);
	ck_assert_int_eq(recv(fds[0], buf, sizeof(buf), 0), 17);
	OK(sendfile(fds[1], f, NULL, 4096), 0);
	/* splice file -> pipe -> socket */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	loff_t in_off = 5;
	OK(splice(f, &in_off, p[1], NULL, 1000, 0), 1000);
	ck_assert_int_eq(in_off, 1005);
	OK(splice(p[0], NULL, fds[1], NULL, 1000, 0), 1000);
	ck_assert_int_eq(recv(fds[0], buf, 1000, MSG_WAITALL), 1000);
	ck_assert_int_lt(pio_diff(buf, 1000, 5, 0x5f), 0);
	/* errors: the kernel's */
	struct pio_res got = PIO_CALL(splice(p[0], NULL, fds[1], NULL, 10, SPLICE_F_NONBLOCK));
	struct pio_res want = sys(syscall(SYS_splice, p[0], NULL, fds[1], NULL, 10, SPLICE_F_NONBLOCK));
	SAME(got, want, "splice from an empty pipe");
	got = PIO_CALL(sendfile(fds[1], p[0], NULL, 10));
	want = sys(syscall(SYS_sendfile, fds[1], p[0], NULL, 10));
	SAME(got, want, "sendfile from a pipe");
	close(p[0]);
	close(p[1]);
	close(fds[0]);
	close(fds[1]);
	close(f);
	free(path);
}
END_TEST

int main(void)
{
	pio_dir();   /* made here, so that the forked test cases share it and it is removed */
	Suite *s = suite_create("io_sockets");
	TCase *tc = tcase_create("sockets");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_eagain, 0, 3);
	tcase_add_loop_test(tc, test_send_counts, 0, 3);
	tcase_add_test(tc, test_fill_until_eagain);
	tcase_add_test(tc, test_datagram_flags);
	tcase_add_loop_test(tc, test_eof_epipe, 0, 2);
	tcase_add_test(tc, test_tcp_large);
	tcase_add_test(tc, test_sendfile_splice);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pio_cleanup();
	return failed ? 1 : 0;
}
