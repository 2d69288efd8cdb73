// SPDX-License-Identifier: MIT
/*
 * The read/write/recv/send-family interposers: doors only, generated from
 * one pattern where the calls are alike.  Each either hands an eligible
 * O_DIRECT request on a pooled buffer to direct.c, or calls the real libc
 * function and counts the call (iocount.h).  The pass-through path takes
 * no lock, allocates nothing, makes no system call of its own and leaves
 * errno as the real call set it, so it is as async-signal-safe as the
 * call itself.  The calls that create, close or re-flag descriptors are
 * in fdcalls.c.
 */
#include <errno.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "format/compiler.h"
#include "doors/direct.h"
#include "core/fdinfo.h"
#include "doors/start.h"
#include "doors/iocount.h"
#include "doors/real.h"
#include "format/stats.h"

extern void __chk_fail(void) __attribute__((noreturn));

struct io_door {
	void **door;
	void *quiet;
};
extern const struct io_door __start_ps_io_doors[], __stop_ps_io_doors[];

void ps_io_go_quiet(void)
{
	for (const struct io_door *d = __start_ps_io_doors; d < __stop_ps_io_doors; d++)
		__atomic_store_n(d->door, d->quiet, __ATOMIC_RELEASE);
}

/* The fortified entry points a -D_FORTIFY_SOURCE build calls. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);

/*
 * The door of a call that only passes through, and its two halves:
 * do_NAME, the fast path inline (for the fortified twins too), and
 * slow_NAME, out of line, for when the gate runs out (the shim may be
 * off, the call may be timed).  fd is the descriptor counted against;
 * request and done (the bytes asked for and moved) may use r, the
 * result, and after runs on r before counting (forgetting passed
 * descriptors).  Past the gate the shim is on, so real_NAME is bound
 * (ps_real_init() ran first).  slow_NAME is a tail call so that the fast
 * path keeps two registers across the real call and no more.
 *
 * The exported NAME is one indirect jump through door_NAME: counted_NAME,
 * or, once start-up found that nothing reads the counters or the shim is
 * off (ps_io_go_quiet), quiet_NAME, which calls libc and counts nothing
 * (it only counts down to the pool's look at the clock: iocount.h).  Each door
 * lists itself in the ps_io_doors section for ps_io_go_quiet to find.
 */
#define PS_IO_DOOR(type, name, call, fd, request, done, after, params, args)                   \
	static __attribute__((noinline)) type slow_##name params                                \
	{                                                                                       \
		uint64_t t0 = ps_io_gate_slow();                                                \
		type r = REAL(name) args;                                                       \
		after;                                                                          \
		if (t0 == PS_IO_OFF)                                                            \
			return r;                                                               \
		return (type)ps_io_timed(call, fd, request, r, done, t0);                       \
	}                                                                                       \
	PS_INLINE type do_##name params                                                         \
	{                                                                                       \
		if (ps_unlikely(--ps_io_gate == 0))                                             \
			return slow_##name args;                                                \
		type r = real_##name args;                                                      \
		after;                                                                          \
		return (type)ps_io_count(call, fd, ps_fd_entry(fd), request, r, done);          \
	}                                                                                       \
	static type counted_##name params                                                       \
	{                                                                                       \
		return do_##name args;                                                          \
	}                                                                                       \
	static type quiet_##name params                                                         \
	{                                                                                       \
		type r = real_##name args;                                                      \
		after;                                                                          \
		if (ps_unlikely(--ps_io_quiet_gate == 0))                                       \
			ps_io_quiet_slow();                                                     \
		return r;                                                                       \
	}                                                                                       \
	static type (*door_##name) params = counted_##name;                                     \
	static const struct io_door io_door_##name                                              \
		__attribute__((used, section("ps_io_doors"), aligned(sizeof(void *)))) = {      \
			(void **)&door_##name, (void *)quiet_##name };                          \
	PS_EXPORT type name params                                                              \
	{                                                                                       \
		return door_##name args;                                                        \
	}

/* A call of n bytes whose result is its byte count. */
#define PS_IO_PLAIN(name, call, fd, params, args) \
	PS_IO_DOOR(ssize_t, name, call, fd, n, r, (void)0, params, args)

/* A vectored call: the bytes of its array, read only once the kernel took it. */
#define PS_IO_VEC(name, call, iov, cnt, after, params, args) \
	PS_IO_DOOR(ssize_t, name, call, fd, r >= 0 ? ps_iov_bytes(iov, (int)(cnt)) : 0, r, after, \
		   params, args)

/* A multi-message call: only the r headers the kernel filled in are known readable. */
#define PS_IO_MMSG(name, call, after, params, args) \
	PS_IO_DOOR(int, name, call, fd, r > 0 ? mmsg_bytes(vec, r, false) : 0, \
		   r > 0 ? (long)mmsg_bytes(vec, r, true) : r, after, params, args)

static size_t mmsg_bytes(const struct mmsghdr *v, int n, bool done)
{
	size_t total = 0;
	for (int i = 0; v && i < n; i++)
		total += done ? v[i].msg_len
			      : ps_iov_bytes(v[i].msg_hdr.msg_iov, (int)v[i].msg_hdr.msg_iovlen);
	return total;
}

/*
 * Descriptors passed with SCM_RIGHTS take numbers the table may know under
 * another kind (closed behind its back): they are of unknown origin.  Read
 * only after a successful call, when the kernel has written the control
 * data into the program's buffer.
 */
static void forget_passed_fds(const struct msghdr *msg)
{
	if (ps_likely(msg->msg_control == NULL) || msg->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c && c->cmsg_len >= CMSG_LEN(0);
	     c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const unsigned char *data = CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, data + i * sizeof(int), sizeof(fd));
			ps_fd_forget(fd);
		}
	}
}

static void forget_passed_fds_m(const struct mmsghdr *vec, int r)
{
	for (int i = 0; i < r; i++)
		forget_passed_fds(&vec[i].msg_hdr);
}

/*
 * read/write on the file position stay plain: io_uring does not keep the
 * position exactly right for O_DIRECT (async completions), and emulating
 * it with lseek would not be atomic.
 */
PS_IO_PLAIN(read, PS_CALL_READ, fd, (int fd, void *buf, size_t n), (fd, buf, n))
PS_IO_PLAIN(write, PS_CALL_WRITE, fd, (int fd, const void *buf, size_t n), (fd, buf, n))
PS_IO_VEC(readv, PS_CALL_READV, iov, n, (void)0, (int fd, const struct iovec *iov, int n),
	  (fd, iov, n))
PS_IO_VEC(writev, PS_CALL_WRITEV, iov, n, (void)0, (int fd, const struct iovec *iov, int n),
	  (fd, iov, n))

/* ---- sockets ------------------------------------------------------------ */

PS_IO_PLAIN(recv, PS_CALL_RECV, fd, (int fd, void *buf, size_t n, int flags), (fd, buf, n, flags))
PS_IO_PLAIN(recvfrom, PS_CALL_RECVFROM, fd,
	    (int fd, void *buf, size_t n, int flags, struct sockaddr *addr, socklen_t *alen),
	    (fd, buf, n, flags, addr, alen))
PS_IO_VEC(recvmsg, PS_CALL_RECVMSG, msg->msg_iov, msg->msg_iovlen,
	  if (r >= 0) forget_passed_fds(msg), (int fd, struct msghdr *msg, int flags),
	  (fd, msg, flags))
PS_IO_MMSG(recvmmsg, PS_CALL_RECVMMSG, forget_passed_fds_m(vec, r),
	   (int fd, struct mmsghdr *vec, unsigned n, int flags, struct timespec *tmo),
	   (fd, vec, n, flags, tmo))
PS_IO_PLAIN(send, PS_CALL_SEND, fd, (int fd, const void *buf, size_t n, int flags),
	    (fd, buf, n, flags))
PS_IO_PLAIN(sendto, PS_CALL_SENDTO, fd,
	    (int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr,
	     socklen_t alen),
	    (fd, buf, n, flags, addr, alen))
PS_IO_VEC(sendmsg, PS_CALL_SENDMSG, msg->msg_iov, msg->msg_iovlen, (void)0,
	  (int fd, const struct msghdr *msg, int flags), (fd, msg, flags))
PS_IO_MMSG(sendmmsg, PS_CALL_SENDMMSG, (void)0,
	   (int fd, struct mmsghdr *vec, unsigned n, int flags), (fd, vec, n, flags))
PS_IO_PLAIN(sendfile, PS_CALL_SENDFILE, out, (int out, int in, off_t *off, size_t n),
	    (out, in, off, n))
PS_IO_PLAIN(splice, PS_CALL_SPLICE, in,
	    (int in, off_t *in_off, int out, off_t *out_off, size_t n, unsigned flags),
	    (in, in_off, out, out_off, n, flags))

PS_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t n)
{
	return do_sendfile(out, in, off, n);
}

/* ---- positional calls, which may go through io_uring -------------------- */

/*
 * pread and pwrite: on a descriptor known to be O_DIRECT, at an offset,
 * io_uring's if it takes the call; else the plain call.  One look at the
 * table serves both the io_uring test and the count.
 */
#define PS_IO_POSITIONAL(name, call, write, buf_t)                                           \
	static __attribute__((noinline)) ssize_t direct_##name(int fd, buf_t buf, size_t n,   \
							       off_t off, uint64_t t0)        \
	{                                                                                     \
		struct ps_route_call rc;                                                      \
		ssize_t r = ps_direct_rw(&rc, call, fd, (void *)buf, n, off, write);          \
		if (r != PS_NOT_TAKEN)                                                        \
			return r;                                                             \
		r = REAL(name)(fd, buf, n, off);                                              \
		ps_route_end(&rc, r);                                                         \
		return ps_io_end(call, fd, n, r, r, t0);                                      \
	}                                                                                     \
	static __attribute__((noinline)) ssize_t slow_##name(int fd, buf_t buf, size_t n,     \
							     off_t off)                       \
	{                                                                                     \
		uint64_t t0 = ps_io_gate_slow();                                              \
		if (t0 == PS_IO_OFF)                                                          \
			return REAL(name)(fd, buf, n, off);                                   \
		if (ps_fd_peek(fd) == PS_FD_DIRECT && off >= 0)                               \
			return direct_##name(fd, buf, n, off, t0);                            \
		ssize_t r = REAL(name)(fd, buf, n, off);                                      \
		return ps_io_timed(call, fd, n, r, r, t0);                                    \
	}                                                                                     \
	PS_INLINE ssize_t do_##name(int fd, buf_t buf, size_t n, off_t off)                   \
	{                                                                                     \
		if (ps_unlikely(--ps_io_gate == 0))                                           \
			return slow_##name(fd, buf, n, off);                                  \
		uint8_t e = ps_fd_entry(fd);                                                  \
		if (ps_unlikely((e & PS_FD_KIND_MASK) == PS_FD_DIRECT) && off >= 0)           \
			return direct_##name(fd, buf, n, off, 0);                             \
		ssize_t r = real_##name(fd, buf, n, off);                                     \
		return ps_io_count(call, fd, e, n, r, r);                                     \
	}                                                                                     \
	PS_EXPORT ssize_t name(int fd, buf_t buf, size_t n, off_t off)                        \
	{                                                                                     \
		return do_##name(fd, buf, n, off);                                            \
	}                                                                                     \
	PS_EXPORT ssize_t name##64(int fd, buf_t buf, size_t n, off_t off)                    \
	{                                                                                     \
		return do_##name(fd, buf, n, off);                                            \
	}

PS_IO_POSITIONAL(pread, PS_CALL_PREAD, false, void *)
PS_IO_POSITIONAL(pwrite, PS_CALL_PWRITE, true, const void *)

/*
 * The positional vectored calls (and their 64 twins), which may go
 * through io_uring too, but only without flags.
 */
#define PS_IO_POSITIONAL_V(name, alias, call, write, params, args, flags)                           \
	PS_EXPORT ssize_t name params                                                         \
	{                                                                                     \
		if (ps_unlikely(!ps_enabled()))                                               \
			return REAL(name) args;                                               \
		struct ps_route_call rc = { .slot = -1 };                                     \
		if ((flags) == 0 && ps_direct_maybe(fd)) {                                    \
			ssize_t r = ps_direct_rwv(&rc, call, fd, iov, n, off, write);         \
			if (r != PS_NOT_TAKEN)                                                \
				return r;                                                     \
		}                                                                             \
		uint64_t t0 = ps_io_begin();                                                  \
		ssize_t r = REAL(name) args;                                                  \
		if (ps_unlikely(rc.slot >= 0))                                                \
			ps_route_end(&rc, r);                                                 \
		ps_io_finish(call, fd, r >= 0 ? ps_iov_bytes(iov, n) : 0, r, r, t0);          \
		return r;                                                                     \
	}                                                                                     \
	PS_EXPORT ssize_t alias params                                                    \
	{                                                                                     \
		return name args;                                                             \
	}

PS_IO_POSITIONAL_V(preadv, preadv64, PS_CALL_PREADV, false,
		   (int fd, const struct iovec *iov, int n, off_t off), (fd, iov, n, off), 0)
PS_IO_POSITIONAL_V(pwritev, pwritev64, PS_CALL_PWRITEV, true,
		   (int fd, const struct iovec *iov, int n, off_t off), (fd, iov, n, off), 0)
PS_IO_POSITIONAL_V(preadv2, preadv64v2, PS_CALL_PREADV2, false,
		   (int fd, const struct iovec *iov, int n, off_t off, int flags),
		   (fd, iov, n, off, flags), flags)
PS_IO_POSITIONAL_V(pwritev2, pwritev64v2, PS_CALL_PWRITEV2, true,
		   (int fd, const struct iovec *iov, int n, off_t off, int flags),
		   (fd, iov, n, off, flags), flags)

/* ---- fortified entry points (-D_FORTIFY_SOURCE) --------------------------- */

PS_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return do_read(fd, buf, n);
}

PS_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return do_pread(fd, buf, n, off);
}

PS_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return do_pread(fd, buf, n, off);
}

PS_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		__chk_fail();
	return do_recv(fd, buf, n, flags);
}

PS_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				 struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		__chk_fail();
	return do_recvfrom(fd, buf, n, flags, addr, alen);
}
