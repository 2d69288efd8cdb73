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
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/fmt.h"
#include "format/names.h"

uint64_t ps_record_max_file(void)
{
	uint64_t stride = (sizeof(struct ps_tstats) + 4095) & ~(uint64_t)4095;

	/* The blob starts on a page after everything else (ps_live_keep_report). */
	return PS_LIVE_HEADER + PS_RECORD_MAX_BLOCKS * stride + PS_SITES_LEN + 4096 +
	       PS_RECORD_MAX_BLOB;
}

int ps_record_open(struct ps_record *r, const struct ps_record_id *id, const char **why)
{
	struct stat st;

	memset(r, 0, sizeof(*r));
	r->pid = id->pid;
	r->ns = id->ns;
	r->tag = id->tag;
	r->fd = -1;
	ps_live_path_tagged(r->path, sizeof(r->path), id->pid, id->ns, id->tag);
	/* O_NONBLOCK: a FIFO put there in place of a file must not hang us. */
	r->fd = open(r->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
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
	if (st.st_size < PS_LIVE_HEADER || (uint64_t)st.st_size > ps_record_max_file()) {
		*why = st.st_size < PS_LIVE_HEADER ? "too short" :
		       "too large (larger than any record the shim writes)";
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
	/* The shim's stride: a block's size rounded up to a page. */
	if (h->block_stride != ((h->block_size + 4095) & ~(uint64_t)4095))
		return "header lies: block stride out of range";
	if (h->max_blocks > PS_RECORD_MAX_BLOCKS)
		return "header lies: more blocks than the shim has";
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
 * the file (where the shim puts it: after every block's room), read whole
 * into private memory and checked (sites.h).  A
 * table that fails is refused alone (r->sites_why); the counters and the
 * rest of the report do not depend on it.
 */
void ps_record_sites(struct ps_record *r)
{
	const struct ps_live_header *h = r->hdr;
	uint64_t off = __atomic_load_n(&h->sites_off, __ATOMIC_ACQUIRE), len = h->sites_len;

	free(r->sites);
	r->sites = NULL;
	r->sites_why = NULL;
	if (off == 0)
		return;
	if (len != PS_SITES_LEN || off != PS_LIVE_HEADER + (uint64_t)h->max_blocks * h->block_stride ||
	    off > r->size || len > r->size - off) {
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

const char *ps_record_read(struct ps_record *r)
{
	struct ps_live_header *h = r->hdr;
	struct stat st;

	free(r->sites);
	r->sites = NULL;
	r->sites_why = NULL;
	r->nblocks = 0;
	/* Its size now: it grows while the process runs. */
	if (fstat(r->fd, &st) < 0 || st.st_size < PS_LIVE_HEADER)
		return "cut short";
	if ((uint64_t)st.st_size > ps_record_max_file())
		return "too large (larger than any record the shim writes)";
	r->size = (size_t)st.st_size;
	if (pread(r->fd, h, PS_LIVE_HEADER, 0) != PS_LIVE_HEADER)
		return "cut short";
	const char *why = check_header(r, h, r->size);
	if (why)
		return why;
	/*
	 * Holes: the shim reserves (fallocate) every page before it writes
	 * it, so a record's only unstored bytes are block room never
	 * reserved.  A file with more is not one the shim wrote: reading it
	 * would cost its reader the zeros of every hole.
	 */
	uint64_t stored = (uint64_t)st.st_blocks * 512, room = (uint64_t)h->max_blocks * h->block_stride;
	if (stored + room + 4096 < (uint64_t)st.st_size) {
		static char line[160];
		snprintf(line, sizeof(line), "sparse: %llu of its %llu bytes are not stored "
			 "(the shim leaves holes only in unused block room)",
			 (unsigned long long)((uint64_t)st.st_size - stored),
			 (unsigned long long)st.st_size);
		return line;
	}
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
	r->nblocks = n;
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

const char *ps_record_totals(const struct ps_record *r, struct ps_tstats *out,
			     struct ps_tstats *tmp)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < r->nblocks; i++) {
		/* Holes (blocks never reserved) read as zeros. */
		off_t at = (off_t)(PS_LIVE_HEADER + (uint64_t)i * r->hdr->block_stride);
		if (pread(r->fd, tmp, sizeof(*tmp), at) != (ssize_t)sizeof(*tmp))
			return "cut short";
		ps_stats_add(out, tmp, 1);
	}
	return NULL;
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
		struct ps_record_id id;
		if (ps_live_parse_name(e->d_name, &id.pid, &id.ns, &id.tag) != 1)
			continue;
		if (n == cap) {
			struct ps_record_id *m = realloc(*ids, sizeof(**ids) * (size_t)(cap *= 2));
			if (!m)
				break;
			*ids = m;
		}
		(*ids)[n++] = id;
	}
	closedir(dir);
	return n;
}

int ps_record_find(int pid, uint64_t ns, struct ps_record_id *id)
{
	char path[64];
	struct stat st;
	struct ps_record_id *ids = NULL;
	int n = ps_record_scan(&ids), best = -1, best_rank = 0;

	/* Whose the process is, while it runs: its record is that user's. */
	snprintf(path, sizeof(path), "/proc/%d", pid);
	bool running = ns == ps_live_pidns() && stat(path, &st) == 0;
	uid_t user = running ? st.st_uid : (uid_t)-1;
	for (int i = 0; i < n; i++) {
		if (ids[i].pid != pid || ids[i].ns != ns)
			continue;
		int rank = 1 + (ids[i].tag == 0);
		char p[PS_LIVE_DIR_MAX + 64];
		ps_live_path_tagged(p, sizeof(p), pid, ns, ids[i].tag);
		if (running && lstat(p, &st) == 0 && st.st_uid == user)
			rank += 2;
		if (rank > best_rank) {
			best = i;
			best_rank = rank;
		}
	}
	if (best >= 0)
		*id = ids[best];
	free(ids);
	return best >= 0 ? 0 : -ENOENT;
}

int ps_record_become(uid_t uid)
{
	struct passwd *pw = getpwuid(uid);
	gid_t gid = pw ? pw->pw_gid : 65534;
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return -errno;
	/* Believed only once seen: every id, and no group left over. */
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != uid ||
	    eu != uid || su != uid || rg != gid || eg != gid || sg != gid || getgroups(0, NULL) != 0)
		return -EPERM;
	return 0;
}

/* The child's exit statuses (render_in_child). */
enum { CHILD_OK = 0, CHILD_NOT_OWNER = 3, CHILD_TOO_BIG = 4 };

pid_t ps_record_fork_piped(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid_t c = fork();
	if (c < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return -e;
	}
	return c;
}

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * render() in a child that has become the record's owner (we being root
 * and the record another user's), its bytes back through a pipe into
 * mem[cap - 1], within PS_RECORD_RENDER_S seconds.  0 (*len set) or
 * -errno: -EPERM it could not become the owner, -ETIMEDOUT it took too
 * long (killed), -EFBIG more than cap, -ECHILD it died otherwise.
 */
static int render_in_child(const struct ps_record *r, void (*render)(struct ps_buf *, void *),
			   void *arg, char *mem, size_t cap, size_t *len)
{
	int p[2];
	pid_t c = ps_record_fork_piped(p);

	if (c < 0)
		return (int)c;
	if (c == 0) {
		struct ps_buf b;
		close(p[0]);
		signal(SIGALRM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		alarm(PS_RECORD_RENDER_S);
		if (geteuid() == 0 && r->owner != 0 && ps_record_become(r->owner) < 0)
			_exit(CHILD_NOT_OWNER);
		ps_buf_init(&b, mem, cap, -1);
		render(&b, arg);
		if (b.truncated || b.len >= cap)
			_exit(CHILD_TOO_BIG);
		for (size_t o = 0; o < b.len;) {
			ssize_t n = write(p[1], b.p + o, b.len - o);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				_exit(CHILD_TOO_BIG + 1);
			o += (size_t)n;
		}
		_exit(CHILD_OK);
	}
	close(p[1]);
	uint64_t deadline = ms_now() + PS_RECORD_RENDER_S * 1000u + 500;
	size_t got = 0;
	int e = 0;
	for (;;) {
		uint64_t now = ms_now();
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		if (now >= deadline) {
			e = -ETIMEDOUT;
			break;
		}
		int k = poll(&pfd, 1, (int)(deadline - now));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			e = k == 0 ? -ETIMEDOUT : -errno;
			break;
		}
		if (got + 1 >= cap) {
			e = -EFBIG;
			break;
		}
		ssize_t n = read(p[0], mem + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	if (e)
		kill(c, SIGKILL);
	int st;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	if (e)
		return e;
	if (WIFSIGNALED(st))
		return WTERMSIG(st) == SIGALRM ? -ETIMEDOUT : -ECHILD;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != CHILD_OK)
		return WIFEXITED(st) && WEXITSTATUS(st) == CHILD_NOT_OWNER ? -EPERM :
		       WIFEXITED(st) && WEXITSTATUS(st) == CHILD_TOO_BIG ? -EFBIG : -ECHILD;
	mem[got] = '\0';
	*len = got;
	return 0;
}

int ps_record_render(struct ps_record *r, void (*render)(struct ps_buf *b, void *arg), void *arg,
		     size_t cap, char **out, size_t *len, const char **note)
{
	char *mem = malloc(cap);
	struct ps_buf b;

	*note = NULL;
	if (!mem)
		return -ENOMEM;
	/* Only naming call sites reads files the record names: that, away from us. */
	if (r->sites && r->sites_view.symbolize) {
		int e = render_in_child(r, render, arg, mem, cap, len);
		if (e == 0) {
			*out = mem;
			return 0;
		}
		if (e == -EFBIG) {
			free(mem);
			return e;
		}
		*note = e == -ETIMEDOUT ? "naming its call sites took too long; their addresses "
					  "are left unnamed" :
			e == -EPERM ? "could not become the record's owner to name its call sites; "
				      "their addresses are left unnamed" :
				      "naming its call sites failed; their addresses are left unnamed";
		r->sites_view.symbolize = false;
	}
	ps_buf_init(&b, mem, cap, -1);
	render(&b, arg);
	if (b.truncated || b.len >= cap) {
		free(mem);
		return -EFBIG;
	}
	ps_buf_str(&b);
	*out = mem;
	*len = b.len;
	return 0;
}

/*
 * The length of the well-formed UTF-8 sequence at p (n bytes there) when
 * it is not a C1 control, else 0: no overlong form, no surrogate, nothing
 * past U+10FFFF.
 */
static size_t utf8_printable(const unsigned char *p, size_t n)
{
	unsigned c = p[0];

	if (c < 0xc2 || c > 0xf4)
		return 0;   /* a continuation byte, an overlong lead (c0, c1), or past U+10FFFF */
	size_t k = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	if (n < k)
		return 0;
	uint32_t cp = c & (0x7fu >> k);
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
	if (cp < least[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f)
		return 0;
	return k;
}

/* How many bytes at p[n] go out as they are (0: one byte becomes '?'). */
static size_t safe_run(const unsigned char *p, size_t n, bool keep_lines)
{
	unsigned c = p[0];

	if (c >= 0x20 && c < 0x7f)
		return 1;
	if (keep_lines && (c == '\n' || c == '\t'))
		return 1;
	return c >= 0x80 ? utf8_printable(p, n) : 0;
}

const char *ps_term_clean(char *out, size_t cap, const char *s, size_t len, bool keep_lines)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	for (size_t i = 0; i < len && p[i];) {
		size_t k = safe_run(p + i, len - i, keep_lines);
		if (o + (k ? k : 1) >= cap)
			break;
		if (k) {
			memcpy(out + o, p + i, k);
			o += k;
			i += k;
		} else {
			out[o++] = '?';
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

int ps_term_put(FILE *f, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t k = safe_run(p + i, len - i, true);
		if (k) {
			fwrite(p + i, 1, k, f);
			i += k;
		} else {
			putc('?', f);
			i++;
		}
	}
	return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}
