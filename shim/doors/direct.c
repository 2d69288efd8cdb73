// SPDX-License-Identifier: MIT
/*
 * Routing O_DIRECT calls on pooled buffers to io_uring (direct.h).  An
 * eligible call's route is the router's (route.c): measured per device,
 * the plain call unless the ring was cheaper.  The plain route adds no
 * system call but on a descriptor's first call in a thread (and every
 * 256th), when fstat learns its device and F_GETFL checks its kind; the
 * ring route asks F_GETFL on every call, as before the router.
 *
 * pread, pwrite, preadv and pwritev are cancellation points (pthreads(7)),
 * and the ring's wait is not: glibc sends no SIGCANCEL to a thread in
 * deferred mode outside a cancellable system call, it only marks it.  So a
 * call taken here acts on a pending cancel where the real call would: on
 * entry (before anything is submitted), and once every SQE of the call is
 * reaped and counted (the I/O done, as a plain O_DIRECT call finishes its
 * uninterruptible wait before the cancel signal's handler runs).  Nothing
 * is left in flight and the ring is released when the thread unwinds; a
 * thread with cancellation disabled sees no change.
 */
#include "doors/direct.h"

#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>

#include "doors/iocount.h"
#include "format/sys.h"

/*
 * Under a finite RLIMIT_FSIZE a write crossing the limit is cut short, but
 * one starting past it raises SIGXFSZ: split chunks would turn the first
 * case into the second.  Such writes stay plain.  Asked each time: another
 * process may change our limit with prlimit(2).
 */
static bool file_size_limited(void)
{
	struct rlimit rl;
	return PS_SYSCALL(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) == 0 &&
	       rl.rlim_cur != RLIM_INFINITY;
}

/*
 * The table can be stale if libc closed and reused the number behind our
 * back, or be told O_DIRECT for a FIFO (F_SETFL); and O_APPEND writes must
 * not be split or reordered.  Asked of the kernel, only for calls the ring
 * would take.
 */
static bool direct_now(int fd, bool write)
{
	return ps_fd_is_direct_now(fd, write) && !(write && file_size_limited());
}

/*
 * The ring's answer r (a result, never PS_NOT_TAKEN) for a call of len
 * bytes started at t0, with the caller's errno saved.  A cancel that came
 * while the call ran takes effect now, the call counted (see the head of
 * this file).
 */
static ssize_t ring_done(enum ps_call call, int fd, size_t len, int saved, uint64_t t0,
			 ssize_t r)
{
	if (r >= 0)
		errno = saved;
	ps_io_end(call, fd, len, r, r, t0);
	pthread_testcancel();
	return r;
}

/*
 * The ring route of a call the router sent there: rc's route falls back
 * to plain (PS_NOT_TAKEN) when the descriptor is no longer what the ring
 * may take (asked of the kernel unless the caller just did: rc->fresh),
 * or the ring did not take the call.
 */
static ssize_t on_ring(struct ps_route_call *rc, enum ps_call call, int fd, const struct iovec *iov,
		       int n, size_t len, off_t off, bool write)
{
	if (!rc->fresh && !direct_now(fd, write)) {
		rc->slot = -1;          /* not an eligible call after all */
		return PS_NOT_TAKEN;
	}
	/* A cancel already pending stops the call before it starts, as in libc. */
	pthread_testcancel();
	int saved = errno;
	uint64_t t0 = ps_io_begin_always();
	uint64_t dev_key = rc->dev_known ? (uint64_t)rc->dev + 1 : 0;
	ssize_t r = n ? ps_uring_rwv(fd, iov, n, off, write)
		      : ps_uring_rw(fd, iov->iov_base, len, off, write, dev_key);
	if (r == PS_NOT_TAKEN) {
		errno = saved;
		ps_route_fall_back(rc);
		return r;
	}
	ps_route_end(rc, r);
	return ring_done(call, fd, len, saved, t0, r);
}

ssize_t ps_direct_rw(struct ps_route_call *rc, enum ps_call call, int fd, void *buf, size_t len,
		     off_t off, bool write)
{
	rc->slot = -1;
	if (!ps_uring_eligible(buf, len, off, off != -1))
		return PS_NOT_TAKEN;
	enum ps_route route = ps_route_begin(rc, fd, write);
	/*
	 * A descriptor new to this thread's device cache (or due for its
	 * recheck) is asked of the kernel whatever the route: its kind may
	 * have been learnt from flags alone (F_SETFL gives a FIFO O_DIRECT),
	 * and the number reused behind the table's back.  The plain route's
	 * other calls make no system call of their own.
	 */
	if (rc->fresh && !direct_now(fd, write)) {
		rc->slot = -1;
		return PS_NOT_TAKEN;
	}
	if (route == PS_ROUTE_PLAIN)
		return PS_NOT_TAKEN;
	return on_ring(rc, call, fd, &(struct iovec){ buf, len }, 0, len, off, write);
}

/*
 * Copy the program's iovec array without trusting it: the kernel answers
 * EFAULT for an unreadable one, and so must we (never SIGSEGV).  0 or -1.
 */
static int copy_iov(struct iovec *dst, const struct iovec *src, int n)
{
	struct iovec local = { dst, sizeof(*dst) * (size_t)n };
	struct iovec remote = { (void *)src, sizeof(*src) * (size_t)n };
	long pid = PS_SYSCALL(SYS_getpid);
	long got = PS_SYSCALL(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0);
	return got == (long)local.iov_len ? 0 : -1;
}

ssize_t ps_direct_rwv(struct ps_route_call *rc, enum ps_call call, int fd,
		      const struct iovec *user_iov, int n, off_t off, bool write)
{
	struct iovec iov[64];

	rc->slot = -1;
	if (off < 0 || n < 1 || n > (int)PS_ARRAY_SIZE(iov) || !ps_uring_usable())
		return PS_NOT_TAKEN;
	/*
	 * Copying the array costs two system calls (getpid, process_vm_readv),
	 * ones a seccomp allow-list may not expect: made only when the call
	 * may take the ring or is measured.  A call the plain route takes
	 * unmeasured is not counted by route: whether it was eligible is not
	 * known without the copy.
	 */
	enum ps_route route = ps_route_begin(rc, fd, write);
	if (rc->fresh && !direct_now(fd, write)) {      /* as in ps_direct_rw() */
		rc->slot = -1;
		return PS_NOT_TAKEN;
	}
	if (route == PS_ROUTE_PLAIN && !rc->sample) {
		rc->slot = -1;
		return PS_NOT_TAKEN;
	}
	if (copy_iov(iov, user_iov, n) < 0 ||
	    !ps_uring_eligible(iov[0].iov_base, iov[0].iov_len, off, true)) {
		rc->slot = -1;
		return PS_NOT_TAKEN;
	}
	if (rc->route == PS_ROUTE_PLAIN)
		return PS_NOT_TAKEN;
	return on_ring(rc, call, fd, iov, n, ps_iov_bytes(iov, n), off, write);
}
