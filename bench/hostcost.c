// SPDX-License-Identifier: MIT
/*
 * hostcost: what this host charges for the things the pool saves and the
 * things it cannot, measured in a few seconds so that scripts/demo can
 * print them before its runs and explain every gain by them.  It measures
 * a 4 KiB page fault (mapping fresh anonymous memory with THP refused,
 * touching each page once and unmapping it: the fault, the zeroing and the
 * unmap), a 2 MiB THP fault (the same with MADV_HUGEPAGE, checked to have
 * faulted whole huge pages), a small system call (getppid), memcpy of 16 MiB
 * buffers, and O_DIRECT writes and reads of 1 MiB on a file in --dir (the
 * disk the demo's storage nodes use).  CPU costs are per CPU second of
 * this thread (a loaded machine's waiting does not count), the disk's in
 * wall time; each figure is the median of --rounds rounds, and the
 * faults' worst round is printed too (a round that touches guest memory
 * the hypervisor has not backed yet pays for the host's fault as well).  Prints one
 * "name value" line per figure; a figure it could not measure is "-" with
 * a "name_why" line saying why.  Exit status 0, or 2 for usage errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MIB (1UL << 20)
#define HUGE_SZ (2UL * MIB)
#define ROUNDS_MAX 15

static const char *opt_dir = ".";
static int opt_rounds = 5;
static size_t opt_file = 64 * MIB;

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
	return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static long minflt_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A 2 MiB-aligned anonymous mapping of len bytes (len a multiple of 2 MiB),
 * or NULL; *base and *maplen are what to munmap. */
static char *map_aligned(size_t len, void **base, size_t *maplen)
{
	*maplen = len + HUGE_SZ;
	*base = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*base == MAP_FAILED)
		return NULL;
	return (char *)(((uintptr_t)*base + HUGE_SZ - 1) & ~(HUGE_SZ - 1));
}

/*
 * Microseconds of CPU per fault when `len` bytes of fresh memory are
 * mapped, touched one byte per `step` with `advice` applied, and unmapped
 * again: the whole life of a page of a fresh buffer, which is what glibc
 * pays per page of a big buffer it maps and unmaps per request, and what
 * the pool saves.  *faults_per_touch says how many faults each touch took
 * (1 when every touch faulted one page of `step` bytes).  Negative on
 * mmap failure.
 */
static double fault_us(size_t len, size_t step, int advice, double *faults_per_touch)
{
	void *base;
	size_t maplen;
	long f0 = minflt_now();
	double t0 = cpu_now();
	char *p = map_aligned(len, &base, &maplen);
	if (!p)
		return -1;
	madvise(p, len, advice);
	size_t touches = len / step;
	for (size_t off = 0; off < len; off += step)
		((volatile char *)p)[off] = 1;
	munmap(base, maplen);
	double t = cpu_now() - t0;
	long faults = minflt_now() - f0;
	*faults_per_touch = (double)faults / (double)touches;
	return faults > 0 ? t / (double)faults * 1e6 : -1;
}

static void faults(void)
{
	double v[ROUNDS_MAX], per;
	int n = 0;

	for (int r = 0; r < opt_rounds; r++)
		if ((v[n] = fault_us(32 * MIB, 4096, MADV_NOHUGEPAGE, &per)) > 0)
			n++;
	if (n) {
		/* The worst round too: a round that lands on guest memory the
		 * hypervisor has not backed yet pays the host's fault as well. */
		printf("fault_4k_us %.3f\n", median(v, n));
		printf("fault_4k_max_us %.3f\n", v[n - 1]);
	}
	else
		printf("fault_4k_us -\nfault_4k_us_why mmap failed: %s\n", strerror(errno));

	/* THP: each touch of a 2 MiB-aligned, advised range should be one
	 * fault of a whole huge page; if it took many, THP was not given. */
	double worst = 0;
	n = 0;
	for (int r = 0; r < opt_rounds; r++) {
		double us = fault_us(64 * MIB, HUGE_SZ, MADV_HUGEPAGE, &per);
		if (us <= 0)
			continue;
		if (per > worst)
			worst = per;
		v[n++] = us;
	}
	if (n && worst <= 1.5) {
		printf("fault_thp_us %.3f\n", median(v, n));
		printf("fault_thp_max_us %.3f\n", v[n - 1]);
	}
	else
		printf("fault_thp_us -\nfault_thp_us_why %s\n",
		       n ? "THP not given (transparent_hugepage off, or no free huge page)" : "mmap failed");
}

static void syscalls(void)
{
	double v[ROUNDS_MAX];
	const int iters = 200000;

	for (int r = 0; r < opt_rounds; r++) {
		double t0 = cpu_now();
		for (int i = 0; i < iters; i++)
			syscall(SYS_getppid);
		v[r] = (cpu_now() - t0) / iters * 1e9;
	}
	printf("syscall_ns %.1f\n", median(v, opt_rounds));
}

static void copies(void)
{
	const size_t len = 16 * MIB;
	char *a = malloc(len), *b = malloc(len);
	double v[ROUNDS_MAX];

	if (!a || !b) {
		printf("memcpy_gbs -\nmemcpy_gbs_why malloc failed\n");
		free(a);
		free(b);
		return;
	}
	memset(a, 1, len);
	memset(b, 2, len);
	for (int r = 0; r < opt_rounds; r++) {
		double t0 = cpu_now();
		for (int i = 0; i < 8; i++) {
			memcpy(i % 2 ? a : b, i % 2 ? b : a, len);
			__asm__ volatile("" ::: "memory");
		}
		v[r] = 8.0 * (double)len / (cpu_now() - t0) / 1e9;
	}
	printf("memcpy_gbs %.2f\n", median(v, opt_rounds));
	free(a);
	free(b);
}

/* MiB/s of one pass over the file in 1 MiB O_DIRECT requests; negative errno. */
static double direct_pass(int fd, char *buf, int write)
{
	double t0 = clock_s(CLOCK_MONOTONIC);
	for (size_t off = 0; off < opt_file; off += MIB) {
		ssize_t n = write ? pwrite(fd, buf, MIB, (off_t)off) : pread(fd, buf, MIB, (off_t)off);
		if (n != (ssize_t)MIB)
			return n < 0 ? -errno : -EIO;
	}
	if (write && fdatasync(fd))
		return -errno;
	return (double)opt_file / MIB / (clock_s(CLOCK_MONOTONIC) - t0);
}

static void disk(void)
{
	char path[4096];
	void *base;
	size_t maplen;
	char *buf = map_aligned(HUGE_SZ, &base, &maplen);
	double w[ROUNDS_MAX], r[ROUNDS_MAX];
	const char *why = NULL;
	int n = 0;

	snprintf(path, sizeof(path), "%s/hostcost.%d", opt_dir, (int)getpid());
	int fd = buf ? open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600) : -1;
	if (fd < 0) {
		why = strerror(buf ? errno : ENOMEM);
	} else {
		/* The buffer as the pool's: one huge page if THP gives it. */
		madvise(buf, HUGE_SZ, MADV_HUGEPAGE);
		memset(buf, 0x5a, HUGE_SZ);
		/* Few rounds: the disk is slow and shared, and one pass is 64 MiB. */
		int rounds = opt_rounds < 3 ? opt_rounds : 3;
		for (; n < rounds; n++) {
			w[n] = direct_pass(fd, buf, 1);
			r[n] = direct_pass(fd, buf, 0);
			if (w[n] < 0 || r[n] < 0) {
				why = strerror((int)-(w[n] < 0 ? w[n] : r[n]));
				break;
			}
		}
		close(fd);
		unlink(path);
	}
	if (buf)
		munmap(base, maplen);
	if (why) {
		printf("direct_write_mibs -\ndirect_read_mibs -\ndirect_why O_DIRECT on %s: %s\n", opt_dir, why);
		return;
	}
	printf("direct_write_mibs %.0f\ndirect_read_mibs %.0f\n", median(w, n), median(r, n));
}

static void usage(void)
{
	fprintf(stderr, "usage: hostcost [--dir DIR] [--rounds N (1-%d)] [--file-mib N]\n", ROUNDS_MAX);
	exit(2);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			opt_dir = argv[++i];
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			opt_rounds = atoi(argv[++i]);
			if (opt_rounds < 1 || opt_rounds > ROUNDS_MAX)
				usage();
		} else if (!strcmp(argv[i], "--file-mib") && i + 1 < argc) {
			long m = atol(argv[++i]);
			if (m < 1 || m > 4096)
				usage();
			opt_file = (size_t)m * MIB;
		} else {
			usage();
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	faults();
	syscalls();
	copies();
	disk();
	return 0;
}
