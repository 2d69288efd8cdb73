// SPDX-License-Identifier: MIT
/*
 * The I/O interposers.  Each one either hands an eligible O_DIRECT request
 * on a pooled buffer to uring.c, or calls the real libc function and counts
 * the call (size, result, errno, time) against the descriptor's kind.  The
 * pass-through path takes no lock, allocates nothing, makes no system call
 * of its own and leaves errno as the real call set it, so it is as
 * async-signal-safe as the call itself.  Calls that create, close,
 * duplicate or re-flag descriptors are wrapped only to tell the kind table
 * (fdinfo.h) what each descriptor is, so that it never has to ask the
 * kernel.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "callsite.h"
#include "compiler.h"
#include "fdinfo.h"
#include "fmt.h"
#include "init.h"
#include "io.h"
#include "live.h"
#include "stats.h"
#include "sys.h"
#include "uring.h"

extern void __chk_fail(void) __attribute__((noreturn));

/* The fortified entry points a -D_FORTIFY_SOURCE build calls. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dir, const char *path, int flags);
int __openat64_2(int dir, const char *path, int flags);

#define REAL_FUNCS(X)                                                              \
	X(ssize_t, read, (int, void *, size_t))                                     \
	X(ssize_t, write, (int, const void *, size_t))                              \
	X(ssize_t, pread, (int, void *, size_t, off_t))                             \
	X(ssize_t, pwrite, (int, const void *, size_t, off_t))                      \
	X(ssize_t, readv, (int, const struct iovec *, int))                         \
	X(ssize_t, writev, (int, const struct iovec *, int))                        \
	X(ssize_t, preadv, (int, const struct iovec *, int, off_t))                 \
	X(ssize_t, pwritev, (int, const struct iovec *, int, off_t))                \
	X(ssize_t, preadv2, (int, const struct iovec *, int, off_t, int))           \
	X(ssize_t, pwritev2, (int, const struct iovec *, int, off_t, int))          \
	X(ssize_t, recv, (int, void *, size_t, int))                                \
	X(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *)) \
	X(ssize_t, recvmsg, (int, struct msghdr *, int))                            \
	X(int, recvmmsg, (int, struct mmsghdr *, unsigned, int, struct timespec *)) \
	X(ssize_t, send, (int, const void *, size_t, int))                          \
	X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int))                      \
	X(int, sendmmsg, (int, struct mmsghdr *, unsigned, int))                    \
	X(ssize_t, sendfile, (int, int, off_t *, size_t))                           \
	X(ssize_t, splice, (int, off_t *, int, off_t *, size_t, unsigned))          \
	X(int, close, (int))                                                        \
	X(int, fclose, (FILE *))                                                    \
	X(int, dup, (int))                                                          \
	X(int, dup2, (int, int))                                                    \
	X(int, dup3, (int, int, int))                                               \
	X(int, fcntl, (int, int, ...))                                              \
	X(int, close_range, (unsigned, unsigned, int))                              \
	X(int, open, (const char *, int, ...))                                      \
	X(int, openat, (int, const char *, int, ...))                               \
	X(int, __open_2, (const char *, int))                                       \
	X(int, __open64_2, (const char *, int))                                     \
	X(int, __openat_2, (int, const char *, int))                                \
	X(int, __openat64_2, (int, const char *, int))                              \
	X(int, socket, (int, int, int))                                             \
	X(int, accept, (int, struct sockaddr *, socklen_t *))                       \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int))                 \
	X(int, pipe, (int *))                                                       \
	X(int, pipe2, (int *, int))                                                 \
	X(int, socketpair, (int, int, int, int *))

#define DECLARE_REAL(ret, name, params) static ret(*real_##name) params;
REAL_FUNCS(DECLARE_REAL)

static bool timing;
/* Call sites are captured (POOLSHIM_BACKTRACE): every call takes the slow path. */
static bool sites_wanted;
static uint32_t sample_period;
static uint64_t site_min;

static long missing(void);

void ps_io_init(const struct ps_config *cfg)
{
	bool absent = false;

	/* None left NULL: the pass-through path calls them unchecked. */
#define RESOLVE(ret, name, params)                                                  \
	real_##name = (ret(*) params)dlsym(RTLD_NEXT, #name);                       \
	if (real_##name == NULL) {                                                  \
		real_##name = (ret(*) params)(void (*)(void))missing;               \
		absent = true;                                                      \
	}
	REAL_FUNCS(RESOLVE)
#undef RESOLVE
	if (absent)
		ps_log("some libc I/O functions were not found; calls to them fail with ENOSYS");
	timing = cfg->timing;
	sites_wanted = cfg->backtrace != 0;
	sample_period = (uint32_t)cfg->timing_sample;
	site_min = cfg->uring_min;
	ps_clock_init();
	ps_uring_init(cfg);
}

/*
 * Resolve a real function on first use when it was called before
 * ps_io_init() (another library's constructor may do I/O before ours).
 */
static void *resolve(void **slot, const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	if (f)
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	return f;
}

/*
 * A missing real function (never seen with glibc) fails with ENOSYS instead
 * of crashing.  Every wrapped function returns -1 for failure in a register
 * wide enough for a long, so one stub serves them all.
 */
static long missing(void)
{
	errno = ENOSYS;
	return -1;
}

#define REAL(name)                                                                   \
	(ps_likely(real_##name != NULL) ? real_##name                               \
	 : resolve((void **)&real_##name, #name) ? real_##name                      \
	 : (__typeof__(real_##name))(void (*)(void))missing)

/*
 * What gate_slow() returns besides 0 (untimed) and a TSC reading (timed):
 * the shim is off; or the call must be counted the slow way (the thread
 * has no counter block).  rdtsc never reads that high.
 */
#define PS_IO_OFF UINT64_MAX
#define PS_IO_SLOW (UINT64_MAX - 1)

/* Whether this thread has been through gate_slow() once (sampling's start). */
static __thread bool gate_started;
/* The countdown to the next timed call while call sites are captured. */
static __thread uint32_t site_left;
/* This thread's xorshift state for the sampling jitter; never 0 once seeded. */
static __thread uint32_t sample_rng;

/*
 * Calls until the next timed one: on average POOLSHIM_TIMING_SAMPLE, drawn
 * from [period/2, period*3/2).  A fixed period would time the same call of
 * a loop every time: a server that alternates recv and send, with an even
 * period, would never have a recv timed.
 */
static uint32_t next_sample(void)
{
	uint32_t x = sample_rng, p = sample_period;

	if (p < 2)
		return 1;
	if (ps_unlikely(x == 0))
		x = (uint32_t)ps_ticks() | 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	sample_rng = x;
	return p / 2 + (x & (p - 1));
}

/*
 * ps_io_gate ran out (stats.h): PS_IO_OFF when the shim is off (the call
 * goes to libc uncounted), else 0 for an untimed call or the TSC at its
 * start.  Sets the gate again: to the next sampling gap (next_sample(),
 * one call in POOLSHIM_TIMING_SAMPLE on average is timed), to 0 with timing off (the next visit is
 * 2^32 calls away), to 1 while the shim is off or the thread has no
 * counter block (PS_IO_SLOW), or while call sites are captured (end()
 * looks at each call).  A thread's first visit claims its block and times
 * its 16th call, so that a short-lived thread has a sample too.
 */
static __attribute__((noinline)) uint64_t gate_slow(void)
{
	if (!ps_enabled()) {
		ps_io_gate = 1;
		return PS_IO_OFF;
	}
	if (ps_unlikely(ps_stats_tls == NULL)) {
		/* Claiming may run the thread-exit hook's set-up: keep errno. */
		int saved = errno;
		struct ps_tstats *t = ps_stats_claim();
		errno = saved;
		if (!t) {
			ps_io_gate = 1;
			return PS_IO_SLOW;
		}
	}
	if (ps_unlikely(__atomic_load_n(&ps_live_child_due, __ATOMIC_RELAXED)))
		ps_live_child_tick();
	if (ps_unlikely(sites_wanted)) {
		/* Every call comes here; the sampling countdown is site_left. */
		ps_io_gate = 1;
		if (!gate_started) {
			gate_started = true;
			site_left = 16;
		}
		if (--site_left != 0 || !timing)
			return PS_IO_SLOW;
		site_left = next_sample();
		return ps_ticks();
	}
	if (!gate_started) {
		gate_started = true;
		ps_io_gate = 15;
		return 0;
	}
	/* Untimed, a fork child still comes back to publish its live file. */
	ps_io_gate = timing ? next_sample() : ps_live_child_due ? 4096 : 0;
	return timing ? ps_ticks() : 0;
}

/*
 * Reading the TSC twice costs ~35 ns on a VM, 3% of a 1 us syscall: time
 * one call in POOLSHIM_TIMING_SAMPLE per thread.  The untimed call pays one
 * decrement and one branch, which also stand for "the shim is on" and
 * "this thread has its block" (ps_io_gate).  PS_IO_OFF: call libc only.
 */
PS_INLINE uint64_t begin(void)
{
	if (ps_likely(--ps_io_gate != 0))
		return 0;
	return gate_slow();
}

/* The same, for the io_uring path: always timed, it is never a tiny call. */
static inline uint64_t begin_always(void)
{
	return timing ? ps_ticks() : 0;
}

/* The kind a failed call counts under; EBADF is not worth a probe. */
static enum ps_fdkind failed_kind(int fd, int err)
{
	if (err != EBADF)
		return ps_fd_kind(fd);
	enum ps_fdkind k = ps_fd_peek(fd);
	return k != PS_FD_NONE ? k : PS_FD_OTHER;
}

/*
 * Count a finished call the slow way: failed, timed, a call site to
 * capture, or a thread whose gate is shut; done is the byte count when
 * result is not it.  Nothing here sets errno (the probe and the thread's
 * first claim restore it themselves), so errno is read only when the call
 * failed.  Out of line, returning result: the fast path calls it last,
 * as a tail call, and keeps no register for the result.
 */
static __attribute__((noinline)) long end(enum ps_call call, int fd, uint64_t request,
					  long result, long done, uint64_t t0)
{
	int err = 0;
	enum ps_fdkind kind;
	uint64_t ns = 0;

	if (ps_likely(result >= 0)) {
		kind = ps_fd_kind(fd);
	} else {
		err = errno;
		kind = failed_kind(fd, err);
	}
	/* A timed call shorter than a nanosecond still counts as timed. */
	if (t0 != 0 && t0 != PS_IO_SLOW) {
		ns = ps_ticks_to_ns(ps_ticks() - t0);
		ns = ns ? ns : 1;
	}
	ps_stats_io_slow(call, kind, request, result < 0 ? result : done, err, ns);
	if (ps_unlikely(ps_callsite_on) && request >= site_min) {
		int saved = errno;
		ps_callsite_capture(PS_SITE_IO, call, result > 0 ? (uint64_t)done : 0, ns);
		errno = saved;
	}
	return result;
}

/*
 * Count a call that passed the gate untimed (t0 == 0 from begin()), so
 * that no call site is wanted: the common case inline.  entry is fd's
 * table entry, read after the call (pread reads it before, for its
 * io_uring test too); 0, unknown, goes to end() for a probe.
 */
PS_INLINE long count(enum ps_call call, int fd, uint8_t entry, uint64_t request, long result,
		     long done)
{
	/* An unknown kind is probed by end(), all of it out of line. */
	if (ps_likely(result >= 0) && ps_likely(entry != 0)) {
		ps_stats_io_fast(call, (enum ps_fdkind)(entry & PS_FD_KIND_MASK), request, done);
		return result;
	}
	return end(call, fd, request, result, done, 0);
}

/* Count a call that went through begin(), timed or not. */
PS_INLINE void finish(enum ps_call call, int fd, uint64_t request, long result, long done,
		      uint64_t t0)
{
	if (ps_likely(t0 == 0))
		count(call, fd, ps_fd_entry(fd), request, result, done);
	else
		end(call, fd, request, result, done, t0);
}

/*
 * The whole pass-through of a call whose request is known before it and
 * whose result is its byte count.  Past the gate the shim is on, so the
 * real function is resolved (ps_io_init() ran before the shim was turned
 * on, and left none NULL).  Everything else is slow_NAME's, a tail call
 * out of line, so that the fast path keeps two registers across the call
 * and no more.
 */
#define PASS(type, call, fd, request, name, ...)                             \
	do {                                                                         \
		if (ps_unlikely(--ps_io_gate == 0))                                  \
			return slow_##name(__VA_ARGS__);                             \
		type r_ = real_##name(__VA_ARGS__);                                  \
		return (type)count(call, fd, ps_fd_entry(fd), request, r_, r_);      \
	} while (0)

/*
 * A timed call that passed gate_slow(): the common case (it succeeded, the
 * kind is known, no call sites) without end()'s generality, since one call
 * in POOLSHIM_TIMING_SAMPLE comes here and its cost is shared by all of them.
 */
static __attribute__((noinline)) long timed(enum ps_call call, int fd, uint64_t request,
					    long result, uint64_t t0)
{
	uint8_t e = ps_fd_entry(fd);
	if (result < 0 || e == 0 || t0 == 0 || t0 == PS_IO_SLOW || sites_wanted)
		return end(call, fd, request, result, result, t0);
	uint64_t ns = ps_ticks_to_ns(ps_ticks() - t0);
	ns = ns ? ns : 1;   /* shorter than a nanosecond still counts as timed */
	struct ps_counter *c = &ps_stats_tls->c[call][e & PS_FD_KIND_MASK];
	PS_ADD(c->bytes, (uint64_t)result);
	PS_ADD(c->size_hist[ps_log2(request)], 1);
	PS_ADD(c->timed, 1);
	PS_ADD(c->nsec, ns);
	ps_hist_add(c->lat_hist, PS_LAT_BUCKETS, ns);
	return result;
}

/* The gate ran out: the shim may be off, the call may be timed. */
#define SLOW_PASS(type, name, call, fd, request, params, args)                      \
	static __attribute__((noinline)) type slow_##name params                     \
	{                                                                            \
		uint64_t t0 = gate_slow();                                           \
		if (t0 == PS_IO_OFF)                                                 \
			return REAL(name) args;                                      \
		type r = REAL(name) args;                                            \
		return (type)timed(call, fd, request, r, t0);                        \
	}

SLOW_PASS(ssize_t, read, PS_CALL_READ, fd, n, (int fd, void *buf, size_t n), (fd, buf, n))
SLOW_PASS(ssize_t, write, PS_CALL_WRITE, fd, n, (int fd, const void *buf, size_t n), (fd, buf, n))
SLOW_PASS(ssize_t, recv, PS_CALL_RECV, fd, n, (int fd, void *buf, size_t n, int flags),
	  (fd, buf, n, flags))
SLOW_PASS(ssize_t, recvfrom, PS_CALL_RECVFROM, fd, n,
	  (int fd, void *buf, size_t n, int flags, struct sockaddr *addr, socklen_t *alen),
	  (fd, buf, n, flags, addr, alen))
SLOW_PASS(ssize_t, send, PS_CALL_SEND, fd, n, (int fd, const void *buf, size_t n, int flags),
	  (fd, buf, n, flags))
SLOW_PASS(ssize_t, sendto, PS_CALL_SENDTO, fd, n,
	  (int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr,
	   socklen_t alen),
	  (fd, buf, n, flags, addr, alen))
SLOW_PASS(ssize_t, sendfile, PS_CALL_SENDFILE, out, n, (int out, int in, off_t *off, size_t n),
	  (out, in, off, n))
SLOW_PASS(ssize_t, splice, PS_CALL_SPLICE, in, n,
	  (int in, off_t *in_off, int out, off_t *out_off, size_t n, unsigned flags),
	  (in, in_off, out, out_off, n, flags))

/*
 * Bytes asked for by an iovec array.  Read only after the kernel accepted
 * the array (the call succeeded): a bad pointer or count is the kernel's
 * EFAULT/EINVAL to report, not a crash of ours.  Failed calls count 0.
 */
static size_t iov_bytes(const struct iovec *iov, int n)
{
	size_t total = 0;
	for (int i = 0; iov && i < n; i++)
		total += iov[i].iov_len;
	return total;
}

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
 * Whether fd may go through io_uring: known to be O_DIRECT.  One of unknown
 * origin is probed by its first call's counting, and comes here from the
 * next.  Inline, so that other descriptors pay two loads for it.
 */
static inline bool maybe_direct(int fd)
{
	return ps_unlikely(ps_fd_peek(fd) == PS_FD_DIRECT);
}

/* An O_DIRECT request on a pooled buffer through io_uring; -2 = not taken. */
static ssize_t try_uring(enum ps_call call, int fd, void *buf, size_t len, off_t off, bool write)
{
	if (!ps_uring_eligible(buf, len, off, off != -1))
		return -2;
	/*
	 * The table can be stale if libc closed and reused the number behind
	 * our back, or be told O_DIRECT for a FIFO (F_SETFL); and O_APPEND
	 * writes must not be split or reordered.
	 */
	if (!ps_fd_is_direct_now(fd, write))
		return -2;
	if (write && file_size_limited())
		return -2;
	int saved = errno;
	uint64_t t0 = begin_always();
	ssize_t r = ps_uring_rw(fd, buf, len, off, write);
	if (r == -2) {
		errno = saved;
		return -2;
	}
	if (r >= 0)
		errno = saved;
	end(call, fd, len, r, r, t0);
	return r;
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

static ssize_t try_uring_v(enum ps_call call, int fd, const struct iovec *user_iov, int n,
			   off_t off, bool write)
{
	struct iovec iov[64];

	/*
	 * Copying the array costs a system call (process_vm_readv), one a
	 * seccomp allow-list may not expect: make it only when io_uring may
	 * take the request.
	 */
	if (off < 0 || n < 1 || n > (int)PS_ARRAY_SIZE(iov) || !ps_uring_usable() ||
	    copy_iov(iov, user_iov, n) < 0)
		return -2;
	size_t len = iov_bytes(iov, n);
	if (!ps_uring_eligible(iov[0].iov_base, iov[0].iov_len, off, true) ||
	    !ps_fd_is_direct_now(fd, write) || (write && file_size_limited()))
		return -2;
	int saved = errno;
	uint64_t t0 = begin_always();
	ssize_t r = ps_uring_rwv(fd, iov, n, off, write);
	if (r == -2) {
		errno = saved;
		return -2;
	}
	if (r >= 0)
		errno = saved;
	end(call, fd, len, r, r, t0);
	return r;
}

/* ---- read and write families ------------------------------------------ */

PS_INLINE ssize_t do_read(int fd, void *buf, size_t n)
{
	/*
	 * read/write on the file position stay plain: io_uring does not keep
	 * the position exactly right for O_DIRECT (async completions), and
	 * emulating it with lseek would not be atomic.
	 */
	PASS(ssize_t, PS_CALL_READ, fd, n, read, fd, buf, n);
}

/*
 * pread on a descriptor known to be O_DIRECT, at an offset: io_uring's
 * if it takes it, else the plain call (counted untimed).  The shim is on.
 */
static __attribute__((noinline)) ssize_t direct_pread(int fd, void *buf, size_t n, off_t off,
							 uint64_t t0)
{
	ssize_t r = try_uring(PS_CALL_PREAD, fd, buf, n, off, false);
	if (r != -2)
		return r;
	r = REAL(pread)(fd, buf, n, off);
	return end(PS_CALL_PREAD, fd, n, r, r, t0);
}

/* The gate ran out on pread. */
static __attribute__((noinline)) ssize_t slow_pread(int fd, void *buf, size_t n, off_t off)
{
	uint64_t t0 = gate_slow();
	if (t0 == PS_IO_OFF)
		return REAL(pread)(fd, buf, n, off);
	if (ps_fd_peek(fd) == PS_FD_DIRECT && off >= 0)
		return direct_pread(fd, buf, n, off, t0);
	ssize_t r = REAL(pread)(fd, buf, n, off);
	return timed(PS_CALL_PREAD, fd, n, r, t0);
}

PS_INLINE ssize_t do_pread(int fd, void *buf, size_t n, off_t off)
{
	if (ps_unlikely(--ps_io_gate == 0))
		return slow_pread(fd, buf, n, off);
	/* One look at the table serves both the io_uring test and the count. */
	uint8_t e = ps_fd_entry(fd);
	if (ps_unlikely((e & PS_FD_KIND_MASK) == PS_FD_DIRECT) && off >= 0)
		return direct_pread(fd, buf, n, off, 0);
	ssize_t r = real_pread(fd, buf, n, off);
	return count(PS_CALL_PREAD, fd, e, n, r, r);
}

/*
 * pwrite on a descriptor known to be O_DIRECT, at an offset: io_uring's
 * if it takes it, else the plain call (counted untimed).  The shim is on.
 */
static __attribute__((noinline)) ssize_t direct_pwrite(int fd, const void *buf, size_t n, off_t off,
							 uint64_t t0)
{
	ssize_t r = try_uring(PS_CALL_PWRITE, fd, (void *)buf, n, off, true);
	if (r != -2)
		return r;
	r = REAL(pwrite)(fd, buf, n, off);
	return end(PS_CALL_PWRITE, fd, n, r, r, t0);
}

/* The gate ran out on pwrite. */
static __attribute__((noinline)) ssize_t slow_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	uint64_t t0 = gate_slow();
	if (t0 == PS_IO_OFF)
		return REAL(pwrite)(fd, buf, n, off);
	if (ps_fd_peek(fd) == PS_FD_DIRECT && off >= 0)
		return direct_pwrite(fd, buf, n, off, t0);
	ssize_t r = REAL(pwrite)(fd, buf, n, off);
	return timed(PS_CALL_PWRITE, fd, n, r, t0);
}

PS_INLINE ssize_t do_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (ps_unlikely(--ps_io_gate == 0))
		return slow_pwrite(fd, buf, n, off);
	/* One look at the table serves both the io_uring test and the count. */
	uint8_t e = ps_fd_entry(fd);
	if (ps_unlikely((e & PS_FD_KIND_MASK) == PS_FD_DIRECT) && off >= 0)
		return direct_pwrite(fd, buf, n, off, 0);
	ssize_t r = real_pwrite(fd, buf, n, off);
	return count(PS_CALL_PWRITE, fd, e, n, r, r);
}

PS_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	return do_read(fd, buf, n);
}

PS_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	PASS(ssize_t, PS_CALL_WRITE, fd, n, write, fd, buf, n);
}

PS_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return do_pread(fd, buf, n, off);
}

PS_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	return do_pread(fd, buf, n, off);
}

PS_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return do_pwrite(fd, buf, n, off);
}

PS_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return do_pwrite(fd, buf, n, off);
}

PS_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(readv)(fd, iov, n);
	uint64_t t0 = begin();
	ssize_t r = REAL(readv)(fd, iov, n);
	finish(PS_CALL_READV, fd, r >= 0 ? iov_bytes(iov, n) : 0, r, r, t0);
	return r;
}

PS_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(writev)(fd, iov, n);
	uint64_t t0 = begin();
	ssize_t r = REAL(writev)(fd, iov, n);
	finish(PS_CALL_WRITEV, fd, r >= 0 ? iov_bytes(iov, n) : 0, r, r, t0);
	return r;
}

/* The positional vectored calls, each of which may go through io_uring. */
static ssize_t do_prwv(enum ps_call call, int fd, const struct iovec *iov, int n, off_t off,
		       int flags)
{
	bool write = call == PS_CALL_PWRITEV || call == PS_CALL_PWRITEV2;
	ssize_t r = flags == 0 && maybe_direct(fd) ? try_uring_v(call, fd, iov, n, off, write)
						   : -2;
	if (r != -2)
		return r;
	uint64_t t0 = begin();
	switch (call) {
	case PS_CALL_PREADV: r = REAL(preadv)(fd, iov, n, off); break;
	case PS_CALL_PREADV2: r = REAL(preadv2)(fd, iov, n, off, flags); break;
	case PS_CALL_PWRITEV: r = REAL(pwritev)(fd, iov, n, off); break;
	default: r = REAL(pwritev2)(fd, iov, n, off, flags); break;
	}
	finish(call, fd, r >= 0 ? iov_bytes(iov, n) : 0, r, r, t0);
	return r;
}

PS_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(preadv)(fd, iov, n, off);
	return do_prwv(PS_CALL_PREADV, fd, iov, n, off, 0);
}

PS_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int n, off_t off)
{
	return preadv(fd, iov, n, off);
}

PS_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(pwritev)(fd, iov, n, off);
	return do_prwv(PS_CALL_PWRITEV, fd, iov, n, off, 0);
}

PS_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
	return pwritev(fd, iov, n, off);
}

PS_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(preadv2)(fd, iov, n, off, flags);
	return do_prwv(PS_CALL_PREADV2, fd, iov, n, off, flags);
}

PS_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return preadv2(fd, iov, n, off, flags);
}

PS_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(pwritev2)(fd, iov, n, off, flags);
	return do_prwv(PS_CALL_PWRITEV2, fd, iov, n, off, flags);
}

PS_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off_t off, int flags)
{
	return pwritev2(fd, iov, n, off, flags);
}

/* ---- sockets ------------------------------------------------------------ */

PS_INLINE ssize_t do_recvfrom(enum ps_call call, int fd, void *buf, size_t n, int flags,
				   struct sockaddr *addr, socklen_t *alen)
{
	if (call == PS_CALL_RECV)
		PASS(ssize_t, PS_CALL_RECV, fd, n, recv, fd, buf, n, flags);
	PASS(ssize_t, PS_CALL_RECVFROM, fd, n, recvfrom, fd, buf, n, flags, addr, alen);
}

PS_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	return do_recvfrom(PS_CALL_RECV, fd, buf, n, flags, NULL, NULL);
}

PS_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
			   socklen_t *alen)
{
	return do_recvfrom(PS_CALL_RECVFROM, fd, buf, n, flags, addr, alen);
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

PS_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (ps_unlikely(!ps_enabled())) {
		ssize_t r = REAL(recvmsg)(fd, msg, flags);
		if (r >= 0)
			forget_passed_fds(msg);
		return r;
	}
	uint64_t t0 = begin();
	ssize_t r = REAL(recvmsg)(fd, msg, flags);
	if (r >= 0)
		forget_passed_fds(msg);
	finish(PS_CALL_RECVMSG, fd, r >= 0 ? iov_bytes(msg->msg_iov, (int)msg->msg_iovlen) : 0, r, r,
	    t0);
	return r;
}

static size_t mmsg_bytes(const struct mmsghdr *v, int n, bool done)
{
	size_t total = 0;
	for (int i = 0; v && i < n; i++)
		total += done ? v[i].msg_len
			      : iov_bytes(v[i].msg_hdr.msg_iov, (int)v[i].msg_hdr.msg_iovlen);
	return total;
}

static void forget_passed_fds_m(const struct mmsghdr *vec, int r)
{
	for (int i = 0; i < r; i++)
		forget_passed_fds(&vec[i].msg_hdr);
}

PS_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned n, int flags, struct timespec *tmo)
{
	if (ps_unlikely(!ps_enabled())) {
		int r = REAL(recvmmsg)(fd, vec, n, flags, tmo);
		forget_passed_fds_m(vec, r);
		return r;
	}
	uint64_t t0 = begin();
	int r = REAL(recvmmsg)(fd, vec, n, flags, tmo);
	forget_passed_fds_m(vec, r);
	/* Only the r headers the kernel filled in are known to be readable. */
	finish(PS_CALL_RECVMMSG, fd, r > 0 ? mmsg_bytes(vec, r, false) : 0, r,
	    r > 0 ? (long)mmsg_bytes(vec, r, true) : r, t0);
	return r;
}

PS_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	PASS(ssize_t, PS_CALL_SEND, fd, n, send, fd, buf, n, flags);
}

PS_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			 const struct sockaddr *addr, socklen_t alen)
{
	PASS(ssize_t, PS_CALL_SENDTO, fd, n, sendto, fd, buf, n, flags, addr, alen);
}

PS_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(sendmsg)(fd, msg, flags);
	uint64_t t0 = begin();
	ssize_t r = REAL(sendmsg)(fd, msg, flags);
	finish(PS_CALL_SENDMSG, fd, r >= 0 ? iov_bytes(msg->msg_iov, (int)msg->msg_iovlen) : 0, r, r,
	    t0);
	return r;
}

PS_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned n, int flags)
{
	if (ps_unlikely(!ps_enabled()))
		return REAL(sendmmsg)(fd, vec, n, flags);
	uint64_t t0 = begin();
	int r = REAL(sendmmsg)(fd, vec, n, flags);
	finish(PS_CALL_SENDMMSG, fd, r > 0 ? mmsg_bytes(vec, r, false) : 0, r,
	    r > 0 ? (long)mmsg_bytes(vec, r, true) : r, t0);
	return r;
}

PS_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	PASS(ssize_t, PS_CALL_SENDFILE, out, n, sendfile, out, in, off, n);
}

PS_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t n)
{
	return sendfile(out, in, off, n);
}

PS_EXPORT ssize_t splice(int in, off_t *in_off, int out, off_t *out_off, size_t n,
			 unsigned flags)
{
	PASS(ssize_t, PS_CALL_SPLICE, in, n, splice, in, in_off, out, out_off, n, flags);
}

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
	return do_recvfrom(PS_CALL_RECV, fd, buf, n, flags, NULL, NULL);
}

PS_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				 struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		__chk_fail();
	return do_recvfrom(PS_CALL_RECVFROM, fd, buf, n, flags, addr, alen);
}

/* ---- descriptor bookkeeping ------------------------------------------- */

/*
 * Every call here returns what libc returned, errno included: the table
 * is updated with plain stores (a new chunk of it with one raw mmap, once
 * per 65536 numbers), never with a system call about the descriptor.
 */
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

PS_EXPORT int fclose(FILE *f)
{
	int fd = f ? fileno(f) : -1;
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

PS_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

PS_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

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

PS_EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	return opened(REAL(open)(path, flags, mode), path, flags);
}

PS_EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	return opened(REAL(open)(path, flags, mode), path, flags);
}

PS_EXPORT int openat(int dir, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	return opened(REAL(openat)(dir, path, flags, mode), path, flags);
}

PS_EXPORT int openat64(int dir, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	return opened(REAL(openat)(dir, path, flags, mode), path, flags);
}

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
