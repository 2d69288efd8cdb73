/* SPDX-License-Identifier: MIT */
/*
 * What each descriptor is (socket, regular file, O_DIRECT file, pipe,
 * other), learnt with fstat + F_GETFL on first use and cached.  The I/O
 * interposers forget an entry whenever the program closes, duplicates onto,
 * creates or re-flags that descriptor.  Lock-free and async-signal-safe.
 */
#ifndef PS_FDINFO_H
#define PS_FDINFO_H

#include <stdbool.h>
#include <stdint.h>

#include "stats.h"

#define PS_FD_CACHE 65536

extern uint8_t ps_fd_cache[PS_FD_CACHE];

/* Look the descriptor up without the cache (two raw syscalls). */
enum ps_fdkind ps_fd_probe(int fd);

static inline enum ps_fdkind ps_fd_kind(int fd)
{
	if ((unsigned)fd >= PS_FD_CACHE)
		return ps_fd_probe(fd);
	uint8_t v = __atomic_load_n(&ps_fd_cache[fd], __ATOMIC_RELAXED);
	if (ps_likely(v != 0))
		return (enum ps_fdkind)(v - 1);
	enum ps_fdkind k = ps_fd_probe(fd);
	/* A closed descriptor is not cached: the number means nothing yet. */
	if (k != PS_FD_NONE)
		__atomic_store_n(&ps_fd_cache[fd], (uint8_t)(k + 1), __ATOMIC_RELAXED);
	return k == PS_FD_NONE ? PS_FD_OTHER : k;
}

static inline void ps_fd_forget(int fd)
{
	if ((unsigned)fd < PS_FD_CACHE)
		__atomic_store_n(&ps_fd_cache[fd], 0, __ATOMIC_RELAXED);
}

/* Forget [lo, hi] (close_range). */
void ps_fd_forget_range(unsigned lo, unsigned hi);

/*
 * Whether fd is open with O_DIRECT right now (one F_GETFL) and, for a
 * write, not O_APPEND.
 */
int ps_fd_is_direct_now(int fd, bool write);

#endif
