// SPDX-License-Identifier: MIT
/*
 * smallbench: the small calls a server makes for every tiny request, timed
 * as loops of a fixed length.  scripts/bench small runs it with no shim,
 * the shim and a baseline shim, interleaved, to show that the shim does no
 * harm where it has nothing to gain (issue 11).
 *
 *   smallbench [--scale F] [--loop NAME,...] [--dir DIR] [--label L]
 *
 * Loops (one iteration each):
 *   open      open + pread 1 KiB + close of a file in the page cache
 *   pipe      write 1 byte to a pipe, read it back
 *   socket    send 1 byte on a socketpair, recv it on the other end
 *   devnull   write 1 byte to /dev/null
 * Each loop runs a fixed number of iterations (times --scale) after an
 * untimed warm-up of a tenth as many; one clock_gettime pair brackets the
 * whole timed loop, whose body neither allocates nor formats anything.
 * Prints one line: `smallbench label=L open_ns=... pipe_ns=... ...` (ns per
 * iteration).  Exit 1 when a call fails (the loop stops at that call).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * Iterations per loop at --scale 1: 0.6-0.7 s each on the project's
 * 2-core VM without the shim (long enough that a timer tick or a
 * preemption is a small part of it), so that a run of all four takes under
 * 3 s and five interleaved rounds of three configurations about a minute.
 */
static const struct loop {
	const char *name;
	long iters;
} loops[] = {
	{ "open", 250000 },
	{ "pipe", 1000000 },
	{ "socket", 400000 },
	{ "devnull", 4000000 },
};
enum { NLOOPS = sizeof(loops) / sizeof(loops[0]) };

struct ctx {
	char path[4096];
	int pipefd[2];
	int sp[2];
	int null;
	char buf[1024];
};

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Each returns the number of iterations done (n unless a call failed). */
static long loop_open(struct ctx *c, long n)
{
	long i;
	for (i = 0; i < n; i++) {
		int fd = open(c->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		ssize_t r = pread(fd, c->buf, sizeof(c->buf), 0);
		if (close(fd) || r != (ssize_t)sizeof(c->buf))
			break;
	}
	return i;
}

static long loop_pipe(struct ctx *c, long n)
{
	long i;
	for (i = 0; i < n; i++)
		if (write(c->pipefd[1], c->buf, 1) != 1 || read(c->pipefd[0], c->buf, 1) != 1)
			break;
	return i;
}

static long loop_socket(struct ctx *c, long n)
{
	long i;
	for (i = 0; i < n; i++)
		if (send(c->sp[0], c->buf, 1, 0) != 1 || recv(c->sp[1], c->buf, 1, 0) != 1)
			break;
	return i;
}

static long loop_devnull(struct ctx *c, long n)
{
	long i;
	for (i = 0; i < n; i++)
		if (write(c->null, c->buf, 1) != 1)
			break;
	return i;
}

static long (*const loop_fn[NLOOPS])(struct ctx *, long) = {
	loop_open, loop_pipe, loop_socket, loop_devnull,
};

static int setup(struct ctx *c, const char *dir)
{
	snprintf(c->path, sizeof(c->path), "%s/poolshim-smallbench.XXXXXX", dir);
	int fd = mkstemp(c->path);
	if (fd < 0) {
		fprintf(stderr, "smallbench: cannot create a file in %s: %s\n", dir, strerror(errno));
		return -1;
	}
	memset(c->buf, 'x', sizeof(c->buf));
	/* 4 KiB written and read once: the timed preads hit the page cache */
	for (int k = 0; k < 4; k++)
		if (write(fd, c->buf, sizeof(c->buf)) != (ssize_t)sizeof(c->buf)) {
			perror("smallbench: writing the data file");
			close(fd);
			return -1;
		}
	close(fd);
	if (pipe2(c->pipefd, O_CLOEXEC) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->sp) ||
	    (c->null = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		perror("smallbench: setup");
		return -1;
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: smallbench [--scale F] [--loop open,pipe,socket,devnull] "
		"[--dir DIR] [--label L]\n");
	return 2;
}

int main(int argc, char **argv)
{
	double scale = 1.0;
	const char *want = "open,pipe,socket,devnull", *label = "-";
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			return usage();
		const char *a = argv[i], *v = argv[++i];
		if (!strcmp(a, "--scale"))
			scale = atof(v);
		else if (!strcmp(a, "--loop"))
			want = v;
		else if (!strcmp(a, "--dir"))
			dir = v;
		else if (!strcmp(a, "--label"))
			label = v;
		else
			return usage();
	}
	if (!(scale > 0))
		return usage();
	int selected[NLOOPS] = { 0 };
	for (const char *p = want; *p;) {
		size_t len = strcspn(p, ",");
		int k;
		for (k = 0; k < NLOOPS; k++)
			if (strlen(loops[k].name) == len && !strncmp(p, loops[k].name, len))
				break;
		if (k == NLOOPS) {
			fprintf(stderr, "smallbench: unknown loop %.*s\n", (int)len, p);
			return usage();
		}
		selected[k] = 1;
		p += len + (p[len] == ',');
	}

	static struct ctx c;
	if (setup(&c, dir)) {
		if (c.path[0])
			unlink(c.path);
		return 1;
	}
	double ns[NLOOPS];
	long done[NLOOPS] = { 0 }, iters[NLOOPS] = { 0 };
	int rc = 0;
	for (int k = 0; k < NLOOPS && !rc; k++) {
		if (!selected[k])
			continue;
		long n = (long)(loops[k].iters * scale);
		if (n < 10)
			n = 10;
		iters[k] = n;
		/* warm-up: first-use costs (lazy init, fd tables, cache) are not the steady state */
		if (loop_fn[k](&c, n / 10 + 1) != n / 10 + 1) {
			fprintf(stderr, "smallbench: %s: warm-up call failed: %s\n", loops[k].name,
				strerror(errno));
			rc = 1;
			break;
		}
		long long t0 = now_ns();
		done[k] = loop_fn[k](&c, n);
		long long t1 = now_ns();
		if (done[k] != n) {
			fprintf(stderr, "smallbench: %s: call failed at iteration %ld: %s\n",
				loops[k].name, done[k], strerror(errno));
			rc = 1;
			break;
		}
		ns[k] = (double)(t1 - t0) / (double)n;
	}
	unlink(c.path);
	if (rc)
		return rc;
	printf("smallbench label=%s", label);
	for (int k = 0; k < NLOOPS; k++)
		if (selected[k])
			printf(" %s_ns=%.1f %s_iters=%ld", loops[k].name, ns[k], loops[k].name, iters[k]);
	printf("\n");
	return 0;
}
