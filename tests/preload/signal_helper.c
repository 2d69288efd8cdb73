// SPDX-License-Identifier: MIT
/*
 * For live.sh: a program with its own SIGUSR2 handler that allocates pooled
 * buffers until it has received --signals signals, then prints how many
 * its handler saw; with --exec it afterwards execs the given program.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t seen;

static void on_usr2(int sig)
{
	(void)sig;
	seen++;
}

int main(int argc, char **argv)
{
	int want = 2;
	char **exec_argv = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--signals") && i + 1 < argc)
			want = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--exec") && i + 1 < argc) {
			exec_argv = &argv[i + 1];
			break;
		}
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr2;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR2, &sa, NULL) != 0)
		return 1;
	/* The disposition reads back as ours, whatever the shim does underneath. */
	struct sigaction back;
	if (sigaction(SIGUSR2, NULL, &back) != 0 || back.sa_handler != on_usr2)
		return 2;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (long i = 0; seen < want; i++) {
		void *p = malloc(1 << 20);
		memset(p, (int)i, 4096);
		free(p);
		usleep(1000);
	}
	printf("handler ran %d\n", (int)seen);
	fflush(stdout);
	if (exec_argv) {
		execvp(exec_argv[0], exec_argv);
		perror("execvp");
		return 3;
	}
	return 0;
}
