// SPDX-License-Identifier: MIT
/*
 * fork N times (default 1000, argv[1]) from a program whose other threads
 * are allocating pooled and small buffers, doing O_DIRECT I/O on pooled
 * buffers (the shim's io_uring path) and pipe I/O, all the time.
 *
 * Each child frees a pooled buffer it inherited, allocates its own, reads
 * and checks a region of the pattern file with O_DIRECT, writes exactly
 * 1 + i % 7 one-byte records to /dev/null (i = its index) and exits
 * through exit(), so the shim writes its report (POOLSHIM_STATS with %p).
 * Up to 4 children run at once.  Every child is watched by an alarm: a
 * deadlock in the shim shows as a child killed by SIGALRM.
 *
 * Prints "child PID INDEX" for each child (the script matches every report
 * to its child and checks the /dev/null write count: reports neither lost
 * nor mixed) and "parent PID WRITES" with the parent's own count of
 * /dev/null writes, then "soak ok".
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_common.h"

#define MiB (1024UL * 1024)
#define FSIZE (32 * MiB)
#define SEED 0x50a4
#define INFLIGHT 4

static char *path;
static int stop_flag;
static int failed;
static unsigned long parent_null_writes;
static int null_fd;

static void fail_now(const char *what)
{
	fprintf(stderr, "fork_soak: %s: %s\n", what, strerror(errno));
	__atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
}

/* Allocate and free buffers on both sides of the pool threshold. */
static void *churn(void *arg)
{
	unsigned long r = (unsigned long)arg;
	while (!__atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE)) {
		r = r * 6364136223846793005UL + 1442695040888963407UL;
		size_t n = (r >> 33) % 3 ? 200 + (r >> 40) % 2000 : (64 << 10) + (r >> 20) % (3 * MiB);
		unsigned char *p = malloc(n);
		if (!p) {
			fail_now("malloc");
			break;
		}
		memset(p, (int)(r & 0xff), n);
		if (p[n - 1] != (unsigned char)(r & 0xff)) {
			fail_now("pattern");
			break;
		}
		free(p);
	}
	return NULL;
}

/* O_DIRECT reads through pooled buffers, checked. */
static void *reader(void *arg)
{
	int fd = pio_open_direct(path, O_RDONLY);
	size_t n = 2 * MiB;
	char *buf = pio_alloc(n);
	unsigned long k = (unsigned long)arg;

	while (!__atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE)) {
		off_t off = (off_t)((k++ % (FSIZE / n)) * n);
		if (pread(fd, buf, n, off) != (ssize_t)n) {
			fail_now("pread");
			break;
		}
		if (pio_diff(buf, n, (uint64_t)off, SEED) >= 0) {
			fail_now("reader: data differs");
			break;
		}
	}
	free(buf);
	close(fd);
	return NULL;
}

/* Pipe traffic plus the parent's own /dev/null writes, counted. */
static void *piper(void *arg)
{
	int p[2];
	char c = 'p';
	if (pipe(p) < 0) {
		fail_now("pipe");
		return NULL;
	}
	while (!__atomic_load_n(&stop_flag, __ATOMIC_ACQUIRE)) {
		if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1) {
			fail_now("pipe I/O");
			break;
		}
		if (write(null_fd, &c, 1) != 1) {
			fail_now("write /dev/null");
			break;
		}
		__atomic_add_fetch(&parent_null_writes, 1, __ATOMIC_RELAXED);
	}
	close(p[0]);
	close(p[1]);
	return NULL;
}

static int child(int index, char *inherited)
{
	alarm(60);
	free(inherited);
	size_t n = MiB;
	char *buf = pio_alloc(n);
	int fd = pio_open_direct(path, O_RDONLY);
	off_t off = (off_t)((unsigned long)index % (FSIZE / n) * n);
	if (pread(fd, buf, n, off) != (ssize_t)n || pio_diff(buf, n, (uint64_t)off, SEED) >= 0) {
		fprintf(stderr, "fork_soak: child %d: O_DIRECT read wrong\n", index);
		return 1;
	}
	for (int i = 0; i < 1 + index % 7; i++)
		if (write(null_fd, "c", 1) != 1)
			return 1;
	free(buf);
	close(fd);
	return 0;
}

static int run(int argc, char **argv)
{
	int forks = argc > 1 ? atoi(argv[1]) : 1000;
	pthread_t th[3];
	pid_t running[INFLIGHT] = { 0 };
	int done = 0, started = 0;

	pio_require_direct();
	path = pio_path("soak");
	pio_make_file(path, FSIZE, SEED);
	null_fd = open("/dev/null", O_WRONLY);
	if (null_fd < 0)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&th[0], NULL, churn, (void *)1UL);
	pthread_create(&th[1], NULL, reader, (void *)3UL);
	pthread_create(&th[2], NULL, piper, NULL);

	while (done < forks && !__atomic_load_n(&failed, __ATOMIC_ACQUIRE)) {
		int slot = -1;
		for (int i = 0; i < INFLIGHT; i++)
			if (!running[i])
				slot = i;
		if (slot >= 0 && started < forks) {
			char *inherited = malloc(256 << 10);   /* pooled; the child frees it */
			if (!inherited) {
				fail_now("malloc");
				break;
			}
			memset(inherited, 1, 256 << 10);
			fflush(stdout);
			pid_t pid = fork();
			if (pid < 0) {
				fail_now("fork");
				break;
			}
			if (pid == 0)
				exit(child(started, inherited));
			free(inherited);
			printf("child %d %d\n", (int)pid, started);
			running[slot] = pid;
			started++;
			continue;
		}
		int st;
		pid_t pid = wait(&st);
		if (pid < 0) {
			fail_now("wait");
			break;
		}
		for (int i = 0; i < INFLIGHT; i++)
			if (running[i] == pid)
				running[i] = 0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "fork_soak: child %d ended with status 0x%x%s\n", (int)pid, st,
				WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (hung: SIGALRM)" : "");
			__atomic_store_n(&failed, 1, __ATOMIC_RELEASE);
		}
		done++;
	}
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	while (wait(NULL) > 0)
		;
	printf("parent %d %lu\n", (int)getpid(), parent_null_writes);
	if (failed)
		return 1;
	printf("soak ok %d forks\n", done);
	return 0;
}

int main(int argc, char **argv)
{
	return pio_main(run, argc, argv);
}
