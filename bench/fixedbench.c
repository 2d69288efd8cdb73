// SPDX-License-Identifier: MIT
/*
 * READ against READ_FIXED against pread, O_DIRECT, on THP, hugetlb and
 * 4 KiB-page buffers: the measurement behind uring.c's choice of plain
 * (non-fixed) SQEs.  One buffer per backing, reused, as a pool slab is;
 * each request is split into 2 MiB chunks submitted together (at most 16
 * in flight), as the shim does.  Every configuration runs once per round,
 * rounds interleaved; the table gives the median MiB/s and CPU seconds
 * (user+sys of the process, io_uring's workers included) per GiB.
 *
 *   bench/fixedbench FILE [SIZE_MiB ...] [--seconds S] [--rounds N]
 *
 * FILE should be on a real disk (not tmpfs) and at least 256 MiB; hugetlb
 * rows need reserved pages (scripts/hugepages 20 bench/fixedbench ...).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cputime.h"

#define MiB (1024UL * 1024)
#define CHUNK (2 * MiB)
#define DEPTH 16
#define MAXBUF (16 * MiB)
#define MAXROUNDS 64

enum mode { M_PREAD, M_READ, M_FIXED, M_NMODES };
static const char *const mode_names[] = { "pread", "READ", "READ_FIXED" };
enum backing { B_THP, B_HUGETLB, B_4K, B_NBACK };
static const char *const back_names[] = { "THP", "hugetlb", "4 KiB" };

static struct io_uring ring;
static void *bufs[B_NBACK];
static int fd;
static off_t file_size;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *make_buf(enum backing b)
{
	size_t len = MAXBUF;
	if (b == B_HUGETLB) {
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		memset(p, 1, len);
		return p;
	}
	char *raw = mmap(NULL, len + 2 * MiB, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	char *p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(2 * MiB - 1));
	madvise(p, len, b == B_THP ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(p, 1, len);
	return p;
}

/* One request of len bytes at off into buffer b; 0 or -1. */
static int one(enum mode m, int b, size_t len, off_t off)
{
	char *buf = bufs[b];
	if (m == M_PREAD)
		return pread(fd, buf, len, off) == (ssize_t)len ? 0 : -1;
	unsigned n = 0;
	for (size_t at = 0; at < len; at += CHUNK, n++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		size_t l = len - at < CHUNK ? len - at : CHUNK;
		if (m == M_FIXED)
			io_uring_prep_read_fixed(sqe, fd, buf + at, (unsigned)l, (__u64)(off + at), b);
		else
			io_uring_prep_read(sqe, fd, buf + at, (unsigned)l, (__u64)(off + at));
	}
	if (io_uring_submit_and_wait(&ring, n) != (int)n)
		return -1;
	int bad = 0;
	for (unsigned i = 0; i < n; i++) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			return -1;
		bad |= cqe->res < 0;
		io_uring_cqe_seen(&ring, cqe);
	}
	return bad ? -1 : 0;
}

struct result {
	double mibs, cpu_per_gib;
};

static struct result run(enum mode m, int b, size_t len, double seconds)
{
	uint64_t bytes = 0, slots = (uint64_t)(file_size / (off_t)len);
	double t0 = now(), c0 = bench_cpu_seconds(NULL), t;
	unsigned seed = 12345;
	while ((t = now()) - t0 < seconds) {
		for (int k = 0; k < 8; k++) {
			off_t off = (off_t)(rand_r(&seed) % slots) * (off_t)len;
			if (one(m, b, len, off) < 0) {
				fprintf(stderr, "fixedbench: %s on %s failed\n", mode_names[m],
					back_names[b]);
				exit(1);
			}
			bytes += len;
		}
	}
	double c = bench_cpu_seconds(NULL) - c0;
	double gib = (double)bytes / (1024.0 * MiB);
	return (struct result){ (double)bytes / MiB / (t - t0), c / gib };
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	double seconds = 1.0;
	int rounds = 5, nsizes = 0;
	size_t sizes[8];
	const char *path = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!path)
			path = argv[i];
		else if (nsizes < 8)
			sizes[nsizes++] = (size_t)atoi(argv[i]) * MiB;
	}
	if (!path || rounds < 1 || rounds > MAXROUNDS) {
		fprintf(stderr, "usage: fixedbench FILE [SIZE_MiB ...] [--seconds S] [--rounds N]\n");
		return 2;
	}
	if (nsizes == 0) {
		sizes[nsizes++] = 1 * MiB;
		sizes[nsizes++] = 16 * MiB;
	}
	fd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < (off_t)(64 * MiB)) {
		fprintf(stderr, "fixedbench: %s: need a file of 64 MiB or more that opens O_DIRECT\n",
			path);
		return 2;
	}
	file_size = st.st_size;
	int ret = io_uring_queue_init(2 * DEPTH, &ring, 0);
	if (ret < 0) {
		fprintf(stderr, "fixedbench: io_uring_queue_init: %s\n", strerror(-ret));
		return 77;
	}
	struct iovec iov[B_NBACK];
	bool have[B_NBACK];
	for (int b = 0; b < B_NBACK; b++) {
		bufs[b] = make_buf((enum backing)b);
		have[b] = bufs[b] != NULL;
		/* A placeholder where hugetlb is missing: the table is indexed by backing. */
		iov[b] = (struct iovec){ have[b] ? bufs[b] : bufs[B_THP], MAXBUF };
		if (!have[b])
			fprintf(stderr, "fixedbench: no %s buffer; its rows are skipped\n",
				back_names[b]);
	}
	if (!have[B_THP] || (ret = io_uring_register_buffers(&ring, iov, B_NBACK)) < 0) {
		fprintf(stderr, "fixedbench: io_uring_register_buffers: %s\n", strerror(-ret));
		return 1;
	}

	static struct result res[8][B_NBACK][M_NMODES][MAXROUNDS];
	for (int r = 0; r < rounds; r++)
		for (int s = 0; s < nsizes; s++)
			for (int b = 0; b < B_NBACK; b++)
				for (int m = 0; m < M_NMODES; m++)
					if (have[b])
						res[s][b][m][r] = run((enum mode)m, b, sizes[s], seconds);

	printf("O_DIRECT reads of %s, one reused buffer per backing, %d chunks of 2 MiB in flight at most;\n"
	       "median [min-max] of %d interleaved rounds of %.1f s: MiB/s and CPU s/GiB\n\n",
	       path, DEPTH, rounds, seconds);
	printf("| size | backing | pread MiB/s | READ MiB/s | READ_FIXED MiB/s | pread CPU s/GiB | READ CPU s/GiB | READ_FIXED CPU s/GiB |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (int s = 0; s < nsizes; s++)
		for (int b = 0; b < B_NBACK; b++) {
			if (!have[b])
				continue;
			double mb[M_NMODES], lo[M_NMODES], hi[M_NMODES], cp[M_NMODES], v[MAXROUNDS];
			for (int m = 0; m < M_NMODES; m++) {
				for (int r = 0; r < rounds; r++)
					v[r] = res[s][b][m][r].mibs;
				mb[m] = median(v, rounds);
				lo[m] = v[0];
				hi[m] = v[rounds - 1];
				for (int r = 0; r < rounds; r++)
					v[r] = res[s][b][m][r].cpu_per_gib;
				cp[m] = median(v, rounds);
			}
			printf("| %zu MiB | %s | %.0f [%.0f-%.0f] | %.0f [%.0f-%.0f] | %.0f [%.0f-%.0f] "
			       "| %.4f | %.4f | %.4f |\n",
			       sizes[s] / MiB, back_names[b], mb[0], lo[0], hi[0], mb[1], lo[1], hi[1],
			       mb[2], lo[2], hi[2], cp[0], cp[1], cp[2]);
		}
	return 0;
}
