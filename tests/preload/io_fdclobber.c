// SPDX-License-Identifier: MIT
/*
 * A program that closes and dup2s over descriptors it did not open, as
 * daemons and close-all loops do, while threads do O_DIRECT I/O on pooled
 * buffers (the shim's io_uring path).
 *
 *  1. Workers read and write a pattern file through the pool; then main
 *     closes every descriptor it does not own and dup2s /dev/null over
 *     each of those numbers (and over a range of low numbers), keeping the
 *     copies.  The workers carry on; every byte is checked.
 *  2. The workers exit (the shim tears their rings down).  Every copy main
 *     made must still be open and still be /dev/null: the shim never
 *     closes or writes a number the program owns.
 *  3. A fork child calls close_range(3, ~0U, 0), reopens the file and does
 *     the same I/O: the shim starts over in it.
 *  4. Prints "foreign N", the descriptors found open that the program did
 *     not open.  Where the kernel lets io_uring_register(2) work by
 *     registered index (Linux 6.3+) the shim's rings hold none, so N is 0
 *     (the shim keeps no copy of stderr either).
 *     "lowest-free N" is the number the next open gets at the end, for the
 *     script to compare with a run without the shim.
 *
 * argv[1]: a file to write the program's own data to; main dup2s it over
 * any descriptor >= 500 it did not open (where the shim keeps its copy of
 * stderr), closes fd 2, and writes one line to it; the script checks that
 * the file holds exactly that line afterwards (no report in it).
 * Prints "lowest-free N" and "fdclobber ok".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_common.h"

#define MiB (1024UL * 1024)
#define FSIZE (16 * MiB)
#define BUF (4 * MiB)
#define SEED 0xc105e
#define WORKERS 3
#define MAXFD 1024

static char *path;
static int stop_flag;
static int failed;

static void die(const char *what)
{
	fprintf(stderr, "io_fdclobber: %s: %s\n", what, strerror(errno));
	_exit(1);
}

/* One worker: rewrite its quarter of the file and read it back, in a loop. */
static void *worker(void *arg)
{
	long k = (long)arg;
	int fd = pio_open_direct(path, O_RDWR);
	char *buf = pio_alloc(BUF);
	off_t off = (off_t)(k * BUF);

	for (int round = 0; !__atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE) || round < 4; round++) {
		pio_fill(buf, BUF, (uint64_t)off, SEED + (uint64_t)round);
		if (pwrite(fd, buf, BUF, off) != (ssize_t)BUF)
			die("pwrite");
		memset(buf, 0, BUF);
		if (pread(fd, buf, BUF, off) != (ssize_t)BUF)
			die("pread");
		if (pio_diff(buf, BUF, (uint64_t)off, SEED + (uint64_t)round) >= 0) {
			fprintf(stderr, "io_fdclobber: worker %ld round %d: data differs\n", k, round);
			__atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
			break;
		}
		if (round > 1000)
			break;
	}
	free(buf);
	close(fd);
	return NULL;
}

static int same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Descriptors open now, as a map. */
static void open_fds(unsigned char *map)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int self = dirfd(d);

	memset(map, 0, MAXFD);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			int fd = atoi(e->d_name);
			if (fd != self && fd < MAXFD)
				map[fd] = 1;
		}
	closedir(d);
}

static int run(int argc, char **argv)
{
	static unsigned char mine[MAXFD], now[MAXFD], copied[MAXFD];
	pthread_t th[WORKERS];

	if (argc < 2) {
		fprintf(stderr, "usage: io_fdclobber DATA-FILE\n");
		return 2;
	}
	pio_require_direct();
	path = pio_path("clobber");
	pio_make_file(path, FSIZE, SEED);

	/*
	 * What the program itself holds: 0-2 and whatever the harness passed
	 * (never at 500 or above, where the shim keeps its copy of stderr).
	 */
	open_fds(mine);
	memset(mine + 500, 0, MAXFD - 500);
	int data = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (data < 0)
		die(argv[1]);
	mine[data] = 1;
	int null = open("/dev/null", O_RDWR);
	if (null < 0)
		die("/dev/null");
	mine[null] = 1;
	int pipefd[2];
	if (pipe(pipefd) < 0)
		die("pipe");
	mine[pipefd[0]] = mine[pipefd[1]] = 1;

	for (long k = 0; k < WORKERS; k++)
		if (pthread_create(&th[k], NULL, worker, (void *)k))
			die("pthread_create");
	usleep(300 * 1000);

	/* Close what we did not open, then take those numbers and more over. */
	open_fds(now);
	int foreign = 0;
	for (int fd = 3; fd < MAXFD; fd++) {
		if (!now[fd] || mine[fd])
			continue;
		/* Worker files are the program's too: leave regular files alone. */
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fd < 500)
			continue;
		foreign++;
		if (fd >= 500) {
			if (dup2(data, fd) < 0)
				die("dup2 data");
		} else if (close(fd) < 0 || dup2(null, fd) < 0) {
			die("close/dup2");
		}
		copied[fd] = 1;
	}
	for (int fd = 3; fd < 64; fd++)
		if (!now[fd] && !mine[fd] && fcntl(fd, F_GETFD) < 0) {
			if (dup2(null, fd) < 0)
				die("dup2 low");
			copied[fd] = 1;
		}
	printf("foreign %d\n", foreign);

	usleep(300 * 1000);
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
	for (int k = 0; k < WORKERS; k++)
		pthread_join(th[k], NULL);
	if (failed)
		return 1;

	/* Rings are gone with their threads: our copies must be untouched. */
	for (int fd = 3; fd < MAXFD; fd++) {
		if (!copied[fd])
			continue;
		if (fcntl(fd, F_GETFD) < 0 || !same_file(fd, fd >= 500 ? data : null)) {
			fprintf(stderr, "io_fdclobber: descriptor %d was closed or replaced "
				"behind the program's back\n", fd);
			return 1;
		}
	}
	if (write(pipefd[1], "x", 1) != 1)
		die("pipe write");
	char c;
	if (read(pipefd[0], &c, 1) != 1 || c != 'x')
		die("pipe read");

	/* A child that closes everything first. */
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		if (syscall(SYS_close_range, 3U, ~0U, 0U) < 0 && errno != ENOSYS)
			die("close_range");
		stop_flag = 0;
		worker((void *)3L);
		_exit(failed ? 1 : 0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "io_fdclobber: close_range child failed (status 0x%x)\n", st);
		return 1;
	}

	/* The lowest free number now, for the script to compare. */
	for (int fd = 3; fd < 500; fd++)
		if (copied[fd])
			close(fd);
	int next = open("/dev/null", O_RDONLY);
	printf("lowest-free %d\nfdclobber ok\n", next);
	fflush(stdout);

	/* Our own line into the data file; no report may follow it there. */
	if (write(data, "program data\n", 13) != 13)
		die("write data");
	pio_cleanup();    /* before fd 2 goes: nftw's descriptors must not take its number */
	close(2);
	return 0;
}

int main(int argc, char **argv)
{
	return pio_main(run, argc, argv);
}
