// SPDX-License-Identifier: MIT
/*
 * The interposers of the calls that create, close, duplicate or re-flag
 * descriptors.  They count nothing: each tells the kind table (fdinfo.h)
 * what the descriptor is, so that it never has to ask the kernel.  Every
 * one returns what libc returned, errno included: the table is updated
 * with plain stores (a new chunk of it with one raw mmap, once per 65536
 * numbers), never with a system call about the descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "format/compiler.h"
#include "core/fdinfo.h"
#include "doors/real.h"

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dir, const char *path, int flags);
int __openat64_2(int dir, const char *path, int flags);

static int made(int fd, enum ps_fdkind kind)
{
	if (fd >= 0)
		ps_fd_set(fd, kind);
	return fd;
}

static int made_pair(int r, const int fds[2], enum ps_fdkind kind)
{
	if (r == 0) {
		ps_fd_set(fds[0], kind);
		ps_fd_set(fds[1], kind);
	}
	return r;
}

/* The new descriptor's kind is the source's (unknown stays unknown). */
static int duplicated(int from, int to)
{
	if (to >= 0)
		ps_fd_copy(from, to);
	return to;
}

/*
 * The entry is cleared after the call: a probe of another thread that
 * stored a kind for fd while it was still open is erased with it.  (One
 * that stores after this is not: that number's next user is probed again
 * only if it came from a call the shim does not wrap.)
 */
PS_EXPORT int close(int fd)
{
	int r = REAL(close)(fd);
	ps_fd_forget(fd);
	return r;
}

/*
 * A stream with no descriptor (fmemopen, open_memstream, fopencookie) makes
 * fileno fail with EBADF: errno is put back, so that a successful fclose
 * leaves it as libc does.
 */
PS_EXPORT int fclose(FILE *f)
{
	int saved = errno;
	int fd = f ? fileno(f) : -1;
	errno = saved;
	int r = REAL(fclose)(f);
	ps_fd_forget(fd);
	return r;
}

PS_EXPORT int dup(int fd)
{
	return duplicated(fd, REAL(dup)(fd));
}

PS_EXPORT int dup2(int fd, int to)
{
	return duplicated(fd, REAL(dup2)(fd, to));
}

PS_EXPORT int dup3(int fd, int to, int flags)
{
	return duplicated(fd, REAL(dup3)(fd, to, flags));
}

PS_EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	int r = REAL(close_range)(lo, hi, flags);
	/* CLOSE_RANGE_CLOEXEC closes nothing now; exec starts a new table. */
	if (!(flags & CLOSE_RANGE_CLOEXEC))
		ps_fd_forget_range(lo, hi);
	return r;
}

/* fcntl's third argument is an int, a long or a pointer: pass the register on. */
static int do_fcntl(int fd, int cmd, void *arg)
{
	int r = REAL(fcntl)(fd, cmd, arg);
	if (r < 0)
		return r;
	if (cmd == F_SETFL)
		ps_fd_setfl(fd, (int)(intptr_t)arg);
	else if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		duplicated(fd, r);
	return r;
}

/* fcntl and fcntl64 (the same call on a 64-bit system). */
#define PS_FCNTL_DOOR(name)                                                        \
	PS_EXPORT int name(int fd, int cmd, ...)                                   \
	{                                                                          \
		va_list ap;                                                        \
		va_start(ap, cmd);                                                 \
		void *arg = va_arg(ap, void *);                                    \
		va_end(ap);                                                        \
		return do_fcntl(fd, cmd, arg);                                     \
	}
PS_FCNTL_DOOR(fcntl)
PS_FCNTL_DOOR(fcntl64)

/* open's mode is read only when the flags ask for one, as libc does. */
static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

/* The path is read only after the kernel took it. */
PS_INLINE int opened(int fd, const char *path, int flags)
{
	if (ps_likely(fd >= 0))
		ps_fd_set(fd, ps_fd_open_kind(path, flags));
	return fd;
}

/*
 * open, openat and their 64 twins (the same calls on a 64-bit system):
 * params and args with the directory (openat) or without.
 */
#define PS_OPEN_DOOR(name, real, params, args)                                     \
	PS_EXPORT int name params                                                  \
	{                                                                          \
		va_list ap;                                                        \
		va_start(ap, flags);                                               \
		mode_t mode = open_mode(flags, ap);                                \
		va_end(ap);                                                        \
		return opened(REAL(real) args, path, flags);                       \
	}
PS_OPEN_DOOR(open, open, (const char *path, int flags, ...), (path, flags, mode))
PS_OPEN_DOOR(open64, open, (const char *path, int flags, ...), (path, flags, mode))
PS_OPEN_DOOR(openat, openat, (int dir, const char *path, int flags, ...), (dir, path, flags, mode))
PS_OPEN_DOOR(openat64, openat, (int dir, const char *path, int flags, ...),
	     (dir, path, flags, mode))

/* What -D_FORTIFY_SOURCE builds call for open(path, flags) with variable flags. */
PS_EXPORT int __open_2(const char *path, int flags)
{
	return opened(REAL(__open_2)(path, flags), path, flags);
}

PS_EXPORT int __open64_2(const char *path, int flags)
{
	return opened(REAL(__open64_2)(path, flags), path, flags);
}

PS_EXPORT int __openat_2(int dir, const char *path, int flags)
{
	return opened(REAL(__openat_2)(dir, path, flags), path, flags);
}

PS_EXPORT int __openat64_2(int dir, const char *path, int flags)
{
	return opened(REAL(__openat64_2)(dir, path, flags), path, flags);
}

PS_EXPORT int creat(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC;
	return opened(REAL(open)(path, flags, mode), path, flags);
}

PS_EXPORT int creat64(const char *path, mode_t mode)
{
	return creat(path, mode);
}

PS_EXPORT int socket(int domain, int type, int proto)
{
	return made(REAL(socket)(domain, type, proto), PS_FD_SOCKET);
}

PS_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	return made(REAL(accept)(fd, addr, alen), PS_FD_SOCKET);
}

PS_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	return made(REAL(accept4)(fd, addr, alen, flags), PS_FD_SOCKET);
}

PS_EXPORT int pipe(int fds[2])
{
	return made_pair(REAL(pipe)(fds), fds, PS_FD_PIPE);
}

PS_EXPORT int pipe2(int fds[2], int flags)
{
	return made_pair(REAL(pipe2)(fds, flags), fds, PS_FD_PIPE);
}

PS_EXPORT int socketpair(int domain, int type, int proto, int fds[2])
{
	return made_pair(REAL(socketpair)(domain, type, proto, fds), fds, PS_FD_SOCKET);
}
