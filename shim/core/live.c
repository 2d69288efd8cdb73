// SPDX-License-Identifier: MIT
/*
 * The live record's file (live.h says what it holds and who reads it).
 * Created with O_EXCL | O_NOFOLLOW, mode 0600, under a hidden name with an
 * unpredictable tag and renamed into place once its header is written
 * (to a tagged name where another user holds the plain one: live.h); it holds the header and
 * grows by one counter block per thread that counts (handed out by an
 * atomic index), so its size and the process's mappings follow what it
 * holds: the header is one mapping, each block another.  tmpfs gives a
 * page on the first store, and when it is full that store is a SIGBUS, so
 * no page is written before it is reserved: the header and each block with
 * fallocate before use, and only while a quarter of /dev/shm stays free
 * for others.  A block without room is not used: its thread counts in
 * anonymous memory, the header says how many do, and verbose mode says so
 * once.  At the end, a report the process could not deliver is appended
 * after the blocks (ps_live_keep_report).
 *
 * A fork child gets private memory mapped over the same addresses (the
 * header and each block), so every pointer to a block stays valid and the
 * parent's file is never written by the child.  Children that ran no atfork handler
 * (_Fork, raw clone or syscall(SYS_fork)) are caught on the slow paths
 * (block claim, publish, removal) by a page marked MADV_WIPEONFORK, which
 * reads zero in any child with an address space of its own.
 */
#include "core/live.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

#include "core/alloc.h"
#include "core/pool.h"
#include "core/blocks.h"
#include "core/callsite.h"
#include "format/fmt.h"
#include "core/report_out.h"
#include "format/sys.h"
#include "core/route.h"
#include "format/sites.h"
#include "core/uring.h"

#include <sys/resource.h>
#include <sys/utsname.h>


#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1
#endif

_Static_assert(sizeof(struct ps_live_header) <= PS_LIVE_HEADER, "header outgrew its room");

static struct ps_live_header *hdr;
/* The header's mapping; each counter block is a mapping of its own (blk). */
static size_t map_len;
/* Where block i of the file is mapped, or NULL (not taken, or not mapped). */
static void *blk[PS_LIVE_BLOCKS];
static int live_pid;
static uint64_t live_ns;
/* The tag of the file's name: 0 for the plain name (livefmt.c, live.h). */
static uint64_t live_tag;
static bool live_verbose;
static uint64_t live_pool_min;
int ps_live_file_due;
uint32_t ps_live_gen;
__thread uint32_t ps_live_gen_seen;
/* The process that started the shim, before its file: its first slab makes it. */
static bool main_pending;
/* A thread is making the file (make_file_once). */
static int making;
/* When the wait for a file began: start, fork, or a failed exec (CLOCK_MONOTONIC ns). */
static uint64_t due_since;
static int said_unpublished;
/*
 * Nonzero in the process that made the file; zero in any child with an
 * address space of its own (MADV_WIPEONFORK), whether or not atfork
 * handlers ran.  NULL when the kernel has no MADV_WIPEONFORK: then a
 * changed pid tells, which a vfork child shares (it is left alone).
 */
static volatile int *fork_guard;
/*
 * The file as made (device, inode, owner), to know it again by path, and
 * whether it is gone already (ps_live_before_chroot): the name may then be
 * someone else's file.
 */
static dev_t live_dev;
static ino_t live_ino;
static uid_t live_owner, owner_before, owner_pending = (uid_t)-1;
static bool live_unlinked;
/* This process is a fork child of the one that started the shim. */
static bool live_is_child;
/* When the header's page faults and CPU time were last brought up to date (CLOCK_MONOTONIC ns). */
static uint64_t usage_at;

static size_t stride(void)
{
	return (sizeof(struct ps_tstats) + 4095) & ~(size_t)4095;
}

/*
 * Whether a block of len bytes leaves a quarter of /dev/shm to others.
 * Counters are worth less than the data of the programs that share it (a
 * database's or browser's shared memory): the shim's files together never
 * fill the last quarter.  Unknown sizes (statfs failing, tmpfs without a
 * limit) do not stop it; the reservation still fails safely.
 */
static bool room_for(size_t len)
{
	struct statfs s;

	if (PS_SYSCALL(SYS_statfs, ps_live_dir(), &s) < 0 || s.f_blocks == 0)
		return true;
	uint64_t bsize = (uint64_t)s.f_bsize;
	return (uint64_t)s.f_bavail * bsize >= len + (uint64_t)s.f_blocks * bsize / 4;
}

/*
 * The header of the file this process may write, or NULL.  In a child
 * that ran no atfork handler the parent's file is dropped here (counts
 * carry on in private memory); a vfork child, which shares our memory,
 * touches nothing.
 */
static void disown(struct ps_live_header *h);

static struct ps_live_header *mine(void)
{
	struct ps_live_header *h = __atomic_load_n(&hdr, __ATOMIC_ACQUIRE);

	if (!h)
		return NULL;
	if (fork_guard) {
		if (*fork_guard)
			return h;
	} else if ((int)PS_SYSCALL(SYS_getpid) == live_pid) {
		return h;
	} else {
		return NULL;     /* may be a vfork child: leave the shared state be */
	}
	disown(h);
	return NULL;
}

static void say_unpublished(const char *why)
{
	if (live_verbose && !__atomic_exchange_n(&said_unpublished, 1, __ATOMIC_RELAXED))
		ps_log("live statistics: %s; threads from now on count in private memory "
		       "(in the exit report, not in `poolshim stat`)", why);
}

static long open_mine(const char *path, int access);

/*
 * Block i: the file grows by it (fallocate reserves its pages, so a full
 * /dev/shm says ENOSPC now rather than SIGBUS later) and it is mapped on
 * its own, through a descriptor that lives for the one call.  The file's
 * size and the process's mappings follow the threads that count: a
 * single-threaded process has one block, 180 KiB, not 128.  NULL when it
 * cannot be had (the directory's last quarter, the path out of reach).
 */
static void *map_block(struct ps_live_header *h, uint32_t i)
{
	char path[PS_LIVE_DIR_MAX + 64];
	size_t len = h->block_stride;
	long off = (long)(PS_LIVE_HEADER + (size_t)i * len);
	void *p = NULL;

	if (live_unlinked || !room_for(len))
		return NULL;
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	long fd = open_mine(path, O_RDWR);
	if (fd < 0)
		return NULL;
	if (PS_SYSCALL(SYS_fallocate, fd, 0, off, (long)len) == 0) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, off);
		if (p == MAP_FAILED)
			p = NULL;
	}
	ps_sys_close((int)fd);
	/*
	 * Threads starting together all saw room before any reserved: each
	 * looks again with its block in, and gives it back when the quarter
	 * is gone, so the last to look is right.
	 */
	if (p && !room_for(0)) {
		PS_SYSCALL(SYS_madvise, p, len, MADV_REMOVE);
		munmap(p, len);
		p = NULL;
	}
	return p;
}

static void *take_block(void)
{
	struct ps_live_header *h = mine();
	if (!h)
		return NULL;
	uint32_t i = __atomic_fetch_add(&h->nblocks, 1, __ATOMIC_SEQ_CST);
	if (i >= h->max_blocks) {
		__atomic_store_n(&h->nblocks, h->max_blocks, __ATOMIC_RELAXED);
		__atomic_add_fetch(&h->unpublished, 1, __ATOMIC_RELAXED);
		say_unpublished("the file's blocks are all taken");
		return NULL;
	}
	/*
	 * Once the process is ending the file may get its report after the
	 * blocks (ps_live_keep_report): no block grows it past that.  Paired
	 * with the end's store of `end` and load of `nblocks` (both SEQ_CST):
	 * either this sees the end, or the end counts this block.
	 */
	void *p = __atomic_load_n(&h->end, __ATOMIC_SEQ_CST) == PS_END_RUNNING ? map_block(h, i) : NULL;
	if (!p) {
		/* A block never mapped stays a hole: readers see zeros there, never a fault. */
		__atomic_add_fetch(&h->unpublished, 1, __ATOMIC_RELAXED);
		say_unpublished("the live directory has no room for another counter block");
		return NULL;
	}
	__atomic_store_n(&blk[i], p, __ATOMIC_RELEASE);
	return p;
}

/* A string into a header field of cap bytes, cut to fit and always ended. */
static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src ? src : "", n);
	dst[n] = '\0';
}

static void copy_reason(char *dst, const char *src)
{
	copy_str(dst, PS_LIVE_REASON, src);
}

/*
 * One publisher at a time.  Slabs are published one after the other (the
 * pool arena's grow lock orders them), but the exit report's publish can
 * meet a thread still adding a slab, and two interleaved copies would leave
 * a header mixing both (found by TSan, tests/tsan).  The one that finds the
 * other in progress skips rather than waits: at exit the two differ by that
 * one slab at most and the file goes right after, and a program exiting
 * from a signal handler may have interrupted the other on this very thread.
 */
static pthread_mutex_t publish_lock = PTHREAD_MUTEX_INITIALIZER;

void ps_live_publish(void)
{
	struct ps_live_header *h = mine();
	struct ps_pool_info info;

	if (!h || pthread_mutex_trylock(&publish_lock) != 0)
		return;
	ps_pool_get_info(&info);
	h->pool.requested = (int32_t)info.requested;
	h->pool.first_mode = (int32_t)info.first_mode;
	h->pool.slabs = info.slabs;
	h->pool.backed = info.backed;
	h->pool.cap = info.cap;
	h->pool.reserve = info.reserve;
	memcpy(h->pool.backed_by, info.backed_by, sizeof(info.backed_by));
	memcpy(h->pool.failures, info.failures, sizeof(info.failures));
	copy_reason(h->pool.hugetlb_reason, info.hugetlb_reason);
	copy_reason(h->pool.thp_reason, info.thp_reason);
	h->pool_ready = ps_alloc_pool_ready();
	/* The free blocks, kept up to date by blocks.c from then on. */
	struct ps_blocks_info bi;
	if (ps_alloc_blocks_info(&bi))
		ps_blocks_set_mirror(&h->free.known);
	h->uring_state = (int32_t)ps_uring_state();
	h->uring_rings = ps_uring_rings();
	copy_reason(h->uring_reason, ps_uring_reason());
	if (__atomic_load_n(&ps_heap, __ATOMIC_ACQUIRE) == PS_HEAP_OTHER)
		copy_reason(h->heap_owner, ps_heap_owner ? ps_heap_owner : "?");
	pthread_mutex_unlock(&publish_lock);
}

/*
 * What a report rendered by someone else needs and the counters do not
 * hold: where it goes (POOLSHIM_STATS expanded for this process, as the
 * process itself would have), the effective configuration, the run it
 * belongs to and the facts of the machine.  Written once, with the file.
 */
static void fill_context(struct ps_live_header *h, int pid)
{
	struct ps_buf b;
	struct utsname un;

	h->flags = live_is_child ? PS_REC_CHILD : 0;
	h->end = PS_END_RUNNING;
	h->report = strcmp(ps_cfg.stats, "off") == 0 ? PS_REC_NONE : PS_REC_PENDING;
	h->stats_format = (int32_t)ps_cfg.stats_format;
	h->start_time = ps_report_start_time();
	h->usage_time = -1;
	if (strcmp(ps_cfg.stats, "stderr") == 0 || strcmp(ps_cfg.stats, "off") == 0 ||
	    ps_report_path(h->stats, sizeof(h->stats), ps_cfg.stats, pid, h->program) < 0)
		copy_str(h->stats, sizeof(h->stats), ps_cfg.stats);
	copy_str(h->run, sizeof(h->run), ps_cfg.run);
	copy_str(h->shim_version, sizeof(h->shim_version), PACKAGE_VERSION);
	if (PS_SYSCALL(SYS_uname, &un) == 0) {
		copy_str(h->host, sizeof(h->host), un.nodename);
		copy_str(h->kernel, sizeof(h->kernel), un.release);
	}
	ps_buf_init(&b, h->config, sizeof(h->config), -1);
	ps_config_print(&ps_cfg, &b);
	ps_buf_str(&b);
	/* Cut short, it would misstate a setting: none rather than a wrong one. */
	if (b.truncated)
		memset(h->config, 0, sizeof(h->config));
}

static void fill_identity(struct ps_live_header *h, int pid, uint64_t ns)
{
	memcpy(h->magic, PS_LIVE_MAGIC, 8);
	h->version = PS_LIVE_VERSION;
	h->max_blocks = PS_LIVE_BLOCKS;
	h->block_size = sizeof(struct ps_tstats);
	h->block_stride = stride();
	h->pid = pid;
	h->pidns = ns;
	h->starttime = ps_live_starttime(0);
	h->exited = 0;
	/* The name kept at start: nginx's workers have rewritten argv[0] since. */
	const char *name = ps_program;
	copy_str(h->program, sizeof(h->program), name[0] ? name : program_invocation_short_name);
	for (char *c = h->program; *c; c++)
		if (*c == '/')
			*c = '_';
	fill_context(h, pid);
}

/*
 * A tag for the file's hidden name (and its name where the plain one is
 * held): from getrandom, else the clock and addresses (still unknown to
 * another user ahead of time).  Never 0.
 */
static uint64_t new_tag(void)
{
	uint64_t t = 0;

	if (PS_SYSCALL(SYS_getrandom, &t, sizeof(t), GRND_NONBLOCK) != (long)sizeof(t)) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = ((uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec) ^ (uint64_t)(uintptr_t)&ts ^
		    (uint64_t)(uintptr_t)&live_tag * 0x9e3779b97f4a7c15ull;
	}
	return t ? t : 1;
}

/*
 * Create and map PID's file with its header's pages reserved and its
 * identity written.  The mapping or NULL.  The file is made under a hidden
 * name and renamed into place once its header says what it is: a reader
 * (`poolshim stat -i PID` waiting for it) never finds it half made.
 */
static struct ps_live_header *create(int pid, uint64_t ns, int *err)
{
	char path[PS_LIVE_DIR_MAX + 64], tmp[PS_LIVE_DIR_MAX + 64];
	uint64_t tag = new_tag();
	ps_live_path(path, sizeof(path), pid, ns);
	ps_live_path_new(tmp, sizeof(tmp), pid, ns, tag);

	/* An unpredictable name, made new: no other user can have put a file there first. */
	long fd = ps_sys_openat(AT_FDCWD, tmp,
				O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		*err = (int)fd;
		return NULL;
	}
	void *p = MAP_FAILED;
	/* The header's pages reserved (fallocate also sets the size): blocks come as threads count. */
	long r = PS_SYSCALL(SYS_fallocate, fd, 0, 0, PS_LIVE_HEADER);
	if (r == 0) {
		p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
		r = p == MAP_FAILED ? -errno : 0;
	}
	struct stat st;
	if (r == 0)
		r = PS_SYSCALL(SYS_fstat, fd, &st);
	ps_sys_close((int)fd);
	if (r == 0) {
		fill_identity(p, pid, ns);
		/*
		 * Into place, replacing a file left by a dead process with our
		 * pid: in a sticky directory (/dev/shm) only its owner's.
		 */
		r = PS_SYSCALL(SYS_renameat, AT_FDCWD, tmp, AT_FDCWD, path);
		/*
		 * The plain name held by a file we may not replace (another
		 * user's: the sticky bit says EPERM; a directory): the tagged
		 * name, which nobody could have known.  Never over a file.
		 */
		if (r == -EPERM || r == -EACCES || r == -EISDIR || r == -ENOTEMPTY || r == -EBUSY) {
			ps_live_path_tagged(path, sizeof(path), pid, ns, tag);
			r = PS_SYSCALL(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE);
			/* A kernel or file system without it: the tag alone keeps the name ours. */
			if (r == -ENOSYS || r == -EINVAL)
				r = PS_SYSCALL(SYS_renameat, AT_FDCWD, tmp, AT_FDCWD, path);
		} else {
			tag = 0;
		}
	}
	if (r < 0) {
		*err = (int)r;
		if (p != MAP_FAILED)
			munmap(p, map_len);
		unlink(tmp);
		return NULL;
	}
	live_dev = st.st_dev;
	live_ino = st.st_ino;
	live_owner = st.st_uid;
	live_tag = tag;
	live_unlinked = false;
	return p;
}

static uint64_t mono_now(void)
{
	return ps_clock_ns(CLOCK_MONOTONIC);
}

/* The file is made and mapped: make it this process's and move its counters in. */
static void adopt_file(struct ps_live_header *h, int pid, uint64_t ns)
{
	h->pool_min = live_pool_min;
	h->gauges = *ps_gauges;
	__atomic_store_n(&ps_gauges_mirror, &h->gauges, __ATOMIC_RELEASE);
	h->threads_peak = (uint32_t)ps_stats_threads_peak();
	__atomic_store_n(&ps_threads_mirror, &h->threads_peak, __ATOMIC_RELEASE);
	h->routes = *ps_routes;
	__atomic_store_n(&ps_routes_mirror, &h->routes, __ATOMIC_RELEASE);
	live_pid = pid;
	live_ns = ns;
	__atomic_store_n(&hdr, h, __ATOMIC_RELEASE);
	ps_live_publish();
	ps_stats_block_source = take_block;
	/* Counts made so far went to anonymous memory: bring this thread's in. */
	ps_stats_rehome();
}

/*
 * With POOLSHIM_BACKTRACE, the call-site table moves into the file: a
 * region after the blocks' room (the blocks keep the offsets readers
 * compute), reserved with fallocate and mapped shared as a block is, so a
 * reader renders the call sites of a process that was killed.  Without
 * it the file has no such region and keeps its size.  Where the region
 * cannot be had (the directory's last quarter), the table stays in private
 * memory and only the process's own report has it.
 */
static void attach_sites(struct ps_live_header *h)
{
	char path[PS_LIVE_DIR_MAX + 64];
	size_t len = PS_SITES_LEN;
	long off = (long)(PS_LIVE_HEADER + (size_t)h->max_blocks * h->block_stride);
	void *p = NULL;

	if (!__atomic_load_n(&ps_callsite_on, __ATOMIC_ACQUIRE) || live_unlinked)
		return;
	if (!room_for(len)) {
		if (live_verbose)
			ps_log("live statistics: no room for the call-site table in %s; call sites "
			       "only in the process's own report", ps_live_dir());
		return;
	}
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	long fd = open_mine(path, O_RDWR);
	if (fd < 0)
		return;
	if (PS_SYSCALL(SYS_fallocate, fd, 0, off, (long)len) == 0) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, off);
		if (p == MAP_FAILED)
			p = NULL;
	}
	ps_sys_close((int)fd);
	if (!p)
		return;
	if (!ps_callsite_move(p)) {
		munmap(p, len);
		return;
	}
	h->sites_len = len;
	__atomic_store_n(&h->sites_off, (uint64_t)off, __ATOMIC_RELEASE);
}

/* The page fork_guard points to, made with the first file (raw calls only). */
static void make_guard(void)
{
	int err;
	fork_guard = ps_sys_fork_canary(&err);
}

/*
 * Make this process's file now and move the calling thread's counters in;
 * other threads move theirs on their next slow path (ps_live_tick).
 * Async-signal-safe: raw system calls and the vDSO clock.
 */
static void make_file(void)
{
	int saved_errno = errno, err = 0;
	int pid = (int)PS_SYSCALL(SYS_getpid);
	uint64_t ns = ps_live_pidns();
	struct ps_live_header *h = create(pid, ns, &err);

	if (!h) {
		if (live_verbose)
			ps_log("no live statistics file in %s (%s)", ps_live_dir(),
			       ps_errno_name(-err) ? ps_errno_name(-err) : "error");
		errno = saved_errno;
		return;
	}
	if (fork_guard)
		*fork_guard = 1;
	else
		make_guard();
	adopt_file(h, pid, ns);
	attach_sites(h);
	__atomic_add_fetch(&ps_live_gen, 1, __ATOMIC_RELEASE);
	/* Records this user's killed processes left, gone for the TTL (sweep.c). */
	ps_live_sweep(pid, ns);
	errno = saved_errno;
}

/*
 * The file is not made at start: a shell's `true`, a health check or a
 * config test would pay a 22 MiB sparse file, its mapping and a dozen
 * system calls for numbers nobody reads (issue 26).  The process makes it
 * once it has done real work (its first pool slab, ps_live_pool_changed)
 * or is still counting a second after start (ps_live_tick), as fork
 * children do.  Until then its counters live in private memory and reach
 * the exit report as always.
 */
int ps_live_init(const struct ps_config *cfg)
{
	live_verbose = cfg->verbose;
	live_pool_min = cfg->pool_min;
	if (strcmp(cfg->live_dir, PS_LIVE_DIR) != 0) {
		int r = ps_live_set_dir(cfg->live_dir);
		/* A directory the user named: tell now if it cannot be used, not a second later. */
		long ar = r == 0 ? PS_SYSCALL(SYS_faccessat, AT_FDCWD, ps_live_dir(), W_OK | X_OK) : 0;
		if (ar < 0)
			r = (int)ar;
		if (r == 0) {
			struct stat st;
			long sr = PS_SYSCALL(SYS_newfstatat, AT_FDCWD, ps_live_dir(), &st, 0);
			if (sr < 0)
				r = (int)sr;
			else if (!S_ISDIR(st.st_mode))
				r = -ENOTDIR;
		}
		if (r < 0) {
			ps_log("POOLSHIM_LIVE_DIR=%s: %s; running without a live statistics file",
			       cfg->live_dir, r == -EINVAL ? "not an absolute path of at most 160 "
			       "characters" : ps_errno_name(-r) ? ps_errno_name(-r) : "unusable");
			return r;
		}
	}
	map_len = PS_LIVE_HEADER;
	due_since = mono_now();
	main_pending = true;
	__atomic_store_n(&ps_live_file_due, 1, __ATOMIC_RELEASE);
	return 0;
}

/*
 * One thread makes the file; ps_live_file_due stays set until it is made,
 * so that the others keep coming back (ps_live_tick_wanted) to move in.
 */
static void make_file_once(void)
{
	if (__atomic_exchange_n(&making, 1, __ATOMIC_ACQ_REL))
		return;
	if (__atomic_load_n(&ps_live_file_due, __ATOMIC_ACQUIRE)) {
		main_pending = false;
		if (!__atomic_load_n(&hdr, __ATOMIC_ACQUIRE))
			make_file();
		__atomic_store_n(&ps_live_file_due, 0, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&making, 0, __ATOMIC_RELEASE);
}

void ps_live_pool_changed(void)
{
	if (main_pending && !__atomic_load_n(&hdr, __ATOMIC_ACQUIRE))
		make_file_once();
	ps_live_publish();
}

/*
 * Move the counters over the file's addresses into private memory, in a
 * child: the parent's file is never written or removed by the child.  The
 * child publishes a file of its own only if it lives on
 * (ps_live_tick): children that end with _exit() soon after fork
 * would otherwise leave one file each behind.  A child that execs
 * publishes again from its new image.
 */
/*
 * Make the shared mapping at p (len bytes) private anonymous memory at the
 * same address, keeping bytes [keep, keep + keep_len) of it: a child keeps
 * the header and each block's bookkeeping (list link, owner), not its
 * counters, which it zeroes anyway (its parent's work is not its own; a
 * child made by a raw clone, which runs no fork handler, then starts from
 * zero too).  Copying whole blocks faulted in 86 pages per block in every
 * fork child.  The copy goes through a page of its own: the forking
 * thread's stack may be small.
 */
static void to_private(void *p, size_t len, size_t keep, size_t keep_len)
{
	char *copy = mmap(NULL, keep_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (copy != MAP_FAILED)
		memcpy(copy, (char *)p + keep, keep_len);
	mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (copy != MAP_FAILED) {
		memcpy((char *)p + keep, copy, keep_len);
		munmap(copy, keep_len);
	}
}

static void disown(struct ps_live_header *h)
{
	/* One thread does it; the others see no file from here on. */
	if (!__atomic_compare_exchange_n(&hdr, &h, NULL, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	ps_stats_block_source = NULL;
	ps_callsite_after_fork_child();
	size_t stride = h->block_stride;
	const size_t tail = offsetof(struct ps_tstats, next);
	for (uint32_t i = 0; i < PS_LIVE_BLOCKS; i++) {
		struct ps_tstats *t = __atomic_exchange_n(&blk[i], NULL, __ATOMIC_ACQ_REL);
		if (!t)
			continue;
		to_private(t, stride, tail, sizeof(struct ps_tstats) - tail);
		/* Private anonymous memory now, zeros but for its bookkeeping. */
		t->anon = 1;
	}
	to_private(h, map_len, 0, PS_LIVE_HEADER);
	live_pid = 0;
	main_pending = false;
	making = 0;
	due_since = mono_now();
	__atomic_store_n(&ps_live_file_due, 1, __ATOMIC_RELEASE);
}

void ps_live_after_fork_child(void)
{
	struct ps_live_header *h = __atomic_load_n(&hdr, __ATOMIC_ACQUIRE);

	live_is_child = true;
	/* The call-site table too, even with no file now (between an exec that failed and the next). */
	ps_callsite_after_fork_child();
	if (h) {
		disown(h);
	} else if (__atomic_load_n(&ps_live_file_due, __ATOMIC_RELAXED)) {
		/* The child of a process that had no file yet: its own clock. */
		main_pending = false;
		making = 0;
		due_since = mono_now();
	}
}

/* Whether t is one of the current file's blocks. */
static bool in_file(const struct ps_tstats *t)
{
	for (uint32_t i = 0; i < PS_LIVE_BLOCKS; i++)
		if (__atomic_load_n(&blk[i], __ATOMIC_ACQUIRE) == t)
			return true;
	return false;
}

/*
 * The slow path's visit (every few dozen counted calls of a thread).
 * Async-signal-safe (raw system calls and the vDSO clock).  One thread
 * makes the file, once the process has lived PS_LIVE_FILE_DELAY_NS; then
 * each thread that counted before moves its block in on its own next
 * visit (only the owner may move a block: it writes it without atomics).
 * A thread that ends first moves in on its way out (init.c's thread-exit
 * hook calls this too); one that never comes back (no counted I/O) and
 * still runs shows in the exit report, not in `poolshim stat`.
 */
void ps_live_tick(void)
{
	/* Under the wrapper at once: a process killed in its first second still leaves a record. */
	if (__atomic_load_n(&ps_live_file_due, __ATOMIC_RELAXED) &&
	    (ps_cfg.run[0] || mono_now() - due_since >= PS_LIVE_FILE_DELAY_NS))
		make_file_once();
	uint32_t gen = __atomic_load_n(&ps_live_gen, __ATOMIC_ACQUIRE);
	if (ps_live_gen_seen == gen)
		return;
	ps_live_gen_seen = gen;
	struct ps_live_header *h = mine();
	struct ps_tstats *t = ps_stats_tls;
	if (h && t && !in_file(t))
		ps_stats_rehome();
}

void ps_live_thread_exit(void)
{
	if (!ps_live_tick_wanted())
		return;
	ps_live_tick();
	/* Another thread is making the file: wait for it (a few system calls), then move in. */
	for (int i = 0; i < 10000 && __atomic_load_n(&making, __ATOMIC_ACQUIRE); i++)
		PS_SYSCALL(SYS_sched_yield);
	ps_live_tick();
}

/*
 * Before an exec that looks likely to succeed: the new image makes a file
 * of its own only once it works (as this one did), so this one's goes
 * now, or it would be left behind by a short new image.  Not in a vfork
 * child (the file is the parent's).  Async-signal-safe.
 */
static bool unlinked_for_exec;

void ps_live_before_exec(void)
{
	char path[PS_LIVE_DIR_MAX + 64];
	struct ps_live_header *h = mine();

	if (!h || live_unlinked || live_pid != (int)PS_SYSCALL(SYS_getpid))
		return;
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	if (PS_SYSCALL(SYS_unlinkat, AT_FDCWD, path, 0) == 0) {
		live_unlinked = true;
		unlinked_for_exec = true;
	}
}

/*
 * The exec failed and the process goes on: a new file is made on the next
 * counted call's slow path, and each thread moves its counters into it
 * (ps_live_tick), as when a file is made late.  The old mapping stays,
 * unlinked, for whatever still points into it.
 */
void ps_live_after_failed_exec(void)
{
	if (!unlinked_for_exec)
		return;
	unlinked_for_exec = false;
	ps_stats_block_source = NULL;
	/* The old file's blocks stay mapped for whoever counts in them, until they move. */
	for (uint32_t i = 0; i < PS_LIVE_BLOCKS; i++)
		__atomic_store_n(&blk[i], NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&hdr, NULL, __ATOMIC_RELEASE);
	live_pid = 0;
	due_since = 0;
	__atomic_store_n(&ps_live_file_due, 1, __ATOMIC_RELEASE);
}

void ps_live_remove(void)
{
	char path[PS_LIVE_DIR_MAX + 64];
	struct ps_live_header *h = mine();

	if (!h || live_pid != (int)PS_SYSCALL(SYS_getpid))
		return;
	h->exited = 1;
	if (live_unlinked)
		return;
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	unlink(path);
}

/*
 * Leaving without a trace when the process changes who or where it is
 * (leave.c calls these around setuid and chroot).  /dev/shm is sticky: a
 * file there can be removed only by its owner, so the file follows the
 * effective uid; and a chroot that hides the directory gets the file
 * removed at the door, through a directory descriptor that lives for the
 * one call.  Both look the file up by path and act only if it is still
 * the one made (device and inode).
 */

/* Open our file by path (access: O_RDONLY or O_RDWR), checked to be ours; fd or -errno. */
static long open_mine(const char *path, int access)
{
	struct stat st;
	long fd = ps_sys_openat(AT_FDCWD, path, access | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);

	if (fd < 0)
		return fd;
	if (PS_SYSCALL(SYS_fstat, fd, &st) < 0 || st.st_dev != live_dev || st.st_ino != live_ino) {
		ps_sys_close((int)fd);
		return -ESTALE;
	}
	return fd;
}

static bool ours_by_path(void)
{
	return mine() && !live_unlinked && live_pid == (int)PS_SYSCALL(SYS_getpid);
}

void ps_live_before_uid(uid_t euid)
{
	char path[PS_LIVE_DIR_MAX + 64];

	owner_before = owner_pending = (uid_t)-1;
	if (euid == (uid_t)-1 || euid == live_owner || !ours_by_path())
		return;
	int saved_errno = errno;
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	long fd = open_mine(path, O_RDONLY);
	if (fd >= 0 && PS_SYSCALL(SYS_fchown, fd, euid, -1) == 0) {
		owner_before = live_owner;
		live_owner = euid;
	} else if (fd >= 0 && euid == 0) {
		/* Back to root (after a seteuid away): root may hand it over itself. */
		owner_pending = euid;
	} else if (fd >= 0) {
		/* Not allowed to hand it over (no CAP_CHOWN): remove it while we may. */
		if (unlink(path) == 0)
			live_unlinked = true;
	}
	if (fd >= 0)
		ps_sys_close((int)fd);
	errno = saved_errno;
}

void ps_live_after_uid(bool changed)
{
	char path[PS_LIVE_DIR_MAX + 64];

	/* Handed over and the change failed, or still to hand over now that it succeeded. */
	uid_t to = !changed ? owner_before : owner_pending;
	owner_before = owner_pending = (uid_t)-1;
	if (to == (uid_t)-1 || !ours_by_path())
		return;
	int saved_errno = errno;
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	long fd = open_mine(path, O_RDONLY);
	if (fd >= 0 && PS_SYSCALL(SYS_fchown, fd, to, -1) == 0)
		live_owner = to;
	if (fd >= 0)
		ps_sys_close((int)fd);
	errno = saved_errno;
}

int ps_live_before_chroot(const char *root)
{
	char path[PS_LIVE_DIR_MAX + 64], inside[PS_PATH_MAX + PS_LIVE_DIR_MAX + 64];
	struct ps_buf b;
	struct stat st;

	if (!root || !ours_by_path())
		return -1;
	int saved_errno = errno;
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	/* The new root reaches the file (a bind-mounted /dev/shm): its path stays good. */
	ps_buf_init(&b, inside, sizeof(inside), -1);
	ps_buf_puts(&b, root);
	ps_buf_puts(&b, path);
	ps_buf_str(&b);
	bool reached = !b.truncated && lstat(inside, &st) == 0 && st.st_dev == live_dev &&
		       st.st_ino == live_ino;
	errno = saved_errno;
	return reached ? -1 : 1;
}

void ps_live_after_chroot(int away, bool changed)
{
	/*
	 * The record stays, and the process goes on counting into it through
	 * its mapping; only its path now names something else (or nothing),
	 * so nothing is done by path from here on: `poolshim collect`
	 * renders it once the process has ended.
	 */
	if (away > 0 && changed)
		live_unlinked = true;
}

/*
 * The end of the process (end.c): the record's last figures, how it
 * ended, and the report kept in it when the process could not deliver it.
 */

bool ps_live_exists(void)
{
	return mine() != NULL && live_pid == (int)PS_SYSCALL(SYS_getpid);
}

void ps_live_make_now(void)
{
	if (!__atomic_load_n(&ps_live_file_due, __ATOMIC_ACQUIRE) || mine())
		return;
	make_file_once();
	/* The calling thread's counters moved in; the others' are read from private memory at exit. */
}

int ps_live_where(char *out, size_t cap)
{
	if (!ps_live_exists() || cap < PS_LIVE_DIR_MAX + 64)
		return -ENOENT;
	ps_live_path_tagged(out, cap, live_pid, live_ns, live_tag);
	return 0;
}

void ps_live_usage(void)
{
	struct ps_live_header *h = mine();
	struct rusage ru;
	struct timespec now;

	if (!h || PS_SYSCALL(SYS_getrusage, RUSAGE_SELF, &ru) != 0)
		return;
	h->minflt = (uint64_t)ru.ru_minflt;
	h->majflt = (uint64_t)ru.ru_majflt;
	h->utime_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec;
	h->stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
	clock_gettime(CLOCK_REALTIME, &now);
	h->usage_time = now.tv_sec;
	usage_at = mono_now();
}

void ps_live_usage_tick(void)
{
	if (__atomic_load_n(&hdr, __ATOMIC_RELAXED) && mono_now() - usage_at >= PS_LIVE_USAGE_NS)
		ps_live_usage();
}

void ps_live_end(int end, int status, bool status_known)
{
	struct ps_live_header *h = mine();

	if (!h)
		return;
	h->exit_status = status;
	if (status_known)
		__atomic_or_fetch(&h->flags, PS_REC_STATUS_KNOWN, __ATOMIC_RELAXED);
	__atomic_store_n(&h->end, end, __ATOMIC_SEQ_CST);
}

void ps_live_delivered(void)
{
	struct ps_live_header *h = mine();

	if (h)
		__atomic_store_n(&h->report, PS_REC_DELIVERED, __ATOMIC_RELEASE);
}

/*
 * The report, rendered here, appended to the record after its blocks (the
 * mapping does not reach there: it is written through a descriptor opened
 * for the one call and checked to be the same file).  The header points
 * at it only once it is whole.  A record that cannot be reached by its
 * path any more keeps its counters alone.
 */
int ps_live_keep_report(int format, unsigned how, const char *why)
{
	char path[PS_LIVE_DIR_MAX + 64];
	struct ps_live_header *h = mine();
	struct stat st;

	if (!h || live_pid != (int)PS_SYSCALL(SYS_getpid))
		return -ENOENT;
	copy_str(h->report_error, sizeof(h->report_error), why);
	if (live_unlinked)
		return -ENOENT;
	ps_live_path_tagged(path, sizeof(path), live_pid, live_ns, live_tag);
	long fd = open_mine(path, O_RDWR);
	if (fd < 0)
		return (int)fd;
	long r = PS_SYSCALL(SYS_fstat, fd, &st);
	/* After every block, those still being added included (see take_block). */
	uint64_t blocks = __atomic_load_n(&h->nblocks, __ATOMIC_SEQ_CST);
	if (blocks > h->max_blocks)
		blocks = h->max_blocks;
	uint64_t off = ((uint64_t)st.st_size + 4095) & ~(uint64_t)4095;
	if (off < PS_LIVE_HEADER + blocks * h->block_stride)
		off = PS_LIVE_HEADER + blocks * h->block_stride;
	if (r == 0)
		r = PS_SYSCALL(SYS_lseek, fd, (long)off, SEEK_SET) < 0 ? -EIO : 0;
	if (r == 0)
		r = ps_report_write((int)fd, (enum ps_stats_format)format, how);
	if (r == 0)
		r = PS_SYSCALL(SYS_fstat, fd, &st);
	if (r == 0 && (uint64_t)st.st_size > off) {
		h->blob_off = off;
		h->blob_len = (uint64_t)st.st_size - off;
		h->stats_format = format;
		__atomic_store_n(&h->report, PS_REC_KEPT, __ATOMIC_RELEASE);
	} else {
		if (r == 0)
			r = -EIO;
		PS_SYSCALL(SYS_ftruncate, fd, (long)off);
	}
	ps_sys_close((int)fd);
	return (int)r;
}
