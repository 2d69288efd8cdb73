/* SPDX-License-Identifier: MIT */
/*
 * Counting the I/O calls that pass through to libc: the gate every
 * interposer decrements, the timing sample, and the count itself against
 * the descriptor's kind.  The common case (shim on, thread has its block,
 * call untimed, succeeded, kind known) is inline and costs a decrement,
 * a branch, a table load and two adds; everything else is out of line in
 * iocount.c, reached by a tail call so that the fast path keeps no
 * register across the real call beyond the descriptor and the size.
 * Nothing here makes a system call, takes a lock or changes errno.
 */
#ifndef PS_IOCOUNT_H
#define PS_IOCOUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "format/compiler.h"
#include "format/config.h"
#include "core/fdinfo.h"
#include "format/stats.h"

/*
 * What ps_io_gate_slow() returns besides 0 (untimed) and a TSC reading
 * (timed): the shim is off (call libc, count nothing); or the call must
 * be counted the slow way (the thread has no counter block).  rdtsc never
 * reads that high.
 */
#define PS_IO_OFF UINT64_MAX
#define PS_IO_SLOW (UINT64_MAX - 1)

/* Read the counting options (POOLSHIM_TIMING*, BACKTRACE, URING_MIN).  Once, at start. */
void ps_iocount_init(const struct ps_config *cfg);

/*
 * The pool's decay in time needs a look at the clock now and then from
 * calls that are not the allocator's (alloc.h, ps_alloc_decay_poll):
 * ps_io_gate_slow() looks each time it runs, which is every
 * POOLSHIM_TIMING_SAMPLE calls on average, or every PS_IO_POLL_CALLS
 * calls untimed.  The quiet doors (nothing reads the counters) count down
 * ps_io_quiet_gate for it alone and call ps_io_quiet_slow() at 0.
 */
#define PS_IO_POLL_CALLS 64
extern __thread uint32_t ps_io_quiet_gate;
void ps_io_quiet_slow(void);

/* POOLSHIM_TIMING. */
extern PS_HIDDEN bool ps_io_timing;
/*
 * Once at start, when nothing will read the counters (POOLSHIM_STATS=off,
 * POOLSHIM_LIVE=off, no POOLSHIM_DUMP_SIGNAL) or the shim is off, after
 * the real functions are bound: the pass-through doors (io.c) then call
 * libc and count nothing, through the one indirect jump they always make.
 */
void ps_io_go_quiet(void);

/*
 * ps_io_gate ran out: PS_IO_OFF when the shim is off, else 0 for an
 * untimed call or the TSC at its start, and the gate is set again (to the
 * next sampling gap, or to 1 while every call must come here).
 */
uint64_t ps_io_gate_slow(void);

/*
 * Count a finished call the general way: failed, timed (t0 a TSC reading),
 * a call site to capture, or a thread whose gate is shut.  done is the
 * byte count when result is not it.  Returns result.
 */
long ps_io_end(enum ps_call call, int fd, uint64_t request, long result, long done, uint64_t t0);

/*
 * Count a call that passed ps_io_gate_slow() with t0: the timed common
 * case without ps_io_end()'s generality, else ps_io_end().  Returns result.
 */
long ps_io_timed(enum ps_call call, int fd, uint64_t request, long result, long done,
		 uint64_t t0);

/*
 * Reading the TSC twice costs ~35 ns on a VM, 3% of a 1 us syscall: one
 * call in POOLSHIM_TIMING_SAMPLE per thread is timed.  The untimed call
 * pays one decrement and one branch, which also stand for "the shim is
 * on" and "this thread has its block" (ps_io_gate, stats.h).  Returns
 * 0 (untimed), a TSC reading, PS_IO_SLOW or PS_IO_OFF (call libc only).
 */
PS_INLINE uint64_t ps_io_begin(void)
{
	if (ps_likely(--ps_io_gate != 0))
		return 0;
	return ps_io_gate_slow();
}

/* The same, for the io_uring path: always timed, it is never a tiny call. */
static inline uint64_t ps_io_begin_always(void)
{
	return ps_io_timing ? ps_ticks() : 0;
}

/*
 * Count a call that passed the gate untimed, so that no call site is
 * wanted: the common case inline.  entry is fd's table entry, read after
 * the call (pread reads it before, for its io_uring test too); 0,
 * unknown, goes to ps_io_end() for a probe.  Returns result.
 */
PS_INLINE long ps_io_count(enum ps_call call, int fd, uint8_t entry, uint64_t request,
			   long result, long done)
{
	if (ps_likely(result >= 0) && ps_likely(entry != 0)) {
		ps_stats_io_fast(call, (enum ps_fdkind)(entry & PS_FD_KIND_MASK), request, done);
		return result;
	}
	return ps_io_end(call, fd, request, result, done, 0);
}

/* Count a call that went through ps_io_begin(), timed or not. */
PS_INLINE void ps_io_finish(enum ps_call call, int fd, uint64_t request, long result, long done,
			    uint64_t t0)
{
	if (ps_likely(t0 == 0))
		ps_io_count(call, fd, ps_fd_entry(fd), request, result, done);
	else
		ps_io_end(call, fd, request, result, done, t0);
}

/*
 * Bytes asked for by an iovec array.  Read only after the kernel accepted
 * the array (the call succeeded): a bad pointer or count is the kernel's
 * EFAULT/EINVAL to report, not a crash of ours.
 */
static inline size_t ps_iov_bytes(const struct iovec *iov, int n)
{
	size_t total = 0;
	for (int i = 0; iov && i < n; i++)
		total += iov[i].iov_len;
	return total;
}

#endif
