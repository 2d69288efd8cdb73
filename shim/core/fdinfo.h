/* SPDX-License-Identifier: MIT */
/*
 * What each descriptor is (socket, regular file, O_DIRECT file, pipe,
 * other), for the per-kind counters and for choosing io_uring.  The kind is
 * learnt from the call that made the descriptor (io.c wraps socket, accept,
 * pipe, open, dup, fcntl ...), so the pass-through path costs no system
 * call; only a descriptor of unknown origin (inherited, received with
 * SCM_RIGHTS, made by a call the shim does not wrap) is probed, once, with
 * fstat (+ F_GETFL for a regular file).
 *
 * The table has an entry for every possible descriptor number, 0 to
 * INT_MAX, in two levels: an array of chunk pointers, and 64 KiB chunks of
 * one-byte entries, each mapped on the first store into it and never
 * unmapped; numbers below 65536 live in a static first chunk that needs
 * no pointer.  The pointer array (512 KiB) is mapped too, on the first
 * store above 65535: in static memory it counted against an
 * address-space limit in every process, though few have such numbers.
 * Readers take one load below 65536, three above, and no lock; writers
 * publish a new array or chunk with one CAS.  Nothing here allocates with
 * malloc or takes a lock, so every function is async-signal-safe.
 *
 * What the table cannot see: a descriptor opened by path is taken to be a
 * regular file ("/dev/..." paths to be devices), so a FIFO or device node
 * opened outside /dev counts as "file"; it never reaches io_uring, whose
 * check (ps_fd_is_direct_now) confirms the type with fstat once.
 */
#ifndef PS_FDINFO_H
#define PS_FDINFO_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include "format/compiler.h"
#include "format/stats.h"

#define PS_FD_CHUNK_BITS 16
#define PS_FD_CHUNK (1u << PS_FD_CHUNK_BITS)
/*
 * Chunks to cover every unsigned int: Linux allows up to ~2^31 descriptors,
 * and a negative one, seen as unsigned, finds a chunk that is never mapped
 * (the lookup needs no sign test).
 */
#define PS_FD_CHUNKS (1u << (32 - PS_FD_CHUNK_BITS))

/*
 * An entry: 0 = unknown (probe on first use), else an enum ps_fdkind in the
 * low bits and PS_FD_CHECKED once fstat has confirmed the type (a kind
 * learnt from open's flags is only what the flags say).
 */
#define PS_FD_KIND_MASK 0x7fu
#define PS_FD_CHECKED 0x80u

/* The chunk pointers (PS_FD_CHUNKS of them), NULL until a number above 65535 is stored. */
extern uint8_t **ps_fd_chunks;
/*
 * Descriptors 0-65535, the only ones most programs have, in static memory:
 * one compare and one load, no chunk pointer (ps_fd_chunks[0] stays NULL).
 */
extern uint8_t ps_fd_first[PS_FD_CHUNK];

/* The raw entry of fd: 0 when unknown, never probes. */
static inline uint8_t ps_fd_entry(int fd)
{
	if (ps_likely((unsigned)fd < PS_FD_CHUNK))
		return __atomic_load_n(&ps_fd_first[fd], __ATOMIC_RELAXED);
	uint8_t **t = __atomic_load_n(&ps_fd_chunks, __ATOMIC_ACQUIRE);
	uint8_t *c = t ? __atomic_load_n(&t[(unsigned)fd >> PS_FD_CHUNK_BITS], __ATOMIC_ACQUIRE)
		       : NULL;
	return c != NULL ? __atomic_load_n(&c[fd & (PS_FD_CHUNK - 1)], __ATOMIC_RELAXED) : 0;
}

/* The kind recorded for fd, PS_FD_NONE when unknown.  No system call. */
static inline enum ps_fdkind ps_fd_peek(int fd)
{
	return (enum ps_fdkind)(ps_fd_entry(fd) & PS_FD_KIND_MASK);
}

/*
 * What fd is, by fstat (+ F_GETFL), without the table: PS_FD_NONE when fd
 * is not open.  Two raw system calls at most; errno untouched.
 */
enum ps_fdkind ps_fd_probe(int fd);

/* Slow paths of the inline functions below. */
enum ps_fdkind ps_fd_kind_slow(int fd);
void ps_fd_store_slow(int fd, uint8_t v);

/*
 * The kind of fd for counting: the table's entry, or a probe (stored) when
 * unknown.  A descriptor that is not open counts as PS_FD_OTHER.
 */
static inline enum ps_fdkind ps_fd_kind(int fd)
{
	uint8_t v = ps_fd_entry(fd);
	if (ps_likely(v != 0))
		return (enum ps_fdkind)(v & PS_FD_KIND_MASK);
	return ps_fd_kind_slow(fd);
}

/* Set fd's raw entry; maps its chunk when needed (one mmap per 64K numbers). */
static inline void ps_fd_store(int fd, uint8_t v)
{
	if (ps_likely((unsigned)fd < PS_FD_CHUNK)) {
		__atomic_store_n(&ps_fd_first[fd], v, __ATOMIC_RELAXED);
		return;
	}
	if (ps_unlikely(fd < 0))
		return;
	uint8_t **t = __atomic_load_n(&ps_fd_chunks, __ATOMIC_ACQUIRE);
	uint8_t *c = t ? __atomic_load_n(&t[(unsigned)fd >> PS_FD_CHUNK_BITS], __ATOMIC_ACQUIRE)
		       : NULL;
	if (ps_likely(c != NULL))
		__atomic_store_n(&c[fd & (PS_FD_CHUNK - 1)], v, __ATOMIC_RELAXED);
	else if (v != 0)
		ps_fd_store_slow(fd, v);
}

/* fd was just made by a call that says what it is (socket, pipe, ...). */
static inline void ps_fd_set(int fd, enum ps_fdkind kind)
{
	ps_fd_store(fd, (uint8_t)kind);
}

/* fd's number means nothing known any more (closed, or of unknown origin). */
static inline void ps_fd_forget(int fd)
{
	ps_fd_store(fd, 0);
}

/* to was just made a duplicate of from (dup, dup2, dup3, F_DUPFD). */
static inline void ps_fd_copy(int from, int to)
{
	if (from != to)
		ps_fd_store(to, ps_fd_entry(from));
}

/* Forget [lo, hi] (close_range); touches only chunks that exist. */
void ps_fd_forget_range(unsigned lo, unsigned hi);

/*
 * The kind a successful open(path, flags) made: DIRECT with O_DIRECT (the
 * kernel takes it only on regular files and block devices), else FILE;
 * under /dev a device (OTHER), except /dev/shm (files); NONE (probe) where
 * the path may name anything, /dev/fd/N, /dev/stdin, /proc/self/fd/N.
 */
enum ps_fdkind ps_fd_open_kind_slow(const char *path, int flags);

static inline enum ps_fdkind ps_fd_open_kind(const char *path, int flags)
{
	/* Most paths are settled by their first two bytes. */
	if (ps_likely(path != NULL) && path[0] == '/' && (path[1] == 'd' || path[1] == 'p'))
		return ps_fd_open_kind_slow(path, flags);
	return flags & O_DIRECT ? PS_FD_DIRECT : PS_FD_FILE;
}

/* F_SETFL(flags) succeeded on fd: a file's O_DIRECT may have changed. */
void ps_fd_setfl(int fd, int flags);

/*
 * The io_uring path's check: fd is open with O_DIRECT right now (one
 * F_GETFL, which also catches a number reused behind the table's back)
 * and, for a write, not O_APPEND; and it is a regular file or block device
 * (fstat, once per descriptor).  When not, the entry is corrected.
 */
bool ps_fd_is_direct_now(int fd, bool write);

/* Chunks mapped so far (for the unit tests). */
unsigned ps_fd_chunks_mapped(void);

#endif
