// SPDX-License-Identifier: MIT
/*
 * The descriptor-kind table without preloading: entries on both sides of
 * every chunk boundary and far past 65536 (no test machine can raise
 * RLIMIT_NOFILE that far, so the numbers here are only table indices),
 * chunks mapped on first store and only then, ranges, copies, the rules
 * for open's path and flags and for F_SETFL, the probe for descriptors of
 * unknown origin, and the io_uring path's check against a FIFO given
 * O_DIRECT.  Each test uses numbers of its own, so the tests also pass
 * unforked (CK_FORK=no).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fdinfo.h"
#include "suites.h"

START_TEST(test_set_get_across_chunks)
{
	static const int fds[] = { 3, 65535, 65536, 70000, 1 << 20, (1 << 20) + 65535, INT_MAX };
	unsigned before = ps_fd_chunks_mapped();

	for (size_t i = 0; i < PS_ARRAY_SIZE(fds); i++)
		ck_assert_int_eq(ps_fd_peek(fds[i]), PS_FD_NONE);
	ps_fd_set(3, PS_FD_SOCKET);
	ps_fd_set(65535, PS_FD_PIPE);
	/* The first 65536 numbers live in static memory, and need no chunk pointers. */
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before);
	if (before == 0)
		ck_assert_ptr_null(ps_fd_chunks);
	ps_fd_set(65536, PS_FD_FILE);
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before + 1);
	ps_fd_set(70000, PS_FD_DIRECT);
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before + 1);
	ps_fd_set(1 << 20, PS_FD_OTHER);
	ps_fd_set((1 << 20) + 65535, PS_FD_SOCKET);
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before + 2);
	ps_fd_set(INT_MAX, PS_FD_PIPE);
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before + 3);

	ck_assert_int_eq(ps_fd_peek(3), PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(65535), PS_FD_PIPE);
	ck_assert_int_eq(ps_fd_peek(65536), PS_FD_FILE);
	ck_assert_int_eq(ps_fd_peek(70000), PS_FD_DIRECT);
	ck_assert_int_eq(ps_fd_peek(1 << 20), PS_FD_OTHER);
	ck_assert_int_eq(ps_fd_peek((1 << 20) + 65535), PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(INT_MAX), PS_FD_PIPE);
	/* Known entries are answered without a probe. */
	ck_assert_int_eq(ps_fd_kind(70000), PS_FD_DIRECT);
	/* Neighbours stay unknown. */
	ck_assert_int_eq(ps_fd_peek(4), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(65537), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(69999), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek((1 << 20) - 1), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(INT_MAX - 1), PS_FD_NONE);

	/* Overwrite and forget. */
	ps_fd_set(70000, PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(70000), PS_FD_SOCKET);
	ps_fd_forget(70000);
	ck_assert_int_eq(ps_fd_peek(70000), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(65536), PS_FD_FILE);
	ps_fd_forget(3);
	ps_fd_forget(65535);
	ck_assert_int_eq(ps_fd_peek(3), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(65535), PS_FD_NONE);
	ps_fd_forget_range(0, UINT_MAX);
}
END_TEST

START_TEST(test_no_chunk_without_need)
{
	unsigned before = ps_fd_chunks_mapped();

	/* Forgetting, copying unknown, reading: nothing to store, nothing mapped. */
	ps_fd_forget(5 << 20);
	ps_fd_copy(6, 6 << 20);
	ck_assert_int_eq(ps_fd_peek(7 << 20), PS_FD_NONE);
	ps_fd_forget_range(8 << 20, UINT_MAX);
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before);
	/* Negative numbers are never stored, and read as unknown. */
	ps_fd_set(-1, PS_FD_SOCKET);
	ps_fd_set(INT_MIN, PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(-1), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(INT_MIN), PS_FD_NONE);
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before);
}
END_TEST

START_TEST(test_forget_range)
{
	static const int fds[] = { 40, 65534, 65535, 65536, 65537, 131071, 131072, 3 << 20 };
	for (size_t i = 0; i < PS_ARRAY_SIZE(fds); i++)
		ps_fd_set(fds[i], PS_FD_SOCKET);

	ps_fd_forget_range(65535, 131071);
	ck_assert_int_eq(ps_fd_peek(40), PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(65534), PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(65535), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(65536), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(65537), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(131071), PS_FD_NONE);
	ck_assert_int_eq(ps_fd_peek(131072), PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(3 << 20), PS_FD_SOCKET);

	/* An empty range (lo > hi) changes nothing. */
	ps_fd_forget_range(41, 40);
	ck_assert_int_eq(ps_fd_peek(40), PS_FD_SOCKET);
	/* close_range(40, ~0U): everything from 40 up, chunks or not. */
	ps_fd_forget_range(40, UINT_MAX);
	for (size_t i = 0; i < PS_ARRAY_SIZE(fds); i++)
		ck_assert_int_eq(ps_fd_peek(fds[i]), PS_FD_NONE);
}
END_TEST

START_TEST(test_copy)
{
	ps_fd_set(50, PS_FD_SOCKET);
	ps_fd_copy(50, 51);
	ps_fd_copy(50, 200000);
	ck_assert_int_eq(ps_fd_peek(51), PS_FD_SOCKET);
	ck_assert_int_eq(ps_fd_peek(200000), PS_FD_SOCKET);
	/* Duplicating onto itself (dup2(fd, fd)) keeps the entry. */
	ps_fd_copy(50, 50);
	ck_assert_int_eq(ps_fd_peek(50), PS_FD_SOCKET);
	/* A copy of an unknown descriptor is unknown, whatever was there. */
	ps_fd_copy(52, 51);
	ck_assert_int_eq(ps_fd_peek(51), PS_FD_NONE);
	/* The checked mark travels with the kind. */
	ps_fd_store(53, PS_FD_DIRECT | PS_FD_CHECKED);
	ps_fd_copy(53, 54);
	ck_assert_uint_eq(ps_fd_entry(54), PS_FD_DIRECT | PS_FD_CHECKED);
	ps_fd_forget_range(0, UINT_MAX);
}
END_TEST

START_TEST(test_open_kind)
{
	static const struct {
		const char *path;
		int flags;
		enum ps_fdkind kind;
	} cases[] = {
		{ "/var/tmp/x", O_RDONLY, PS_FD_FILE },
		{ "/var/tmp/x", O_RDWR | O_DIRECT, PS_FD_DIRECT },
		{ "relative", O_WRONLY | O_CREAT, PS_FD_FILE },
		{ "", O_RDONLY, PS_FD_FILE },
		{ "/", O_RDONLY, PS_FD_FILE },
		{ "/d", O_RDONLY, PS_FD_FILE },
		{ "/de", O_RDONLY, PS_FD_FILE },
		{ "/dev", O_RDONLY, PS_FD_FILE },
		{ "/data/f", O_RDONLY, PS_FD_FILE },
		{ "/dev/null", O_WRONLY, PS_FD_OTHER },
		{ "/dev/zero", O_RDONLY, PS_FD_OTHER },
		{ "/dev/pts/3", O_RDWR, PS_FD_OTHER },
		{ "/dev/sda", O_RDONLY, PS_FD_OTHER },
		{ "/dev/nvme0n1", O_RDWR | O_DIRECT, PS_FD_DIRECT },
		{ "/dev/shm/seg", O_RDWR, PS_FD_FILE },
		{ "/dev/shm/seg", O_RDWR | O_DIRECT, PS_FD_DIRECT },
		{ "/dev/hugepages/f", O_RDWR, PS_FD_FILE },
		{ "/dev/fd/3", O_RDONLY, PS_FD_NONE },
		{ "/dev/stdin", O_RDONLY, PS_FD_NONE },
		{ "/proc/self/fd/7", O_RDONLY, PS_FD_NONE },
		{ "/proc/123/fd/7", O_RDONLY, PS_FD_NONE },
		{ "/proc/self/stat", O_RDONLY, PS_FD_FILE },
		{ "/proc", O_RDONLY, PS_FD_FILE },
		{ "/p", O_RDONLY, PS_FD_FILE },
	};
	for (size_t i = 0; i < PS_ARRAY_SIZE(cases); i++)
		ck_assert_msg(ps_fd_open_kind(cases[i].path, cases[i].flags) == cases[i].kind,
			      "%s flags %#x: kind %s, want %s", cases[i].path, cases[i].flags,
			      ps_fdkind_name(ps_fd_open_kind(cases[i].path, cases[i].flags)),
			      ps_fdkind_name(cases[i].kind));
}
END_TEST

START_TEST(test_setfl)
{
	ps_fd_set(60, PS_FD_FILE);
	ps_fd_setfl(60, O_RDONLY | O_NONBLOCK);
	ck_assert_int_eq(ps_fd_peek(60), PS_FD_FILE);
	ps_fd_setfl(60, O_RDONLY | O_DIRECT);
	ck_assert_int_eq(ps_fd_peek(60), PS_FD_DIRECT);
	ps_fd_setfl(60, O_RDONLY);
	ck_assert_int_eq(ps_fd_peek(60), PS_FD_FILE);
	/* A checked regular file stays checked both ways. */
	ps_fd_store(61, PS_FD_FILE | PS_FD_CHECKED);
	ps_fd_setfl(61, O_DIRECT);
	ck_assert_uint_eq(ps_fd_entry(61), PS_FD_DIRECT | PS_FD_CHECKED);
	/* O_DIRECT on a pipe or socket is not a file's. */
	ps_fd_set(62, PS_FD_PIPE);
	ps_fd_setfl(62, O_DIRECT);
	ck_assert_int_eq(ps_fd_peek(62), PS_FD_PIPE);
	ps_fd_set(63, PS_FD_SOCKET);
	ps_fd_setfl(63, O_DIRECT | O_NONBLOCK);
	ck_assert_int_eq(ps_fd_peek(63), PS_FD_SOCKET);
	/* Unknown stays unknown; a device given O_DIRECT is looked at again. */
	ps_fd_setfl(64, O_DIRECT);
	ck_assert_int_eq(ps_fd_peek(64), PS_FD_NONE);
	ps_fd_set(65, PS_FD_OTHER);
	ps_fd_setfl(65, O_NONBLOCK);
	ck_assert_int_eq(ps_fd_peek(65), PS_FD_OTHER);
	ps_fd_setfl(65, O_DIRECT);
	ck_assert_int_eq(ps_fd_peek(65), PS_FD_NONE);
	ps_fd_forget_range(0, UINT_MAX);
}
END_TEST

/* Real descriptors of unknown origin: probed once, then known. */
START_TEST(test_probe_unknown)
{
	int p[2], s[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
	int n = open("/dev/null", O_RDONLY);
	char path[] = "/tmp/pst-fdinfo-XXXXXX";
	int f = mkstemp(path);
	ck_assert(n >= 0 && f >= 0);
	unlink(path);
	int fds[] = { p[0], s[0], n, f };
	enum ps_fdkind want[] = { PS_FD_PIPE, PS_FD_SOCKET, PS_FD_OTHER, PS_FD_FILE };
	for (int i = 0; i < 4; i++) {
		ps_fd_forget(fds[i]);
		ck_assert_int_eq(ps_fd_kind(fds[i]), want[i]);
		ck_assert_uint_eq(ps_fd_entry(fds[i]), want[i] | PS_FD_CHECKED);
	}
	/* A closed number counts as other and is not recorded. */
	close(f);
	ps_fd_forget(f);
	errno = 1234;
	ck_assert_int_eq(ps_fd_kind(f), PS_FD_OTHER);
	ck_assert_int_eq(errno, 1234);
	ck_assert_int_eq(ps_fd_peek(f), PS_FD_NONE);
	close(p[0]);
	close(p[1]);
	close(s[0]);
	close(s[1]);
	close(n);
}
END_TEST

/* The io_uring path's check against what the table was told. */
START_TEST(test_direct_now)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	/* F_SETFL gives a pipe O_DIRECT (packet mode); the table may believe a file. */
	ck_assert_int_eq(fcntl(p[0], F_SETFL, O_DIRECT), 0);
	ps_fd_set(p[0], PS_FD_DIRECT);
	ck_assert(!ps_fd_is_direct_now(p[0], false));
	ck_assert_uint_eq(ps_fd_entry(p[0]), PS_FD_PIPE | PS_FD_CHECKED);
	/* Without O_DIRECT now (reused behind the table's back): forgotten. */
	ps_fd_set(p[1], PS_FD_DIRECT | PS_FD_CHECKED);
	ck_assert(!ps_fd_is_direct_now(p[1], true));
	ck_assert_int_eq(ps_fd_peek(p[1]), PS_FD_NONE);
	close(p[0]);
	close(p[1]);

	char path[] = "/var/tmp/pst-fdinfo-XXXXXX";
	int f = mkstemp(path);
	ck_assert(f >= 0);
	close(f);
	int d = open(path, O_RDWR | O_DIRECT);
	int a = open(path, O_WRONLY | O_APPEND | O_DIRECT);
	unlink(path);
	if (d < 0) {
		ck_assert_int_eq(errno, EINVAL);   /* filesystem without O_DIRECT: nothing more */
		return;
	}
	ps_fd_set(d, PS_FD_DIRECT);
	ck_assert(ps_fd_is_direct_now(d, false));
	ck_assert(ps_fd_is_direct_now(d, true));
	ck_assert_uint_eq(ps_fd_entry(d), PS_FD_DIRECT | PS_FD_CHECKED);
	ck_assert(a >= 0);
	ps_fd_set(a, PS_FD_DIRECT);
	ck_assert(!ps_fd_is_direct_now(a, true));   /* O_APPEND writes stay plain */
	ck_assert(ps_fd_is_direct_now(a, false));
	close(d);
	close(a);
}
END_TEST

/* Threads storing into one new chunk at once: one chunk, every entry kept. */
#define RACERS 8
static void *race(void *arg)
{
	int base = (int)(intptr_t)arg;
	for (int k = 0; k < 64; k++)
		ps_fd_set(base + k * RACERS, PS_FD_PIPE);
	return NULL;
}

START_TEST(test_concurrent_growth)
{
	unsigned before = ps_fd_chunks_mapped();
	int base = 100 << PS_FD_CHUNK_BITS;
	pthread_t t[RACERS];

	for (int i = 0; i < RACERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, race, (void *)(intptr_t)(base + i)), 0);
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(ps_fd_chunks_mapped(), before + 1);
	for (int k = 0; k < RACERS * 64; k++)
		ck_assert_int_eq(ps_fd_peek(base + k), PS_FD_PIPE);
	ck_assert_int_eq(ps_fd_peek(base + RACERS * 64), PS_FD_NONE);
	ps_fd_forget_range(0, UINT_MAX);
}
END_TEST

Suite *suite_fdinfo(void)
{
	Suite *s = suite_create("fdinfo");
	TCase *tc = tcase_create("fdinfo");

	tcase_add_test(tc, test_set_get_across_chunks);
	tcase_add_test(tc, test_no_chunk_without_need);
	tcase_add_test(tc, test_forget_range);
	tcase_add_test(tc, test_copy);
	tcase_add_test(tc, test_open_kind);
	tcase_add_test(tc, test_setfl);
	tcase_add_test(tc, test_probe_unknown);
	tcase_add_test(tc, test_direct_now);
	tcase_add_test(tc, test_concurrent_growth);
	suite_add_tcase(s, tc);
	return s;
}
