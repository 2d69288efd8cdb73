// SPDX-License-Identifier: MIT
/*
 * Two checks of tools/collect.c through its C API, the one the `poolshim`
 * wrapper calls:
 *   collect_api links DIR
 *     ps_collect_open_no_links() by openat2 and by its component walk
 *     (the way on kernels without openat2): a path through a linked
 *     directory, and a final link, are refused and nothing is written
 *     behind them; a plain path opens.  Prints one line per check.
 *   collect_api known LIVE_DIR LIBRARY PROGRAM [ARG...]
 *     runs PROGRAM under LIBRARY (POOLSHIM_RUN=known), kills it with
 *     SIGKILL once its record is there, waits for it, and has ps_collect()
 *     render its report with the wait status and usage the parent saw:
 *     the report, on stdout, says "killed by signal 9 (SIGKILL)".
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "format/livefmt.h"

static int bad;

static void expect_refused(const char *what, int fd)
{
	if (fd >= 0) {
		printf("FAIL %s: opened\n", what);
		close(fd);
		bad = 1;
	} else {
		printf("ok %s: refused (%s)\n", what, strerror(-fd));
	}
}

static int links(const char *dir)
{
	char real[4096], p[4096];
	int dfd = open(dir, O_PATH | O_DIRECTORY);

	snprintf(real, sizeof(real), "%s/real", dir);
	if (dfd < 0 || mkdir(real, 0700) < 0)
		return 2;
	snprintf(p, sizeof(p), "%s/linkdir", dir);
	if (symlink(real, p) < 0)
		return 2;
	snprintf(p, sizeof(p), "%s/real/f", dir);
	int f = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (f < 0 || write(f, "kept", 4) != 4)
		return 2;
	close(f);
	snprintf(p, sizeof(p), "%s/flink", dir);
	if (symlink("real/f", p) < 0)
		return 2;
	for (int walk = 0; walk < 2; walk++) {
		const char *how = walk ? "walk" : "openat2";
		char what[128];
		snprintf(p, sizeof(p), "%s/linkdir/y", dir);
		snprintf(what, sizeof(what), "%s: a linked directory", how);
		expect_refused(what, ps_collect_open_no_links(AT_FDCWD, p, O_WRONLY | O_CREAT, 0600, walk));
		snprintf(what, sizeof(what), "%s: a linked directory, relative", how);
		expect_refused(what, ps_collect_open_no_links(dfd, "linkdir/z", O_WRONLY | O_CREAT, 0600,
							      walk));
		snprintf(p, sizeof(p), "%s/flink", dir);
		snprintf(what, sizeof(what), "%s: a final link", how);
		expect_refused(what, ps_collect_open_no_links(AT_FDCWD, p, O_WRONLY | O_TRUNC, 0, walk));
		snprintf(p, sizeof(p), "%s//real/./x%d", dir, walk);
		int fd = ps_collect_open_no_links(AT_FDCWD, p, O_WRONLY | O_CREAT | O_EXCL, 0600, walk);
		printf("%s %s: a plain path opens%s%s\n", fd >= 0 ? "ok" : "FAIL", how,
		       fd >= 0 ? "" : ": ", fd >= 0 ? "" : strerror(-fd));
		bad |= fd < 0;
		if (fd >= 0)
			close(fd);
	}
	struct stat st;
	snprintf(p, sizeof(p), "%s/real/y", dir);
	bool made = stat(p, &st) == 0;
	snprintf(p, sizeof(p), "%s/real/z", dir);
	made |= stat(p, &st) == 0;
	snprintf(p, sizeof(p), "%s/real/f", dir);
	bool kept = stat(p, &st) == 0 && st.st_size == 4;
	printf("%s nothing written behind the links\n", !made && kept ? "ok" : "FAIL");
	return bad || made || !kept;
}

static int known(const char *live, const char *lib, char **argv)
{
	pid_t c = fork();
	if (c < 0)
		return 2;
	if (c == 0) {
		setenv("POOLSHIM_LIVE_DIR", live, 1);
		setenv("POOLSHIM_RUN", "known", 1);
		setenv("LD_PRELOAD", lib, 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	char path[PS_LIVE_DIR_MAX + 64];
	if (ps_live_set_dir(live) < 0)
		return 2;
	ps_live_path(path, sizeof(path), c, ps_live_pidns());
	struct stat st;
	for (int i = 0; i < 200 && stat(path, &st) < 0; i++)
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	nanosleep(&(struct timespec){ 0, 300000000 }, NULL);
	kill(c, SIGKILL);
	int status;
	struct rusage ru;
	while (wait4(c, &status, 0, &ru) < 0 && errno == EINTR)
		;
	struct ps_collect_opts o;
	memset(&o, 0, sizeof(o));
	o.live_dir = live;
	o.run = "known";
	o.out = stdout;
	o.who = "collect_api";
	o.known_pid = c;
	o.known_status = status;
	o.known_rusage = &ru;
	return ps_collect(&o);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "links"))
		return links(argv[2]);
	if (argc >= 5 && !strcmp(argv[1], "known"))
		return known(argv[2], argv[3], argv + 4);
	fprintf(stderr, "usage: collect_api links DIR | known LIVE_DIR LIBRARY PROGRAM [ARG...]\n");
	return 2;
}
