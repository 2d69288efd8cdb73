// SPDX-License-Identifier: MIT
/*
 * For io_devchunk.sh: 16 MiB O_DIRECT preads, the requests the shim splits
 * into chunks of the device's size, with what each returned.
 *
 *   io_devchunk write FILE   lay out FILE: 40 MiB + 8 KiB of a pattern
 *                            (byte i of the file is (i / 4096 * 7 + i) & 255)
 *   io_devchunk read FILE    four 16 MiB preads into a malloc'd buffer: at
 *                            0, at 4 KiB, across the end of the file (a
 *                            short read), past the end; prints each result,
 *                            whether the bytes read match the pattern and
 *                            the rest of the buffer was left alone, and the
 *                            file offset afterwards (pread must not move it)
 *
 *   io_devchunk route FILE N N preads of 128 KiB at pseudo-random aligned
 *                            offsets into one malloc'd buffer, every eighth
 *                            followed by a pwrite of the same bytes back
 *                            (the file is unchanged), then a pread across
 *                            the end and one past it; prints what they
 *                            returned and the file offset afterwards
 *                            (io_route.sh: the router's test)
 *   io_devchunk pastend FILE N  N preads of 128 KiB past the end of FILE
 *                            (each returns 0: the router gets no sample)
 *
 * Exits 77 when the directory refuses O_DIRECT.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB (1024L * 1024)
#define LEN (16 * MiB)
#define FSIZE (40 * MiB + 8192)
#define UNTOUCHED 0xEE

static unsigned char pattern(long at)
{
	return (unsigned char)((at / 4096 * 7 + at) & 255);
}

static int write_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0600);
	unsigned char *buf;

	if (fd < 0)
		return errno == EINVAL ? 77 : 1;
	if (posix_memalign((void **)&buf, 4096, LEN) != 0)
		return 1;
	for (long done = 0; done < FSIZE;) {
		long n = FSIZE - done < LEN ? FSIZE - done : LEN;
		for (long i = 0; i < n; i++)
			buf[i] = pattern(done + i);
		if (pwrite(fd, buf, (size_t)n, done) != n)
			return errno == EINVAL ? 77 : 1;
		done += n;
	}
	free(buf);
	return close(fd) == 0 ? 0 : 1;
}

static int read_file(const char *path)
{
	static const long offs[] = { 0, 4096, FSIZE - 6 * MiB - 8192, FSIZE + 4 * MiB - 8192 };
	int fd = open(path, O_RDONLY | O_DIRECT);
	unsigned char *buf;

	if (fd < 0)
		return errno == EINVAL ? 77 : 1;
	/* From the pool under the shim */
	if (posix_memalign((void **)&buf, 4096, LEN) != 0)
		return 1;
	for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
		memset(buf, UNTOUCHED, LEN);
		ssize_t n = pread(fd, buf, LEN, offs[k]);
		int err = n < 0 ? errno : 0;
		long bad = -1, touched = -1;
		for (long i = 0; i < n && bad < 0; i++)
			if (buf[i] != pattern(offs[k] + i))
				bad = i;
		for (long i = n < 0 ? 0 : n; i < LEN && touched < 0; i++)
			if (buf[i] != UNTOUCHED)
				touched = i;
		printf("pread off=%ld -> %zd errno=%d first-bad=%ld touched-after=%ld\n", offs[k], n,
		       err, bad, touched);
	}
	printf("offset after: %ld\n", (long)lseek(fd, 0, SEEK_CUR));
	free(buf);
	close(fd);
	return 0;
}

#define RLEN (128 * 1024)

static int route_file(const char *path, long calls)
{
	int fd = open(path, O_RDWR | O_DIRECT);
	unsigned char *buf;
	unsigned long seed = 12345;
	long good = 0, bad = 0, writes = 0, wrong = 0;

	if (fd < 0)
		return errno == EINVAL ? 77 : 1;
	if (posix_memalign((void **)&buf, 4096, RLEN) != 0)
		return 1;
	for (long k = 0; k < calls; k++) {
		seed = seed * 6364136223846793005ul + 1442695040888963407ul;
		long off = (long)((seed >> 33) % ((FSIZE - RLEN) / 4096)) * 4096;
		memset(buf, UNTOUCHED, RLEN);
		ssize_t n = pread(fd, buf, RLEN, off);
		long i = 0;
		while (i < n && buf[i] == pattern(off + i))
			i++;
		if (n == RLEN && i == n)
			good++;
		else
			bad++;
		if (k % 8 == 0 && n == RLEN) {
			writes++;
			if (pwrite(fd, buf, RLEN, off) != RLEN)
				wrong++;
		}
	}
	ssize_t across = pread(fd, buf, RLEN, FSIZE - 8192);
	ssize_t past = pread(fd, buf, RLEN, FSIZE + 8192);
	printf("route preads=%ld good=%ld bad=%ld pwrites=%ld failed=%ld across-end=%zd past-end=%zd "
	       "offset after=%ld\n", calls, good, bad, writes, wrong, across, past,
	       (long)lseek(fd, 0, SEEK_CUR));
	free(buf);
	close(fd);
	return 0;
}

static int past_end(const char *path, long calls)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	unsigned char *buf;
	long zero = 0;

	if (fd < 0)
		return errno == EINVAL ? 77 : 1;
	if (posix_memalign((void **)&buf, 4096, RLEN) != 0)
		return 1;
	for (long k = 0; k < calls; k++)
		zero += pread(fd, buf, RLEN, FSIZE + 8192 + k * RLEN) == 0;
	printf("pastend preads=%ld zero=%ld\n", calls, zero);
	free(buf);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "pastend") == 0)
		return past_end(argv[2], atol(argv[3]));
	if (argc == 4 && strcmp(argv[1], "route") == 0)
		return route_file(argv[2], atol(argv[3]));
	if (argc == 3 && strcmp(argv[1], "write") == 0)
		return write_file(argv[2]);
	if (argc == 3 && strcmp(argv[1], "read") == 0)
		return read_file(argv[2]);
	fprintf(stderr, "usage: io_devchunk write|read FILE | route FILE N\n");
	return 2;
}
