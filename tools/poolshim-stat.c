// SPDX-License-Identifier: MIT
/*
 * poolshim-stat: the live view.  Reads the counters that processes under
 * the shim publish in /dev/shm/poolshim-PID.stats and prints the same table
 * as the exit report: once, or every -i seconds as deltas.  A file whose
 * process is gone (exited without cleaning up, or was killed with SIGKILL)
 * is still read, marked as such and then removed.
 *
 *   poolshim-stat [-i SECONDS] [-c COUNT] [--json] [--keep] [PID ...]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "live.h"
#include "report.h"
#include "stats.h"

struct target {
	int pid;
	struct ps_live_header *hdr;
	size_t len;
	bool dead;
	struct ps_tstats *prev;   /* last totals, for deltas */
};

static bool opt_json, opt_keep;

static void usage(FILE *f)
{
	fprintf(f, "usage: poolshim stat [-i SECONDS] [-c COUNT] [--json] [--keep] [PID ...]\n"
		   "Prints the live counters of processes running under libpoolshim.so\n"
		   "(all of them when no PID is given); with -i, the change every SECONDS.\n"
		   "Files of processes that are gone are read once more, then removed\n"
		   "(--keep leaves them).\n");
}

static int open_target(struct target *t, int pid)
{
	char path[96];
	struct stat st;

	ps_live_path(path, sizeof(path), pid);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "poolshim stat: %d: no live statistics (%s): not running under "
				"the shim, or POOLSHIM_LIVE=off\n", pid, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < PS_LIVE_HEADER) {
		fprintf(stderr, "poolshim stat: %s: too short\n", path);
		close(fd);
		return -1;
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, "poolshim stat: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct ps_live_header *h = p;
	if (memcmp(h->magic, PS_LIVE_MAGIC, 8) != 0 || h->version != PS_LIVE_VERSION ||
	    h->block_size != sizeof(struct ps_tstats) ||
	    PS_LIVE_HEADER + (size_t)h->max_blocks * h->block_stride > (size_t)st.st_size) {
		fprintf(stderr, "poolshim stat: %s: not a live statistics file of this version "
				"(a different poolshim build?)\n", path);
		munmap(p, (size_t)st.st_size);
		return -1;
	}
	t->pid = pid;
	t->hdr = h;
	t->len = (size_t)st.st_size;
	/* Gone, or the pid now belongs to another process. */
	t->dead = (kill(pid, 0) < 0 && errno == ESRCH) ||
		  (h->starttime && ps_live_starttime(pid) != h->starttime);
	t->prev = calloc(1, sizeof(struct ps_tstats));
	return t->prev ? 0 : -1;
}

static void totals(const struct target *t, struct ps_tstats *out)
{
	const struct ps_live_header *h = t->hdr;
	uint32_t n = __atomic_load_n(&h->nblocks, __ATOMIC_ACQUIRE);

	if (n > h->max_blocks)
		n = h->max_blocks;
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < n; i++)
		ps_stats_add(out, (const struct ps_tstats *)((const char *)h + PS_LIVE_HEADER +
							     (size_t)i * h->block_stride), 1);
}

/* Page faults and CPU time from /proc/PID/stat, while the process lives. */
static void proc_usage(const struct target *t, struct ps_report_data *d)
{
	char path[64], buf[1024];
	unsigned long minflt, majflt, utime, stime;

	if (t->dead)
		return;
	snprintf(path, sizeof(path), "/proc/%d/stat", t->pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	/* fields 3.. after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %lu %*u %lu %*u %lu %lu",
			&minflt, &majflt, &utime, &stime) == 4) {
		long hz = sysconf(_SC_CLK_TCK);
		d->minflt = minflt;
		d->majflt = majflt;
		d->utime_us = (uint64_t)utime * 1000000u / (uint64_t)hz;
		d->stime_us = (uint64_t)stime * 1000000u / (uint64_t)hz;
	}
}

static void show(const struct target *t, const struct ps_tstats *counters, const char *what)
{
	const struct ps_live_header *h = t->hdr;
	struct ps_report_data d;
	char storage[4096];
	struct ps_buf b;

	memset(&d, 0, sizeof(d));
	d.pid = t->pid;
	d.program = h->program;
	d.totals = counters;
	d.pool_ready = h->pool_ready;
	d.pool.requested = (enum ps_hugepages)h->pool.requested;
	d.pool.first_mode = (enum ps_backing)h->pool.first_mode;
	d.pool.slabs = h->pool.slabs;
	d.pool.backed = h->pool.backed;
	d.pool.cap = h->pool.cap;
	d.pool.reserve = h->pool.reserve;
	memcpy(d.pool.backed_by, h->pool.backed_by, sizeof(d.pool.backed_by));
	memcpy(d.pool.failures, h->pool.failures, sizeof(d.pool.failures));
	d.pool.hugetlb_reason = h->pool.hugetlb_reason[0] ? h->pool.hugetlb_reason : NULL;
	d.pool.thp_reason = h->pool.thp_reason[0] ? h->pool.thp_reason : NULL;
	d.pool_in_use = h->gauges.pool_in_use;
	d.pool_peak = h->gauges.pool_peak;
	d.pool_min = h->pool_min;
	d.threads = (int)(h->nblocks > h->max_blocks ? h->max_blocks : h->nblocks);
	proc_usage(t, &d);
	d.uring_state = h->uring_state;
	d.uring_reason = h->uring_reason[0] ? h->uring_reason : NULL;
	d.uring_rings = h->uring_rings;

	fflush(stdout);
	if (!opt_json)
		printf("---- pid %d (%s): %s%s ----\n", t->pid, h->program, what,
		       t->dead ? " [process gone: exited without cleanup or was killed]" : "");
	fflush(stdout);
	ps_buf_init(&b, storage, sizeof(storage), 1);
	ps_report_render(&b, &d, opt_json ? PS_FORMAT_JSON : PS_FORMAT_TEXT);
	ps_buf_flush(&b);
}

static void forget_dead(struct target *t)
{
	char path[96];

	if (!t->dead || opt_keep)
		return;
	ps_live_path(path, sizeof(path), t->pid);
	if (unlink(path) == 0 && !opt_json)
		printf("(removed %s)\n", path);
}

static int scan_all(int **pids)
{
	DIR *d = opendir(PS_LIVE_DIR);
	struct dirent *e;
	int n = 0, cap = 16;

	*pids = malloc(sizeof(int) * (size_t)cap);
	if (!d || !*pids)
		return 0;
	while ((e = readdir(d)) != NULL) {
		int pid;
		char tail[16];
		if (sscanf(e->d_name, "poolshim-%d.%15s", &pid, tail) == 2 &&
		    strcmp(tail, "stats") == 0 && pid > 0) {
			if (n == cap)
				*pids = realloc(*pids, sizeof(int) * (size_t)(cap *= 2));
			(*pids)[n++] = pid;
		}
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	double interval = 0;
	long count = -1;
	int *pids = NULL, npids = 0;

	pids = malloc(sizeof(int) * (size_t)(argc > 1 ? argc : 1));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--json")) {
			opt_json = true;
		} else if (!strcmp(a, "--keep")) {
			opt_keep = true;
		} else if ((!strcmp(a, "-i") || !strcmp(a, "-c")) && i + 1 < argc) {
			char *end;
			double v = strtod(argv[++i], &end);
			if (*end || v <= 0 || (a[1] == 'c' && v != (long)v)) {
				fprintf(stderr, "poolshim stat: %s wants a positive %s, not '%s'\n", a,
					a[1] == 'i' ? "number of seconds" : "count", argv[i]);
				return 2;
			}
			if (a[1] == 'i')
				interval = v;
			else
				count = (long)v;
		} else {
			char *end;
			long pid = strtol(a, &end, 10);
			if (*end || pid <= 0 || pid > 1 << 30) {
				fprintf(stderr, "poolshim stat: '%s' is not a pid\n", a);
				usage(stderr);
				return 2;
			}
			pids[npids++] = (int)pid;
		}
	}
	if (npids == 0) {
		free(pids);
		npids = scan_all(&pids);
		if (npids == 0) {
			fprintf(stderr, "poolshim stat: no process is publishing live statistics in "
					PS_LIVE_DIR "\n");
			return 1;
		}
	}

	struct target *t = calloc((size_t)npids, sizeof(*t));
	struct ps_tstats *now = calloc(1, sizeof(*now));
	int ok = 0;
	for (int i = 0; i < npids; i++)
		if (open_target(&t[ok], pids[i]) == 0)
			ok++;
	if (ok == 0)
		return 1;

	for (long round = 0; count < 0 || round < count; round++) {
		for (int i = 0; i < ok; i++) {
			totals(&t[i], now);
			if (interval > 0 && round > 0) {
				struct ps_tstats *delta = calloc(1, sizeof(*delta));
				memcpy(delta, now, sizeof(*now));
				ps_stats_add(delta, t[i].prev, -1);
				char what[64];
				snprintf(what, sizeof(what), "change over %.3gs", interval);
				show(&t[i], delta, what);
				free(delta);
			} else {
				show(&t[i], now, interval > 0 ? "totals so far" : "totals");
			}
			memcpy(t[i].prev, now, sizeof(*now));
		}
		if (interval <= 0)
			break;
		bool all_dead = true;
		for (int i = 0; i < ok; i++)
			all_dead &= t[i].dead || (kill(t[i].pid, 0) < 0 && errno == ESRCH);
		if (all_dead)
			break;
		struct timespec ts = { (time_t)interval,
				       (long)((interval - (double)(time_t)interval) * 1e9) };
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < ok; i++)
		forget_dead(&t[i]);
	return 0;
}
