// SPDX-License-Identifier: MIT
/*
 * Per-thread io_uring rings for O_DIRECT I/O on pooled buffers.
 *
 * A ring is created on a thread's first eligible call with SINGLE_ISSUER
 * and DEFER_TASKRUN (COOP_TASKRUN, then no flags, on older kernels) and its
 * fd registered.  Where the kernel takes io_uring_register(2) by registered
 * index (6.3 and later) the ring's descriptor is then closed: the shim holds
 * no descriptor the program could close, dup2 over or count against its
 * RLIMIT_NOFILE, and the program's descriptors are numbered as without us.
 * Older kernels need the descriptor: it is moved high (F_DUPFD_CLOEXEC to
 * the upper half of RLIMIT_NOFILE, so the program's next open() gets the
 * number it would get without us), and since the program may still close
 * or reuse that number, the shim checks that it is still its ring before
 * using or closing it.
 *
 * No buffer is registered: SQEs are plain READ/WRITE, never READ_FIXED.
 * A registered buffer is long-term pinned for as long as it stays
 * registered, which costs the program twice.  The pinned pages are charged
 * to its user's RLIMIT_MEMLOCK, across every process of that user: under
 * the usual 8 MiB limit, after one O_DIRECT pread into a registered pool
 * slab, the program's own io_uring_register_buffers of 6 MiB failed with
 * ENOMEM, and so did a neighbour process's.  And the pinned pages stop
 * being the program's as soon as it calls madvise(MADV_DONTNEED), munmap,
 * mremap, mprotect or pkey_mprotect on them, by raw system call too, which
 * no interposer sees: reads landed in the old pages (the program saw
 * zeros), writes sent the old contents, a read-only buffer was written.
 * With plain SQEs the kernel pins the pages of the moment, with their
 * permissions, per request and only while it runs, as pread does.  What
 * registration would save, measured on this project's VM (bench/
 * fixedbench, docs/results.md): on THP and hugetlb buffers, the pool's
 * default, the same MiB/s, and 0.0013 CPU seconds per GiB at 16 MiB
 * (READ 0.0059, READ_FIXED 0.0046: pinning eight 2 MiB folios), nothing
 * at 1 MiB; on 4 KiB pages half the CPU per GiB (0.037 against 0.014 at
 * 16 MiB, a GUP of 4096 pages per request), a backing the pool uses only
 * when hugepages are off or missing.  No registration can follow what
 * the program does to its memory behind our back, so there is no opt-in
 * either.
 *
 * Footprint: a thread that made an eligible call holds one ring (its
 * SQ/CQ pages, charged to the memory cgroup, not RLIMIT_MEMLOCK, since
 * Linux 5.12), no descriptor on Linux 6.3 and later, and no pinned page
 * between calls; the ring goes at thread exit.
 *
 * Rings live in thread-local storage and are tagged with the pid that made
 * them.  A fork child must never touch its parent's ring: the ring memory
 * is shared with the parent, and the kernel object is the parent's.  The
 * atfork handler drops the copy; forks that run no handler (_Fork, a raw
 * clone) are noticed on the ring lookup through a MADV_WIPEONFORK page,
 * which reads as zero in any child, so the lookup costs no system call.
 *
 * Which calls come here at all is the router's (route.c): per device, the
 * ring only where it measured cheaper than the plain call, unless
 * POOLSHIM_URING=on.
 *
 * A read is split into chunks of what the file's block device takes in
 * one request (its queue's max_sectors_kb; a partition's disk), read from
 * sysfs once per device (the device as the router learnt it: no fstat
 * per call), and never into more chunks than the ring depth
 * and the device's nr_requests (then the chunks grow).  An explicit
 * POOLSHIM_URING_CHUNK wins, and it is the size where no block queue is
 * found (tmpfs, NFS, btrfs' anonymous devices, no /sys).  The chunk size
 * changes how the kernel sees the request, never what the call returns.
 *
 * Requests are submitted in waves of at most POOLSHIM_URING_DEPTH SQEs and
 * every SQE of a wave is reaped before the call returns: a signal never
 * leaves a chunk in flight (O_DIRECT file I/O is not interruptible anyway,
 * so finishing is what the plain syscall would do).  Reads are split into
 * chunks that run in parallel.  A write is not: chunks written in parallel
 * can land past one that failed (a full disk), bytes beyond the prefix the
 * call returns, and linked chunks (which cancel the rest on a failure, as
 * a plain pwrite stops there) run one after another and lost 5-10% on
 * 16 MiB PUTs here; one SQE for the whole write has the kernel's own
 * semantics and its parallelism.  The segments of a vectored write are
 * linked.  When the kernel takes
 * fewer SQEs than were queued, what it took is reaped first and the rest
 * offered again; when it takes none, the ring is dropped (the queued SQEs
 * would go out with its next use) and the call finishes with plain calls.
 *
 * pread and pwrite are async-signal-safe, so a signal handler may call
 * them while the thread it interrupted is inside this file with its ring:
 * the ring is marked busy for the whole call, and a nested call takes the
 * plain path.
 */
#include "core/uring.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "format/compiler.h"
#include "format/fmt.h"
#include "core/pool.h"
#include "core/route.h"
#include "format/stats.h"
#include "format/sys.h"

#define PS_ALIGN 4096u            /* anything less passes through to the kernel */
#define PS_MAX_RW 0x7ffff000L     /* the kernel's MAX_RW_COUNT: it cuts longer calls short */
#define PS_FD_HIGH_MAX 1000       /* kept descriptors start at most this high (fd table size) */

struct ring {
	struct io_uring ring;
	int pid;                  /* process that created it; 0 = none */
	bool failed;              /* setup failed in this thread */
	bool fdless;              /* descriptor closed; reached by registered index */
	bool regd;                /* ring fd registered: io_uring_enter by index */
	dev_t fd_dev;             /* identity of a kept descriptor, ring.ring_fd */
	ino_t fd_ino;
};

#ifndef IORING_REGISTER_USE_REGISTERED_RING
#define IORING_REGISTER_USE_REGISTERED_RING (1U << 31)   /* Linux 6.3 */
#endif

static __thread struct ring tls_ring;
/*
 * Set while this thread's ring is in use (a signal handler's call then
 * stays off it).  Kept apart from tls_ring, which is cleared wholesale
 * when a ring is dropped.
 */
static __thread int tls_busy;
static bool uring_on;
static uint64_t min_len, chunk_len;
static bool chunk_set;           /* POOLSHIM_URING_CHUNK given: no device sizes */
static unsigned depth;
static int state = PS_URING_STATE_OK;
static const char *reason;
static uint64_t rings;           /* created, ever */
static bool verbose;
#ifdef PS_TEST_HOOKS
static enum ps_uring_test test_mode;   /* POOLSHIM_URING_TEST */
#else
/* The shipped library forces no fault: the test branches below fold away. */
static const enum ps_uring_test test_mode = PS_URING_TEST_NONE;
#endif
static int process_pid;
/*
 * One word on a MADV_WIPEONFORK page: 1 here, 0 in any child made since
 * process_pid was last set, whether or not atfork handlers ran.  NULL
 * where the kernel lacks MADV_WIPEONFORK (before 4.14): then every ring
 * lookup asks for the pid.
 */
static int *fork_canary;
static bool canary_unavailable;     /* no MADV_WIPEONFORK here */


void ps_uring_init(const struct ps_config *cfg)
{
	uring_on = cfg->uring != PS_URING_OFF;
	min_len = cfg->uring_min;
	chunk_len = (cfg->uring_chunk + PS_ALIGN - 1) & ~(uint64_t)(PS_ALIGN - 1);
	chunk_set = cfg->uring_chunk_set;
	depth = (unsigned)cfg->uring_depth;
	verbose = cfg->verbose;
#ifdef PS_TEST_HOOKS
	test_mode = cfg->uring_test;
#endif
	ps_route_init(cfg);
	/* The pid and the canary are taken with the first ring (current_pid):
	 * a process that never does eligible O_DIRECT makes no system call here. */
	if (!uring_on) {
		state = PS_URING_STATE_OFF;
		reason = "POOLSHIM_URING=off";
		return;
	}
}

/* The canary's page, made once (raw system calls: async-signal-safe). */
static void make_canary(void)
{
	int err;
	int *none = NULL, *page = (int *)ps_sys_fork_canary(&err);

	if (!page) {
		canary_unavailable = err == -EINVAL;
		return;
	}
	if (!__atomic_compare_exchange_n(&fork_canary, &none, page, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		PS_SYSCALL(SYS_munmap, page, 4096);    /* another thread's came first */
}

/*
 * This process's pid.  After a fork that ran no atfork handler (_Fork, a
 * raw clone) the cached one is the parent's: the wiped canary says so.
 */
static int current_pid(void)
{
	/* Acquire: the page's first write, made before another thread published it, is seen. */
	volatile int *canary = __atomic_load_n(&fork_canary, __ATOMIC_ACQUIRE);

	if (ps_likely(canary != NULL && __atomic_load_n(canary, __ATOMIC_RELAXED)))
		return __atomic_load_n(&process_pid, __ATOMIC_RELAXED);
	int pid = (int)PS_SYSCALL(SYS_getpid);
	__atomic_store_n(&process_pid, pid, __ATOMIC_RELAXED);
	if (canary)
		__atomic_store_n(canary, 1, __ATOMIC_RELAXED);
	else if (!canary_unavailable)
		make_canary();
	return pid;
}

enum ps_uring_state ps_uring_state(void)
{
	return (enum ps_uring_state)__atomic_load_n(&state, __ATOMIC_RELAXED);
}

const char *ps_uring_reason(void)
{
	return reason;
}

uint64_t ps_uring_rings(void)
{
	return __atomic_load_n(&rings, __ATOMIC_RELAXED);
}

/*
 * Whether r's kept descriptor still is its ring: the program may have
 * closed the number, or put a file of its own there (a close-all loop, a
 * dup2).  The inode tells rings apart where each has its own; the link
 * name tells an io_uring from other anonymous-inode files where they share
 * one (older kernels).
 */
static bool ring_fd_ours(const struct ring *r)
{
	struct stat st;
	int fd = r->ring.ring_fd;

	if (fd < 0 || PS_SYSCALL(SYS_fstat, fd, &st) < 0 || st.st_dev != r->fd_dev ||
	    st.st_ino != r->fd_ino)
		return false;
	char path[32] = "/proc/self/fd/", link[32];
	size_t at = strlen(path);
	char digits[12];
	int nd = 0;
	for (unsigned v = (unsigned)fd; v || nd == 0; v /= 10)
		digits[nd++] = (char)('0' + v % 10);
	while (nd)
		path[at++] = digits[--nd];
	path[at] = '\0';
	static const char want[] = "anon_inode:[io_uring]";
	long n = PS_SYSCALL(SYS_readlinkat, AT_FDCWD, path, link, sizeof(link));
	if (n < 0)
		return true;     /* no /proc: the inode is all there is to go by */
	return n == (long)sizeof(want) - 1 && memcmp(link, want, sizeof(want) - 1) == 0;
}

/* io_uring_register(2) on r, by registered index once its fd is closed. */
static int ring_register(struct ring *r, unsigned op, const void *arg, unsigned nr)
{
	if (r->fdless)
		return (int)PS_SYSCALL(SYS_io_uring_register, r->ring.enter_ring_fd,
				       op | IORING_REGISTER_USE_REGISTERED_RING, arg, nr);
	if (!ring_fd_ours(r))
		return -EBADF;
	return (int)PS_SYSCALL(SYS_io_uring_register, r->ring.ring_fd, op, arg, nr);
}

/*
 * Whether the kernel takes io_uring_register(2) by registered index
 * (Linux 6.3): IORING_REGISTER_PROBE of no opcodes changes nothing and
 * answers 0 where it does.  0 or -errno.
 */
static int probe_by_index(struct ring *r)
{
	struct io_uring_probe probe;

	memset(&probe, 0, sizeof(probe));
	return ring_register(r, IORING_REGISTER_PROBE, &probe, 0);
}

/*
 * Unmap r's rings: all a fork child may do with its copy of its parent's
 * ring (the memory is shared with the parent; unmapping our view of it
 * changes nothing there).  liburing's io_uring_queue_exit would also
 * unregister and close by descriptor, on a number that may be the
 * program's by now.
 */
static void ring_unmap(struct ring *r)
{
	struct io_uring_sq *sq = &r->ring.sq;
	struct io_uring_cq *cq = &r->ring.cq;
	size_t sqe_size = sizeof(struct io_uring_sqe);

	if (r->ring.flags & IORING_SETUP_SQE128)
		sqe_size += 64;
	PS_SYSCALL(SYS_munmap, sq->sqes, sqe_size * sq->ring_entries);
	PS_SYSCALL(SYS_munmap, sq->ring_ptr, sq->ring_sz);
	if (cq->ring_ptr && cq->ring_ptr != sq->ring_ptr)
		PS_SYSCALL(SYS_munmap, cq->ring_ptr, cq->ring_sz);
}

/* Close r's kept descriptor, if the number still is the ring's. */
static void ring_close_fd(struct ring *r)
{
	if (!r->fdless && ring_fd_ours(r))
		ps_sys_close(r->ring.ring_fd);
	r->ring.ring_fd = -1;
}

/* Release a ring this process made: its registered index, descriptor, mappings. */
static void ring_exit(struct ring *r)
{
	if (r->regd) {
		struct io_uring_rsrc_update up;
		memset(&up, 0, sizeof(up));
		up.offset = (__u32)r->ring.enter_ring_fd;
		ring_register(r, IORING_UNREGISTER_RING_FDS, &up, 1);
	}
	ring_close_fd(r);
	ring_unmap(r);
}

/*
 * Let go of a ring inherited over fork.  Registered indexes are per task
 * and not inherited; a kept descriptor is our own copy, closed only if the
 * number still holds it.  Nothing reaches the kernel's ring object, which
 * the parent goes on using (no unregistering: that would be the parent's
 * buffers and slots).
 */
static void ring_forget(struct ring *r)
{
	ring_close_fd(r);
	ring_unmap(r);
	memset(r, 0, sizeof(*r));
}

/* Drop the calling thread's ring, whoever made it; the thread uses plain calls from now on. */
static void ring_drop(struct ring *r)
{
	if (r->pid == current_pid())
		ring_exit(r);
	else
		ring_forget(r);
	memset(r, 0, sizeof(*r));
	r->failed = true;
}

/*
 * With the ring fd registered, try io_uring_register by index: if the
 * kernel takes it, the descriptor is no longer needed (thread exit
 * unregisters the index that way).
 */
static void drop_ring_fd(struct ring *r)
{
	r->fdless = true;
	if (probe_by_index(r) < 0) {
		r->fdless = false;
		return;
	}
	ps_sys_close(r->ring.ring_fd);
	r->ring.ring_fd = -1;
}

void ps_uring_thread_exit(void)
{
	struct ring *r = &tls_ring;

	/* A signal handler doing I/O now must not find a half-released ring. */
	tls_busy = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (r->pid && r->pid == current_pid())
		ring_exit(r);
	else if (r->pid)
		ring_forget(r);
	/*
	 * No new ring for I/O from destructors that run after ours: nothing
	 * would release it.
	 */
	memset(r, 0, sizeof(*r));
	r->failed = true;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	tls_busy = 0;
}

void ps_uring_after_fork_child(void)
{
	__atomic_store_n(&process_pid, (int)PS_SYSCALL(SYS_getpid), __ATOMIC_RELAXED);
	int *canary = __atomic_load_n(&fork_canary, __ATOMIC_ACQUIRE);
	if (canary)
		__atomic_store_n(canary, 1, __ATOMIC_RELAXED);
	/*
	 * The forking thread's ring belongs to the parent.  If fork() came
	 * from a signal handler in the middle of this thread's I/O, the
	 * interrupted call still holds it: it notices the pid and drops it.
	 */
	if (tls_ring.pid && !tls_busy)
		ring_forget(&tls_ring);
}

bool ps_uring_usable(void)
{
	return uring_on && __atomic_load_n(&state, __ATOMIC_RELAXED) == PS_URING_STATE_OK;
}

bool ps_uring_eligible(const void *buf, size_t len, off_t off, bool positional)
{
	if (!uring_on)
		return false;
	if (len < min_len) {
		ps_stats_uring_fallback(PS_UFB_SMALL);
		return false;
	}
	struct ps_pool_range where;
	if (!ps_pool_range_of(buf, len, &where)) {
		ps_stats_uring_fallback(PS_UFB_NOT_POOLED);
		return false;
	}
	if (where.protected) {
		ps_stats_uring_fallback(PS_UFB_PROTECTED);
		return false;
	}
	/* An end past the largest offset is the kernel's EINVAL to give. */
	if (positional && (len > (uint64_t)INT64_MAX || (uint64_t)off > (uint64_t)INT64_MAX - len))
		return false;
	/* Misaligned O_DIRECT requests go to the kernel, which says EINVAL exactly. */
	if (((uintptr_t)buf | len | (positional ? (uint64_t)off : 0)) & (PS_ALIGN - 1)) {
		ps_stats_uring_fallback(PS_UFB_UNALIGNED);
		return false;
	}
	return __atomic_load_n(&state, __ATOMIC_RELAXED) == PS_URING_STATE_OK;
}

static void give_up(int err)
{
	int expected = PS_URING_STATE_OK;

	/* EPERM/ENOSYS mean no thread will get a ring: stop trying everywhere. */
	if (err == -EPERM || err == -ENOSYS || err == -EACCES) {
		if (__atomic_compare_exchange_n(&state, &expected, PS_URING_STATE_UNAVAILABLE, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			reason = err == -ENOSYS ? "io_uring_setup: ENOSYS (kernel or seccomp)"
				 : err == -EACCES ? "io_uring_setup: EACCES (kernel.io_uring_disabled or seccomp)"
				 : "io_uring_setup: EPERM (kernel.io_uring_disabled or seccomp)";
			if (verbose)
				ps_log("io_uring unavailable (%s); O_DIRECT I/O uses the plain calls",
				       reason);
		}
	} else if (verbose) {
		ps_log("io_uring ring setup failed in a thread (%s); it uses the plain calls",
		       ps_errno_name(-err) ? ps_errno_name(-err) : "error");
	}
}

/*
 * Move a kept ring descriptor to the upper half of RLIMIT_NOFILE (at most
 * PS_FD_HIGH_MAX, which bounds the fd table the kernel grows for it), so
 * that the program's descriptors are numbered as they would be without us.
 * Records its identity.  0 or -errno (no free number up there).
 */
static int move_fd_high(struct ring *r)
{
	struct rlimit rl;
	long lim = 1024;
	struct stat st;

	/* The identity first: on failure the original is what ring_close_fd() must close. */
	if (PS_SYSCALL(SYS_fstat, r->ring.ring_fd, &st) < 0)
		return -EBADF;
	r->fd_dev = st.st_dev;
	r->fd_ino = st.st_ino;
	if (PS_SYSCALL(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) == 0)
		lim = rl.rlim_cur > (rlim_t)PS_FD_HIGH_MAX * 2 ? PS_FD_HIGH_MAX * 2 : (long)rl.rlim_cur;
	long fd = PS_SYSCALL(SYS_fcntl, r->ring.ring_fd, F_DUPFD_CLOEXEC, lim / 2);
	if (fd < 0)
		return (int)fd;
	ps_sys_close(r->ring.ring_fd);
	r->ring.ring_fd = (int)fd;
	if (!r->regd)
		r->ring.enter_ring_fd = (int)fd;
	return 0;
}

/* The calling thread's ring, created on first use; NULL when unavailable. */
static struct ring *get_ring(void)
{
	struct ring *r = &tls_ring;
	int pid = current_pid();

	if (ps_likely(r->pid == pid))
		return r;
	/* Made by the thread we were forked from, in a child that ran no atfork handler. */
	if (r->pid)
		ring_forget(r);
	if (r->failed)
		return NULL;

	struct io_uring_params p;
	unsigned entries = depth * 2 < 8 ? 8 : depth * 2;
	static const unsigned flag_sets[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int ret = -EINVAL;
	for (size_t i = 0; i < PS_ARRAY_SIZE(flag_sets); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = flag_sets[i];
		ret = io_uring_queue_init_params(entries, &r->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret < 0) {
		r->failed = true;
		give_up(ret);
		return NULL;
	}
	r->pid = pid;
	r->regd = io_uring_register_ring_fd(&r->ring) == 1;
	/* The test build's POOLSHIM_URING_TEST=keepfd: behave as before Linux 6.3. */
	if (r->regd && test_mode != PS_URING_TEST_KEEPFD)
		drop_ring_fd(r);
	__atomic_add_fetch(&rings, 1, __ATOMIC_RELAXED);
	if (!r->fdless && (ret = move_fd_high(r)) < 0) {
		if (verbose)
			ps_log("no free descriptor in the upper half of RLIMIT_NOFILE for an io_uring "
			       "ring (%s); this thread uses the plain calls",
			       ps_errno_name(-ret) ? ps_errno_name(-ret) : "error");
		ring_drop(r);
		return NULL;
	}
	return r;
}

/*
 * Queue limits of the block devices files were read from, one slot per
 * device, filled on its first read and never changed (a device's limits
 * are set when it is probed).  Slots are claimed with an atomic counter
 * and published by their key, so lookups take no lock; two threads
 * meeting a new device at once may both fill a slot, which is harmless.
 * When the slots run out, further devices get the configured chunk.
 */
#define PS_DEV_SLOTS 16
#define PS_DEV_CHUNK_MIN ((uint64_t)64 << 10)   /* smaller limits: the kernel splits anyway */

struct dev_limit {
	uint64_t key;            /* dev_t + 1, published last; 0: not filled yet */
	uint64_t max_bytes;      /* max_sectors_kb in bytes; 0: no block queue found */
	uint32_t nr_requests;    /* 0: unknown */
};

static struct dev_limit dev_limits[PS_DEV_SLOTS];
static unsigned dev_claimed;

/* A decimal number from a sysfs file; 0 when it cannot be read. */
static uint64_t sys_number(const char *path)
{
	char text[32];
	long fd = ps_sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	long n = ps_sys_read((int)fd, text, sizeof(text) - 1);
	ps_sys_close((int)fd);
	uint64_t v = 0;
	for (long i = 0; i < n && text[i] >= '0' && text[i] <= '9'; i++)
		v = v * 10 + (uint64_t)(text[i] - '0');
	return v;
}

/* /sys/dev/block/MAJ:MIN/{,../}queue/NAME into out[cap] (../: a partition's disk). */
static const char *queue_path(char *out, size_t cap, dev_t dev, bool parent, const char *name)
{
	struct ps_buf b;

	ps_buf_init(&b, out, cap, -1);
	ps_buf_printf(&b, "/sys/dev/block/%u:%u/%squeue/%s", major(dev), minor(dev),
		      parent ? "../" : "", name);
	return ps_buf_str(&b);
}

static void read_limits(dev_t dev, struct dev_limit *l)
{
	char path[96];

	for (int parent = 0; parent < 2 && !l->max_bytes; parent++) {
		l->max_bytes = sys_number(queue_path(path, sizeof(path), dev, parent, "max_sectors_kb"))
			       << 10;
		if (l->max_bytes)
			l->nr_requests = (uint32_t)sys_number(
				queue_path(path, sizeof(path), dev, parent, "nr_requests"));
	}
}

/* The limits of dev, read on first use; NULL when no slot is left. */
static const struct dev_limit *dev_limits_of(dev_t dev)
{
	uint64_t key = (uint64_t)dev + 1;
	unsigned n = __atomic_load_n(&dev_claimed, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n && i < PS_DEV_SLOTS; i++)
		if (__atomic_load_n(&dev_limits[i].key, __ATOMIC_ACQUIRE) == key)
			return &dev_limits[i];
	unsigned i = __atomic_fetch_add(&dev_claimed, 1, __ATOMIC_ACQ_REL);
	if (i >= PS_DEV_SLOTS)
		return NULL;
	read_limits(dev, &dev_limits[i]);
	__atomic_store_n(&dev_limits[i].key, key, __ATOMIC_RELEASE);
	if (verbose && dev_limits[i].max_bytes)
		ps_log("io_uring: reads on block device %u:%u go in chunks of up to %lu KiB "
		       "(its max_sectors_kb; nr_requests %u)", major(dev), minor(dev),
		       (unsigned long)(dev_limits[i].max_bytes >> 10), dev_limits[i].nr_requests);
	else if (verbose)
		ps_log("io_uring: no block queue for device %u:%u; its reads go in chunks of "
		       "POOLSHIM_URING_CHUNK", major(dev), minor(dev));
	return &dev_limits[i];
}

/*
 * The chunk a read of len bytes is split into: the device's largest
 * request, in at most min(depth, nr_requests) chunks; the configured
 * chunk when it was given or the device is unknown.  dev_key is the
 * file's device + 1 as the router found it (0: not known): no fstat here.
 */
static size_t read_chunk(uint64_t dev_key, size_t len)
{
	if (chunk_set || len <= PS_DEV_CHUNK_MIN || !dev_key)
		return chunk_len;
	const struct dev_limit *l = dev_limits_of((dev_t)(dev_key - 1));
	if (!l || !l->max_bytes)
		return chunk_len;
	uint64_t chunk = l->max_bytes < PS_DEV_CHUNK_MIN ? PS_DEV_CHUNK_MIN
							  : l->max_bytes & ~(uint64_t)(PS_ALIGN - 1);
	unsigned most = l->nr_requests && l->nr_requests < depth ? l->nr_requests : depth;
	if ((len + chunk - 1) / chunk > most)
		chunk = ((len + most - 1) / most + PS_ALIGN - 1) & ~(uint64_t)(PS_ALIGN - 1);
	return (size_t)chunk;
}

struct piece {
	void *buf;
	size_t len;
	off_t off;
};

/*
 * The test build's POOLSHIM_URING_TEST=short_submit/stuck_submit: what
 * liburing's submit does, except that the kernel is offered only part of
 * the queued SQEs, as when it stops early on its own.  short: one SQE on a
 * wave's first try, the rest on the next; stuck: one, then none.
 */
static int push_for_test(struct ring *r, unsigned left, bool first)
{
	struct io_uring_sq *sq = &r->ring.sq;
	unsigned take = left;

	if (first && left > 1)
		take = 1;
	else if (!first && test_mode == PS_URING_TEST_STUCK)
		return 0;
	if (sq->sqe_head != sq->sqe_tail) {
		sq->sqe_head = sq->sqe_tail;
		io_uring_smp_store_release(sq->ktail, sq->sqe_tail);
	}
	unsigned flags = (take == left ? IORING_ENTER_GETEVENTS : 0) |
			 (r->regd ? IORING_ENTER_REGISTERED_RING : 0);
	return (int)PS_SYSCALL(SYS_io_uring_enter, r->ring.enter_ring_fd, take,
			       take == left ? left : 0, flags, NULL, 0);
}

/*
 * Offer the kernel the left SQEs still queued and wait for them: how many
 * it took (it may take fewer, and then returns at once), or -errno.
 */
static int push(struct ring *r, unsigned left, bool first)
{
	bool for_test = test_mode == PS_URING_TEST_SHORT || test_mode == PS_URING_TEST_STUCK;
	int ret = ps_unlikely(for_test) ? push_for_test(r, left, first)
					: io_uring_submit_and_wait(&r->ring, left);
	/* Interrupted before taking anything: offer them again, without waiting. */
	while (ret == -EINTR)
		ret = io_uring_submit_and_wait(&r->ring, 0);
	return ret;
}

/*
 * Reap n completions into res[] (by user_data, an index below wave).  0,
 * or -errno if the ring cannot deliver them, or it is no longer ours: a
 * fork() from a signal handler that interrupted this call, whose child
 * must not take completions that belong to its parent.
 */
static int reap(struct ring *r, int n, int32_t *res, int wave)
{
	for (int got = 0; got < n;) {
		struct io_uring_cqe *cqe;
		if (ps_unlikely(r->pid != current_pid()))
			return -ECHILD;
		int ret = io_uring_wait_cqe(&r->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			return ret;
		if (cqe->user_data < (__u64)wave)
			res[cqe->user_data] = cqe->res;
		io_uring_cqe_seen(&r->ring, cqe);
		got++;
	}
	return 0;
}

/*
 * Queue pieces [0, wave) of pc as SQEs; a write wave is one link chain.
 * Plain READ/WRITE: the kernel pins the program's pages of the moment,
 * with their protection, for each request (see the head of this file).
 */
static void prep_wave(struct ring *r, int fd, const struct piece *pc, int wave, bool write)
{
	for (int i = 0; i < wave; i++) {
		const struct piece *p = &pc[i];
		struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
		if (write)
			io_uring_prep_write(sqe, fd, p->buf, (unsigned)p->len, (__u64)p->off);
		else
			io_uring_prep_read(sqe, fd, p->buf, (unsigned)p->len, (__u64)p->off);
		/*
		 * Unlinked, a later chunk lands while an earlier one fails (the
		 * disk fills up): bytes past the prefix the call returns.  Linked,
		 * a failed or short chunk cancels the rest, as pwrite stops.
		 */
		if (write && i + 1 < wave)
			sqe->flags |= IOSQE_IO_LINK;
		sqe->user_data = (__u64)i;
	}
}

/*
 * Submit pieces (in waves) and reap them all; contiguous prefix or
 * -1/errno, as pread/pwrite.  PS_NOT_TAKEN when nothing ran: the caller makes the
 * real call.
 */
static ssize_t submit_pieces(struct ring *r, int fd, const struct piece *pc, int n, bool write)
{
	struct ps_tstats *t = ps_stats_mine();
	ssize_t total = 0;
	int first_err = 0;
	bool stop = false;

	if (n > 1 && t)
		PS_ADD(t->uring.split_calls, 1);
	for (int base = 0; base < n && !stop; base += (int)depth) {
		int wave = n - base < (int)depth ? n - base : (int)depth;
		int32_t res[256];
		prep_wave(r, fd, &pc[base], wave, write);
		int sent = 0;

		for (int i = 0; i < wave; i++)
			res[i] = -ECANCELED;
		/* Reap what the kernel took before offering the rest: writes stay in order. */
		while (sent < wave) {
			int took = push(r, (unsigned)(wave - sent), sent == 0);
			if (took <= 0)
				break;
			if (t) {
				PS_ADD(t->uring.enters, 1);
				PS_ADD(t->uring.sqes, (uint64_t)took);
				ps_hist_add(t->uring.sqes_per_enter, PS_SQE_BUCKETS, (uint64_t)took);
			}
			if (reap(r, took, res, wave) < 0)
				break;
			sent += took;
		}
		for (int i = 0; i < sent && !stop; i++) {
			if (res[i] == -EFAULT) {
				/*
				 * A page of the buffer the kernel could not
				 * pin (protected or unmapped behind our back,
				 * by raw system call): one O_DIRECT call fails
				 * whole with EFAULT, whatever it did before.
				 */
				total = 0;
				first_err = EFAULT;
				stop = true;
			} else if (res[i] < 0) {
				if (total == 0)
					first_err = -res[i];
				stop = true;
			} else {
				total += res[i];
				if ((size_t)res[i] < pc[base + i].len)
					stop = true;
			}
		}
		if (sent == wave)
			continue;
		/*
		 * The kernel left SQEs of this wave queued (they would go out
		 * with the ring's next use) or the ring failed: drop it, with
		 * nothing in flight, and finish with the plain calls, in order.
		 */
		ring_drop(r);
		ps_stats_uring_fallback(PS_UFB_ERROR);
		if (!stop && base + sent == 0)
			return PS_NOT_TAKEN;
		for (int k = base + sent; k < n && !stop; k++) {
			long v = PS_SYSCALL(write ? SYS_pwrite64 : SYS_pread64, fd, pc[k].buf, pc[k].len,
					    pc[k].off);
			if (v < 0 && total == 0)
				first_err = (int)-v;
			if (v > 0)
				total += v;
			stop = v < 0 || (size_t)v < pc[k].len;
		}
		break;
	}
	if (total == 0 && first_err) {
		errno = first_err;
		return -1;
	}
	return total;
}

/* Mark the thread's ring busy; false (counted) when it already is: a signal handler's call. */
static bool claim_ring(void)
{
	if (ps_unlikely(tls_busy)) {
		ps_stats_uring_fallback(PS_UFB_NESTED);
		return false;
	}
	tls_busy = 1;
	/* The handler runs on this thread: ordering against it is the compiler's alone. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return true;
}

static void release_ring(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	tls_busy = 0;
}

static ssize_t rw_claimed(int fd, void *buf, size_t len, off_t off, bool write, uint64_t dev_key)
{
	struct ring *r = get_ring();
	if (!r) {
		ps_stats_uring_fallback(PS_UFB_SETUP);
		return PS_NOT_TAKEN;
	}

	struct piece pc[256];
	/* A write is one SQE (see the head of this file); len is at most PS_SLAB_MAX (ps_uring_rw). */
	size_t chunk = write ? len : read_chunk(dev_key, len);
	int n = (int)((len + chunk - 1) / chunk);
	if (n > (int)PS_ARRAY_SIZE(pc)) {
		chunk = ((len + PS_ARRAY_SIZE(pc) - 1) / PS_ARRAY_SIZE(pc) + PS_ALIGN - 1) &
			~(size_t)(PS_ALIGN - 1);
		n = (int)((len + chunk - 1) / chunk);
	}
	for (int i = 0; i < n; i++) {
		size_t at = (size_t)i * chunk;
		pc[i] = (struct piece){ (char *)buf + at, len - at < chunk ? len - at : chunk,
					off + (off_t)at };
	}
	return submit_pieces(r, fd, pc, n, write);
}

static ssize_t rwv_claimed(int fd, const struct iovec *iov, int iovcnt, off_t off, bool write)
{
	struct piece pc[256];
	size_t total = 0;

	struct ring *r = get_ring();
	if (!r) {
		ps_stats_uring_fallback(PS_UFB_SETUP);
		return PS_NOT_TAKEN;
	}
	for (int i = 0; i < iovcnt; i++) {
		const struct iovec *v = &iov[i];
		struct ps_pool_range where;
		/* The first segment passed ps_uring_eligible(): not looked up again. */
		if (i > 0 && (((uintptr_t)v->iov_base | v->iov_len) & (PS_ALIGN - 1) || v->iov_len == 0 ||
			      !ps_pool_range_of(v->iov_base, v->iov_len, &where) || where.protected))
			return PS_NOT_TAKEN;
		pc[i] = (struct piece){ v->iov_base, v->iov_len, off + (off_t)total };
		total += v->iov_len;
		/* The kernel cuts a longer call short at MAX_RW_COUNT: its answer to give. */
		if (total > (uint64_t)PS_MAX_RW || total > (uint64_t)INT64_MAX - (uint64_t)off)
			return PS_NOT_TAKEN;
	}
	return submit_pieces(r, fd, pc, iovcnt, write);
}

/*
 * Run a call on this thread's ring, claimed for its duration: one buffer
 * (iovcnt 0, split into chunks) or an array (one SQE per segment).
 */
static ssize_t on_ring(int fd, const struct iovec *iov, int iovcnt, off_t off, bool write,
		       uint64_t dev_key)
{
	if (!claim_ring())
		return PS_NOT_TAKEN;
	ssize_t ret = iovcnt == 0 ? rw_claimed(fd, iov->iov_base, iov->iov_len, off, write, dev_key)
				  : rwv_claimed(fd, iov, iovcnt, off, write);
	release_ring();
	return ret;
}

ssize_t ps_uring_rw(int fd, void *buf, size_t len, off_t off, bool write, uint64_t dev_key)
{
	/* A bound for the piece arithmetic: longer calls take the plain path. */
	if (len == 0 || len > PS_SLAB_MAX)
		return PS_NOT_TAKEN;
	return on_ring(fd, &(struct iovec){ buf, len }, 0, off, write, dev_key);
}

ssize_t ps_uring_rwv(int fd, const struct iovec *iov, int iovcnt, off_t off, bool write)
{
	if (off < 0 || iovcnt < 1 || iovcnt > 256)
		return PS_NOT_TAKEN;
	return on_ring(fd, iov, iovcnt, off, write, 0);
}
