// SPDX-License-Identifier: MIT
/*
 * Many threads doing counted I/O at once, for live_shm_full.sh: each writes
 * once (claiming its counter block), waits until all have, then writes the
 * rest, so every thread holds a block at the same time.  Exits 0 when every
 * write succeeded.  With --shm-free it then prints how much of /dev/shm is
 * free (with a raw write, which the shim does not count).  It first takes
 * and frees a pooled buffer: the shim makes the live file on a process's
 * first pool slab (or after a second), and the threads must find it made.
 *
 *   live_threads THREADS WRITES [--shm-free]
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_barrier_t all_in;
static int fd, writes;

static void *run(void *arg)
{
	char c = 'x';
	long bad = 0;

	(void)arg;
	bad += write(fd, &c, 1) != 1;
	pthread_barrier_wait(&all_in);
	for (int i = 1; i < writes; i++)
		bad += write(fd, &c, 1) != 1;
	return (void *)bad;
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[1]) : 32;
	writes = argc > 2 ? atoi(argv[2]) : 100;
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	long bad = 0;

	void *(*volatile alloc)(size_t) = malloc;    /* not elided with the free */
	char *pooled = alloc(1 << 20);
	if (!pooled)
		return 2;
	pooled[0] = 1;
	free(pooled);
	fd = open("/dev/null", O_WRONLY);
	if (fd < 0 || !t || pthread_barrier_init(&all_in, NULL, (unsigned)n) != 0)
		return 2;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, NULL) != 0)
			return 2;
	for (int i = 0; i < n; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (long)r;
	}
	if (argc > 3 && !strcmp(argv[3], "--shm-free")) {
		struct statfs s;
		char line[64];
		if (statfs("/dev/shm", &s) != 0 || s.f_blocks == 0)
			return 2;
		int len = snprintf(line, sizeof(line), "shm free %d%%\n",
				   (int)(100 * s.f_bavail / s.f_blocks));
		syscall(SYS_write, 1, line, (size_t)len);
	}
	return bad ? 1 : 0;
}
