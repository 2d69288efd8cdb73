/* SPDX-License-Identifier: MIT */
/*
 * Raw system calls for the shim's own I/O (messages, reports, /proc and
 * /sys reads).  They bypass every interposed libc entry point, never touch
 * errno of the caller's call in progress beyond the syscall itself, and are
 * async-signal-safe.  Each returns the result or -errno.
 */
#ifndef PS_SYS_H
#define PS_SYS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/*
 * The page size.  The shim is built for x86-64 only (it reads the TSC),
 * where pages are 4 KiB; huge pages are asked for by their own size.
 */
#define PS_PAGE ((size_t)4096)

static inline long ps_sys_ret(long r)
{
	return r == -1 ? -errno : r;
}

/* Run a raw syscall without disturbing the caller's errno. */
#define PS_SYSCALL(...)                                                    \
	({                                                                 \
		int ps_saved_errno_ = errno;                               \
		long ps_r_ = ps_sys_ret(syscall(__VA_ARGS__));             \
		errno = ps_saved_errno_;                                   \
		ps_r_;                                                     \
	})

static inline long ps_sys_write(int fd, const void *buf, size_t len)
{
	return PS_SYSCALL(SYS_write, fd, buf, len);
}

static inline long ps_sys_read(int fd, void *buf, size_t len)
{
	return PS_SYSCALL(SYS_read, fd, buf, len);
}

static inline long ps_sys_openat(int dirfd, const char *path, int flags, int mode)
{
	return PS_SYSCALL(SYS_openat, dirfd, path, flags, mode);
}

static inline long ps_sys_close(int fd)
{
	return PS_SYSCALL(SYS_close, fd);
}

/* Write all of buf, retrying on EINTR and short writes: 0 or -errno. */
static inline int ps_sys_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		long n = ps_sys_write(fd, p, len);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

/*
 * A word on a page of its own marked MADV_WIPEONFORK, set to 1: it reads 0
 * in any child with an address space of its own, whether or not atfork
 * handlers ran.  NULL, and -errno in *err, when the page cannot be had
 * (-EINVAL: the kernel has no MADV_WIPEONFORK, before 4.14).  Raw system
 * calls only: async-signal-safe.
 */
static inline volatile int *ps_sys_fork_canary(int *err)
{
	long page = PS_SYSCALL(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page < 0) {
		*err = (int)page;
		return NULL;
	}
	long r = PS_SYSCALL(SYS_madvise, page, 4096, MADV_WIPEONFORK);
	if (r != 0) {
		PS_SYSCALL(SYS_munmap, page, 4096);
		*err = (int)r;
		return NULL;
	}
	*(volatile int *)page = 1;
	*err = 0;
	return (volatile int *)page;
}

/* Clock c in nanoseconds (the vDSO's for the monotonic clocks: no system call). */
static inline uint64_t ps_clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
