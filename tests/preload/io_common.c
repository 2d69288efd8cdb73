// SPDX-License-Identifier: MIT
/* Helpers shared by the I/O preload tests; see io_common.h. */

#include "io_common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ULL;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

#define PIO_INDEX_MASK ((1ULL << 40) - 1)

uint64_t pio_word(uint64_t i, uint64_t seed)
{
	return (mix(i ^ (seed << 40) ^ seed) & ~PIO_INDEX_MASK) | (i & PIO_INDEX_MASK);
}

static unsigned char pat_byte(uint64_t off, uint64_t seed)
{
	return (unsigned char)(pio_word(off >> 3, seed) >> ((off & 7) * 8));
}

void pio_fill(void *buf, size_t n, uint64_t off, uint64_t seed)
{
	unsigned char *c = buf;
	size_t k = 0;
	for (; k < n && ((off + k) & 7); k++)
		c[k] = pat_byte(off + k, seed);
	for (; k + 8 <= n; k += 8) {
		uint64_t w = pio_word((off + k) >> 3, seed);
		memcpy(c + k, &w, 8);
	}
	for (; k < n; k++)
		c[k] = pat_byte(off + k, seed);
}

ssize_t pio_diff(const void *buf, size_t n, uint64_t off, uint64_t seed)
{
	const unsigned char *c = buf;
	size_t k = 0;
	for (; k < n && ((off + k) & 7); k++)
		if (c[k] != pat_byte(off + k, seed))
			return (ssize_t)k;
	for (; k + 8 <= n; k += 8) {
		uint64_t w = pio_word((off + k) >> 3, seed), v;
		memcpy(&v, c + k, 8);
		if (v != w)
			break;
	}
	for (; k < n; k++)
		if (c[k] != pat_byte(off + k, seed))
			return (ssize_t)k;
	return -1;
}

uint64_t pio_origin(const void *buf)
{
	uint64_t w;
	memcpy(&w, buf, 8);
	return (w & PIO_INDEX_MASK) << 3;
}

static char dir[4096];

/* Whether a file in directory d can be created with O_DIRECT. */
static bool takes_direct(const char *d)
{
	char probe[4200];
	snprintf(probe, sizeof(probe), "%s/pstio-probe.%d", d, (int)getpid());
	int fd = open(probe, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	close(fd);
	unlink(probe);
	return true;
}

/*
 * $PST_IO_DIR if set; else the first of /var/tmp (disk-backed on most
 * systems), $TMPDIR and /tmp where O_DIRECT works; else /tmp, where the
 * O_DIRECT tests then skip.
 */
const char *pio_dir(void)
{
	if (!dir[0]) {
		const char *base = getenv("PST_IO_DIR");
		if (!base || !*base) {
			const char *tmp = getenv("TMPDIR");
			const char *cands[] = { "/var/tmp", tmp && *tmp ? tmp : "/tmp", "/tmp" };
			base = "/tmp";
			for (size_t k = 0; k < sizeof(cands) / sizeof(*cands); k++)
				if (takes_direct(cands[k])) {
					base = cands[k];
					break;
				}
		}
		snprintf(dir, sizeof(dir), "%s/pstio.XXXXXX", base);
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			exit(99);
		}
	}
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

void pio_cleanup(void)
{
	if (dir[0])
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	dir[0] = '\0';
}

int pio_main(int (*body)(int argc, char **argv), int argc, char **argv)
{
	pid_t self = getpid();
	int r = body(argc, argv);
	if (getpid() == self)
		pio_cleanup();
	return r;
}

char *pio_path(const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s", pio_dir(), name) < 0)
		exit(99);
	return p;
}

void pio_make_file(const char *path, uint64_t size, uint64_t seed)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t bufsz = 1 << 20;
	char *buf = malloc(bufsz);
	if (fd < 0 || !buf) {
		perror(path);
		exit(99);
	}
	for (uint64_t off = 0; off < size;) {
		size_t n = size - off < bufsz ? (size_t)(size - off) : bufsz;
		pio_fill(buf, n, off, seed);
		ssize_t w = pwrite(fd, buf, n, (off_t)off);
		if (w <= 0) {
			perror("pio_make_file: pwrite");
			exit(99);
		}
		off += (uint64_t)w;
	}
	if (fsync(fd) || close(fd)) {
		perror("pio_make_file: fsync");
		exit(99);
	}
	free(buf);
}

int pio_open_direct(const char *path, int flags)
{
	int fd = open(path, flags | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EINVAL) {
		printf("O_DIRECT not supported under %s: skipped\n", pio_dir());
		pio_cleanup();
		exit(77);
	}
	if (fd < 0) {
		perror(path);
		exit(99);
	}
	return fd;
}

void pio_require_direct(void)
{
	char *p = pio_path("probe");
	close(pio_open_direct(p, O_RDWR | O_CREAT));
	unlink(p);
	free(p);
}

double pio_scale(void)
{
	const char *s = getenv("PST_IO_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

size_t pio_chunk(void)
{
	const char *s = getenv("POOLSHIM_URING_CHUNK");
	char *end;
	if (!s)
		return 1 << 20;
	unsigned long long v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	}
	return v >= 4096 ? (size_t)v : 1 << 20;
}

static struct pio_res res(long r)
{
	return (struct pio_res){ r, r < 0 ? errno : 0 };
}

struct pio_res pio_sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return res(syscall(SYS_pread64, fd, buf, n, off));
}

struct pio_res pio_sys_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return res(syscall(SYS_pwrite64, fd, buf, n, off));
}

struct pio_res pio_sys_read(int fd, void *buf, size_t n)
{
	return res(syscall(SYS_read, fd, buf, n));
}

struct pio_res pio_sys_preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	/* preadv(2) takes the offset as two longs (low, high) */
	return res(syscall(SYS_preadv, fd, iov, cnt, (long)off, 0L));
}

void *pio_alloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n)) {
		fprintf(stderr, "posix_memalign(%zu) failed\n", n);
		exit(99);
	}
	return p;
}
