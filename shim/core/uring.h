/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend for O_DIRECT file I/O on pooled buffers.  One ring
 * per thread, created on the first eligible call and never inherited across
 * fork; no buffer is registered (plain READ/WRITE SQEs: the kernel sees
 * the program's pages and permissions of the moment; see uring.c's head).
 * A positional request is split into chunks of
 * POOLSHIM_URING_CHUNK submitted together, at most POOLSHIM_URING_DEPTH in
 * flight, and the call returns the contiguous successful prefix, as
 * pread/pwrite would.
 */
#ifndef PS_URING_H
#define PS_URING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "format/config.h"

/* Read the configuration.  Call once at start. */
void ps_uring_init(const struct ps_config *cfg);

/*
 * Whether a call of len bytes at buf (and off, when positional) on an
 * O_DIRECT descriptor can go through io_uring: on, large enough, buffer in
 * pool slabs without a gap and not protected (one lookup, ps_pool_range_of),
 * everything 4 KiB aligned.  Counts the reason when not.
 */
bool ps_uring_eligible(const void *buf, size_t len, off_t off, bool positional);

/*
 * Whether io_uring may be used at all (on, and not found unavailable): a
 * check with no side effect, for callers that must do work (copy an iovec
 * array) before they can ask ps_uring_eligible().
 */
bool ps_uring_usable(void);

/*
 * What the io_uring path returns when it did nothing and the caller must
 * make the real call instead (errno untouched).  -2 is no result a real
 * call gives (they return -1 for every failure).
 */
#define PS_NOT_TAKEN (-2)

/*
 * Do positional I/O (off >= 0), split into chunks.  write selects writes;
 * dev_key is the file's device + 1 (0: unknown), whose largest request
 * sizes a read's chunks.
 * Returns what pread/pwrite would: bytes, or -1 with errno; PS_NOT_TAKEN
 * when the ring is unavailable, or busy (a call from a signal handler that
 * interrupted this thread's own).
 */
ssize_t ps_uring_rw(int fd, void *buf, size_t len, off_t off, bool write, uint64_t dev_key);

/*
 * Vectored positional I/O, one SQE per segment.  Same returns as
 * ps_uring_rw(); PS_NOT_TAKEN also when a segment is not eligible.  The
 * first segment must have passed ps_uring_eligible() (it is not looked up
 * again); the others are checked here.
 */
ssize_t ps_uring_rwv(int fd, const struct iovec *iov, int iovcnt, off_t off, bool write);

/* Thread exit: close the thread's ring (its fd and mappings); no new one after. */
void ps_uring_thread_exit(void);

/*
 * In a fork child: forget the inherited ring, touching nothing the parent
 * uses.  Children that run no atfork handler (_Fork, raw clone) are caught
 * on their first ring lookup instead.
 */
void ps_uring_after_fork_child(void);

/* For the report. */
enum ps_uring_state ps_uring_state(void);
const char *ps_uring_reason(void);
uint64_t ps_uring_rings(void);

#endif
