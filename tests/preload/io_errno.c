// SPDX-License-Identifier: MIT
/*
 * errno across every interposed I/O call: on success it is left exactly as
 * it was; on failure the return value and errno equal those of the same
 * call made with syscall(2), which no interposer sees (EBADF on a closed
 * descriptor, EFAULT, ESPIPE on a pipe, EINVAL for a negative offset, an
 * iovec count out of range or O_DIRECT misalignment, EISDIR, ENOTSOCK,
 * EPIPE, EAGAIN, EOPNOTSUPP for unknown RWF_ flags, EISCONN ...).  Each
 * case runs twice, on a fresh scene each time: through libc, then raw.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "io_common.h"
#include "lib.h"

#define SENTINEL 31337
/* volatile: keep the compiler from diagnosing the deliberate misuse */
static void *volatile bad_ptr = (void *)8;
static volatile int neg = -1;
#define BAD (bad_ptr)

/* Descriptors of every kind, made fresh for each run of a case. */
struct scene {
	int pipe[2];       /* "pipedata" waiting in it */
	int sock[2];       /* unix stream pair, "sockdata" waiting at sock[0] */
	int dgram[2];      /* unix datagram pair, non-blocking, empty */
	int file;          /* regular file, read-write, 64 KiB of pattern */
	int rdonly;        /* the same file, read-only */
	int direct;        /* the same file with O_DIRECT, or -1 */
	int dir;           /* a directory */
	int closed;        /* a descriptor number that is not open */
	int empty_pipe[2]; /* non-blocking, empty */
	char *big;         /* 4 MiB pooled, 4096-aligned */
	char small[256];
	struct iovec iov[2];
	struct iovec *edge;      /* 2 iovecs that end where an unmapped page starts */
	struct mmsghdr *medge;   /* 1 mmsghdr that ends there too */
	char *guard;             /* the two pages */
};

static char *fpath;

static struct scene *scene_new(void)
{
	struct scene *s = calloc(1, sizeof(*s));
	ck_assert_int_eq(pipe2(s->pipe, O_CLOEXEC), 0);
	ck_assert_int_eq(write(s->pipe[1], "pipedata", 8), 8);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->sock), 0);
	ck_assert_int_eq(write(s->sock[1], "sockdata", 8), 8);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, s->dgram), 0);
	ck_assert_int_eq(pipe2(s->empty_pipe, O_CLOEXEC | O_NONBLOCK), 0);
	s->file = open(fpath, O_RDWR | O_CLOEXEC);
	s->rdonly = open(fpath, O_RDONLY | O_CLOEXEC);
	s->direct = open(fpath, O_RDWR | O_DIRECT | O_CLOEXEC);
	s->dir = open(pio_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert(s->file >= 0 && s->rdonly >= 0 && s->dir >= 0);
	s->closed = dup(s->file);
	close(s->closed);
	s->big = pio_alloc(4 << 20);
	s->iov[0] = (struct iovec){ s->small, 100 };
	s->iov[1] = (struct iovec){ s->big, 1 << 20 };
	/* a page of iovecs followed by one the process may not touch: a call
	 * given a count beyond the array must not read past it (the kernel
	 * refuses or stops first) */
	long pg = sysconf(_SC_PAGESIZE);
	s->guard = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(s->guard, MAP_FAILED);
	ck_assert_int_eq(mprotect(s->guard + pg, (size_t)pg, PROT_NONE), 0);
	s->edge = (struct iovec *)(s->guard + pg) - 2;
	s->edge[0] = s->iov[0];
	s->edge[1] = s->iov[1];
	s->medge = (struct mmsghdr *)(s->guard + pg) - 1;
	*s->medge = (struct mmsghdr){ .msg_hdr = { .msg_iov = s->edge, .msg_iovlen = 1 } };
	return s;
}

static void scene_free(struct scene *s)
{
	int fds[] = { s->pipe[0], s->pipe[1], s->sock[0], s->sock[1], s->dgram[0], s->dgram[1],
		      s->file, s->rdonly, s->direct, s->dir, s->empty_pipe[0], s->empty_pipe[1] };
	for (size_t k = 0; k < sizeof(fds) / sizeof(*fds); k++)
		if (fds[k] >= 0)
			close(fds[k]);
	free(s->big);
	munmap(s->guard, (size_t)sysconf(_SC_PAGESIZE) * 2);
	free(s);
}

typedef long (*case_fn)(struct scene *s, int raw);

#define CASE(name, libc_expr, sys_expr) \
	static long name(struct scene *s, int raw) \
	{ return raw ? (long)(sys_expr) : (long)(libc_expr); }

/* msghdr/mmsghdr over the scene's iovecs */
#define MH(s) (&(struct msghdr){ .msg_iov = (s)->iov, .msg_iovlen = 1 })
#define MMH(s) (&(struct mmsghdr){ .msg_hdr = { .msg_iov = (s)->iov, .msg_iovlen = 1 } })

/* read family */
CASE(read_ok, read(s->pipe[0], s->small, 100), syscall(SYS_read, s->pipe[0], s->small, 100))
CASE(read_file_ok, read(s->file, s->big, 1 << 20), syscall(SYS_read, s->file, s->big, 1 << 20))
CASE(read_ebadf, read(s->closed, s->small, 10), syscall(SYS_read, s->closed, s->small, 10))
CASE(read_efault, read(s->pipe[0], BAD, 10), syscall(SYS_read, s->pipe[0], BAD, 10))
CASE(read_eisdir, read(s->dir, s->small, 10), syscall(SYS_read, s->dir, s->small, 10))
CASE(read_eagain, read(s->empty_pipe[0], s->small, 10), syscall(SYS_read, s->empty_pipe[0], s->small, 10))
CASE(read_wronly, read(s->pipe[1], s->small, 10), syscall(SYS_read, s->pipe[1], s->small, 10))
CASE(read_direct_misaligned, read(s->direct, s->big + 1, 65536), syscall(SYS_read, s->direct, s->big + 1, 65536))
CASE(read_direct_ok, read(s->direct, s->big, 65536), syscall(SYS_read, s->direct, s->big, 65536))
CASE(pread_ok, pread(s->file, s->big, 1 << 20, 100), syscall(SYS_pread64, s->file, s->big, 1 << 20, (long)100))
CASE(pread64_ok, pread64(s->file, s->small, 100, 7), syscall(SYS_pread64, s->file, s->small, 100, (long)7))
CASE(pread_espipe, pread(s->pipe[0], s->small, 10, 0), syscall(SYS_pread64, s->pipe[0], s->small, 10, (long)0))
CASE(pread64_espipe, pread64(s->sock[0], s->small, 10, 0), syscall(SYS_pread64, s->sock[0], s->small, 10, (long)0))
CASE(pread_einval, pread(s->file, s->small, 10, -5), syscall(SYS_pread64, s->file, s->small, 10, -5L))
CASE(pread_ebadf, pread(s->closed, s->small, 10, 0), syscall(SYS_pread64, s->closed, s->small, 10, (long)0))
CASE(pread_efault, pread(s->file, BAD, 100, 0), syscall(SYS_pread64, s->file, BAD, 100, (long)0))
CASE(pread_direct_misaligned, pread(s->direct, s->big, 65536 + 1, 0), syscall(SYS_pread64, s->direct, s->big, 65536 + 1, (long)0))
CASE(pread_direct_offset, pread(s->direct, s->big, 65536, 3), syscall(SYS_pread64, s->direct, s->big, 65536, (long)3))
CASE(pread_direct_efault, pread(s->direct, BAD, 65536, 0), syscall(SYS_pread64, s->direct, BAD, 65536, (long)0))
CASE(pread_direct_ok, pread(s->direct, s->big, 1 << 20, 0), syscall(SYS_pread64, s->direct, s->big, 1 << 20, (long)0))
CASE(readv_ok, readv(s->sock[0], s->iov, 2), syscall(SYS_readv, s->sock[0], s->iov, 2))
CASE(readv_einval, readv(s->file, s->iov, neg), syscall(SYS_readv, s->file, s->iov, (long)neg))
CASE(readv_toomany, readv(s->file, s->iov, IOV_MAX + 1 + neg + 1), syscall(SYS_readv, s->file, s->iov, IOV_MAX + 1L))
CASE(readv_efault, readv(s->file, BAD, 1), syscall(SYS_readv, s->file, BAD, 1))
CASE(preadv_ok, preadv(s->file, s->iov, 2, 1), syscall(SYS_preadv, s->file, s->iov, 2, 1L, 0L))
CASE(preadv_espipe, preadv(s->pipe[0], s->iov, 2, 0), syscall(SYS_preadv, s->pipe[0], s->iov, 2, 0L, 0L))
CASE(preadv_einval, preadv(s->file, s->iov, 2, -2), syscall(SYS_preadv, s->file, s->iov, 2, -2L, -1L))
CASE(preadv_direct_mixed, preadv(s->direct, s->iov, 2, 0), syscall(SYS_preadv, s->direct, s->iov, 2, 0L, 0L))
CASE(preadv2_ok, preadv2(s->file, s->iov, 2, 0, 0), syscall(SYS_preadv2, s->file, s->iov, 2, 0L, 0L, 0))
CASE(preadv2_cur, preadv2(s->file, s->iov, 2, -1, 0), syscall(SYS_preadv2, s->file, s->iov, 2, -1L, -1L, 0))
CASE(preadv2_flags, preadv2(s->file, s->iov, 2, 0, 0x40000000), syscall(SYS_preadv2, s->file, s->iov, 2, 0L, 0L, 0x40000000))
CASE(preadv2_nowait_pipe, preadv2(s->empty_pipe[0], s->iov, 1, -1, RWF_NOWAIT), syscall(SYS_preadv2, s->empty_pipe[0], s->iov, 1, -1L, -1L, RWF_NOWAIT))
/* one misaligned segment among pooled ones: the whole call fails, nothing is read */
#define IOV2(a, alen, b, blen) ((struct iovec[]){ { (a), (alen) }, { (b), (blen) } })
CASE(preadv_direct_seg_misaligned, preadv(s->direct, IOV2(s->big, 65536, s->big + 131072 + 1, 65536), 2, 0),
     syscall(SYS_preadv, s->direct, IOV2(s->big, 65536, s->big + 131072 + 1, 65536), 2, 0L, 0L))
CASE(preadv_direct_len_misaligned, preadv(s->direct, IOV2(s->big, 65536, s->big + 131072, 65536 + 1), 2, 0),
     syscall(SYS_preadv, s->direct, IOV2(s->big, 65536, s->big + 131072, 65536 + 1), 2, 0L, 0L))
CASE(pwritev_direct_len_misaligned, pwritev(s->direct, IOV2(s->big, 65536, s->big + 131072, 65536 + 1), 2, 65536),
     syscall(SYS_pwritev, s->direct, IOV2(s->big, 65536, s->big + 131072, 65536 + 1), 2, 65536L, 0L))
CASE(readv_direct_seg_misaligned, readv(s->direct, IOV2(s->big, 65536, s->big + 131072 + 1, 65536), 2),
     syscall(SYS_readv, s->direct, IOV2(s->big, 65536, s->big + 131072 + 1, 65536), 2))
/* offsets near the top of the range: offset + length overflows */
#define TOP_OFF (0x7fffffffffffffffL - 4095 - 4 * 1024 * 1024)
CASE(pread_direct_top, pread(s->direct, s->big, 4 << 20, TOP_OFF + 4096), syscall(SYS_pread64, s->direct, s->big, 4 << 20, TOP_OFF + 4096))
CASE(pread_direct_top2, pread(s->direct, s->big, 4 << 20, TOP_OFF), syscall(SYS_pread64, s->direct, s->big, 4 << 20, TOP_OFF))
CASE(pwrite_direct_top, pwrite(s->direct, s->big, 4 << 20, TOP_OFF + 4096), syscall(SYS_pwrite64, s->direct, s->big, 4 << 20, TOP_OFF + 4096))
CASE(preadv_direct_top, preadv(s->direct, s->iov + 1, 1, TOP_OFF + 4096), syscall(SYS_preadv, s->direct, s->iov + 1, 1, TOP_OFF + 4096, 0L))
CASE(readv_direct_efault, readv(s->direct, BAD, 1), syscall(SYS_readv, s->direct, BAD, 1))
CASE(preadv_direct_efault, preadv(s->direct, BAD, 2, 0), syscall(SYS_preadv, s->direct, BAD, 2, 0L, 0L))
CASE(readv_toomany_edge, readv(s->file, s->edge, IOV_MAX + 1 + neg + 1), syscall(SYS_readv, s->file, s->edge, IOV_MAX + 1L))
CASE(preadv_direct_toomany_edge, preadv(s->direct, s->edge, IOV_MAX + 1 + neg + 1, 0), syscall(SYS_preadv, s->direct, s->edge, IOV_MAX + 1L, 0L, 0L))
/* write family */
CASE(write_ok, write(s->pipe[1], "abc", 3), syscall(SYS_write, s->pipe[1], "abc", 3))
CASE(write_ebadf, write(s->closed, "abc", 3), syscall(SYS_write, s->closed, "abc", 3))
CASE(write_rdonly, write(s->rdonly, "abc", 3), syscall(SYS_write, s->rdonly, "abc", 3))
CASE(write_efault, write(s->pipe[1], BAD, 3), syscall(SYS_write, s->pipe[1], BAD, 3))
CASE(write_dir, write(s->dir, "abc", 3), syscall(SYS_write, s->dir, "abc", 3))
CASE(write_direct_misaligned, write(s->direct, s->big + 512 + 1, 65536), syscall(SYS_write, s->direct, s->big + 512 + 1, 65536))
CASE(pwrite_ok, pwrite(s->file, s->small, 10, 70000), syscall(SYS_pwrite64, s->file, s->small, 10, (long)70000))
CASE(pwrite64_ok, pwrite64(s->file, s->small, 10, 5), syscall(SYS_pwrite64, s->file, s->small, 10, (long)5))
CASE(pwrite_espipe, pwrite(s->pipe[1], "a", 1, 0), syscall(SYS_pwrite64, s->pipe[1], "a", 1, (long)0))
CASE(pwrite64_einval, pwrite64(s->file, "a", 1, -1), syscall(SYS_pwrite64, s->file, "a", 1, -1L))
CASE(pwrite_direct_misaligned, pwrite(s->direct, s->big, 65536, 100), syscall(SYS_pwrite64, s->direct, s->big, 65536, (long)100))
CASE(pwrite_direct_ok, pwrite(s->direct, s->big, 1 << 20, 1 << 20), syscall(SYS_pwrite64, s->direct, s->big, 1 << 20, (long)1 << 20))
CASE(writev_ok, writev(s->sock[1], s->iov, 1), syscall(SYS_writev, s->sock[1], s->iov, 1))
CASE(writev_einval, writev(s->sock[1], s->iov, neg * 3), syscall(SYS_writev, s->sock[1], s->iov, (long)neg * 3))
CASE(pwritev_ok, pwritev(s->file, s->iov, 2, 4), syscall(SYS_pwritev, s->file, s->iov, 2, 4L, 0L))
CASE(pwritev_espipe, pwritev(s->pipe[1], s->iov, 1, 0), syscall(SYS_pwritev, s->pipe[1], s->iov, 1, 0L, 0L))
CASE(pwritev2_flags, pwritev2(s->file, s->iov, 1, 0, 0x40000000), syscall(SYS_pwritev2, s->file, s->iov, 1, 0L, 0L, 0x40000000))
CASE(pwritev2_cur, pwritev2(s->file, s->iov, 1, -1, 0), syscall(SYS_pwritev2, s->file, s->iov, 1, -1L, -1L, 0))
CASE(writev_efault, writev(s->sock[1], BAD, 1), syscall(SYS_writev, s->sock[1], BAD, 1))
CASE(pwritev_direct_efault, pwritev(s->direct, BAD, 1, 0), syscall(SYS_pwritev, s->direct, BAD, 1, 0L, 0L))
CASE(writev_toomany_edge, writev(s->sock[1], s->edge, IOV_MAX + 1 + neg + 1), syscall(SYS_writev, s->sock[1], s->edge, IOV_MAX + 1L))
/* sockets */
CASE(recv_ok, recv(s->sock[0], s->small, 100, 0), syscall(SYS_recvfrom, s->sock[0], s->small, 100, 0, NULL, NULL))
CASE(recv_enotsock, recv(s->file, s->small, 10, 0), syscall(SYS_recvfrom, s->file, s->small, 10, 0, NULL, NULL))
CASE(recv_ebadf, recv(s->closed, s->small, 10, 0), syscall(SYS_recvfrom, s->closed, s->small, 10, 0, NULL, NULL))
CASE(recv_eagain, recv(s->dgram[0], s->small, 10, 0), syscall(SYS_recvfrom, s->dgram[0], s->small, 10, 0, NULL, NULL))
CASE(recv_efault, recv(s->sock[0], BAD, 10, 0), syscall(SYS_recvfrom, s->sock[0], BAD, 10, 0, NULL, NULL))
CASE(recvfrom_ok, recvfrom(s->sock[0], s->small, 3, MSG_PEEK, NULL, NULL), syscall(SYS_recvfrom, s->sock[0], s->small, 3, MSG_PEEK, NULL, NULL))
CASE(recvfrom_enotsock, recvfrom(s->pipe[0], s->small, 10, 0, NULL, NULL), syscall(SYS_recvfrom, s->pipe[0], s->small, 10, 0, NULL, NULL))
CASE(recvmsg_ok, recvmsg(s->sock[0], MH(s), 0), syscall(SYS_recvmsg, s->sock[0], MH(s), 0))
CASE(recvmsg_eagain, recvmsg(s->dgram[0], MH(s), 0), syscall(SYS_recvmsg, s->dgram[0], MH(s), 0))
CASE(recvmsg_efault, recvmsg(s->sock[0], BAD, 0), syscall(SYS_recvmsg, s->sock[0], BAD, 0))
CASE(recvmmsg_ok, recvmmsg(s->sock[0], MMH(s), 1, 0, NULL), syscall(SYS_recvmmsg, s->sock[0], MMH(s), 1, 0, NULL))
CASE(recvmmsg_eagain, recvmmsg(s->dgram[0], MMH(s), 1, 0, NULL), syscall(SYS_recvmmsg, s->dgram[0], MMH(s), 1, 0, NULL))
CASE(recvmmsg_enotsock, recvmmsg(s->file, MMH(s), 1, 0, NULL), syscall(SYS_recvmmsg, s->file, MMH(s), 1, 0, NULL))
CASE(send_ok, send(s->sock[1], "hello", 5, 0), syscall(SYS_sendto, s->sock[1], "hello", 5, 0, NULL, 0))
CASE(send_enotsock, send(s->file, "x", 1, 0), syscall(SYS_sendto, s->file, "x", 1, 0, NULL, 0))
CASE(send_efault, send(s->sock[1], BAD, 5, 0), syscall(SYS_sendto, s->sock[1], BAD, 5, 0, NULL, 0))
CASE(sendto_ok, sendto(s->dgram[1], "dg", 2, 0, NULL, 0), syscall(SYS_sendto, s->dgram[1], "dg", 2, 0, NULL, 0))
CASE(sendto_eisconn, sendto(s->sock[1], "x", 1, 0, (struct sockaddr *)&(struct sockaddr_un){ .sun_family = AF_UNIX, .sun_path = "/nonexistent" }, sizeof(struct sockaddr_un)),
     syscall(SYS_sendto, s->sock[1], "x", 1, 0, &(struct sockaddr_un){ .sun_family = AF_UNIX, .sun_path = "/nonexistent" }, sizeof(struct sockaddr_un)))
CASE(sendmsg_ok, sendmsg(s->sock[1], MH(s), 0), syscall(SYS_sendmsg, s->sock[1], MH(s), 0))
CASE(sendmsg_enotsock, sendmsg(s->pipe[1], MH(s), 0), syscall(SYS_sendmsg, s->pipe[1], MH(s), 0))
CASE(sendmmsg_ok, sendmmsg(s->dgram[1], MMH(s), 1, 0), syscall(SYS_sendmmsg, s->dgram[1], MMH(s), 1, 0))
CASE(sendmmsg_ebadf, sendmmsg(s->closed, MMH(s), 1, 0), syscall(SYS_sendmmsg, s->closed, MMH(s), 1, 0))
CASE(sendmsg_efault, sendmsg(s->sock[1], BAD, 0), syscall(SYS_sendmsg, s->sock[1], BAD, 0))
CASE(recvmmsg_efault, recvmmsg(s->sock[0], BAD, 1, 0, NULL), syscall(SYS_recvmmsg, s->sock[0], BAD, 1, 0, NULL))
CASE(sendmmsg_efault, sendmmsg(s->sock[1], BAD, 1, 0), syscall(SYS_sendmmsg, s->sock[1], BAD, 1, 0))
CASE(recvmmsg_edge, recvmmsg(s->dgram[0], s->medge, 1000, 0, NULL), syscall(SYS_recvmmsg, s->dgram[0], s->medge, 1000, 0, NULL))
CASE(recvmsg_bad_iov, recvmsg(s->sock[0], &(struct msghdr){ .msg_iov = BAD, .msg_iovlen = 1 }, 0),
     syscall(SYS_recvmsg, s->sock[0], &(struct msghdr){ .msg_iov = BAD, .msg_iovlen = 1 }, 0))
/* sendfile and splice */
CASE(sendfile_ok, sendfile(s->sock[1], s->file, NULL, 1000), syscall(SYS_sendfile, s->sock[1], s->file, NULL, 1000))
CASE(sendfile_ebadf, sendfile(s->sock[1], s->closed, NULL, 10), syscall(SYS_sendfile, s->sock[1], s->closed, NULL, 10))
CASE(sendfile_einval, sendfile(s->sock[1], s->pipe[0], NULL, 10), syscall(SYS_sendfile, s->sock[1], s->pipe[0], NULL, 10))
CASE(splice_ok, splice(s->pipe[0], NULL, s->sock[1], NULL, 8, 0), syscall(SYS_splice, s->pipe[0], NULL, s->sock[1], NULL, 8, 0))
CASE(splice_einval, splice(s->file, NULL, s->sock[1], NULL, 8, 0), syscall(SYS_splice, s->file, NULL, s->sock[1], NULL, 8, 0))
CASE(splice_eagain, splice(s->empty_pipe[0], NULL, s->sock[1], NULL, 8, SPLICE_F_NONBLOCK), syscall(SYS_splice, s->empty_pipe[0], NULL, s->sock[1], NULL, 8, SPLICE_F_NONBLOCK))
CASE(splice_espipe, splice(s->pipe[0], &(loff_t){ 0 }, s->sock[1], NULL, 8, 0), syscall(SYS_splice, s->pipe[0], &(loff_t){ 0 }, s->sock[1], NULL, 8, 0))

#define C(name) { #name, name }
static const struct { const char *name; case_fn fn; } cases[] = {
	C(read_ok), C(read_file_ok), C(read_ebadf), C(read_efault), C(read_eisdir), C(read_eagain),
	C(read_wronly), C(read_direct_misaligned), C(read_direct_ok),
	C(pread_ok), C(pread64_ok), C(pread_espipe), C(pread64_espipe), C(pread_einval),
	C(pread_ebadf), C(pread_efault), C(pread_direct_misaligned), C(pread_direct_offset),
	C(pread_direct_efault), C(pread_direct_ok),
	C(readv_ok), C(readv_einval), C(readv_toomany), C(readv_efault),
	C(preadv_ok), C(preadv_espipe), C(preadv_einval), C(preadv_direct_mixed),
	C(pread_direct_top), C(pread_direct_top2), C(pwrite_direct_top), C(preadv_direct_top),
	C(preadv_direct_seg_misaligned), C(preadv_direct_len_misaligned), C(pwritev_direct_len_misaligned),
	C(readv_direct_seg_misaligned), C(readv_direct_efault), C(preadv_direct_efault), C(readv_toomany_edge), C(preadv_direct_toomany_edge),
	C(preadv2_ok), C(preadv2_cur), C(preadv2_flags), C(preadv2_nowait_pipe),
	C(write_ok), C(write_ebadf), C(write_rdonly), C(write_efault), C(write_dir),
	C(write_direct_misaligned),
	C(pwrite_ok), C(pwrite64_ok), C(pwrite_espipe), C(pwrite64_einval),
	C(pwrite_direct_misaligned), C(pwrite_direct_ok),
	C(writev_ok), C(writev_einval), C(pwritev_ok), C(pwritev_espipe), C(pwritev2_flags), C(pwritev2_cur),
	C(writev_efault), C(pwritev_direct_efault), C(writev_toomany_edge),
	C(recv_ok), C(recv_enotsock), C(recv_ebadf), C(recv_eagain), C(recv_efault),
	C(recvfrom_ok), C(recvfrom_enotsock), C(recvmsg_ok), C(recvmsg_eagain), C(recvmsg_efault),
	C(recvmmsg_ok), C(recvmmsg_eagain), C(recvmmsg_enotsock),
	C(send_ok), C(send_enotsock), C(send_efault), C(sendto_ok), C(sendto_eisconn),
	C(sendmsg_ok), C(sendmsg_enotsock), C(sendmmsg_ok), C(sendmmsg_ebadf),
	C(sendmsg_efault), C(recvmmsg_efault), C(sendmmsg_efault), C(recvmmsg_edge), C(recvmsg_bad_iov),
	C(sendfile_ok), C(sendfile_ebadf), C(sendfile_einval),
	C(splice_ok), C(splice_einval), C(splice_eagain), C(splice_espipe),
};
enum { NCASES = sizeof(cases) / sizeof(cases[0]) };

static bool uses_direct(const char *name)
{
	return strstr(name, "direct") != NULL;
}

/* Name the case when the libc call crashes (where the kernel returned an error). */
static char crash_note[256];

static void on_crash(int sig)
{
	ssize_t w = write(2, crash_note, strlen(crash_note));
	(void)w;
	signal(sig, SIG_DFL);
	raise(sig);
}

START_TEST(test_errno)
{
	const char *name = cases[_i].name;
	struct scene *s = scene_new();
	if (s->direct < 0 && uses_direct(name)) {
		scene_free(s);
		return;   /* no O_DIRECT on this filesystem */
	}
	/* the kernel's answer first */
	errno = SENTINEL;
	long want = cases[_i].fn(s, 1);
	int want_err = errno;
	off_t want_pos = lseek(s->file, 0, SEEK_CUR), want_dpos = s->direct >= 0 ? lseek(s->direct, 0, SEEK_CUR) : 0;
	scene_free(s);

	s = scene_new();
	snprintf(crash_note, sizeof(crash_note), "io_errno: %s crashed through libc; the kernel returned %ld (errno %s)\n",
		 name, want, want < 0 ? strerrorname_np(want_err) : "-");
	signal(SIGSEGV, on_crash);
	signal(SIGBUS, on_crash);
	errno = SENTINEL;
	long got = cases[_i].fn(s, 0);
	int got_err = errno;
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	off_t got_pos = lseek(s->file, 0, SEEK_CUR), got_dpos = s->direct >= 0 ? lseek(s->direct, 0, SEEK_CUR) : 0;
	scene_free(s);

	ck_assert_msg(got == want, "%s returned %ld (errno %s), kernel %ld (errno %s)", name,
		      got, strerrorname_np(got_err), want, strerrorname_np(want_err));
	if (got >= 0)
		ck_assert_msg(got_err == SENTINEL, "%s succeeded but set errno to %s", name,
			      strerrorname_np(got_err));
	else
		ck_assert_msg(got_err == want_err, "%s: errno %s, kernel %s", name,
			      strerrorname_np(got_err), strerrorname_np(want_err));
	ck_assert_msg(got_pos == want_pos && got_dpos == want_dpos,
		      "%s left the file offset at %lld/%lld, kernel %lld/%lld", name,
		      (long long)got_pos, (long long)got_dpos, (long long)want_pos, (long long)want_dpos);
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	fpath = pio_path("errno");
	pio_make_file(fpath, 65536, 0xe77);
	Suite *su = suite_create("io_errno");
	TCase *tc = tcase_create("errno");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_errno, 0, NCASES);
	suite_add_tcase(su, tc);
	SRunner *sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	pio_cleanup();
	return failed ? 1 : 0;
}
