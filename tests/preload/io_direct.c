// SPDX-License-Identifier: MIT
/*
 * O_DIRECT data integrity, the path the shim sends through io_uring:
 * random aligned preads into fresh pooled buffers, sizes on either side of
 * the chunk size, reads across and after EOF, unaligned requests (the same
 * count or errno as the direct system call), preadv/preadv2 over pooled
 * segments, read()/readv() and the file offset, 8 threads on one
 * descriptor (and 4 sharing one file offset), and writes (pwrite, pwritev,
 * write, O_APPEND) read back against a shadow copy.  Expectations come from
 * the pattern the file was written with and from syscall(2), which no
 * interposer sees; the same program passes without the shim.
 */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io_common.h"
#include "lib.h"

#define KiB (1024UL)
#define MiB (1024UL * 1024)
#define SEED 0x5eed
/* Not a multiple of the block size: reads across EOF return an odd count. */
#define FSIZE (48 * MiB + 5000)

static char *rpath;    /* the pattern file, read-only tests */
static int pooled_bufs, large_bufs;

static size_t expect_count(uint64_t off, size_t n)
{
	if (off >= FSIZE)
		return 0;
	return FSIZE - off < n ? (size_t)(FSIZE - off) : n;
}

/* A read that starts at or past EOF leaves the buffer alone.  (One that
 * crosses EOF may not: the kernel reads whole blocks of a preallocated
 * extent into the buffer and only truncates the count.) */
static void check_canary(const unsigned char *buf, size_t got, size_t n)
{
	if (got)
		return;
	for (size_t k = 0; k < n; k += (k < 8192 || n - k <= 8192) ? 1 : 4093)
		if (buf[k] != 0xa5)
			ck_abort_msg("byte %zu of %zu overwritten by a read at EOF", k, n);
}

/* One pread through libc (the shim), checked against the pattern. */
static void pread_check(int fd, uint64_t off, size_t n)
{
	unsigned char *buf = pio_alloc(n);
	large_bufs += n >= 64 * KiB;
	pooled_bufs += pst_pooled(buf);
	memset(buf, 0xa5, n);
	errno = 4321;
	ssize_t r = pread(fd, buf, n, (off_t)off);
	size_t want = expect_count(off, n);
	ck_assert_msg(r == (ssize_t)want, "pread(%zu at %llu) = %zd (errno %d), want %zu",
		      n, (unsigned long long)off, r, errno, want);
	ck_assert_int_eq(errno, 4321);
	ssize_t bad = pio_diff(buf, want, off, SEED);
	ck_assert_msg(bad < 0, "pread(%zu at %llu): wrong byte at %zd", n,
		      (unsigned long long)off, bad);
	check_canary(buf, want, n);
	free(buf);
}

START_TEST(test_random_preads)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	uint64_t rs = 0x1234 + (uint64_t)_i;
	int iters = (int)(1200 * pio_scale());
	for (int i = 0; i < iters; i++) {
		/* log-uniform 4 KiB .. 8 MiB, in 4 KiB units */
		unsigned shift = (unsigned)(pst_rand(&rs) % 12);
		size_t pages = (1UL << shift) + pst_rand(&rs) % (1UL << shift);
		if (pages > 2048)
			pages = 2048;
		size_t n = pages * 4 * KiB;
		/* mostly inside the file, sometimes across or past EOF */
		uint64_t span = FSIZE / 4096 + 256;
		uint64_t off = (pst_rand(&rs) % span) * 4096;
		pread_check(fd, off, n);
	}
	if (pst_shim_loaded() && large_bufs && getenv("POOLSHIM") == NULL)
		ck_assert_msg(pooled_bufs > 0, "no buffer of %d came from the pool", large_bufs);
	close(fd);
}
END_TEST

/* Sizes just under, at and over multiples of the chunk size (up to more
 * chunks than the ring depth), and EOF falling inside, at and between chunks. */
START_TEST(test_chunk_boundaries)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	size_t chunk = pio_chunk();
	size_t sizes[] = { 4 * KiB, 60 * KiB, 64 * KiB, 68 * KiB };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++)
		pread_check(fd, 8192, sizes[k]);
	for (size_t m = 1; m <= 20 && m * chunk <= 24 * MiB; m += (m < 4 ? 1 : 3)) {
		size_t base = m * chunk;
		pread_check(fd, 0, base - 4 * KiB);
		pread_check(fd, 4096, base);
		pread_check(fd, 1 * MiB, base + 4 * KiB);
	}
	uint64_t eof_block = FSIZE & ~4095ULL;
	for (size_t m = 1; m <= 5; m++) {
		/* EOF inside the m-th chunk, on a chunk boundary, one block after it */
		pread_check(fd, eof_block - m * chunk + 4096, (m + 2) * chunk);
		pread_check(fd, eof_block - m * chunk, (m + 1) * chunk);
		pread_check(fd, (FSIZE - m * chunk) & ~4095ULL, m * chunk + 8192);
	}
	close(fd);
}
END_TEST

START_TEST(test_eof)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	uint64_t eof_block = FSIZE & ~4095ULL;
	pread_check(fd, eof_block, 4096);           /* the 904-byte tail */
	pread_check(fd, eof_block, 16 * MiB);
	pread_check(fd, eof_block - 1 * MiB, 16 * MiB);
	pread_check(fd, eof_block + 4096, 4096);    /* past EOF: 0 */
	pread_check(fd, eof_block + 4096, 4 * MiB);
	pread_check(fd, 1ULL << 40, 2 * MiB);
	/* read() at EOF: a short read, then 0, and the offset stops at EOF */
	ck_assert_int_eq(lseek(fd, (off_t)(eof_block - 2 * MiB), SEEK_SET), (off_t)(eof_block - 2 * MiB));
	unsigned char *buf = pio_alloc(8 * MiB);
	ssize_t r = read(fd, buf, 8 * MiB);
	ck_assert_int_eq(r, (ssize_t)(FSIZE - (eof_block - 2 * MiB)));
	ck_assert_int_lt(pio_diff(buf, (size_t)r, eof_block - 2 * MiB, SEED), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), FSIZE);
	ck_assert_int_eq(read(fd, buf, 8 * MiB), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), FSIZE);
	free(buf);
	close(fd);
}
END_TEST

/* Misaligned buffer, offset or length: whatever the kernel says (EINVAL on
 * most block devices), with the same data when it succeeds. */
START_TEST(test_unaligned)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	size_t sizes[] = { 4 * KiB, 128 * KiB, 3 * MiB };
	long shifts[] = { 0, 1, 8, 512, 2048 };
	for (size_t si = 0; si < 3; si++)
		for (size_t bi = 0; bi < 5; bi++)
			for (size_t oi = 0; oi < 5; oi++)
				for (long dl = -1; dl <= 1; dl++) {
					size_t n = sizes[si] + (size_t)(dl * shifts[(oi + bi) % 5]);
					uint64_t off = 64 * KiB + (uint64_t)shifts[oi];
					unsigned char *raw = pio_alloc(sizes[si] + 8192);
					unsigned char *buf = raw + shifts[bi];
					unsigned char *ref = pio_alloc(sizes[si] + 8192) ;
					struct pio_res want = pio_sys_pread(fd, ref + shifts[bi], n, (off_t)off);
					struct pio_res got = PIO_CALL(pread(fd, buf, n, (off_t)off));
					ck_assert_msg(got.ret == want.ret && got.err == want.err,
						      "pread(buf+%ld, %zu, %llu) = %ld/%d, kernel %ld/%d",
						      shifts[bi], n, (unsigned long long)off,
						      got.ret, got.err, want.ret, want.err);
					if (got.ret > 0)
						ck_assert_int_lt(pio_diff(buf, (size_t)got.ret, off, SEED), 0);
					/* read() too, from the same offset */
					lseek(fd, (off_t)off, SEEK_SET);
					got = PIO_CALL(read(fd, buf, n));
					off_t pos = lseek(fd, 0, SEEK_CUR);
					lseek(fd, (off_t)off, SEEK_SET);
					want = pio_sys_read(fd, ref + shifts[bi], n);
					ck_assert_msg(got.ret == want.ret && got.err == want.err,
						      "read(buf+%ld, %zu) at %llu = %ld/%d, kernel %ld/%d",
						      shifts[bi], n, (unsigned long long)off,
						      got.ret, got.err, want.ret, want.err);
					ck_assert_int_eq(pos, lseek(fd, 0, SEEK_CUR));
					free(raw);
					free(ref);
				}
	close(fd);
}
END_TEST

static void preadv_check(int fd, int cnt, const size_t *lens, uint64_t off, bool mixed, bool v2)
{
	struct iovec iov[16];
	size_t total = 0;
	for (int k = 0; k < cnt; k++) {
		/* mixed: every other segment is a small, not pooled buffer */
		size_t n = mixed && (k & 1) ? 4 * KiB : lens[k];
		iov[k].iov_base = pio_alloc(n);
		iov[k].iov_len = n;
		memset(iov[k].iov_base, 0xa5, n);
		total += n;
	}
	errno = 777;
	ssize_t r = v2 ? preadv2(fd, iov, cnt, (off_t)off, 0) : preadv(fd, iov, cnt, (off_t)off);
	size_t want = expect_count(off, total);
	ck_assert_msg(r == (ssize_t)want, "preadv(%d segments, %zu at %llu) = %zd (errno %d), want %zu",
		      cnt, total, (unsigned long long)off, r, errno, want);
	ck_assert_int_eq(errno, 777);
	uint64_t at = off;
	size_t left = want;
	for (int k = 0; k < cnt; k++) {
		size_t n = left < iov[k].iov_len ? left : iov[k].iov_len;
		ssize_t bad = pio_diff(iov[k].iov_base, n, at, SEED);
		ck_assert_msg(bad < 0, "preadv segment %d: wrong byte at %zd", k, bad);
		if (want == 0)
			check_canary(iov[k].iov_base, 0, iov[k].iov_len);
		at += n;
		left -= n;
		free(iov[k].iov_base);
	}
}

START_TEST(test_preadv)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	uint64_t rs = 99;
	int iters = (int)(150 * pio_scale());
	for (int i = 0; i < iters; i++) {
		int cnt = 1 + (int)(pst_rand(&rs) % 8);
		size_t lens[16];
		for (int k = 0; k < cnt; k++)
			lens[k] = (1 + pst_rand(&rs) % 512) * 4 * KiB;
		uint64_t off = (pst_rand(&rs) % (FSIZE / 4096 + 64)) * 4096;
		preadv_check(fd, cnt, lens, off, i % 5 == 4, i % 3 == 2);
	}
	/* 16 segments of 1 MiB, ending across EOF */
	size_t lens[16];
	for (int k = 0; k < 16; k++)
		lens[k] = 1 * MiB;
	preadv_check(fd, 16, lens, (FSIZE & ~4095ULL) - 10 * MiB, false, false);

	/* preadv2 with offset -1 reads at, and advances, the file offset */
	unsigned char *a = pio_alloc(2 * MiB), *b = pio_alloc(1 * MiB);
	struct iovec iov[2] = { { a, 2 * MiB }, { b, 1 * MiB } };
	ck_assert_int_eq(lseek(fd, 4 * MiB, SEEK_SET), 4 * MiB);
	ck_assert_int_eq(preadv2(fd, iov, 2, -1, 0), 3 * MiB);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 7 * MiB);
	ck_assert_int_lt(pio_diff(a, 2 * MiB, 4 * MiB, SEED), 0);
	ck_assert_int_lt(pio_diff(b, 1 * MiB, 6 * MiB, SEED), 0);
	/* preadv leaves the offset alone */
	ck_assert_int_eq(preadv(fd, iov, 2, 0), 3 * MiB);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 7 * MiB);
	free(a);
	free(b);
	close(fd);
}
END_TEST

/* read()/readv() through the file offset: each call continues where the last
 * stopped, the offset moves by what was returned, EOF gives a short read then 0. */
START_TEST(test_read_offset)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	size_t sizes[] = { 4 * KiB, 64 * KiB, 1 * MiB, 1 * MiB + 4 * KiB, 3 * MiB, 16 * MiB, 128 * KiB };
	off_t pos = 0;
	unsigned char *buf = pio_alloc(16 * MiB);
	for (int i = 0; ; i++) {
		size_t n = sizes[i % 7];
		ssize_t r;
		if (i % 4 == 3) {
			struct iovec iov[2] = { { buf, n / 2 }, { buf + n / 2, n - n / 2 } };
			r = readv(fd, iov, 2);
		} else {
			r = read(fd, buf, n);
		}
		size_t want = expect_count((uint64_t)pos, n);
		ck_assert_msg(r == (ssize_t)want, "read #%d of %zu at %lld = %zd, want %zu",
			      i, n, (long long)pos, r, want);
		ck_assert_int_lt(pio_diff(buf, want, (uint64_t)pos, SEED), 0);
		pos += r;
		ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), pos);
		if (r == 0)
			break;
	}
	ck_assert_int_eq(pos, FSIZE);
	/* a dup shares the offset: reads alternate between the two numbers and continue each other */
	int fd2 = dup(fd);
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	pos = 0;
	for (int i = 0; i < 8; i++) {
		size_t n = (size_t)(i + 1) * 512 * KiB;
		ssize_t r = read(i & 1 ? fd2 : fd, buf, n);
		ck_assert_msg(r == (ssize_t)n, "read #%d through the %s = %zd", i, i & 1 ? "dup" : "original", r);
		ck_assert_int_lt(pio_diff(buf, n, (uint64_t)pos, SEED), 0);
		pos += r;
		ck_assert_int_eq(lseek(i & 1 ? fd : fd2, 0, SEEK_CUR), pos);
	}
	close(fd2);
	free(buf);
	close(fd);
}
END_TEST

struct reader {
	int fd;
	int id;
	bool shared_offset;
	int failures;
	size_t nranges;
	uint64_t ranges[512][2];
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	uint64_t rs = 0xabc0 + (uint64_t)rd->id;
	int iters = (int)(60 * pio_scale());
	for (int i = 0; rd->shared_offset || i < iters; i++) {
		size_t n = (1 + pst_rand(&rs) % 768) * 4 * KiB;
		unsigned char *buf = pio_alloc(n);
		if (rd->shared_offset) {
			/* whatever this read got, it is one contiguous range of the file */
			ssize_t r = read(rd->fd, buf, n);
			if (r < 0) {
				rd->failures++;
			} else if (r > 0) {
				uint64_t from = pio_origin(buf);
				if (pio_diff(buf, (size_t)r, from, SEED) >= 0 || rd->nranges == 512)
					rd->failures++;
				else {
					rd->ranges[rd->nranges][0] = from;
					rd->ranges[rd->nranges++][1] = (uint64_t)r;
				}
			}
			free(buf);
			if (r <= 0)
				break;
			continue;
		}
		uint64_t off = (pst_rand(&rs) % (FSIZE / 4096 + 16)) * 4096;
		memset(buf, 0xa5, n);
		ssize_t r = pread(rd->fd, buf, n, (off_t)off);
		size_t want = expect_count(off, n);
		if (r != (ssize_t)want || pio_diff(buf, want, off, SEED) >= 0)
			rd->failures++;
		free(buf);
	}
	return NULL;
}

static int cmp_range(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

START_TEST(test_threads)
{
	enum { N = 8 };
	static struct reader rd[N];
	pthread_t t[N];
	int fd = pio_open_direct(rpath, O_RDONLY);
	/* 8 threads, positional reads on one descriptor */
	for (int k = 0; k < N; k++) {
		rd[k] = (struct reader){ .fd = fd, .id = k };
		ck_assert_int_eq(pthread_create(&t[k], NULL, reader_main, &rd[k]), 0);
	}
	for (int k = 0; k < N; k++) {
		pthread_join(t[k], NULL);
		ck_assert_msg(rd[k].failures == 0, "thread %d: %d bad preads", k, rd[k].failures);
	}
	/* 4 threads sharing the file offset: the reads tile the file, no overlap, no gap */
	enum { S = 4 };
	for (int k = 0; k < S; k++) {
		rd[k] = (struct reader){ .fd = fd, .id = k, .shared_offset = true };
		ck_assert_int_eq(pthread_create(&t[k], NULL, reader_main, &rd[k]), 0);
	}
	static uint64_t all[S * 512][2];
	size_t nall = 0;
	for (int k = 0; k < S; k++) {
		pthread_join(t[k], NULL);
		ck_assert_msg(rd[k].failures == 0, "shared-offset thread %d: %d bad reads", k, rd[k].failures);
		memcpy(all[nall], rd[k].ranges, rd[k].nranges * sizeof(all[0]));
		nall += rd[k].nranges;
	}
	qsort(all, nall, sizeof(all[0]), cmp_range);
	uint64_t at = 0;
	for (size_t k = 0; k < nall; k++) {
		ck_assert_msg(all[k][0] == at, "shared offset: a read started at %llu, expected %llu",
			      (unsigned long long)all[k][0], (unsigned long long)at);
		at += all[k][1];
	}
	ck_assert_int_eq(at, FSIZE);
	close(fd);
}
END_TEST

/* Writes of every kind through the shim against a shadow copy, read back
 * with the direct system call. */
#define WMAX (24 * MiB)
START_TEST(test_writes)
{
	char *path = pio_path("written");
	int fd = pio_open_direct(path, O_RDWR | O_CREAT | O_TRUNC);
	unsigned char *shadow = calloc(1, WMAX + 8 * MiB);
	uint64_t rs = 0x77, end = 0;
	int iters = (int)(200 * pio_scale());
	for (int i = 0; i < iters; i++) {
		size_t n = (1 + pst_rand(&rs) % 1024) * 4 * KiB;
		uint64_t off = (pst_rand(&rs) % (WMAX / 4096)) * 4096;
		uint64_t seed = pst_rand(&rs);
		int op = (int)(pst_rand(&rs) % 4);
		unsigned char *buf = pio_alloc(n);
		pio_fill(buf, n, 0, seed);
		ssize_t r;
		errno = 4242;
		if (op == 0) {
			r = pwrite(fd, buf, n, (off_t)off);
		} else if (op == 1) {
			size_t h = (n / 2) & ~(size_t)4095;
			struct iovec iov[2] = { { buf, h }, { buf + h, n - h } };
			r = (i & 1) ? pwritev(fd, iov, 2, (off_t)off) : pwritev2(fd, iov, 2, (off_t)off, 0);
		} else {
			ck_assert_int_eq(lseek(fd, (off_t)off, SEEK_SET), (off_t)off);
			if (op == 2) {
				r = write(fd, buf, n);
			} else {
				size_t h = (n / 2) & ~(size_t)4095;
				struct iovec iov[2] = { { buf, h }, { buf + h, n - h } };
				r = (i & 1) ? writev(fd, iov, 2) : pwritev2(fd, iov, 2, -1, 0);
			}
			ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), (off_t)(off + n));
		}
		ck_assert_msg(r == (ssize_t)n, "write op %d of %zu at %llu = %zd (errno %d)",
			      op, n, (unsigned long long)off, r, errno);
		ck_assert_int_eq(errno, 4242);
		memcpy(shadow + off, buf, n);
		if (off + n > end)
			end = off + n;
		free(buf);
	}
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)end);
	unsigned char *back = pio_alloc(1 * MiB);
	for (uint64_t off = 0; off < end; off += 1 * MiB) {
		struct pio_res r = pio_sys_pread(fd, back, 1 * MiB, (off_t)off);
		ck_assert_int_eq(r.ret, (long)(end - off < 1 * MiB ? end - off : 1 * MiB));
		ck_assert_msg(memcmp(back, shadow + off, (size_t)r.ret) == 0,
			      "file differs from what was written in the MiB at %llu", (unsigned long long)off);
	}
	/* misaligned writes: the kernel's answer, and the file untouched when it refuses */
	unsigned char *raw = pio_alloc(256 * KiB);
	struct pio_res got = PIO_CALL(pwrite(fd, raw + 1, 128 * KiB, 0));
	struct pio_res want = pio_sys_pwrite(fd, raw + 1, 128 * KiB, 0);
	ck_assert_msg(got.ret == want.ret && got.err == want.err, "pwrite(buf+1) = %ld/%d, kernel %ld/%d",
		      got.ret, got.err, want.ret, want.err);
	got = PIO_CALL(pwrite(fd, raw, 128 * KiB + 100, 4096));
	want = pio_sys_pwrite(fd, raw, 128 * KiB + 100, 4096);
	ck_assert_msg(got.ret == want.ret && got.err == want.err, "pwrite(len+100) = %ld/%d, kernel %ld/%d",
		      got.ret, got.err, want.ret, want.err);
	free(raw);
	free(back);
	free(shadow);
	close(fd);
	unlink(path);
	free(path);
}
END_TEST

/* O_APPEND: every write lands at the end, whatever the offset says (pwrite
 * too, on Linux), and the offset is left at the new end. */
START_TEST(test_append)
{
	char *path = pio_path("appended");
	int fd = pio_open_direct(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND);
	uint64_t end = 0, rs = 5;
	unsigned char *buf = pio_alloc(4 * MiB);
	int iters = (int)(40 * pio_scale());
	for (int i = 0; i < iters; i++) {
		size_t n = (16 + pst_rand(&rs) % 1009) * 4 * KiB;
		pio_fill(buf, n, end, 0xa99e);
		ssize_t r;
		if (i % 3 == 0)
			r = write(fd, buf, n);
		else if (i % 3 == 1)
			r = pwrite(fd, buf, n, 0);
		else {
			struct iovec iov[2] = { { buf, 64 * KiB }, { buf + 64 * KiB, n - 64 * KiB } };
			r = writev(fd, iov, 2);
		}
		ck_assert_msg(r == (ssize_t)n, "append #%d of %zu = %zd (errno %d)", i, n, r, errno);
		end += n;
		if (i % 3 != 1)
			ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), (off_t)end);
	}
	/* RWF_APPEND on a descriptor without O_APPEND: at the end too, whatever the offset */
	int plain = pio_open_direct(path, O_RDWR);
	for (int i = 0; i < 4; i++) {
		size_t n = (size_t)(i + 1) * 512 * KiB;
		pio_fill(buf, n, end, 0xa99e);
		struct iovec iov[2] = { { buf, n / 2 }, { buf + n / 2, n - n / 2 } };
		ssize_t r = pwritev2(plain, iov, i % 2 + 1, 0, RWF_APPEND);
		ck_assert_msg(r == (ssize_t)(i % 2 ? n : n / 2), "pwritev2(RWF_APPEND) #%d = %zd (errno %d)", i, r, errno);
		end += (uint64_t)r;
	}
	close(plain);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)end);
	for (uint64_t off = 0; off < end; off += 4 * MiB) {
		struct pio_res r = pio_sys_pread(fd, buf, 4 * MiB, (off_t)off);
		ck_assert_int_eq(r.ret, (long)(end - off < 4 * MiB ? end - off : 4 * MiB));
		ck_assert_int_lt(pio_diff(buf, (size_t)r.ret, off, 0xa99e), 0);
	}
	free(buf);
	close(fd);
	unlink(path);
	free(path);
}
END_TEST

/*
 * a and b are n-byte buffers, a the shim's, b read by the plain system
 * call: with their second halves read-only, a pread into a returns what
 * the kernel returns for b and never writes the read-only half.  The
 * protection is lifted again before returning.
 */
static void check_pread_half_readonly(int fd, unsigned char *a, unsigned char *b, size_t n,
				      const char *what)
{
	const size_t half = n / 2;
	memset(a, 0x11, n);
	memset(b, 0x11, n);
	ck_assert_int_eq(mprotect(a + half, half, PROT_READ), 0);
	ck_assert_int_eq(mprotect(b + half, half, PROT_READ), 0);
	struct pio_res want = pio_sys_pread(fd, b, n, 0);
	struct pio_res got = PIO_CALL(pread(fd, a, n, 0));
	bool untouched = a[half] == 0x11 && a[n - 1] == 0x11;
	ck_assert_int_eq(mprotect(a + half, half, PROT_READ | PROT_WRITE), 0);
	ck_assert_int_eq(mprotect(b + half, half, PROT_READ | PROT_WRITE), 0);
	ck_assert_msg(got.ret == want.ret && got.err == want.err,
		      "pread into %s: %ld/%d, kernel %ld/%d", what, got.ret, got.err,
		      want.ret, want.err);
	ck_assert_msg(untouched || want.ret == (long)n, "pread wrote into read-only memory");
}

/*
 * Protection the program put on part of a pooled buffer holds: the kernel
 * refuses (EFAULT) to read into read-only pages or to write from
 * inaccessible ones, even after the pool was registered as fixed buffers
 * (which the kernel writes through without looking at the protection).
 */
START_TEST(test_protected_buffer)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	char *wpath = pio_path("protected");
	int wfd = pio_open_direct(wpath, O_RDWR | O_CREAT | O_TRUNC);
	const size_t n = 4 * MiB, half = 2 * MiB;
	unsigned char *a = NULL, *b = NULL;
	ck_assert_int_eq(posix_memalign((void **)&a, 2 * MiB, n), 0);
	ck_assert_int_eq(posix_memalign((void **)&b, 2 * MiB, n), 0);
	/* eligible I/O first, so that the pool (a included) is registered before mprotect */
	unsigned char *warm = pio_alloc(1 * MiB);
	ck_assert_int_eq(pread(fd, warm, 1 * MiB, 0), 1 * MiB);
	ck_assert_int_eq(pread(fd, a, n, 0), (ssize_t)n);
	check_pread_half_readonly(fd, a, b, n, "a half read-only buffer");
	/* writing from memory the program may not read */
	ck_assert_int_eq(mprotect(a + half, half, PROT_NONE), 0);
	struct pio_res want = pio_sys_pwrite(wfd, a, n, 0);
	struct pio_res got = PIO_CALL(pwrite(wfd, a, n, (off_t)n));
	ck_assert_int_eq(mprotect(a + half, half, PROT_READ | PROT_WRITE), 0);
	ck_assert_msg(got.ret == want.ret && got.err == want.err,
		      "pwrite from a half inaccessible buffer: %ld/%d, kernel %ld/%d", got.ret, got.err,
		      want.ret, want.err);
	free(a);
	free(b);
	free(warm);
	close(wfd);
	close(fd);
	unlink(wpath);
	free(wpath);
}
END_TEST

/*
 * The same across a slab border (issue 35): two 2 MiB blocks taken one
 * after the other are two slabs side by side; freed, they merge and serve
 * one 4 MiB buffer.  Protecting its half in the second slab must send the
 * buffer's I/O to the plain call too, as protecting the first half does:
 * the pool reads protection marks over every slab a range touches.
 * Where the pool placed the blocks otherwise, this is the case above.
 */
START_TEST(test_protected_span)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	const size_t n = 4 * MiB, half = 2 * MiB;
	unsigned char *x = NULL, *y = NULL;
	/* page-aligned for mprotect, glibc's too (POOLSHIM=off) */
	ck_assert_int_eq(posix_memalign((void **)&x, 4096, half), 0);
	ck_assert_int_eq(posix_memalign((void **)&y, 4096, half), 0);
	/* Addresses as numbers: compared and printed after the frees. */
	uintptr_t first = (uintptr_t)x;
	bool adjacent = (uintptr_t)y == first + half;
	free(x);
	free(y);
	unsigned char *a = NULL, *b = NULL;
	ck_assert_int_eq(posix_memalign((void **)&a, 4096, n), 0);
	ck_assert_int_eq(posix_memalign((void **)&b, 2 * MiB, n), 0);
	if (!adjacent || (uintptr_t)a != first)
		fprintf(stderr, "protected_span: the 4 MiB buffer did not reuse the two blocks "
			"(%#lx, %#lx -> %p)\n", (unsigned long)first, (unsigned long)(first + half),
			(void *)a);
	check_pread_half_readonly(fd, a, b, n, "a buffer read-only in its second slab");
	free(a);
	free(b);
	close(fd);
}
END_TEST

/*
 * RLIMIT_FSIZE: a write that crosses the limit is cut short at it, with no
 * signal; only a write that starts at or past the limit raises SIGXFSZ (and
 * fails with EFBIG when that is ignored).  A split write must not turn the
 * first case into the second for its later chunks.
 */
START_TEST(test_fsize_limit)
{
	/* a wrong answer here kills the process: only in a forked test case */
	const char *fork_mode = getenv("CK_FORK");
	if (fork_mode && !strcmp(fork_mode, "no"))
		return;
	char *path = pio_path("fsize");
	int fd = pio_open_direct(path, O_RDWR | O_CREAT | O_TRUNC);
	const size_t n = 4 * MiB, limit = 6 * MiB;
	unsigned char *buf = pio_alloc(n);
	pio_fill(buf, n, 0, 0xf5);
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = limit;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	/* SIGXFSZ at its default (terminate): the process must live */
	errno = 4242;
	ssize_t r = pwrite(fd, buf, n, 4 * MiB);
	ck_assert_msg(r == (ssize_t)(limit - 4 * MiB), "pwrite across RLIMIT_FSIZE = %zd (errno %d), want %zu",
		      r, errno, limit - 4 * MiB);
	ck_assert_int_eq(errno, 4242);
	struct iovec iov[2] = { { buf, n / 2 }, { buf + n / 2, n / 2 } };
	r = pwritev(fd, iov, 2, 3 * MiB);
	ck_assert_msg(r == (ssize_t)(limit - 3 * MiB), "pwritev across RLIMIT_FSIZE = %zd (errno %d)", r, errno);
	ck_assert_int_eq(lseek(fd, 5 * MiB, SEEK_SET), 5 * MiB);
	r = write(fd, buf, n);
	ck_assert_msg(r == (ssize_t)(limit - 5 * MiB), "write across RLIMIT_FSIZE = %zd (errno %d)", r, errno);
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), (off_t)limit);
	/* at the limit, SIGXFSZ ignored: EFBIG, as the kernel says */
	signal(SIGXFSZ, SIG_IGN);
	struct pio_res want = pio_sys_pwrite(fd, buf, n, (off_t)limit);
	struct pio_res got = PIO_CALL(pwrite(fd, buf, n, (off_t)limit));
	ck_assert_msg(got.ret == want.ret && got.err == want.err, "pwrite at the limit: %ld/%d, kernel %ld/%d",
		      got.ret, got.err, want.ret, want.err);
	signal(SIGXFSZ, SIG_DFL);
	rl.rlim_cur = RLIM_INFINITY;
	setrlimit(RLIMIT_FSIZE, &rl);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)limit);
	free(buf);
	close(fd);
	unlink(path);
	free(path);
}
END_TEST

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

struct churn {
	int fd;
	int id;
	int failures;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	size_t n = 1 * MiB;
	uint64_t off = (uint64_t)(c->id % 40) * MiB;
	unsigned char *buf = pio_alloc(n);
	if (pread(c->fd, buf, n, (off_t)off) != (ssize_t)n || pio_diff(buf, n, off, SEED) >= 0)
		c->failures++;
	free(buf);
	return NULL;
}

/*
 * Short-lived threads, one eligible read each (a thread-per-request server):
 * whatever a thread set up for its I/O goes away with it.  Descriptors must
 * not pile up; with RLIMIT_NOFILE a little above what is open, the program
 * can still open files at the end.
 */
START_TEST(test_thread_churn)
{
	int fd = pio_open_direct(rpath, O_RDONLY);
	int before = count_fds();
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rlim_t old = rl.rlim_cur;
	rl.rlim_cur = (rlim_t)before + 48;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	int threads = (int)(200 * pio_scale());
	for (int k = 0; k < threads; k++) {
		struct churn c = { .fd = fd, .id = k };
		pthread_t t;
		ck_assert_int_eq(pthread_create(&t, NULL, churn_main, &c), 0);
		pthread_join(t, NULL);
		ck_assert_msg(c.failures == 0, "thread %d: bad pread", k);
	}
	int after = count_fds(), err = errno;
	int probe = open(rpath, O_RDONLY | O_CLOEXEC), perr = errno;
	/* the limit goes back first: with CK_FORK=no the exit report needs a descriptor */
	rl.rlim_cur = old;
	setrlimit(RLIMIT_NOFILE, &rl);
	errno = err;
	ck_assert_msg(after >= 0, "after %d exited threads, no descriptor left to list /proc/self/fd: %s",
		      threads, strerror(errno));
	ck_assert_msg(after - before < 16, "%d descriptors left behind by %d exited threads",
		      after - before, threads);
	ck_assert_msg(probe >= 0, "open after the threads: %s", strerror(perr));
	close(probe);
	close(fd);
}
END_TEST

static Suite *suite_io_direct(void)
{
	Suite *s = suite_create("io_direct");
	struct { const char *name; const TTest *t; int loops; } cases[] = {
		{ "random", test_random_preads, 1 },
		{ "chunks", test_chunk_boundaries, 1 },
		{ "eof", test_eof, 1 },
		{ "unaligned", test_unaligned, 1 },
		{ "preadv", test_preadv, 1 },
		{ "read_offset", test_read_offset, 1 },
		{ "threads", test_threads, 1 },
		{ "writes", test_writes, 1 },
		{ "append", test_append, 1 },
		{ "protected", test_protected_buffer, 1 },
		{ "protected_span", test_protected_span, 1 },
		{ "fsize", test_fsize_limit, 1 },
		{ "thread_churn", test_thread_churn, 1 },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(*cases); k++) {
		TCase *tc = tcase_create(cases[k].name);
		tcase_set_timeout(tc, 300);
		tcase_add_loop_test(tc, cases[k].t, 0, cases[k].loops);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	pio_require_direct();
	rpath = pio_path("pattern");
	pio_make_file(rpath, FSIZE, SEED);
	SRunner *sr = srunner_create(suite_io_direct());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pio_cleanup();
	return failed ? 1 : 0;
}
