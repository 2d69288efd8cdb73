// SPDX-License-Identifier: MIT
/*
 * Programs that leave the way they started (issue 25): the shim must leave
 * no descriptor and no file behind them.
 *
 *   leave_helper daemon MS    daemon(3) (stdio to /dev/null); the daemon
 *                             allocates, lives MS milliseconds, allocates
 *   leave_helper setuid USER  print pid; setresuid to USER (by name); allocate; exit
 *   leave_helper seteuid USER [back]  the same with seteuid (back: then
 *                             seteuid(0) again, and print "live N": how
 *                             many live files of this pid $POOLSHIM_LIVE_DIR
 *                             holds, the view kept through the round trip)
 *   leave_helper chroot DIR   print pid; chroot(DIR); allocate; exit
 *   leave_helper exec PROG    print pid and "live N"; execv(PROG) (a short
 *                             program: the new image makes no file of its own)
 *
 * Each first takes and frees a pooled buffer, which makes the live file
 * (the shim makes it on real work, or after a second), then prints
 * "pid N" (the process that made the live file).
 */
#include <dirent.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void work(void)
{
	for (int i = 0; i < 100; i++) {
		char *p = malloc(100 + i);
		if (p)
			p[0] = 1;
		free(p);
	}
}

/* A buffer from the pool: the shim's first slab makes the live file. */
static void pooled(void)
{
	/* Through a volatile pointer: a malloc and free the compiler sees would go. */
	void *(*volatile alloc)(size_t) = malloc;
	char *p = alloc(1 << 20);
	if (p)
		p[0] = 1;
	free(p);
}

/* Live files of this process in $POOLSHIM_LIVE_DIR. */
static int live_files(void)
{
	const char *dir = getenv("POOLSHIM_LIVE_DIR");
	char prefix[64];
	struct dirent *e;
	int n = 0;
	DIR *d = dir ? opendir(dir) : NULL;

	if (!d)
		return -1;
	snprintf(prefix, sizeof(prefix), "poolshim-%d-", (int)getpid());
	while ((e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: leave_helper daemon MS | setuid USER | seteuid USER | chroot DIR\n");
		return 2;
	}
	pooled();
	work();
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	if (!strcmp(argv[1], "daemon")) {
		long ms = atol(argv[2]);
		if (daemon(1, 0) != 0) {
			perror("daemon");
			return 1;
		}
		struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
		work();
		nanosleep(&ts, NULL);
		work();
		return 0;
	}
	if (!strcmp(argv[1], "setuid") || !strcmp(argv[1], "seteuid")) {
		struct passwd *pw = getpwnam(argv[2]);
		if (!pw) {
			fprintf(stderr, "no user %s\n", argv[2]);
			return 1;
		}
		uid_t u = pw->pw_uid;
		int r = !strcmp(argv[1], "setuid") ? setresuid(u, u, u) : seteuid(u);
		if (r != 0) {
			perror(argv[1]);
			return 1;
		}
		work();
		if (argc > 3 && !strcmp(argv[3], "back")) {
			if (seteuid(0) != 0) {
				perror("seteuid back");
				return 1;
			}
			printf("live %d\n", live_files());
		}
		return 0;
	}
	if (!strcmp(argv[1], "chroot")) {
		if (chroot(argv[2]) != 0 || chdir("/") != 0) {
			perror("chroot");
			return 1;
		}
		work();
		return 0;
	}
	if (!strcmp(argv[1], "exec")) {
		char *args[] = { argv[2], NULL };
		printf("live %d\n", live_files());
		fflush(stdout);
		execv(argv[2], args);
		perror("execv");
		return 1;
	}
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 2;
}
