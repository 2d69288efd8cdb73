// SPDX-License-Identifier: MIT
/*
 * iobench: the I/O patterns the shim speeds up, as an unmodified program
 * would write them.  Run by scripts/bench-io with and without the shim.
 *
 *   iobench get [--size 4M] [--file PATH] [--file-size 1G] [--seconds 2]
 *               [--prealloc] [--label NAME]
 *     The naive storage GET loop: posix_memalign a fresh buffer of --size,
 *     pread it from an O_DIRECT file at a random aligned offset, scan it,
 *     free it.  --prealloc reads into one buffer allocated up front
 *     (MAP_HUGETLB when the system has hugepages, else posix_memalign): the
 *     upper bound.  The file is created (random bytes) when missing or
 *     short.  Prints GB/s, CPU seconds (user+sys) per GiB, faults per op.
 *
 *   iobench passthrough [--calls 1000000] [--label NAME]
 *     Tiny calls that the shim only counts: write(1 byte) to /dev/null,
 *     read(1 byte) from /dev/zero, send and recv of 1 byte on a
 *     socketpair.  Prints nanoseconds per call.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cputime.h"

#define MiB (1024ULL * 1024)

struct opts {
	const char *what;
	size_t size;
	const char *file;
	uint64_t file_size;
	double seconds;
	bool prealloc;
	const char *label;
	long calls;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static unsigned long long parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': return v << 10;
	case 'm': case 'M': return v << 20;
	case 'g': case 'G': return v << 30;
	case '\0': return v;
	}
	fprintf(stderr, "iobench: bad size %s\n", s);
	exit(2);
}

/* Create (or extend) the data file with random bytes, through the page cache. */
static void ensure_file(const char *path, uint64_t size)
{
	struct stat st;
	if (stat(path, &st) == 0 && (uint64_t)st.st_size >= size)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	size_t chunk = 4 * MiB;
	uint64_t *buf = malloc(chunk), s = 0x9e3779b97f4a7c15ULL;
	if (fd < 0 || !buf) {
		perror(path);
		exit(1);
	}
	fprintf(stderr, "iobench: creating %s (%llu MiB)\n", path, (unsigned long long)(size >> 20));
	for (uint64_t off = 0; off < size; off += chunk) {
		for (size_t k = 0; k < chunk / 8; k++)
			buf[k] = rng(&s);
		size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n) {
			perror("iobench: writing the data file");
			exit(1);
		}
	}
	if (fsync(fd) || close(fd)) {
		perror("iobench: fsync");
		exit(1);
	}
	free(buf);
}

/* The upper bound's buffer: hugetlb pages if there are any, else aligned heap. */
static void *prealloc_buffer(size_t size, const char **kind)
{
	size_t huge = (size + 2 * MiB - 1) & ~(2 * MiB - 1);
	void *p = mmap(NULL, huge, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
	if (p != MAP_FAILED) {
		*kind = "hugetlb";
		return p;
	}
	if (posix_memalign(&p, 2 * MiB, size))
		return NULL;
	madvise(p, size, MADV_HUGEPAGE);
	memset(p, 0, size);
	*kind = "heap";
	return p;
}

static uint64_t scan(const void *buf, size_t n)
{
	const uint64_t *w = buf;
	uint64_t sum = 0;
	for (size_t k = 0; k < n / 8; k++)
		sum += w[k];
	return sum;
}

static int get(const struct opts *o)
{
	ensure_file(o->file, o->file_size);
	int fd = open(o->file, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "iobench: open(%s, O_DIRECT): %s\n", o->file, strerror(errno));
		return errno == EINVAL ? 77 : 1;
	}
	uint64_t slots = (o->file_size - o->size) / 4096 + 1, s = 0x1234567;
	const char *kind = "fresh";
	void *pre = NULL;
	if (o->prealloc && !(pre = prealloc_buffer(o->size, &kind))) {
		fprintf(stderr, "iobench: no buffer\n");
		return 1;
	}
	volatile uint64_t sink = 0;
	long ops = 0, f0 = 0, f1;
	double t0 = 0, c0 = 0, t;
	/* op -1 warms up: the first buffer of a size may cost a pool slab's
	 * (or the heap's) page faults, which belong to no steady state */
	for (long warm = 1;; warm = 0) {
		if (!warm && ops == 0) {
			t0 = now();
			c0 = bench_cpu_seconds(&f0);
		}
		void *buf = pre;
		if (!buf && posix_memalign(&buf, 4096, o->size)) {
			fprintf(stderr, "iobench: posix_memalign(%zu) failed\n", o->size);
			return 1;
		}
		off_t off = (off_t)(rng(&s) % slots * 4096);
		ssize_t r = pread(fd, buf, o->size, off);
		if (r != (ssize_t)o->size) {
			fprintf(stderr, "iobench: pread(%zu at %lld) = %zd: %s\n", o->size,
				(long long)off, r, r < 0 ? strerror(errno) : "short");
			return 1;
		}
		sink += scan(buf, o->size);
		if (!pre)
			free(buf);
		if (warm)
			continue;
		ops++;
		t = now();
		if (t - t0 >= o->seconds)
			break;
	}
	double cpu = bench_cpu_seconds(&f1) - c0, bytes = (double)ops * (double)o->size;
	printf("iobench get label=%s size=%zu buffer=%s ops=%ld seconds=%.3f GB/s=%.3f "
	       "cpu_s_per_GiB=%.4f faults/op=%.1f\n", o->label, o->size, kind, ops, t - t0,
	       bytes / (t - t0) / 1e9, cpu / (bytes / (double)(1ULL << 30)),
	       (double)(f1 - f0) / (double)ops);
	(void)sink;
	close(fd);
	return 0;
}

/* ns per call of op over o->calls calls, timed in batches of 64. */
static int passthrough(const struct opts *o)
{
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC), zero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	int sp[2];
	char c = 'x';
	enum { BATCH = 64 };
	if (null < 0 || zero < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp)) {
		perror("iobench: passthrough setup");
		return 1;
	}
	double t_write = 0, t_read = 0, t_send = 0, t_recv = 0;
	long batches = o->calls / BATCH;
	for (long b = 0; b < batches; b++) {
		double t0 = now();
		for (int k = 0; k < BATCH; k++)
			if (write(null, &c, 1) != 1)
				return 1;
		double t1 = now();
		for (int k = 0; k < BATCH; k++)
			if (read(zero, &c, 1) != 1)
				return 1;
		double t2 = now();
		for (int k = 0; k < BATCH; k++)
			if (send(sp[0], &c, 1, 0) != 1)
				return 1;
		double t3 = now();
		for (int k = 0; k < BATCH; k++)
			if (recv(sp[1], &c, 1, 0) != 1)
				return 1;
		double t4 = now();
		t_write += t1 - t0;
		t_read += t2 - t1;
		t_send += t3 - t2;
		t_recv += t4 - t3;
	}
	double n = (double)(batches * BATCH) / 1e9;
	printf("iobench passthrough label=%s calls=%ld write_ns=%.1f read_ns=%.1f send_ns=%.1f "
	       "recv_ns=%.1f\n", o->label, batches * BATCH, t_write / n, t_read / n, t_send / n,
	       t_recv / n);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: iobench get [--size N] [--file PATH] [--file-size N] [--seconds S] "
		"[--prealloc] [--label L]\n       iobench passthrough [--calls N] [--label L]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct opts o = { .size = 4 * MiB, .file_size = 1ULL << 30, .seconds = 2.0,
			  .label = "-", .calls = 1000000 };
	const char *tmp = getenv("TMPDIR");
	char defpath[4096];
	snprintf(defpath, sizeof(defpath), "%s/poolshim-iobench.dat", tmp && *tmp ? tmp : "/tmp");
	o.file = defpath;
	if (argc < 2)
		return usage();
	o.what = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--prealloc")) {
			o.prealloc = true;
			continue;
		}
		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "--size"))
			o.size = parse_size(v);
		else if (!strcmp(a, "--file"))
			o.file = v;
		else if (!strcmp(a, "--file-size"))
			o.file_size = parse_size(v);
		else if (!strcmp(a, "--seconds"))
			o.seconds = atof(v);
		else if (!strcmp(a, "--label"))
			o.label = v;
		else if (!strcmp(a, "--calls"))
			o.calls = atol(v);
		else
			return usage();
	}
	if (!strcmp(o.what, "get")) {
		if (o.size < 4096 || o.size % 4096 || o.file_size < o.size || o.seconds <= 0) {
			fprintf(stderr, "iobench: --size must be a multiple of 4K within --file-size\n");
			return 2;
		}
		return get(&o);
	}
	if (!strcmp(o.what, "passthrough"))
		return o.calls >= 64 ? passthrough(&o) : usage();
	return usage();
}
