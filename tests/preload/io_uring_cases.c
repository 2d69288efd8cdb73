// SPDX-License-Identifier: MIT
/*
 * Hostile cases for the shim's io_uring path, one per mode (argv[1]); the
 * tests/preload/io_uring_*.sh scripts run them under the shim, some with a
 * POOLSHIM_URING_TEST fault (which only the test build of the shim,
 * tests/preload/libpoolshim-test.so, has), and some also without the shim
 * to get the kernel's own answer.  Each mode checks its data itself and, where the
 * shim is loaded, reads the shim's io_uring counters from a JSON report
 * (poolshim_report_fd, found with dlsym) to show which path the calls took.
 *
 *   nested  a SIGALRM handler does O_DIRECT preads while the interrupted
 *           thread is in the middle of large ones
 *   keepfd  rings that keep their descriptor (Linux < 6.3): the program
 *           closes and reuses those numbers; thread exit and a fork child
 *           must leave the program's files alone
 *   link    a split O_DIRECT write whose second chunk hits ENOSPC (run on
 *           a full tmpfs): prints what landed, for comparison with a plain
 *           pwrite
 *   submit  large preads, pwrites and preadvs: with POOLSHIM_URING_TEST=
 *           short_submit or stuck_submit the kernel takes fewer SQEs than
 *           were queued
 *   fork    children made by _Fork() and by a raw clone() syscall (no
 *           atfork handlers) do O_DIRECT I/O next to their parent
 *   bounds  lengths that wrap the end of a pooled buffer: the same result
 *           and errno as the system call itself
 * Exit 0 when right, 1 when wrong, 77 when O_DIRECT is unavailable here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "io_common.h"

#define KiB (1024UL)
#define MiB (1024UL * 1024)
#define SEED 0x0421
#define MAXFD 1024

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("FAIL: " __VA_ARGS__);                        \
			printf("\n");                                        \
			failures++;                                          \
		}                                                            \
	} while (0)

static void die(const char *what)
{
	printf("io_uring_cases: %s: %s\n", what, strerror(errno));
	fflush(stdout);
	pio_cleanup();
	_exit(99);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the shim's io_uring counters, from its JSON report --------------- */

struct ucounts {
	bool shim;            /* the shim is loaded and answered */
	bool on;              /* ... and its io_uring state is "ok" */
	long sqes;
	long fb_setup, fb_register, fb_error, fb_nested;
};

static long jnum(const char *from, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = from ? strstr(from, pat) : NULL;
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static struct ucounts ucounts(void)
{
	struct ucounts c = { 0 };
	int (*report)(int, int) = (int (*)(int, int))dlsym(RTLD_DEFAULT, "poolshim_report_fd");
	static char text[256 * 1024];

	if (!report)
		return c;
	int fd = (int)syscall(SYS_memfd_create, "report", 1U /* MFD_CLOEXEC */);
	if (fd < 0 || report(fd, 1) != 0)
		die("poolshim_report_fd");
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	if (n <= 0)
		die("report read");
	text[n] = '\0';
	const char *u = strstr(text, "\"uring\":{");
	const char *fb = u ? strstr(u, "\"fallbacks\":{") : NULL;
	c.shim = u && fb;
	c.on = c.shim && strncmp(u, "\"uring\":{\"state\":\"ok\"", 22) == 0;
	c.sqes = jnum(u, "sqes");
	c.fb_setup = jnum(fb, "setup");
	c.fb_register = jnum(fb, "register");
	c.fb_error = jnum(fb, "error");
	c.fb_nested = jnum(fb, "nested");
	return c;
}

/* ---- nested: O_DIRECT preads from a signal handler --------------------- */

#define NEST_FILE (32 * MiB)
#define NEST_BIG (4 * MiB)
#define NEST_SMALL (256 * KiB)

static int nest_fd;
static char *nest_small;
static volatile sig_atomic_t h_reads, h_bad;
static uint64_t h_rand = 12345;

static void on_alarm(int sig)
{
	int saved = errno;
	(void)sig;
	h_rand = h_rand * 6364136223846793005ULL + 1442695040888963407ULL;
	off_t off = (off_t)((h_rand >> 33) % ((NEST_FILE - NEST_SMALL) / 4096)) * 4096;
	ssize_t n = pread(nest_fd, nest_small, NEST_SMALL, off);
	if (n != (ssize_t)NEST_SMALL || pio_diff(nest_small, NEST_SMALL, (uint64_t)off, SEED) >= 0)
		h_bad++;
	h_reads++;
	errno = saved;
}

static void mode_nested(void)
{
	char *path = pio_path("nested");
	pio_make_file(path, NEST_FILE, SEED);
	nest_fd = pio_open_direct(path, O_RDONLY);
	char *big = pio_alloc(NEST_BIG);
	nest_small = pio_alloc(NEST_SMALL);
	struct ucounts before = ucounts();

	/* No SA_RESTART: the interrupted call must get on by itself. */
	struct sigaction sa = { .sa_handler = on_alarm };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		die("sigaction");
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		die("setitimer");

	long reads = 0, bad = 0;
	uint64_t rnd = 99;
	double end = now() + 1.5 * pio_scale();
	while (now() < end || reads < 20) {
		rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
		off_t off = (off_t)((rnd >> 33) % ((NEST_FILE - NEST_BIG) / 4096)) * 4096;
		ssize_t n = pread(nest_fd, big, NEST_BIG, off);
		if (n != (ssize_t)NEST_BIG || pio_diff(big, NEST_BIG, (uint64_t)off, SEED) >= 0)
			bad++;
		reads++;
	}
	struct itimerval off_it = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off_it, NULL);
	signal(SIGALRM, SIG_IGN);

	printf("nested: main %ld reads (%ld wrong), handler %d reads (%d wrong)\n", reads, bad,
	       (int)h_reads, (int)h_bad);
	CHECK(bad == 0, "%ld of %ld large preads returned wrong bytes", bad, reads);
	CHECK(h_bad == 0, "%d of %d preads in the signal handler returned wrong bytes",
	      (int)h_bad, (int)h_reads);
	CHECK(h_reads > 10, "only %d handler runs", (int)h_reads);
	struct ucounts after = ucounts();
	if (after.on) {
		long sqes = after.sqes - before.sqes, nested = after.fb_nested - before.fb_nested;
		printf("nested: %ld SQEs, %ld nested fallbacks\n", sqes, nested);
		CHECK(sqes > 0, "no I/O went through io_uring");
		CHECK(nested > 0, "no handler read was counted as a nested fallback");
	}
}

/* ---- keepfd: ring descriptors the program closes and reuses ------------ */

#define KEEP_FILE (8 * MiB)
#define KEEP_BUF (1 * MiB)

static int keep_fd;            /* the program's O_DIRECT file, opened before any ring */
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t keep_cond = PTHREAD_COND_INITIALIZER;
static int keep_step;
static int keep_null;          /* the program's /dev/null, dup2ed over ring numbers */
static int keep_rings[16], keep_nrings;

static void step_wait(int want)
{
	pthread_mutex_lock(&keep_lock);
	while (keep_step < want)
		pthread_cond_wait(&keep_cond, &keep_lock);
	pthread_mutex_unlock(&keep_lock);
}

static void step_set(int v)
{
	pthread_mutex_lock(&keep_lock);
	keep_step = v;
	pthread_cond_broadcast(&keep_cond);
	pthread_mutex_unlock(&keep_lock);
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* The io_uring descriptors open now (the shim's: the program has none). */
static int find_rings(int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;
	if (!d)
		die("/proc/self/fd");
	while ((e = readdir(d)) && n < max) {
		char link[300], target[128];
		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(link, target, sizeof(target) - 1);
		if (k > 0) {
			target[k] = '\0';
			if (strcmp(target, "anon_inode:[io_uring]") == 0)
				out[n++] = atoi(e->d_name);
		}
	}
	closedir(d);
	return n;
}

static int lowest_free(void)
{
	int fd = open("/dev/null", O_RDONLY);
	if (fd < 0)
		die("/dev/null");
	close(fd);
	return fd;
}

static void keep_io(int fd, char *buf, uint64_t off, const char *who)
{
	memset(buf, 0, KEEP_BUF);
	ssize_t n = pread(fd, buf, KEEP_BUF, (off_t)off);
	CHECK(n == (ssize_t)KEEP_BUF && pio_diff(buf, KEEP_BUF, off, SEED) < 0,
	      "%s: pread returned %zd or wrong bytes", who, n);
}

/* A worker: I/O (its ring appears), wait while main clobbers, I/O, maybe fork. */
static void *keep_worker(void *arg)
{
	bool do_fork = arg != NULL;
	int fd = keep_fd;
	char *buf = pio_alloc(KEEP_BUF);

	keep_io(fd, buf, 0, "worker before");
	step_set(1);
	step_wait(2);
	keep_io(fd, buf, KEEP_BUF, "worker after the clobber");
	if (do_fork) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			int bad = 0;
			for (int i = 0; i < keep_nrings; i++)
				if (fcntl(keep_rings[i], F_GETFD) < 0 ||
				    !same_file(keep_rings[i], keep_null)) {
					printf("FAIL: fork child: descriptor %d was closed or replaced "
					       "behind the program's back\n", keep_rings[i]);
					bad = 1;
				}
			keep_io(fd, buf, 2 * KEEP_BUF, "fork child");
			fflush(stdout);
			_exit(bad || failures ? 1 : 0);
		}
		int st;
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "fork child failed (status 0x%x)", st);
	}
	free(buf);
	return NULL;
}

static void keep_round(bool do_fork, int first_free)
{
	pthread_t th;
	int before[16];
	int nbefore = find_rings(before, 16);

	step_set(0);
	if (pthread_create(&th, NULL, keep_worker, do_fork ? (void *)1 : NULL))
		die("pthread_create");
	step_wait(1);

	int all[16];
	int nall = find_rings(all, 16);
	keep_nrings = 0;
	for (int i = 0; i < nall; i++) {
		bool old = false;
		for (int j = 0; j < nbefore; j++)
			old |= all[i] == before[j];
		if (!old)
			keep_rings[keep_nrings++] = all[i];
	}
	const char *what = do_fork ? "fork round" : "thread-exit round";
	printf("keepfd %s: %d ring descriptor(s):", what, keep_nrings);
	for (int i = 0; i < keep_nrings; i++)
		printf(" %d", keep_rings[i]);
	printf("\n");
	int low = lowest_free();
	CHECK(low == first_free, "%s: the next open gets %d, not %d as before the ring existed",
	      what, low, first_free);

	/* What a close-all loop and a later dup2 do to numbers the program did not open. */
	for (int i = 0; i < keep_nrings; i++)
		if (close(keep_rings[i]) < 0 || dup2(keep_null, keep_rings[i]) < 0)
			die("close/dup2");
	step_set(2);
	pthread_join(th, NULL);

	for (int i = 0; i < keep_nrings; i++)
		CHECK(fcntl(keep_rings[i], F_GETFD) >= 0 && same_file(keep_rings[i], keep_null),
		      "%s: descriptor %d was closed or replaced behind the program's back",
		      what, keep_rings[i]);
	if (keep_nrings == 0)
		printf("keepfd %s: no ring descriptor seen\n", what);
}

static void mode_keepfd(void)
{
	char *path = pio_path("keepfd");
	pio_make_file(path, KEEP_FILE, SEED);
	keep_null = open("/dev/null", O_RDWR);
	if (keep_null < 0)
		die("/dev/null");
	keep_fd = pio_open_direct(path, O_RDONLY);
	int first_free = lowest_free();
	keep_round(false, first_free);
	keep_round(true, first_free);
}

/* ---- link: a split write whose middle chunk fails ---------------------- */

/* Describe what the file holds, 4 KiB block by block, in runs: o(ld) n(ew) z(ero) ?. */
static void describe(const char *path, size_t len, char *out, size_t outsz)
{
	int fd = open(path, O_RDONLY);
	char *blk = malloc(4096), *zero = calloc(1, 4096);
	size_t at = 0;
	char run = 0;
	int count = 0;

	if (fd < 0 || !blk || !zero)
		die("describe");
	out[0] = '\0';
	for (size_t off = 0; off < len; off += 4096) {
		char c;
		ssize_t n = pread(fd, blk, 4096, (off_t)off);
		if (n != 4096)
			c = n <= 0 ? '-' : '?';
		else if (pio_diff(blk, 4096, off, SEED) < 0)
			c = 'o';
		else if (pio_diff(blk, 4096, off, SEED + 1) < 0)
			c = 'n';
		else if (memcmp(blk, zero, 4096) == 0)
			c = 'z';
		else
			c = '?';
		if (c != run && count) {
			at += (size_t)snprintf(out + at, outsz - at, "%c%d ", run, count);
			count = 0;
		}
		run = c;
		count++;
	}
	if (count)
		snprintf(out + at, outsz - at, "%c%d", run, count);
	close(fd);
	free(blk);
	free(zero);
}

/* Fill the filesystem under pio_dir(), then give back `spare` bytes. */
static void fill_fs(size_t spare)
{
	char *path = pio_path("filler");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char *buf = calloc(1, 64 * KiB);
	off_t size = 0;
	if (fd < 0 || !buf)
		die("filler");
	for (size_t step = 64 * KiB; step >= 4096; step /= 16)
		for (;;) {
			ssize_t n = pwrite(fd, buf, step, size);
			if (n <= 0)
				break;
			size += n;
		}
	if (errno != ENOSPC)
		die("filling the filesystem");
	if (spare && ftruncate(fd, size - (off_t)spare) < 0)
		die("ftruncate filler");
	close(fd);
	free(buf);
	free(path);
}

static void mode_link(const char *spare_arg)
{
	size_t chunk = pio_chunk();
	size_t len = 4 * chunk;
	size_t spare = spare_arg ? strtoul(spare_arg, NULL, 0) : 0;
	char *path = pio_path("link");
	char map[256];

	pio_require_direct();
	pio_make_file(path, len, SEED);
	int fd = open(path, O_RDWR);
	/* The second chunk needs new blocks; the others overwrite blocks already there. */
	if (fd < 0 || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)chunk,
				(off_t)chunk) < 0)
		die("punch hole");
	close(fd);
	fill_fs(spare);

	fd = pio_open_direct(path, O_RDWR);
	char *buf = pio_alloc(len);
	pio_fill(buf, len, 0, SEED + 1);
	/* PST_LINK_VEC=1: the same write as pwritev, one chunk per segment (one SQE each). */
	struct iovec iov[4];
	for (int i = 0; i < 4; i++)
		iov[i] = (struct iovec){ buf + (size_t)i * chunk, chunk };
	struct pio_res r = getenv("PST_LINK_VEC") ? PIO_CALL(pwritev(fd, iov, 4, 0))
						  : PIO_CALL(pwrite(fd, buf, len, 0));
	struct stat st;
	if (fstat(fd, &st) < 0)
		die("fstat");
	close(fd);
	describe(path, len, map, sizeof(map));
	printf("link: ret %ld errno %d size %lld blocks %s\n", r.ret, r.err, (long long)st.st_size,
	       map);
}

/* ---- submit: calls split into waves the kernel takes in part ---------- */

#define SUB_FILE (8 * MiB)
#define SUB_BUF (2 * MiB)

static void mode_submit(void)
{
	char *path = pio_path("submit");
	pio_make_file(path, SUB_FILE, SEED);
	int fd = pio_open_direct(path, O_RDWR);
	char *buf = pio_alloc(SUB_BUF);
	struct iovec iov[4];
	for (int i = 0; i < 4; i++)
		iov[i] = (struct iovec){ pio_alloc(SUB_BUF / 4), SUB_BUF / 4 };
	struct ucounts before = ucounts();

	for (int round = 0; round < 12; round++) {
		uint64_t off = (uint64_t)(round % 4) * SUB_BUF;
		uint64_t seed = SEED + (uint64_t)round;
		ssize_t n = pread(fd, buf, SUB_BUF, (off_t)off);
		CHECK(n == (ssize_t)SUB_BUF && pio_diff(buf, SUB_BUF, off, round < 4 ? SEED : seed - 4) < 0,
		      "round %d: pread returned %zd or wrong bytes", round, n);
		pio_fill(buf, SUB_BUF, off, seed);
		n = pwrite(fd, buf, SUB_BUF, (off_t)off);
		CHECK(n == (ssize_t)SUB_BUF, "round %d: pwrite returned %zd (%s)", round, n,
		      strerror(errno));
		n = preadv(fd, iov, 4, (off_t)off);
		bool right = n == (ssize_t)SUB_BUF;
		for (int i = 0; i < 4 && right; i++)
			right = pio_diff(iov[i].iov_base, SUB_BUF / 4, off + (uint64_t)i * (SUB_BUF / 4),
					 seed) < 0;
		CHECK(right, "round %d: preadv returned %zd or wrong bytes", round, n);
	}
	struct ucounts after = ucounts();
	printf("submit: 36 calls done\n");
	if (after.shim)
		printf("submit: %ld SQEs, fallbacks: setup %ld error %ld\n", after.sqes - before.sqes,
		       after.fb_setup - before.fb_setup, after.fb_error - before.fb_error);
}

/* ---- fork: _Fork() and raw clone() children ---------------------------- */

#define FORK_FILE (16 * MiB)
#define FORK_BUF (1 * MiB)
#define FORK_KIDS 6
#define FORK_ROUNDS 24

static int fork_fd;
static char *fork_buf;

/* Rewrite region `at` with `seed` and read it back, rounds times. */
static int fork_io(uint64_t at, uint64_t seed, int rounds)
{
	int bad = 0;
	for (int i = 0; i < rounds; i++) {
		pio_fill(fork_buf, FORK_BUF, at, seed + (uint64_t)i);
		if (pwrite(fork_fd, fork_buf, FORK_BUF, (off_t)at) != (ssize_t)FORK_BUF)
			bad++;
		memset(fork_buf, 0, FORK_BUF);
		if (pread(fork_fd, fork_buf, FORK_BUF, (off_t)at) != (ssize_t)FORK_BUF ||
		    pio_diff(fork_buf, FORK_BUF, at, seed + (uint64_t)i) >= 0)
			bad++;
	}
	return bad;
}

static pid_t raw_fork(int k)
{
	if (k % 2 == 0)
		return _Fork();
	/* clone(2) as fork: no glibc fork handlers, no atfork. */
	return (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
}

static void mode_fork(void)
{
	char *path = pio_path("fork");
	pio_make_file(path, FORK_FILE, SEED);
	fork_fd = pio_open_direct(path, O_RDWR);
	fork_buf = pio_alloc(FORK_BUF);
	CHECK(fork_io(0, SEED + 100, 2) == 0, "parent before forking: wrong data");

	for (int k = 0; k < FORK_KIDS; k++) {
		const char *how = k % 2 == 0 ? "_Fork" : "clone";
		uint64_t region = (uint64_t)(k + 2) * FORK_BUF;
		uint64_t seed = SEED + 1000 * (uint64_t)(k + 1);
		pid_t pid = raw_fork(k);
		if (pid < 0)
			die(how);
		if (pid == 0) {
			struct ucounts a = ucounts();
			int bad = fork_io(region, seed, FORK_ROUNDS);
			struct ucounts b = ucounts();
			int rc = 0;
			if (bad) {
				printf("FAIL: %s child %d: %d of %d calls wrong\n", how, k, bad,
				       2 * FORK_ROUNDS);
				rc = 1;
			}
			if (a.shim) {
				long fb = (b.fb_setup - a.fb_setup) + (b.fb_register - a.fb_register) +
					  (b.fb_error - a.fb_error);
				if (fb != 0 || b.sqes - a.sqes < 2 * FORK_ROUNDS) {
					printf("FAIL: %s child %d: %ld SQEs, %ld fallbacks "
					       "(setup +%ld, error +%ld): the child did not get a ring "
					       "of its own\n", how, k, b.sqes - a.sqes, fb,
					       b.fb_setup - a.fb_setup, b.fb_error - a.fb_error);
					rc = 1;
				}
			}
			fflush(stdout);
			_exit(rc);
		}
		/* The parent carries on with its own ring meanwhile. */
		struct ucounts a = ucounts();
		int bad = fork_io(FORK_BUF, seed + 500, FORK_ROUNDS);
		int st;
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "%s child %d failed (status 0x%x)", how, k, st);
		struct ucounts b = ucounts();
		CHECK(bad == 0, "parent beside %s child %d: %d calls wrong", how, k, bad);
		if (a.shim) {
			long fb = (b.fb_setup - a.fb_setup) + (b.fb_register - a.fb_register) +
				  (b.fb_error - a.fb_error);
			CHECK(fb == 0 && b.sqes - a.sqes >= 2 * FORK_ROUNDS,
			      "parent beside %s child %d: %ld SQEs, %ld fallbacks: its ring stopped "
			      "working", how, k, b.sqes - a.sqes, fb);
		}
		/* What the child wrote last is on disk, as it wrote it. */
		memset(fork_buf, 0, FORK_BUF);
		ssize_t n = pread(fork_fd, fork_buf, FORK_BUF, (off_t)region);
		CHECK(n == (ssize_t)FORK_BUF &&
		      pio_diff(fork_buf, FORK_BUF, region, seed + FORK_ROUNDS - 1) < 0,
		      "%s child %d: its writes are not in the file", how, k);
	}
	CHECK(fork_io(0, SEED + 200, 4) == 0, "parent after the children: wrong data");
	printf("fork: %d children (_Fork and clone), parent and children checked\n", FORK_KIDS);
}

/* ---- bounds: lengths that wrap past the end of a pooled buffer --------- */

static void mode_bounds(void)
{
	char *path = pio_path("bounds");
	pio_make_file(path, 4 * MiB, SEED);
	int fd = pio_open_direct(path, O_RDWR);
	char *buf = pio_alloc(1 * MiB);
	/* Inside the buffer, so that (p - slab start) + len wraps to a small number. */
	char *p = buf + 64 * KiB;
	const size_t lens[] = { (size_t)-4096, (size_t)-65536, (size_t)1 << 63 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i];
		struct pio_res got = PIO_CALL(pread(fd, p, len, 0));
		struct pio_res want = pio_sys_pread(fd, p, len, 0);
		printf("bounds: pread len %#zx: %ld/%d, the system call %ld/%d\n", len, got.ret,
		       got.err, want.ret, want.err);
		CHECK(got.ret == want.ret && got.err == want.err,
		      "pread of %#zx bytes: %ld errno %d, the system call gives %ld errno %d", len,
		      got.ret, got.err, want.ret, want.err);

		got = PIO_CALL(pwrite(fd, p, len, 0));
		want = pio_sys_pwrite(fd, p, len, 0);
		CHECK(got.ret == want.ret && got.err == want.err,
		      "pwrite of %#zx bytes: %ld errno %d, the system call gives %ld errno %d", len,
		      got.ret, got.err, want.ret, want.err);

		struct iovec iov = { p, len };
		got = PIO_CALL(preadv(fd, &iov, 1, 0));
		want = pio_sys_preadv(fd, &iov, 1, 0);
		CHECK(got.ret == want.ret && got.err == want.err,
		      "preadv of %#zx bytes: %ld errno %d, the system call gives %ld errno %d", len,
		      got.ret, got.err, want.ret, want.err);
	}
	/* Still a working descriptor and buffer afterwards. */
	ssize_t n = pread(fd, buf, 1 * MiB, 0);
	CHECK(n == (ssize_t)MiB && pio_diff(buf, MiB, 0, SEED) < 0, "a normal pread after: %zd", n);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: io_uring_cases nested|keepfd|link [SPARE]|submit|fork|bounds\n");
		return 2;
	}
	pio_require_direct();
	if (strcmp(argv[1], "nested") == 0)
		mode_nested();
	else if (strcmp(argv[1], "keepfd") == 0)
		mode_keepfd();
	else if (strcmp(argv[1], "link") == 0)
		mode_link(argc > 2 ? argv[2] : NULL);
	else if (strcmp(argv[1], "submit") == 0)
		mode_submit();
	else if (strcmp(argv[1], "fork") == 0)
		mode_fork();
	else if (strcmp(argv[1], "bounds") == 0)
		mode_bounds();
	else {
		fprintf(stderr, "io_uring_cases: unknown mode %s\n", argv[1]);
		return 2;
	}
	pio_cleanup();
	printf("%s: %s\n", argv[1], failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
