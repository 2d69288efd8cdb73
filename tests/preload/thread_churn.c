// SPDX-License-Identifier: MIT
/*
 * Thread churn: N short-lived threads, WIDTH at a time, each allocating
 * one small block that a later thread frees (issue 25: a thread-per-
 * connection server).  Prints the most threads alive at once (main
 * included), for the report's process.threads to be checked against.
 *
 *   thread_churn N [WIDTH]
 *   thread_churn -m N    the same in a fork child; prints its peak RSS
 *                        (KiB), the exit report included
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define WIDTH_MAX 64

static void *slot[WIDTH_MAX];
static int width = 10;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int alive = 1, alive_max = 1;

static void *run(void *arg)
{
	long i = (long)arg;
	void *p = malloc(64);

	if (!p)
		abort();
	memset(p, 1, 64);
	pthread_mutex_lock(&mu);
	void *old = slot[i % width];
	slot[i % width] = p;
	pthread_mutex_unlock(&mu);
	free(old);
	return NULL;
}

static int churn(int argc, char **argv);

int main(int argc, char **argv)
{
	struct rusage ru;
	int status;

	if (argc < 2 || strcmp(argv[1], "-m") != 0)
		return churn(argc, argv);
	/* The child's peak as its parent sees it: the child's whole life, exit included. */
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0)
		exit(churn(argc - 1, argv + 1));
	if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	printf("peak_kb %ld\n", ru.ru_maxrss);
	return 0;
}

static int churn(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5000;
	pthread_t t[WIDTH_MAX];

	if (argc > 2)
		width = atoi(argv[2]);
	if (n <= 0 || width <= 0 || width > WIDTH_MAX) {
		fprintf(stderr, "usage: thread_churn N [WIDTH <= %d]\n", WIDTH_MAX);
		return 2;
	}
	for (int i = 0; i < n; i += width) {
		for (int k = 0; k < width; k++) {
			if (pthread_create(&t[k], NULL, run, (void *)(long)(i + k)) != 0)
				abort();
			/* Counted by the creator: a thread is alive from here to its join. */
			if (++alive > alive_max)
				alive_max = alive;
		}
		for (int k = 0; k < width; k++) {
			pthread_join(t[k], NULL);
			alive--;
		}
	}
	for (int k = 0; k < width; k++)
		free(slot[k]);
	printf("alive_max %d\n", alive_max);
	fflush(stdout);
	return 0;
}
