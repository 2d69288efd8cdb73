// SPDX-License-Identifier: MIT
/*
 * fork() while other threads hold the pool lock (tests/preload/fork_pool.sh).
 * Near the pool cap (a small POOLSHIM_POOL_SIZE) every large request that
 * finds no free extent reaches the extent hook, which takes the pool lock,
 * at times outside jemalloc's own mutexes; PS_TEST_POOL_DELAY_US (the test
 * build of the shim) holds it a while each time.  Threads allocate and free
 * pooled buffers of changing sizes while the main thread forks in a loop;
 * each child asks for a pooled buffer (which takes the lock) and exits.  A
 * child that inherited the lock held would wait forever: its alarm kills
 * it and the test fails (at the first such child).
 *   fork_pool FORKS THREADS
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	while (!stop) {
		/* 1..6 MiB in 64 KiB steps: sizes the arena rarely has free */
		size_t n = ((size_t)(rand_r(&seed) % 80) + 16) << 16;
		char *p = malloc(n);
		if (p) {
			p[0] = p[n - 1] = 1;
			free(p);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int forks = argc > 1 ? atoi(argv[1]) : 40;
	int nthreads = argc > 2 ? atoi(argv[2]) : 3;
	pthread_t t[16];
	int hung = 0, bad = 0;

	if (nthreads > 16)
		nthreads = 16;
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
	usleep(20000);
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0) {
			alarm(2);
			/* larger than the cap: always reaches the hook and its lock */
			size_t n = (size_t)64 << 20;
			char *p = malloc(n);
			if (!p)
				_exit(3);
			p[0] = p[n - 1] = 1;
			free(p);
			_exit(0);
		}
		int status;
		waitpid(pid, &status, 0);
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
			hung++;
			printf("fork_pool: child %d of %d hung on the pool lock\n", i + 1, forks);
			break;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			bad++;
	}
	stop = 1;
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	printf("fork_pool forks=%d hung=%d failed=%d\n", forks, hung, bad);
	return hung || bad ? 1 : 0;
}
