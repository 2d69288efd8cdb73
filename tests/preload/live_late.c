// SPDX-License-Identifier: MIT
/*
 * A process that makes its live file late, for live_late.sh: THREADS
 * threads each write EARLY bytes to /dev/null one by one at once (before
 * any file exists: no pooled buffer, well within the first second), then
 * all wait 1.2 s, then each writes LATE more.  The shim makes the file on
 * one thread's first counted call past the first second; every other
 * thread must move the counts it made before into it on its own.  The
 * main thread then stops itself (SIGSTOP) so the test can read the file,
 * and exits 0 after SIGCONT.  Progress goes out with raw write system
 * calls, which the shim does not count.
 *
 *   live_late THREADS EARLY LATE
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int fd, early, late;
static pthread_barrier_t early_done;

static void *run(void *arg)
{
	char c = 'x';
	long bad = 0;

	(void)arg;
	for (int i = 0; i < early; i++)
		bad += write(fd, &c, 1) != 1;
	pthread_barrier_wait(&early_done);
	struct timespec ts = { 1, 200000000 };
	nanosleep(&ts, NULL);
	for (int i = 0; i < late; i++)
		bad += write(fd, &c, 1) != 1;
	return (void *)bad;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int n = atoi(argv[1]);
	early = atoi(argv[2]);
	late = atoi(argv[3]);
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	long bad = 0;

	fd = open("/dev/null", O_WRONLY);
	if (fd < 0 || !t || pthread_barrier_init(&early_done, NULL, (unsigned)n) != 0)
		return 2;
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, NULL) != 0)
			return 2;
	for (int i = 0; i < n; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += (long)r;
	}
	const char msg[] = "stopping\n";
	syscall(SYS_write, 1, msg, sizeof(msg) - 1);
	raise(SIGSTOP);
	return bad ? 1 : 0;
}
