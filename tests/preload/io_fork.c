// SPDX-License-Identifier: MIT
/*
 * fork and O_DIRECT I/O on pooled buffers: the parent's ring (if any) is
 * never inherited, so a child that reads and writes builds its own.  The
 * parent does I/O before the fork (a ring exists), the child reads into a
 * buffer allocated before the fork and into fresh ones, writes a region,
 * and exits; the parent checks the child's writes and keeps working.  Also
 * a child of a child, and a child that execs nothing but exits at once.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_common.h"
#include "lib.h"

#define MiB (1024UL * 1024)
#define FSIZE (32 * MiB)
#define SEED 0xf0f0

static char *path;

/* Read the whole file in large preads and check it against the pattern,
 * except [hole, hole+hlen) which must hold the pattern of seed2 instead. */
static int verify(int fd, size_t step, uint64_t hole, uint64_t hlen, uint64_t seed2)
{
	unsigned char *buf = pio_alloc(step);
	for (uint64_t off = 0; off < FSIZE; off += step) {
		ssize_t r = pread(fd, buf, step, (off_t)off);
		if (r != (ssize_t)(FSIZE - off < step ? FSIZE - off : step))
			return 1;
		for (uint64_t k = 0; k < (uint64_t)r; k += 4096) {
			uint64_t at = off + k;
			bool in = at >= hole && at < hole + hlen;
			if (pio_diff(buf + k, 4096, in ? at - hole : at, in ? seed2 : SEED) >= 0)
				return 2;
		}
	}
	free(buf);
	return 0;
}

static int child_work(int fd, unsigned char *inherited, uint64_t seed2)
{
	/* a buffer from before the fork, then fresh ones */
	if (pread(fd, inherited, 8 * MiB, 0) != 8 * MiB || pio_diff(inherited, 8 * MiB, 0, SEED) >= 0)
		return 10;
	int r = verify(fd, 3 * MiB, 0, 0, 0);
	if (r)
		return 20 + r;
	unsigned char *w = pio_alloc(4 * MiB);
	pio_fill(w, 4 * MiB, 0, seed2);
	if (pwrite(fd, w, 4 * MiB, 8 * MiB) != 4 * MiB)
		return 30;
	free(w);
	return verify(fd, 5 * MiB, 8 * MiB, 4 * MiB, seed2) ? 40 : 0;
}

static void restore(int fd)
{
	unsigned char *w = pio_alloc(4 * MiB);
	pio_fill(w, 4 * MiB, 8 * MiB, SEED);
	ck_assert_int_eq(pwrite(fd, w, 4 * MiB, 8 * MiB), 4 * MiB);
	free(w);
}

static int wait_child(pid_t pid)
{
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "child died: status %#x", status);
	return WEXITSTATUS(status);
}

START_TEST(test_fork_child_io)
{
	int fd = pio_open_direct(path, O_RDWR);
	unsigned char *buf = pio_alloc(8 * MiB);
	/* the parent uses the ring before the fork */
	ck_assert_int_eq(verify(fd, 4 * MiB, 0, 0, 0), 0);
	for (int round = 0; round < 3; round++) {
		fflush(NULL);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		/* exit(), not _exit(): the child writes its own report (io_direct.sh reads it) */
		if (pid == 0)
			exit(child_work(fd, buf, 0xc0de + (uint64_t)round));
		int rc = wait_child(pid);
		ck_assert_msg(rc == 0, "child round %d failed with %d", round, rc);
		/* the parent sees the child's write, with its own ring */
		ck_assert_int_eq(verify(fd, 2 * MiB, 8 * MiB, 4 * MiB, 0xc0de + (uint64_t)round), 0);
		restore(fd);
		ck_assert_int_eq(verify(fd, 1 * MiB, 0, 0, 0), 0);
	}
	free(buf);
	close(fd);
}
END_TEST

/* A child and a grandchild at once, while the parent reads too. */
START_TEST(test_fork_concurrent)
{
	int fd = pio_open_direct(path, O_RDONLY);
	unsigned char *buf = pio_alloc(16 * MiB);
	ck_assert_int_eq(pread(fd, buf, 16 * MiB, 0), 16 * MiB);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		pid_t g = fork();
		if (g < 0)
			_exit(50);
		int rc = verify(fd, 6 * MiB, 0, 0, 0);
		if (g == 0)
			_exit(rc ? 60 + rc : 0);
		int st;
		if (waitpid(g, &st, 0) != g || !WIFEXITED(st))
			_exit(70);
		_exit(rc ? rc : WEXITSTATUS(st));
	}
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(verify(fd, 7 * MiB, 0, 0, 0), 0);
	int rc = wait_child(pid);
	ck_assert_msg(rc == 0, "child or grandchild failed with %d", rc);
	ck_assert_int_lt(pio_diff(buf, 16 * MiB, 0, SEED), 0);
	free(buf);
	close(fd);
}
END_TEST

/* Parent and child share the file offset of a descriptor open before the fork. */
START_TEST(test_fork_shared_offset)
{
	int fd = pio_open_direct(path, O_RDWR);
	unsigned char *buf = pio_alloc(4 * MiB);
	ck_assert_int_eq(read(fd, buf, 2 * MiB), 2 * MiB);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		ssize_t r = read(fd, buf, 3 * MiB);
		_exit(r == 3 * MiB && pio_diff(buf, 3 * MiB, 2 * MiB, SEED) < 0 ? 0 : 1);
	}
	ck_assert_int_eq(wait_child(pid), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 5 * MiB);
	ck_assert_int_eq(read(fd, buf, 4 * MiB), 4 * MiB);
	ck_assert_int_lt(pio_diff(buf, 4 * MiB, 5 * MiB, SEED), 0);
	free(buf);
	close(fd);
}
END_TEST

/* Free hugetlb memory in bytes (HugePages_Free x Hugepagesize), 0 if none. */
static uint64_t hugetlb_free(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	uint64_t pages = 0, kib = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "HugePages_Free: %lu", &pages);
		sscanf(line, "Hugepagesize: %lu kB", &kib);
	}
	fclose(f);
	return pages * kib * 1024;
}

/*
 * fork after a large buffer was used for O_DIRECT I/O.  Without the shim
 * fork just shares the pages copy-on-write.  Pages pinned for io_uring
 * (registered buffers) must instead be copied during fork itself, which for
 * a hugetlb pool needs as many free hugetlb pages again: size the buffer to
 * what is free, so that a pool left pinned across fork makes fork fail
 * (ENOMEM) where the kernel alone would not.
 */
START_TEST(test_fork_after_large_io)
{
	uint64_t hfree = hugetlb_free();
	size_t n = (size_t)(hfree / 10 * 6) & ~(size_t)(2 * MiB - 1);
	if (n > 512 * MiB)
		n = 512 * MiB;
	if (n < 32 * MiB)
		n = 32 * MiB;
	int fd = pio_open_direct(path, O_RDONLY);
	unsigned char *buf = pio_alloc(n);
	for (size_t off = 0; off < n; off += FSIZE)
		ck_assert_int_eq(pread(fd, buf + off, n - off < FSIZE ? n - off : FSIZE, 0),
				 (ssize_t)(n - off < FSIZE ? n - off : FSIZE));
	for (int i = 0; i < 3; i++) {
		fflush(NULL);
		pid_t pid = fork();
		ck_assert_msg(pid >= 0, "fork after I/O into a %zu MiB buffer (%llu MiB of hugetlb pages were free): %s",
			      n >> 20, (unsigned long long)(hfree >> 20), strerror(errno));
		if (pid == 0)
			_exit(pio_diff(buf, FSIZE, 0, SEED) < 0 ? 0 : 1);
		ck_assert_int_eq(wait_child(pid), 0);
	}
	free(buf);
	close(fd);
}
END_TEST

/* A child that only exits (its exit must not wait on or tear down the parent's ring). */
START_TEST(test_fork_exit)
{
	int fd = pio_open_direct(path, O_RDONLY);
	ck_assert_int_eq(verify(fd, 8 * MiB, 0, 0, 0), 0);
	for (int i = 0; i < 5; i++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			exit(0);
		ck_assert_int_eq(wait_child(pid), 0);
		ck_assert_int_eq(verify(fd, 8 * MiB, 0, 0, 0), 0);
	}
	close(fd);
}
END_TEST

int main(void)
{
	pio_require_direct();
	path = pio_path("forked");
	pio_make_file(path, FSIZE, SEED);
	Suite *s = suite_create("io_fork");
	TCase *tc = tcase_create("fork");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_fork_child_io);
	tcase_add_test(tc, test_fork_concurrent);
	tcase_add_test(tc, test_fork_shared_offset);
	tcase_add_test(tc, test_fork_exit);
	tcase_add_test(tc, test_fork_after_large_io);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pio_cleanup();
	return failed ? 1 : 0;
}
