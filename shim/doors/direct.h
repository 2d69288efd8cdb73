/* SPDX-License-Identifier: MIT */
/*
 * Whether a positional call on an O_DIRECT descriptor goes through
 * io_uring (uring.c) instead of libc, and its count when it does.  An
 * eligible call's route is the router's (route.h): the caller that makes
 * the plain call ends the route with ps_route_end().
 */
#ifndef PS_DIRECT_H
#define PS_DIRECT_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "format/compiler.h"
#include "core/fdinfo.h"
#include "core/route.h"
#include "format/stats.h"
#include "core/uring.h"

/*
 * Whether fd may go through io_uring: known to be O_DIRECT.  One of
 * unknown origin is probed by its first call's counting, and comes here
 * from the next.  Inline, so that other descriptors pay two loads for it.
 */
static inline bool ps_direct_maybe(int fd)
{
	return ps_unlikely(ps_fd_peek(fd) == PS_FD_DIRECT);
}

/*
 * pread/pwrite (write) of len bytes at buf, offset off >= 0, on an
 * O_DIRECT descriptor: through io_uring when the buffer is pooled,
 * everything lines up and the router sends the call there, counted
 * (timed) under call.  Returns what the real call would, or PS_NOT_TAKEN
 * (errno untouched): make the real call, then ps_route_end(rc, result)
 * (rc->slot is -1 for a call the router does not count).
 */
ssize_t ps_direct_rw(struct ps_route_call *rc, enum ps_call call, int fd, void *buf, size_t len,
		     off_t off, bool write);

/*
 * The same for preadv/pwritev (and their v2 forms with no flags) on the
 * program's iovec array, which is copied first without trusting it, and
 * only when the call may take the ring or is measured.
 */
ssize_t ps_direct_rwv(struct ps_route_call *rc, enum ps_call call, int fd,
		      const struct iovec *iov, int n, off_t off, bool write);

#endif
