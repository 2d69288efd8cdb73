// SPDX-License-Identifier: MIT
/*
 * Process lifecycle under the shim: fork from a program whose other threads
 * are allocating (the child must allocate, large and small, without
 * deadlock), posix_spawn and vfork from a threaded program, and exec of a
 * new image that inherits the shim through LD_PRELOAD.  Sized by work (forks
 * and spawns, times PST_SCALE for a soak): the allocating threads run only
 * while the main thread forks, so their CPU follows the forks' wall time.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib.h"

/* Forks, and posix_spawn + vfork pairs, at PST_SCALE=1 (once 60 and 30). */
#define FORKS 20
#define SPAWNS 10

extern char **environ;
static const char *self;
static atomic_int stop;

static void *churn(void *arg)
{
	uint64_t r = (uint64_t)(uintptr_t)arg;
	while (!atomic_load(&stop)) {
		size_t n = (pst_rand(&r) % 2) ? 100 : (64 << 10) + pst_rand(&r) % (4 << 20);
		unsigned char *p = malloc(n);
		pst_fill(p, n < 4096 ? n : 4096, r);
		p = realloc(p, n * 2);
		free(p);
	}
	return NULL;
}

/* What a child does: allocate across the threshold and verify. */
static int child_work(void)
{
	for (int i = 0; i < 50; i++) {
		size_t n = (size_t)(i % 2 ? 200 : (1 + i) << 16);
		unsigned char *p = malloc(n);
		if (!p)
			return 2;
		pst_fill(p, n, (uint64_t)i);
		if (!pst_check(p, n, (uint64_t)i))
			return 3;
		free(p);
	}
	return 0;
}

START_TEST(test_fork_while_threads_allocate)
{
	pthread_t t[3];
	atomic_store(&stop, 0);
	for (intptr_t i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, churn, (void *)(i + 7));
	for (long i = 0, n = pst_scaled(FORKS); i < n; i++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(child_work());
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "child %ld: status %#x", i, status);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
}
END_TEST

START_TEST(test_spawn_and_vfork_while_threads_allocate)
{
	pthread_t t[2];
	atomic_store(&stop, 0);
	for (intptr_t i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, churn, (void *)(i + 3));
	for (long i = 0, n = pst_scaled(SPAWNS); i < n; i++) {
		pid_t pid;
		char *argv[] = { (char *)self, (char *)"--child", NULL };
		ck_assert_int_eq(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

		pid = vfork();
		if (pid == 0) {
			execve(self, argv, environ);
			_exit(127);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}
END_TEST

/* The exec'd image inherits LD_PRELOAD, so it runs under the shim too. */
START_TEST(test_exec_inherits_shim)
{
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[] = { (char *)self, (char *)"--child-expect-shim", NULL };
		execve(self, argv, environ);
		_exit(127);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
}
END_TEST

int main(int argc, char **argv)
{
	self = argv[0];
	if (argc > 1 && !strcmp(argv[1], "--child"))
		return child_work();
	if (argc > 1 && !strcmp(argv[1], "--child-expect-shim")) {
		if (!pst_shim_loaded())
			return 4;
		return child_work();
	}

	Suite *s = suite_create("alloc_lifecycle");
	TCase *tc = tcase_create("lifecycle");
	/* A hang detector, many times the work's time at a load average of 20. */
	tcase_set_timeout(tc, 600 * pst_scale());
	tcase_add_test(tc, test_fork_while_threads_allocate);
	tcase_add_test(tc, test_spawn_and_vfork_while_threads_allocate);
	tcase_add_test(tc, test_exec_inherits_shim);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
