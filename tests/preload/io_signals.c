// SPDX-License-Identifier: MIT
/*
 * Signals and blocking I/O under the shim, as the kernel defines them:
 * without SA_RESTART a blocking read/recv on a pipe or socket returns -1
 * EINTR; with SA_RESTART it restarts and returns the data sent later; a
 * handler that itself calls write() and read() works, during blocking reads
 * and while the thread it interrupts is inside a stream of interposed calls
 * (the pass-through path takes no lock and allocates nothing); and O_DIRECT
 * preads that go through io_uring are never cut short by a signal (a
 * regular-file read is not interruptible: full count, right data).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "io_common.h"
#include "lib.h"

#define MiB (1024UL * 1024)

static atomic_int delivered, handler_failures;
static int handler_fd = -1;     /* the handler writes one byte here, if >= 0 */
static int handler_pipe[2];     /* and writes then reads back one byte here */

static void on_signal(int sig)
{
	int saved = errno;
	char c = 's';
	(void)sig;
	atomic_fetch_add(&delivered, 1);
	if (handler_fd >= 0 && write(handler_fd, &c, 1) != 1)
		atomic_fetch_add(&handler_failures, 1);
	if (write(handler_pipe[1], &c, 1) != 1 || read(handler_pipe[0], &c, 1) != 1 || c != 's')
		atomic_fetch_add(&handler_failures, 1);
	errno = saved;
}

static void set_handler(bool restart)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	ck_assert_int_eq(pipe2(handler_pipe, O_CLOEXEC), 0);
	atomic_store(&delivered, 0);
	atomic_store(&handler_failures, 0);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Wait until thread tid sleeps in system call nr (from /proc/self/task/TID/
 * syscall), or stop is set; so that a signal surely interrupts the blocking
 * call rather than arriving just before it.  Without that file (no /proc),
 * a 50 ms pause stands in.
 */
static void wait_blocked(pid_t tid, long nr, atomic_int *stop_flag)
{
	char path[64], buf[128];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	for (int tries = 0; tries < 10000 && !atomic_load(stop_flag); tries++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			sleep_ms(50);
			return;
		}
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		close(fd);
		if (n <= 0) {
			sleep_ms(50);
			return;
		}
		buf[n] = '\0';
		if (strtol(buf, NULL, 10) == nr && strncmp(buf, "running", 7))
			return;
		sleep_ms(1);
	}
}

/* A thread that signals the main thread every `every_ms` until `stop`, and
 * after `then_after` signals writes `data` to `fd` (if fd >= 0).  With
 * blocked_in >= 0 it signals only while the main thread sleeps in that
 * system call. */
struct signaller {
	pthread_t target;
	pid_t tid;
	long blocked_in;
	int every_ms;
	int then_after;
	int fd;
	const char *data;
	atomic_int stop;
	pthread_t self;
};

static void *signaller_main(void *arg)
{
	struct signaller *s = arg;
	for (int n = 0; !atomic_load(&s->stop); n++) {
		if (n == s->then_after && s->fd >= 0) {
			if (write(s->fd, s->data, strlen(s->data)) < 0)
				atomic_fetch_add(&handler_failures, 1);
		}
		if (s->blocked_in >= 0)
			wait_blocked(s->tid, s->blocked_in, &s->stop);
		pthread_kill(s->target, SIGUSR1);
		if (s->every_ms)
			sleep_ms(s->every_ms);
		else {
			/*
			 * As fast as they come, but not faster than the target
			 * can take them: an unthrottled loop on the other core
			 * kept a thread inside signal delivery for over a minute.
			 */
			struct timespec ts = { 0, 50000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static void start(struct signaller *s, long blocked_in, int every_ms, int then_after, int fd,
		  const char *data)
{
	s->target = pthread_self();
	s->tid = gettid();
	s->blocked_in = blocked_in;
	s->every_ms = every_ms;
	s->then_after = then_after;
	s->fd = fd;
	s->data = data;
	atomic_store(&s->stop, 0);
	ck_assert_int_eq(pthread_create(&s->self, NULL, signaller_main, s), 0);
}

static void stop(struct signaller *s)
{
	atomic_store(&s->stop, 1);
	pthread_join(s->self, NULL);
}

enum { C_READ, C_READV, C_RECV, C_RECVFROM, C_RECVMSG, C_RECVMMSG, C_NCALLS };
static const char *call_names[] = { "read", "readv", "recv", "recvfrom", "recvmsg", "recvmmsg" };
/* the system call each makes (recv is recvfrom on Linux) */
static const long call_nrs[] = { SYS_read, SYS_readv, SYS_recvfrom, SYS_recvfrom, SYS_recvmsg, SYS_recvmmsg };

/* One blocking receive by the given call; returns its result and errno. */
static struct pio_res blocking_call(int call, int fd, char *buf, size_t n)
{
	struct iovec iov = { buf, n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct mmsghdr mm = { .msg_hdr = mh };
	switch (call) {
	case C_READ: return PIO_CALL(read(fd, buf, n));
	case C_READV: return PIO_CALL(readv(fd, &iov, 1));
	case C_RECV: return PIO_CALL(recv(fd, buf, n, 0));
	case C_RECVFROM: return PIO_CALL(recvfrom(fd, buf, n, 0, NULL, NULL));
	case C_RECVMSG: return PIO_CALL(recvmsg(fd, &mh, 0));
	default: {
		struct pio_res r = PIO_CALL(recvmmsg(fd, &mm, 1, 0, NULL));
		if (r.ret == 1)
			r.ret = mm.msg_len;
		return r;
	}
	}
}

/* fds[0] reads, fds[1] writes: a pipe (pipe=true) or a stream socketpair. */
static void endpoints(bool is_pipe, int fds[2])
{
	if (is_pipe)
		ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	else
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
}

static void close2(int fds[2])
{
	close(fds[0]);
	close(fds[1]);
}

START_TEST(test_eintr)
{
	for (int call = 0; call < C_NCALLS; call++)
		for (int p = 0; p < 2; p++) {
			bool is_pipe = p == 0;
			if (is_pipe && call >= C_RECV)
				continue;
			int fds[2];
			char buf[64];
			struct signaller s;
			endpoints(is_pipe, fds);
			set_handler(false);
			start(&s, call_nrs[call], 20, -1, -1, NULL);
			struct pio_res r = blocking_call(call, fds[0], buf, sizeof(buf));
			stop(&s);
			ck_assert_msg(r.ret == -1 && r.err == EINTR, "%s on a %s: %ld/%d, want -1/EINTR",
				      call_names[call], is_pipe ? "pipe" : "socket", r.ret, r.err);
			ck_assert_int_ge(atomic_load(&delivered), 1);
			ck_assert_int_eq(atomic_load(&handler_failures), 0);
			close2(fds);
			close2(handler_pipe);
		}
}
END_TEST

START_TEST(test_restart)
{
	for (int call = 0; call < C_NCALLS; call++)
		for (int p = 0; p < 2; p++) {
			bool is_pipe = p == 0;
			if (is_pipe && call >= C_RECV)
				continue;
			int fds[2];
			char buf[64] = { 0 };
			struct signaller s;
			endpoints(is_pipe, fds);
			set_handler(true);
			/* 6 signals 15 ms apart while blocked, then the data */
			start(&s, call_nrs[call], 15, 6, fds[1], "hello");
			struct pio_res r = blocking_call(call, fds[0], buf, sizeof(buf));
			stop(&s);
			ck_assert_msg(r.ret == 5 && !memcmp(buf, "hello", 5),
				      "%s on a %s with SA_RESTART: %ld/%d '%.*s', want 5 'hello'",
				      call_names[call], is_pipe ? "pipe" : "socket", r.ret, r.err,
				      r.ret > 0 ? (int)r.ret : 0, buf);
			ck_assert_int_ge(atomic_load(&delivered), 1);
			ck_assert_int_eq(atomic_load(&handler_failures), 0);
			close2(fds);
			close2(handler_pipe);
		}
}
END_TEST

/* The handler writes into the very pipe/socket the main thread is blocked on. */
START_TEST(test_handler_writes)
{
	for (int restart = 0; restart < 2; restart++)
		for (int p = 0; p < 2; p++) {
			int fds[2];
			char buf[64];
			struct signaller s;
			endpoints(p == 0, fds);
			set_handler(restart);
			handler_fd = fds[1];
			start(&s, p ? SYS_recvfrom : SYS_read, 30, -1, -1, NULL);
			struct pio_res r = blocking_call(p ? C_RECV : C_READ, fds[0], buf, sizeof(buf));
			stop(&s);
			handler_fd = -1;
			if (restart)
				/* restarted, then woken by the handler's own byte(s) */
				ck_assert_msg(r.ret >= 1 && buf[0] == 's', "SA_RESTART: %ld/%d", r.ret, r.err);
			else
				ck_assert_msg(r.ret == -1 && r.err == EINTR, "no SA_RESTART: %ld/%d", r.ret, r.err);
			ck_assert_int_eq(atomic_load(&handler_failures), 0);
			/* whatever the handler wrote is there, in order */
			int fl = fcntl(fds[0], F_GETFL);
			fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
			long total = r.ret > 0 ? r.ret : 0;
			ssize_t n;
			while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
				for (ssize_t k = 0; k < n; k++)
					ck_assert_int_eq(buf[k], 's');
				total += n;
			}
			ck_assert_int_eq(n, -1);
			ck_assert_int_eq(errno, EAGAIN);
			ck_assert_int_eq(total, atomic_load(&delivered));
			close2(fds);
			close2(handler_pipe);
		}
}
END_TEST

/* Signals as fast as they come while this thread makes interposed calls and
 * the handler makes its own: nothing deadlocks, every count is right. */
START_TEST(test_hammer)
{
	int pf[2], sp[2];
	char c = 'x';
	struct signaller s;
	ck_assert_int_eq(pipe2(pf, O_CLOEXEC), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	set_handler(true);
	start(&s, -1, 0, -1, -1, NULL);
	/*
	 * Bounded by time as well as count: how fast a signal storm lets this
	 * thread progress is the host's business (on the 2-core VM 30000
	 * rounds took from 10 to over 60 s, with or without the shim).
	 */
	int iters = (int)(30000 * pio_scale()), done = 0;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < iters; i++, done++) {
		if ((i & 63) == 63) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - t0.tv_sec >= 20)
				break;
		}
		ck_assert_int_eq(write(pf[1], &c, 1), 1);
		ck_assert_int_eq(read(pf[0], &c, 1), 1);
		ck_assert_int_eq(send(sp[1], &c, 1, 0), 1);
		ck_assert_int_eq(recv(sp[0], &c, 1, 0), 1);
		if ((i & 1023) == 0) {
			/* something that allocates, in the interrupted thread */
			void *p = malloc(1 * MiB);
			ck_assert_ptr_nonnull(p);
			memset(p, 1, 4096);
			free(p);
		}
	}
	stop(&s);
	ck_assert_int_ge(done, 64);
	ck_assert_int_gt(atomic_load(&delivered), 0);
	ck_assert_int_eq(atomic_load(&handler_failures), 0);
	close2(pf);
	close2(sp);
	close2(handler_pipe);
}
END_TEST

/* O_DIRECT preads through io_uring while signals (no SA_RESTART) arrive:
 * the kernel never returns EINTR or a short count for these, nor may the shim. */
START_TEST(test_direct_signals)
{
	char *path = pio_path("signals");
	const uint64_t fsize = 32 * MiB, seed = 0x5151;
	pio_make_file(path, fsize, seed);
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL)
		return;   /* no O_DIRECT here: nothing to test */
	ck_assert_int_ge(fd, 0);
	struct signaller s;
	set_handler(false);
	start(&s, -1, 1, -1, -1, NULL);
	unsigned char *buf = pio_alloc(16 * MiB);
	int iters = (int)(40 * pio_scale());
	for (int i = 0; i < iters; i++) {
		uint64_t off = (uint64_t)(i % 5) * 4 * MiB;
		ssize_t r = pread(fd, buf, 16 * MiB, (off_t)off);
		ck_assert_msg(r == 16 * MiB, "pread #%d under signals: %zd (errno %d)", i, r, errno);
		ck_assert_int_lt(pio_diff(buf, 16 * MiB, off, seed), 0);
		ck_assert_int_eq(lseek(fd, (off_t)off, SEEK_SET), (off_t)off);
		r = read(fd, buf, 16 * MiB);
		ck_assert_msg(r == 16 * MiB, "read #%d under signals: %zd (errno %d)", i, r, errno);
		ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), (off_t)(off + 16 * MiB));
	}
	stop(&s);
	ck_assert_int_eq(atomic_load(&handler_failures), 0);
	free(buf);
	close(fd);
	close2(handler_pipe);
	unlink(path);
	free(path);
}
END_TEST

int main(void)
{
	pio_dir();   /* made here, so that the forked test cases share it and it is removed */
	Suite *s = suite_create("io_signals");
	TCase *tc = tcase_create("signals");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_eintr);
	tcase_add_test(tc, test_restart);
	tcase_add_test(tc, test_handler_writes);
	tcase_add_test(tc, test_hammer);
	tcase_add_test(tc, test_direct_signals);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pio_cleanup();
	return failed ? 1 : 0;
}
