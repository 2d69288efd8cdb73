// SPDX-License-Identifier: MIT
/*
 * Per-thread io_uring rings for O_DIRECT I/O on pooled buffers.
 *
 * A ring is created on a thread's first eligible call with SINGLE_ISSUER
 * and DEFER_TASKRUN (COOP_TASKRUN, then no flags, on older kernels) and its
 * fd registered.  Where the kernel takes io_uring_register(2) by registered
 * index (6.3 and later) the ring's descriptor is then closed: the shim holds
 * no descriptor the program could close, dup2 over or count against its
 * RLIMIT_NOFILE, and the program's descriptors are numbered as without us.  Its fixed-buffer table is sparse: slab i of the pool is
 * buffer i, registered the first time the thread sees the slab.  Rings live
 * in thread-local storage and are tagged with the pid that made them, so a
 * fork child never submits to its parent's ring.
 *
 * Requests are submitted in waves of at most POOLSHIM_URING_DEPTH SQEs and
 * every SQE of a wave is reaped before the call returns: a signal never
 * leaves a chunk in flight (O_DIRECT file I/O is not interruptible anyway,
 * so finishing is what the plain syscall would do).
 */
#include "uring.h"

#include <errno.h>
#include <liburing.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compiler.h"
#include "fmt.h"
#include "pool.h"
#include "stats.h"
#include "sys.h"

#define PS_URING_TABLE 4096       /* registered buffer slots (slabs) */
#define PS_ALIGN 4096u            /* anything less passes through to the kernel */

struct ring {
	struct io_uring ring;
	int pid;                  /* process that created it; 0 = none */
	bool failed;              /* setup failed in this thread */
	int seen_slabs;           /* slabs [0, seen_slabs) have been looked at */
	bool have_table;          /* the sparse fixed-buffer table is registered */
	bool fdless;              /* descriptor closed; reached by registered index */
	uint8_t registered[PS_URING_TABLE / 8];
};

#ifndef IORING_REGISTER_USE_REGISTERED_RING
#define IORING_REGISTER_USE_REGISTERED_RING (1U << 31)   /* Linux 6.3 */
#endif

static __thread struct ring tls_ring;
static bool uring_on;
static uint64_t min_len, chunk_len;
static unsigned depth;
static int state = PS_URING_STATE_OK;
static const char *reason;
static uint64_t rings;           /* created, ever */
static uint64_t live_rings;      /* open now */
static bool verbose;
static int process_pid;

void ps_uring_init(const struct ps_config *cfg)
{
	uring_on = cfg->uring != PS_URING_OFF;
	min_len = cfg->uring_min;
	chunk_len = (cfg->uring_chunk + PS_ALIGN - 1) & ~(uint64_t)(PS_ALIGN - 1);
	depth = (unsigned)cfg->uring_depth;
	verbose = cfg->verbose;
	process_pid = (int)PS_SYSCALL(SYS_getpid);
	if (!uring_on) {
		state = PS_URING_STATE_OFF;
		reason = "POOLSHIM_URING=off";
	}
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

/* io_uring_register(2) on r, by registered index once its fd is closed. */
static int ring_register(struct ring *r, unsigned op, const void *arg, unsigned nr)
{
	if (r->fdless)
		return (int)PS_SYSCALL(SYS_io_uring_register, r->ring.enter_ring_fd,
				       op | IORING_REGISTER_USE_REGISTERED_RING, arg, nr);
	return (int)PS_SYSCALL(SYS_io_uring_register, r->ring.ring_fd, op, arg, nr);
}

static int register_sparse_table(struct ring *r)
{
	struct io_uring_rsrc_register reg;

	memset(&reg, 0, sizeof(reg));
	reg.nr = PS_URING_TABLE;
	reg.flags = IORING_RSRC_REGISTER_SPARSE;
	return ring_register(r, IORING_REGISTER_BUFFERS2, &reg, sizeof(reg));
}

static int register_slab(struct ring *r, unsigned slot, const struct iovec *iov)
{
	struct io_uring_rsrc_update2 up;
	__u64 tag = 0;

	memset(&up, 0, sizeof(up));
	up.offset = slot;
	up.data = (__u64)(uintptr_t)iov;
	up.tags = (__u64)(uintptr_t)&tag;
	up.nr = 1;
	return ring_register(r, IORING_REGISTER_BUFFERS_UPDATE, &up, sizeof(up));
}

/*
 * Unmap r and release it.  A descriptor-less ring is unregistered by index
 * first; liburing's own attempt then meets fd -1 and does nothing.
 */
static void ring_exit(struct ring *r)
{
	if (r->fdless) {
		struct io_uring_rsrc_update up;
		memset(&up, 0, sizeof(up));
		up.offset = (__u32)r->ring.enter_ring_fd;
		ring_register(r, IORING_UNREGISTER_RING_FDS, &up, 1);
	}
	io_uring_queue_exit(&r->ring);
}

/*
 * With the ring fd registered, try the buffer table by index: if the
 * kernel takes it, the descriptor is no longer needed.
 */
static void drop_ring_fd(struct ring *r)
{
	r->fdless = true;
	if (register_sparse_table(r) < 0) {
		r->fdless = false;
		return;
	}
	r->have_table = true;
	ps_sys_close(r->ring.ring_fd);
	r->ring.ring_fd = -1;
}

void ps_uring_thread_exit(void)
{
	if (tls_ring.pid && tls_ring.pid == process_pid) {
		ring_exit(&tls_ring);
		__atomic_sub_fetch(&live_rings, 1, __ATOMIC_RELAXED);
	}
	memset(&tls_ring, 0, sizeof(tls_ring));
}

void ps_uring_before_fork(void)
{
	struct ring *r = &tls_ring;

	/*
	 * Long-term pinned pages are copied into the child at fork: drop this
	 * thread's registrations so fork stays cheap; they come back on the
	 * next eligible call.
	 */
	if (r->pid && r->pid == process_pid && r->have_table) {
		ring_register(r, IORING_UNREGISTER_BUFFERS, NULL, 0);
		r->have_table = false;
		r->seen_slabs = 0;
		memset(r->registered, 0, sizeof(r->registered));
	}
}

void ps_uring_after_fork_child(void)
{
	process_pid = (int)PS_SYSCALL(SYS_getpid);
	/*
	 * The forking thread's ring belongs to the parent: unmap our copy of it
	 * (registered indexes are not inherited; a kept fd is ours to close).
	 */
	if (tls_ring.pid) {
		io_uring_queue_exit(&tls_ring.ring);
		memset(&tls_ring, 0, sizeof(tls_ring));
	}
}

bool ps_uring_eligible(const void *buf, size_t len, off_t off, bool positional)
{
	if (!uring_on)
		return false;
	if (len < min_len) {
		ps_stats_uring_fallback(PS_UFB_SMALL);
		return false;
	}
	if (!ps_pool_within_slab(buf, len)) {
		ps_stats_uring_fallback(PS_UFB_NOT_POOLED);
		return false;
	}
	if (ps_pool_slab_protected(ps_pool_slab_of(buf))) {
		ps_stats_uring_fallback(PS_UFB_PROTECTED);
		return false;
	}
	/* An end past the largest offset is the kernel's EINVAL to give. */
	if (positional && (uint64_t)off > (uint64_t)INT64_MAX - len)
		return false;
	/* Misaligned O_DIRECT requests go to the kernel, which says EINVAL exactly. */
	if (((uintptr_t)buf | len | (positional ? (uint64_t)off : 0)) & (PS_ALIGN - 1))
		return false;
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

/* The calling thread's ring, created on first use; NULL when unavailable. */
static struct ring *get_ring(void)
{
	struct ring *r = &tls_ring;

	if (ps_likely(r->pid == process_pid && r->pid != 0))
		return r;
	if (r->failed && r->pid == 0)
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
	r->pid = process_pid;
	r->seen_slabs = 0;
	if (io_uring_register_ring_fd(&r->ring) == 1)
		drop_ring_fd(r);
	__atomic_add_fetch(&rings, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&live_rings, 1, __ATOMIC_RELAXED);
	return r;
}

static bool is_registered(struct ring *r, int slab)
{
	return slab < PS_URING_TABLE && (r->registered[slab / 8] & (1u << (slab % 8)));
}

/*
 * Whether I/O on slab i goes out as plain READ/WRITE SQEs rather than
 * fixed-buffer ones.  hugetlb slabs are never registered: pinning a 2 MiB
 * folio per I/O costs next to nothing, while a registered (long-term
 * pinned) private hugetlb page must be copied at fork, which fails with
 * ENOMEM unless as many free hugetlb pages are left.
 */
static bool plain_slab(int i)
{
	struct ps_slab s;
	return ps_pool_slab(i, &s) && s.backing == PS_BACK_HUGETLB;
}

/* Register slabs this ring has not looked at yet. */
static void sync_slabs(struct ring *r)
{
	int n = ps_pool_nslabs();

	if (r->seen_slabs >= n)
		return;
	if (!r->have_table) {
		if (register_sparse_table(r) < 0)
			return;
		r->have_table = true;
	}
	for (; r->seen_slabs < n && r->seen_slabs < PS_URING_TABLE; r->seen_slabs++) {
		struct ps_slab s;
		int i = r->seen_slabs;
		if (!ps_pool_slab(i, &s))
			break;
		if (s.backing == PS_BACK_HUGETLB)
			continue;
		struct iovec iov = { (void *)s.base, s.len };
		if (register_slab(r, (unsigned)i, &iov) == 1)
			r->registered[i / 8] |= (uint8_t)(1u << (i % 8));
		else if (verbose)
			ps_log("could not register pool slab %d (%zu bytes) with io_uring "
			       "(RLIMIT_MEMLOCK?); I/O on it uses the plain calls", i, s.len);
	}
}

struct piece {
	void *buf;
	size_t len;
	off_t off;
};

/* Submit pieces (in waves) and reap them all; contiguous prefix or -1/errno. */
static ssize_t submit_pieces(struct ring *r, int fd, const struct piece *pc, int n, bool write,
			     int slab_of_all)
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
		unsigned nfixed = 0;

		for (int i = 0; i < wave; i++) {
			const struct piece *p = &pc[base + i];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
			int slab = slab_of_all >= 0 ? slab_of_all : ps_pool_slab_of(p->buf);
			bool fixed = is_registered(r, slab);
			if (fixed && write)
				io_uring_prep_write_fixed(sqe, fd, p->buf, (unsigned)p->len,
							  (__u64)p->off, slab);
			else if (fixed)
				io_uring_prep_read_fixed(sqe, fd, p->buf, (unsigned)p->len,
							 (__u64)p->off, slab);
			else if (write)
				io_uring_prep_write(sqe, fd, p->buf, (unsigned)p->len, (__u64)p->off);
			else
				io_uring_prep_read(sqe, fd, p->buf, (unsigned)p->len, (__u64)p->off);
			nfixed += fixed;
			sqe->user_data = (__u64)i;
			res[i] = -ECANCELED;
		}
		int submitted = io_uring_submit_and_wait(&r->ring, (unsigned)wave);
		while (submitted == -EINTR)
			submitted = io_uring_submit_and_wait(&r->ring, 0);
		if (submitted < 0) {
			/*
			 * Queued SQEs would go out with the next call: drop the
			 * ring.  Nothing of this wave ran.
			 */
			ring_exit(r);
			memset(r, 0, sizeof(*r));
			r->failed = true;
			if (base == 0)
				return -2;
			break;
		}
		if (t) {
			PS_ADD(t->uring.enters, 1);
			PS_ADD(t->uring.sqes, (uint64_t)wave);
			PS_ADD(t->uring.fixed, (uint64_t)nfixed);
			ps_hist_add(t->uring.sqes_per_enter, PS_SQE_BUCKETS, (uint64_t)wave);
		}
		/* Reap every SQE of the wave, whatever happens, before returning. */
		for (int got = 0; got < wave;) {
			struct io_uring_cqe *cqe;
			int ret = io_uring_wait_cqe(&r->ring, &cqe);
			if (ret == -EINTR)
				continue;
			if (ret < 0)
				break;    /* cannot happen with SQEs in flight; do not spin */
			if (cqe->user_data < (__u64)wave)
				res[cqe->user_data] = cqe->res;
			io_uring_cqe_seen(&r->ring, cqe);
			got++;
		}
		for (int i = 0; i < wave && !stop; i++) {
			if (res[i] < 0) {
				if (total == 0 && base + i == 0)
					first_err = -res[i];
				stop = true;
			} else {
				total += res[i];
				if ((size_t)res[i] < pc[base + i].len)
					stop = true;
			}
		}
	}
	if (total == 0 && first_err) {
		errno = first_err;
		return -1;
	}
	return total;
}

ssize_t ps_uring_rw(int fd, void *buf, size_t len, off_t off, bool write)
{
	struct ring *r = get_ring();
	if (!r) {
		ps_stats_uring_fallback(PS_UFB_SETUP);
		return -2;
	}
	sync_slabs(r);
	int slab = ps_pool_slab_of(buf);
	if (!is_registered(r, slab) && !plain_slab(slab)) {
		ps_stats_uring_fallback(PS_UFB_REGISTER);
		return -2;
	}

	struct piece pc[256];
	size_t chunk = chunk_len;
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
	return submit_pieces(r, fd, pc, n, write, slab);
}

ssize_t ps_uring_rwv(int fd, const struct iovec *iov, int iovcnt, off_t off, bool write)
{
	struct piece pc[256];
	size_t total = 0;

	if (off < 0 || iovcnt < 1 || iovcnt > (int)PS_ARRAY_SIZE(pc))
		return -2;
	struct ring *r = get_ring();
	if (!r) {
		ps_stats_uring_fallback(PS_UFB_SETUP);
		return -2;
	}
	sync_slabs(r);
	for (int i = 0; i < iovcnt; i++) {
		const struct iovec *v = &iov[i];
		if (((uintptr_t)v->iov_base | v->iov_len) & (PS_ALIGN - 1) || v->iov_len == 0 ||
		    !ps_pool_within_slab(v->iov_base, v->iov_len) ||
		    ps_pool_slab_protected(ps_pool_slab_of(v->iov_base)))
			return -2;
		int slab = ps_pool_slab_of(v->iov_base);
		if (!is_registered(r, slab) && !plain_slab(slab)) {
			ps_stats_uring_fallback(PS_UFB_REGISTER);
			return -2;
		}
		pc[i] = (struct piece){ v->iov_base, v->iov_len, off + (off_t)total };
		total += v->iov_len;
		if (total > (uint64_t)INT64_MAX - (uint64_t)off)
			return -2;
	}
	return submit_pieces(r, fd, pc, iovcnt, write, -1);
}
