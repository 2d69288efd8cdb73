// SPDX-License-Identifier: MIT
/*
 * What a program does to its own pooled buffers, and to its threads, must
 * hold for its O_DIRECT I/O exactly as without the shim (issues 25, 27).
 * One mode per run (argv[1]); tests/preload/io_uring_coherent.sh runs
 * each without the shim (the kernel's answer, which this program checks)
 * and under it.
 *
 *   memlock    one O_DIRECT pread into a pooled buffer, then the program's
 *              own io_uring_register_buffers of 6 MiB must succeed, and so
 *              must a neighbour process's (exec'd without the shim) while
 *              this one lives: run as a user without CAP_IPC_LOCK under an
 *              8 MiB RLIMIT_MEMLOCK, which pinned pool memory would eat
 *   dontneed   after madvise(MADV_DONTNEED) on the buffer, pread fills the
 *              program's pages with the file's bytes, and pwrite writes
 *              what the buffer holds now (zeros)
 *   protect    read-only by raw mprotect and pkey_mprotect system calls,
 *              and a page unmapped by a raw munmap: pread fails EFAULT
 *   cancel CALL  pthread_cancel of a thread looping on CALL (pread, pwrite,
 *              preadv, pwritev; nothing else in the loop is a
 *              cancellation point) ends it as PTHREAD_CANCELED
 *
 * Exit 0 when right, 1 when wrong, 77 when O_DIRECT or io_uring is
 * unavailable here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024UL * 1024)
#define FILE_SIZE (16 * MiB)
#define BUF (1 * MiB)

static char dir[256], path[300];
static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("FAIL: " __VA_ARGS__);                        \
			printf("\n");                                        \
			failures++;                                          \
		}                                                            \
	} while (0)

static void cleanup(void)
{
	if (path[0])
		unlink(path);
	if (dir[0])
		rmdir(dir);
}

static void die(const char *what)
{
	printf("io_uring_coherent: %s: %s\n", what, strerror(errno));
	cleanup();
	exit(99);
}

static void skip(const char *why)
{
	printf("io_uring_coherent: %s\n", why);
	cleanup();
	exit(77);
}

/* Byte at file offset i: never zero, so a zero-filled buffer never matches. */
static unsigned char pattern(uint64_t i)
{
	return (unsigned char)(1 + (i * 2654435761u >> 7) % 251);
}

/* A 16 MiB file of the pattern in a fresh directory that takes O_DIRECT. */
static int make_file(void)
{
	const char *base = getenv("PST_IO_DIR");
	snprintf(dir, sizeof(dir), "%s/pst-coherent.XXXXXX", base ? base : "/var/tmp");
	if (!mkdtemp(dir)) {
		dir[0] = '\0';
		die("mkdtemp");
	}
	snprintf(path, sizeof(path), "%s/f", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		die("create");
	static unsigned char chunk[64 * 1024];
	for (uint64_t at = 0; at < FILE_SIZE; at += sizeof(chunk)) {
		for (size_t i = 0; i < sizeof(chunk); i++)
			chunk[i] = pattern(at + i);
		if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			die("write");
	}
	fsync(fd);
	close(fd);
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0 && errno == EINVAL)
		skip("no O_DIRECT here");
	if (fd < 0)
		die("open O_DIRECT");
	return fd;
}

/* Offset of the first byte of buf that is not the file's at off, or -1. */
static long mismatch(const unsigned char *buf, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != pattern(off + i))
			return (long)i;
	return -1;
}

/* A pooled buffer under the shim: 1 MiB, 4 KiB aligned, from malloc's family. */
static unsigned char *pooled(void)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, BUF))
		die("posix_memalign");
	memset(p, 0xee, BUF);
	return p;
}

/* Register 6 MiB of fresh 4 KiB pages with a ring of our own: 0 or -errno. */
static int register_6m(void)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(8, &ring, 0);
	if (ret < 0)
		return ret;
	size_t len = 6 * MiB;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	madvise(p, len, MADV_NOHUGEPAGE);
	memset(p, 1, len);
	struct iovec iov = { p, len };
	ret = io_uring_register_buffers(&ring, &iov, 1);
	if (ret == 0)
		io_uring_unregister_buffers(&ring);
	io_uring_queue_exit(&ring);
	munmap(p, len);
	return ret;
}

static int mode_neighbour(void)
{
	char go;
	/* Wait for the word: the other process has done its I/O and registration. */
	if (read(0, &go, 1) != 1)
		return 98;
	int ret = register_6m();
	printf("neighbour: io_uring_register_buffers(6 MiB) = %d (%s)\n", ret,
	       ret ? strerror(-ret) : "ok");
	return ret == 0 ? 0 : 1;
}

static int mode_memlock(int fd)
{
	/*
	 * A neighbour of the same user, not under the shim, started first:
	 * a fork after our I/O would see us drop whatever we hold for fork.
	 * It registers when told, while we live.
	 */
	int word[2];
	if (pipe(word) < 0)
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char *argv[] = { "io_uring_coherent", "neighbour", NULL };
		char *envp[] = { "PATH=/usr/bin:/bin", NULL };
		dup2(word[0], 0);
		execve("/proc/self/exe", argv, envp);
		_exit(98);
	}
	close(word[0]);

	unsigned char *buf = pooled();
	ssize_t n = pread(fd, buf, BUF, 0);
	CHECK(n == (ssize_t)BUF && mismatch(buf, BUF, 0) < 0, "pread: %zd", n);

	int ret = register_6m();
	if (ret == -ENOSYS || ret == -EPERM || ret == -EACCES)
		skip("io_uring unavailable");
	CHECK(ret == 0, "the program's own io_uring_register_buffers(6 MiB) after an O_DIRECT "
			"pread: %s (pool memory pinned against RLIMIT_MEMLOCK?)", strerror(-ret));
	if (ret == 0)
		printf("own: io_uring_register_buffers(6 MiB) = 0\n");

	if (write(word[1], "g", 1) != 1)
		die("write to the neighbour");
	close(word[1]);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "a neighbour process of the same user could not register 6 MiB (status %#x)", st);

	/* The pooled buffer still reads right, and is ours until now. */
	n = pread(fd, buf, BUF, 2 * MiB);
	CHECK(n == (ssize_t)BUF && mismatch(buf, BUF, 2 * MiB) < 0, "second pread: %zd", n);
	free(buf);
	return 0;
}

static int mode_dontneed(int fd)
{
	unsigned char *buf = pooled();
	/* One read first: a shim that registers the buffer does it now. */
	ssize_t n = pread(fd, buf, BUF, 0);
	CHECK(n == (ssize_t)BUF && mismatch(buf, BUF, 0) < 0, "pread: %zd", n);

	if (madvise(buf, BUF, MADV_DONTNEED) < 0)
		die("madvise");
	n = pread(fd, buf, BUF, 4 * MiB);
	long at = mismatch(buf, BUF, 4 * MiB);
	CHECK(n == (ssize_t)BUF && at < 0,
	      "pread after MADV_DONTNEED returned %zd but byte %ld is %#x, not the file's %#x", n,
	      at, at < 0 ? 0 : buf[at], at < 0 ? 0 : pattern(4 * MiB + (uint64_t)at));
	printf("dontneed: pread after MADV_DONTNEED: %zd bytes, %s\n", n,
	       at < 0 ? "the file's" : "NOT the file's");

	/* The buffer as it is now, zeros, is what pwrite must write. */
	if (madvise(buf, BUF, MADV_DONTNEED) < 0)
		die("madvise");
	n = pwrite(fd, buf, BUF, 8 * MiB);
	CHECK(n == (ssize_t)BUF, "pwrite after MADV_DONTNEED: %zd (%s)", n, strerror(errno));
	static unsigned char back[BUF] __attribute__((aligned(4096)));
	long got = syscall(SYS_pread64, fd, back, BUF, 8 * MiB);
	size_t nonzero = 0;
	for (size_t i = 0; i < BUF; i++)
		nonzero += back[i] != 0;
	CHECK(got == (long)BUF && nonzero == 0,
	      "pwrite after MADV_DONTNEED wrote %zu non-zero bytes (the old contents)", nonzero);
	printf("dontneed: pwrite after MADV_DONTNEED wrote %zu non-zero bytes\n", nonzero);
	free(buf);
	return 0;
}

/* pread into buf after a raw system call changed it: must fail EFAULT. */
static void expect_efault(int fd, unsigned char *buf, size_t len, const char *what)
{
	errno = 0;
	ssize_t n = pread(fd, buf, len, 0);
	int err = errno;
	CHECK(n == -1 && err == EFAULT, "pread after %s: %zd (%s), want -1 EFAULT", what, n,
	      strerror(err));
	printf("protect: pread after %s: %zd (%s)\n", what, n, n < 0 ? strerror(err) : "ok");
}

static int mode_protect(int fd)
{
	unsigned char *buf = pooled();
	ssize_t n = pread(fd, buf, BUF, 0);
	CHECK(n == (ssize_t)BUF && mismatch(buf, BUF, 0) < 0, "pread: %zd", n);

	/* Raw system calls: the shim's mprotect door never sees them. */
	if (syscall(SYS_mprotect, buf, BUF, PROT_READ) < 0)
		die("mprotect");
	expect_efault(fd, buf, BUF, "a raw mprotect(PROT_READ)");
	if (syscall(SYS_mprotect, buf, BUF, PROT_READ | PROT_WRITE) < 0)
		die("mprotect back");

	n = pread(fd, buf, BUF, 0);
	CHECK(n == (ssize_t)BUF, "pread after protection came back: %zd", n);
	if (syscall(SYS_pkey_mprotect, buf, BUF, PROT_READ, -1) == 0) {
		expect_efault(fd, buf, BUF, "a raw pkey_mprotect(PROT_READ, -1)");
		if (syscall(SYS_mprotect, buf, BUF, PROT_READ | PROT_WRITE) < 0)
			die("mprotect back");
	}

	/*
	 * The last page unmapped behind the allocator's back: the buffer is
	 * the program's to break (it is never freed), and the kernel
	 * answers EFAULT for the whole call.
	 */
	n = pread(fd, buf, BUF, 0);
	CHECK(n == (ssize_t)BUF, "pread before munmap: %zd", n);
	if (syscall(SYS_munmap, buf + BUF - 4096, 4096) < 0)
		die("munmap");
	expect_efault(fd, buf, BUF, "a raw munmap of its last page");
	return 0;
}

enum call { C_PREAD, C_PWRITE, C_PREADV, C_PWRITEV };
static enum call cancel_call;
static int cancel_fd;
static volatile int started, cleaned;

static void on_cleanup(void *arg)
{
	(void)arg;
	cleaned = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *cancel_thread(void *arg)
{
	unsigned char *buf = arg;
	double t0 = now();
	void *volatile ret = (void *)1;

	pthread_cleanup_push(on_cleanup, NULL);
	/* Only the call itself is a cancellation point in this loop. */
	for (unsigned i = 0; now() - t0 < 10; i++) {
		off_t off = (off_t)(i % 8) * (off_t)BUF;
		struct iovec iov[2] = { { buf, BUF / 2 }, { buf + BUF / 2, BUF / 2 } };
		ssize_t n = cancel_call == C_PREAD    ? pread(cancel_fd, buf, BUF, off)
			    : cancel_call == C_PWRITE ? pwrite(cancel_fd, buf, BUF, off)
			    : cancel_call == C_PREADV ? preadv(cancel_fd, iov, 2, off)
						      : pwritev(cancel_fd, iov, 2, off);
		if (n != (ssize_t)BUF) {
			ret = (void *)2;
			break;
		}
		__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	}
	pthread_cleanup_pop(0);
	return ret;
}

static int mode_cancel(int fd, const char *which)
{
	static const char *const names[] = { "pread", "pwrite", "preadv", "pwritev" };
	int c = -1;
	for (int i = 0; i < 4; i++)
		if (which && !strcmp(which, names[i]))
			c = i;
	if (c < 0) {
		printf("io_uring_coherent: cancel needs pread, pwrite, preadv or pwritev\n");
		return 99;
	}
	cancel_call = (enum call)c;
	cancel_fd = fd;
	unsigned char *buf = pooled();
	if (pread(fd, buf, BUF, 0) != (ssize_t)BUF)
		die("pread");

	pthread_t th;
	if (pthread_create(&th, NULL, cancel_thread, buf))
		die("pthread_create");
	while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(20000);
	pthread_cancel(th);
	void *ret;
	pthread_join(th, &ret);
	const char *how = ret == PTHREAD_CANCELED ? "cancelled"
			  : ret == (void *)1      ? "returned normally after 10 s"
						  : "failed";
	printf("cancel: a thread looping on %s: %s\n", names[c], how);
	CHECK(ret == PTHREAD_CANCELED && cleaned, "%s is no cancellation point: the thread %s",
	      names[c], how);

	/* The shim still reads right on this thread after the other was cancelled. */
	ssize_t n = pread(fd, buf, BUF, 3 * MiB);
	CHECK(n == (ssize_t)BUF && (c == C_PWRITE || c == C_PWRITEV || mismatch(buf, BUF, 3 * MiB) < 0),
	      "pread after the cancel: %zd", n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		printf("usage: io_uring_coherent memlock|dontneed|protect|cancel CALL\n");
		return 99;
	}
	if (!strcmp(argv[1], "neighbour"))
		return mode_neighbour();
	int fd = make_file();
	int rc = 99;
	if (!strcmp(argv[1], "memlock"))
		rc = mode_memlock(fd);
	else if (!strcmp(argv[1], "dontneed"))
		rc = mode_dontneed(fd);
	else if (!strcmp(argv[1], "protect"))
		rc = mode_protect(fd);
	else if (!strcmp(argv[1], "cancel"))
		rc = mode_cancel(fd, argv[2]);
	close(fd);
	cleanup();
	if (rc)
		return rc;
	return failures ? 1 : 0;
}
