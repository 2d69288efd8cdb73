// SPDX-License-Identifier: MIT
/*
 * Routing O_DIRECT calls on pooled buffers to io_uring (direct.h).
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
#include "direct.h"

#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>

#include "iocount.h"
#include "sys.h"

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
 * The ring's answer r for a call of len bytes started at t0, with the
 * caller's errno saved.  A cancel that came while the call ran takes
 * effect now, the call counted (see the head of this file).
 */
static ssize_t ring_done(enum ps_call call, int fd, size_t len, int saved, uint64_t t0,
			 ssize_t r)
{
	if (r == PS_NOT_TAKEN || r >= 0)
		errno = saved;
	if (r != PS_NOT_TAKEN) {
		ps_io_end(call, fd, len, r, r, t0);
		pthread_testcancel();
	}
	return r;
}

ssize_t ps_direct_rw(enum ps_call call, int fd, void *buf, size_t len, off_t off, bool write)
{
	if (!ps_uring_eligible(buf, len, off, off != -1) || !direct_now(fd, write))
		return PS_NOT_TAKEN;
	/* A cancel already pending stops the call before it starts, as in libc. */
	pthread_testcancel();
	int saved = errno;
	uint64_t t0 = ps_io_begin_always();
	return ring_done(call, fd, len, saved, t0, ps_uring_rw(fd, buf, len, off, write));
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

ssize_t ps_direct_rwv(enum ps_call call, int fd, const struct iovec *user_iov, int n, off_t off,
		      bool write)
{
	struct iovec iov[64];

	/*
	 * Copying the array costs a system call (process_vm_readv), one a
	 * seccomp allow-list may not expect: make it only when io_uring may
	 * take the request.
	 */
	if (off < 0 || n < 1 || n > (int)PS_ARRAY_SIZE(iov) || !ps_uring_usable() ||
	    copy_iov(iov, user_iov, n) < 0)
		return PS_NOT_TAKEN;
	if (!ps_uring_eligible(iov[0].iov_base, iov[0].iov_len, off, true) || !direct_now(fd, write))
		return PS_NOT_TAKEN;
	pthread_testcancel();
	int saved = errno;
	uint64_t t0 = ps_io_begin_always();
	return ring_done(call, fd, ps_iov_bytes(iov, n), saved, t0,
			 ps_uring_rwv(fd, iov, n, off, write));
}
