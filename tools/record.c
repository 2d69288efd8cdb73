// SPDX-License-Identifier: MIT
/*
 * Reading and checking a live record, for the tools (record.h says why
 * nothing in one is trusted).  The order is always: open without
 * following links or blocking, check the file's type and size, read the
 * header into private memory, check every field against the file and its
 * room, then read the blocks the header names.  Whatever fails, the caller
 * gets one reason in words and the record is left as it was.
 */
#include "record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/fmt.h"
#include "format/names.h"

int ps_record_open(struct ps_record *r, int pid, uint64_t ns, const char **why)
{
	struct stat st;

	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->ns = ns;
	r->fd = -1;
	ps_live_path(r->path, sizeof(r->path), pid, ns);
	/* O_NONBLOCK: a FIFO put there in place of a file must not hang us. */
	r->fd = open(r->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (r->fd < 0) {
		*why = strerror(errno);
		return -1;
	}
	if (fstat(r->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		return -1;
	}
	r->owner = st.st_uid;
	r->group = st.st_gid;
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	if (st.st_size < PS_LIVE_HEADER || (uint64_t)st.st_size > PS_RECORD_MAX_FILE) {
		*why = st.st_size < PS_LIVE_HEADER ? "too short" : "too large";
		return -1;
	}
	r->size = (size_t)st.st_size;
	r->hdr = malloc(PS_LIVE_HEADER);
	if (!r->hdr) {
		*why = "out of memory";
		return -1;
	}
	return 0;
}

/* Whether s ends within its cap bytes. */
static bool ended(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

/* The lookup ps_config_load() asks: the record's lines, split in place. */
#define CONFIG_LINES 64
static struct {
	const char *name[CONFIG_LINES];
	const char *value[CONFIG_LINES];
	int n;
} lines;

static const char *line_get(const char *name)
{
	for (int i = 0; i < lines.n; i++)
		if (strcmp(lines.name[i], name) == 0)
			/* "" is how an empty string option (the default) prints. */
			return lines.value[i][0] ? lines.value[i] : NULL;
	return NULL;
}

static int quiet(void)
{
	return -1;
}

static bool name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

int ps_record_config(const char *text, struct ps_config *cfg)
{
	char copy[PS_LIVE_CONFIG];
	size_t len = strnlen(text, sizeof(copy));

	if (len >= sizeof(copy))
		return -EINVAL;
	memcpy(copy, text, len + 1);
	lines.n = 0;
	for (char *s = copy; *s;) {
		char *nl = strchr(s, '\n');
		if (!nl || lines.n == CONFIG_LINES)
			return -EINVAL;   /* every line ends; no more than the table has */
		*nl = '\0';
		char *eq = strchr(s, '=');
		if (!eq || eq - s < 8 || strncmp(s, "POOLSHIM", 8) != 0)
			return -EINVAL;
		*eq = '\0';
		for (char *c = s; *c; c++)
			if (!name_char(*c))
				return -EINVAL;
		for (unsigned char *c = (unsigned char *)eq + 1; *c; c++)
			if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
				return -EINVAL;
		for (int i = 0; i < lines.n; i++)
			if (strcmp(lines.name[i], s) == 0)
				return -EINVAL;
		lines.name[lines.n] = s;
		lines.value[lines.n++] = eq + 1;
		s = nl + 1;
	}
	int (*was)(void) = ps_log_fd;
	ps_log_fd = quiet;
	int problems = ps_config_load(cfg, line_get, NULL);
	ps_log_fd = was;
	/* The one cross-option complaint a process may have had itself: not the record's fault. */
	if (cfg->pool_min > cfg->pool_size)
		problems--;
	lines.n = 0;
	return problems ? -EINVAL : 0;
}

/* The header's problem, or NULL when it may be used with a file of size bytes. */
static const char *check_header(struct ps_record *r, const struct ps_live_header *h, size_t size)
{
	if (memcmp(h->magic, PS_LIVE_MAGIC, 8) != 0 || h->version != PS_LIVE_VERSION ||
	    h->block_size != sizeof(struct ps_tstats))
		return "not a live statistics file of this version (a different poolshim build?)";
	if (h->block_stride < h->block_size || h->block_stride > PS_RECORD_MAX_FILE)
		return "header lies: block stride out of range";
	if (h->max_blocks > PS_RECORD_MAX_BLOCKS)
		return "header lies: too many blocks";
	if (h->pid != r->pid || h->pidns != r->ns)
		return "header lies: pid or namespace differs from the file name";
	if ((uint32_t)h->pool.requested > PS_HUGE_NONE ||
	    (uint32_t)h->pool.first_mode >= PS_BACK__COUNT ||
	    (uint32_t)h->uring_state > 2 || h->routes.nslots > PS_ROUTE_SLOTS ||
	    h->routes.mode > PS_URING_ON)
		return "header lies: a state out of range";
	/* Version 3: how it ended, where the report stands and goes. */
	if (h->flags & ~(PS_REC_STATUS_KNOWN | PS_REC_CHILD))
		return "header lies: unknown flags";
	if ((uint32_t)h->end >= PS_END__COUNT || (uint32_t)h->report >= PS_REC__COUNT ||
	    (h->stats_format != PS_FORMAT_TEXT && h->stats_format != PS_FORMAT_JSON))
		return "header lies: an end, report state or format out of range";
	if (h->end == PS_END_EXIT && (h->flags & PS_REC_STATUS_KNOWN) &&
	    (h->exit_status < 0 || h->exit_status > 255))
		return "header lies: exit status out of range";
	if (h->end == PS_END_SIGNAL && (h->exit_status < 1 || h->exit_status > 64))
		return "header lies: signal out of range";
	if (!ended(h->stats, sizeof(h->stats)) || !ended(h->run, sizeof(h->run)) ||
	    !ended(h->report_error, sizeof(h->report_error)) ||
	    !ended(h->heap_owner, sizeof(h->heap_owner)) ||
	    !ended(h->shim_version, sizeof(h->shim_version)) || !ended(h->host, sizeof(h->host)) ||
	    !ended(h->kernel, sizeof(h->kernel)) || !ended(h->config, sizeof(h->config)))
		return "header lies: a string runs past its room";
	if (h->run[0] && ps_parse_id(h->run) < 0)
		return "header lies: a run id the shim would not take";
	if (h->report == PS_REC_KEPT &&
	    (h->blob_len == 0 || h->blob_len > PS_RECORD_MAX_BLOB || h->blob_off < PS_LIVE_HEADER ||
	     h->blob_off > size || h->blob_len > size - h->blob_off))
		return "header lies: the kept report is not inside the file";
	if (h->report == PS_REC_PENDING && strcmp(h->stats, "off") == 0)
		return "header lies: a report pending for POOLSHIM_STATS=off";
	r->cfg_known = h->config[0] != '\0';
	if (!r->cfg_known)
		ps_config_defaults(&r->cfg);
	else if (ps_record_config(h->config, &r->cfg) < 0)
		return "header lies: a configuration the shim would not have written";
	if (r->cfg_known) {
		/* Where the report goes must be the configuration's POOLSHIM_STATS, expanded. */
		char want[sizeof(h->stats)];
		const char *pat = r->cfg.stats;
		bool plain = strcmp(pat, "stderr") == 0 || strcmp(pat, "off") == 0;
		char program[sizeof(h->program)];
		memcpy(program, h->program, sizeof(program));
		program[sizeof(program) - 1] = '\0';
		if (plain ? strcmp(pat, h->stats) != 0 :
		    ps_report_path(want, sizeof(want), pat, h->pid, program) < 0 ||
		    strcmp(want, h->stats) != 0)
			return "header lies: the report's destination is not its configuration's";
		if (strcmp(r->cfg.run, h->run) != 0)
			return "header lies: the run id is not its configuration's";
	}
	return NULL;
}

/*
 * The call-site table, if the record has one: its place checked against
 * the file, read whole into private memory and checked (sites.h).  A
 * table that fails is refused alone (r->sites_why); the counters and the
 * rest of the report do not depend on it.
 */
static void read_sites(struct ps_record *r)
{
	const struct ps_live_header *h = r->hdr;
	uint64_t off = __atomic_load_n(&h->sites_off, __ATOMIC_ACQUIRE), len = h->sites_len;

	free(r->sites);
	r->sites = NULL;
	r->sites_why = NULL;
	if (off == 0)
		return;
	if (len != PS_SITES_LEN || off % 4096 || off < PS_LIVE_HEADER || off > r->size ||
	    len > r->size - off) {
		r->sites_why = "its place in the file is not one the shim would use";
		return;
	}
	void *b = malloc(len);
	if (!b) {
		r->sites_why = "out of memory";
		return;
	}
	if (pread(r->fd, b, len, (off_t)off) != (ssize_t)len) {
		free(b);
		r->sites_why = "cut short";
		return;
	}
	if ((r->sites_why = ps_sites_check(b)) != NULL) {
		free(b);
		return;
	}
	r->sites = b;
	r->sites_view = (struct ps_sites_view){
		.region = b,
		.sample = r->cfg.backtrace_sample,
		.top = (unsigned)r->cfg.backtrace_top,
		.symbolize = true,
		.offline = true,
		.debuginfo_path = r->cfg.debuginfo_path[0] ? r->cfg.debuginfo_path : NULL,
	};
}

void ps_record_as_owner(const struct ps_record *r, bool on)
{
	if (geteuid() != 0 || r->owner == 0)
		return;
	if (on) {
		setfsgid(r->group);
		setfsuid(r->owner);
	} else {
		setfsuid(geteuid());
		setfsgid(getegid());
	}
}

const char *ps_record_read(struct ps_record *r)
{
	struct ps_live_header *h = r->hdr;
	struct stat st;

	/* Its size now: it grows while the process runs. */
	if (fstat(r->fd, &st) < 0 || st.st_size < PS_LIVE_HEADER ||
	    (uint64_t)st.st_size > PS_RECORD_MAX_FILE)
		return "cut short";
	r->size = (size_t)st.st_size;
	if (pread(r->fd, h, PS_LIVE_HEADER, 0) != PS_LIVE_HEADER)
		return "cut short";
	const char *why = check_header(r, h, r->size);
	if (why)
		return why;
	/* The writer owns these strings; ours end inside their room whatever it wrote. */
	h->program[sizeof(h->program) - 1] = '\0';
	h->pool.hugetlb_reason[PS_LIVE_REASON - 1] = '\0';
	h->pool.thp_reason[PS_LIVE_REASON - 1] = '\0';
	h->uring_reason[PS_LIVE_REASON - 1] = '\0';
	uint32_t n = __atomic_load_n(&h->nblocks, __ATOMIC_RELAXED);
	if (n > h->max_blocks)
		n = h->max_blocks;
	/*
	 * The file grows a block at a time, after the count: only the blocks
	 * it holds now are read (divided, not multiplied: no overflow).
	 */
	if (n > (r->size - PS_LIVE_HEADER) / h->block_stride)
		n = (uint32_t)((r->size - PS_LIVE_HEADER) / h->block_stride);
	size_t len = (size_t)n * h->block_stride;
	char *b = realloc(r->blocks, len ? len : 1);
	if (!b)
		return "out of memory";
	r->blocks = b;
	/* Holes (blocks never reserved) read as zeros. */
	ssize_t got = len ? pread(r->fd, b, len, PS_LIVE_HEADER) : 0;
	if (got != (ssize_t)len)
		return "cut short";
	r->nblocks = n;
	read_sites(r);
	return NULL;
}

/*
 * Whether pid has ended but is not yet reaped (state Z in /proc/PID/stat):
 * a worker that died just as its parent exits is still a zombie when the
 * wrapper collects, and its record is as final as it will ever be.
 */
static bool zombie(int pid)
{
	char path[64], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* The name may hold anything, ')' too: the state follows the last one. */
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

void ps_record_judge(struct ps_record *r, uint64_t my_ns)
{
	r->foreign_ns = my_ns == 0 || r->ns != my_ns;
	/* Gone, or the pid now belongs to another process; judged in our namespace only. */
	r->dead = !r->foreign_ns &&
		  ((kill(r->pid, 0) < 0 && errno == ESRCH) ||
		   (r->hdr->starttime && ps_live_starttime(r->pid) != r->hdr->starttime) ||
		   zombie(r->pid));
}

void ps_record_totals(const struct ps_record *r, struct ps_tstats *out, struct ps_tstats *tmp)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < r->nblocks; i++) {
		/* Copied out: the stride need not keep a block aligned. */
		memcpy(tmp, r->blocks + (size_t)i * r->hdr->block_stride, sizeof(*tmp));
		ps_stats_add(out, tmp, 1);
	}
}

void ps_record_data(const struct ps_record *r, struct ps_report_data *d,
		    const struct ps_tstats *counters)
{
	const struct ps_live_header *h = r->hdr;

	memset(d, 0, sizeof(*d));
	d->pid = r->pid;
	d->program = h->program;
	d->totals = counters;
	d->pool_ready = h->pool_ready;
	/* The header has no word for it: the configuration says it. */
	d->pool_off = r->cfg_known && !r->cfg.pool;
	/* Nor for the placement: without the configuration it is not known (not the default). */
	d->allocator = r->cfg_known ? ps_pool_allocator_name(r->cfg.pool_allocator) : NULL;
	d->heap_owner = h->heap_owner[0] ? h->heap_owner : NULL;
	d->pool.requested = (enum ps_hugepages)h->pool.requested;
	d->pool.first_mode = (enum ps_backing)h->pool.first_mode;
	d->pool.slabs = h->pool.slabs;
	d->pool.backed = h->pool.backed;
	d->pool.cap = h->pool.cap;
	d->pool.reserve = h->pool.reserve;
	d->pool.retain = r->cfg.pool_retain;
	d->pool.decay_ms = r->cfg.pool_decay_ms;
	memcpy(d->pool.backed_by, h->pool.backed_by, sizeof(d->pool.backed_by));
	memcpy(d->pool.failures, h->pool.failures, sizeof(d->pool.failures));
	d->pool.hugetlb_reason = h->pool.hugetlb_reason[0] ? h->pool.hugetlb_reason : NULL;
	d->pool.thp_reason = h->pool.thp_reason[0] ? h->pool.thp_reason : NULL;
	d->pool_in_use = h->gauges.pool_in_use;
	/* Older writers leave it zero; anything but 1 is not a known value. */
	if (h->free.known == 1 && h->free.zero_bytes <= h->free.bytes) {
		d->free_known = true;
		d->free_blocks = h->free.blocks;
		d->free_bytes = h->free.bytes;
		d->free_zero_bytes = h->free.zero_bytes;
		d->free_largest = h->free.largest <= h->free.bytes ? h->free.largest : 0;
	}
	d->pool_peak = h->gauges.pool_peak;
	d->pool_min = h->pool_min;
	d->minflt = h->minflt;
	d->majflt = h->majflt;
	d->utime_us = h->utime_us;
	d->stime_us = h->stime_us;
	d->threads = h->threads_peak ? (int)h->threads_peak : (int)r->nblocks;
	d->uring_state = h->uring_state;
	d->uring_reason = h->uring_reason[0] ? h->uring_reason : NULL;
	d->uring_rings = h->uring_rings;
	d->routes = &h->routes;
	d->version = h->shim_version[0] ? h->shim_version : NULL;
	memcpy(d->host, h->host, sizeof(d->host));
	memcpy(d->kernel, h->kernel, sizeof(d->kernel));
	d->start_time = h->start_time >= 0 ? h->start_time : -1;
	d->cfg = r->cfg_known ? &r->cfg : NULL;
	d->sites = r->sites ? &r->sites_view : NULL;
	d->sites_refused = r->sites_why;
}

int ps_record_blob(const struct ps_record *r, char **out, size_t *len)
{
	const struct ps_live_header *h = r->hdr;

	if (h->report != PS_REC_KEPT)
		return -ENOENT;
	char *b = malloc(h->blob_len + 1);
	if (!b)
		return -ENOMEM;
	ssize_t got = pread(r->fd, b, h->blob_len, (off_t)h->blob_off);
	if (got != (ssize_t)h->blob_len) {
		free(b);
		return got < 0 ? -errno : -EIO;
	}
	b[h->blob_len] = '\0';
	*out = b;
	*len = h->blob_len;
	return 0;
}

int ps_record_remove(const struct ps_record *r)
{
	struct stat now;

	/* The same file we read, not one put in its place since. */
	if (lstat(r->path, &now) < 0)
		return -errno;
	if (now.st_ino != r->ino || now.st_dev != r->dev)
		return -ESTALE;
	return unlink(r->path) == 0 ? 0 : -errno;
}

void ps_record_close(struct ps_record *r)
{
	if (r->fd >= 0)
		close(r->fd);
	free(r->hdr);
	free(r->blocks);
	free(r->sites);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

int ps_record_scan(struct ps_record_id **ids)
{
	DIR *dir = opendir(ps_live_dir());
	struct dirent *e;
	int n = 0, cap = 16;

	*ids = malloc(sizeof(**ids) * (size_t)cap);
	if (!dir || !*ids) {
		int err = dir ? ENOMEM : errno;
		if (dir)
			closedir(dir);
		return -err;
	}
	while ((e = readdir(dir)) != NULL) {
		int pid, end = 0;
		unsigned long ns;
		if (sscanf(e->d_name, "poolshim-%d-%lu.stats%n", &pid, &ns, &end) != 2 || end <= 0 ||
		    e->d_name[end] != '\0' || pid <= 0)
			continue;
		if (n == cap) {
			struct ps_record_id *m = realloc(*ids, sizeof(**ids) * (size_t)(cap *= 2));
			if (!m)
				break;
			*ids = m;
		}
		(*ids)[n].pid = pid;
		(*ids)[n++].ns = ns;
	}
	closedir(dir);
	return n;
}
