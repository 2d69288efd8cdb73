// SPDX-License-Identifier: MIT
/*
 * The descriptor-kind table behind the per-kind I/O counters and the
 * io_uring eligibility check: its chunks, the probe for descriptors of
 * unknown origin, and the rules that turn open's path and flags, and
 * F_SETFL, into a kind.  See fdinfo.h for the layout and its guarantees.
 */
#include "core/fdinfo.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "format/sys.h"

uint8_t **ps_fd_chunks;
uint8_t ps_fd_first[PS_FD_CHUNK];
static unsigned chunks_mapped;

enum ps_fdkind ps_fd_probe(int fd)
{
	struct stat st;

	if (PS_SYSCALL(SYS_fstat, fd, &st) < 0)
		return PS_FD_NONE;
	if (S_ISSOCK(st.st_mode))
		return PS_FD_SOCKET;
	if (S_ISFIFO(st.st_mode))
		return PS_FD_PIPE;
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
		long fl = PS_SYSCALL(SYS_fcntl, fd, F_GETFL);
		if (fl >= 0 && (fl & O_DIRECT))
			return PS_FD_DIRECT;
		return S_ISREG(st.st_mode) ? PS_FD_FILE : PS_FD_OTHER;
	}
	return PS_FD_OTHER;
}

enum ps_fdkind ps_fd_kind_slow(int fd)
{
	enum ps_fdkind k = ps_fd_probe(fd);
	/* A closed descriptor is not recorded: the number means nothing yet. */
	if (k == PS_FD_NONE)
		return PS_FD_OTHER;
	ps_fd_store(fd, (uint8_t)(k | PS_FD_CHECKED));
	return k;
}

/* The array of chunk pointers, mapped (and published) if it is not yet. */
static uint8_t **table_for_store(void)
{
	uint8_t **t = __atomic_load_n(&ps_fd_chunks, __ATOMIC_ACQUIRE);
	if (t)
		return t;
	size_t len = PS_FD_CHUNKS * sizeof(*t);
	/* Raw mmap: this may run inside malloc or a signal handler. */
	long p = PS_SYSCALL(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p < 0)
		return NULL;
	uint8_t **mine = (uint8_t **)p, **expected = NULL;
	if (__atomic_compare_exchange_n(&ps_fd_chunks, &expected, mine, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return mine;
	PS_SYSCALL(SYS_munmap, mine, len);
	return expected;
}

/* The chunk for index i, mapped (and published) if it is not yet. */
static uint8_t *chunk_for_store(unsigned i)
{
	uint8_t **t = table_for_store();
	if (!t)
		return NULL;   /* the entry stays unknown: probed when used */
	uint8_t *c = __atomic_load_n(&t[i], __ATOMIC_ACQUIRE);
	if (c)
		return c;
	uint8_t *mine = ps_fd_first;
	if (i != 0) {
		/* Raw mmap: this may run inside malloc or a signal handler. */
		long p = PS_SYSCALL(SYS_mmap, NULL, PS_FD_CHUNK, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p < 0)
			return NULL;   /* the entry stays unknown: probed when used */
		mine = (uint8_t *)p;
	}
	uint8_t *expected = NULL;
	if (__atomic_compare_exchange_n(&t[i], &expected, mine, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (i != 0)
			__atomic_add_fetch(&chunks_mapped, 1, __ATOMIC_RELAXED);
		return mine;
	}
	/* Another thread published the chunk first: use that one. */
	if (i != 0)
		PS_SYSCALL(SYS_munmap, mine, PS_FD_CHUNK);
	return expected;
}

void ps_fd_store_slow(int fd, uint8_t v)
{
	uint8_t *c = chunk_for_store((unsigned)fd >> PS_FD_CHUNK_BITS);
	if (c)
		__atomic_store_n(&c[fd & (PS_FD_CHUNK - 1)], v, __ATOMIC_RELAXED);
}

void ps_fd_forget_range(unsigned lo, unsigned hi)
{
	if (hi > INT_MAX)
		hi = INT_MAX;
	if (lo > hi)
		return;
	for (unsigned i = lo >> PS_FD_CHUNK_BITS; i <= hi >> PS_FD_CHUNK_BITS; i++) {
		uint8_t **t = __atomic_load_n(&ps_fd_chunks, __ATOMIC_ACQUIRE);
		uint8_t *c = i == 0 ? ps_fd_first : t ? __atomic_load_n(&t[i], __ATOMIC_ACQUIRE) : NULL;
		if (!c)
			continue;
		unsigned base = i << PS_FD_CHUNK_BITS;
		unsigned from = lo > base ? lo - base : 0;
		unsigned to = hi - base < PS_FD_CHUNK ? hi - base : PS_FD_CHUNK - 1;
		for (unsigned k = from; k <= to; k++)
			__atomic_store_n(&c[k], 0, __ATOMIC_RELAXED);
	}
}

/* Byte by byte: never reads past the end of a short path. */
static inline bool starts(const char *s, const char *prefix)
{
	for (; *prefix; s++, prefix++)
		if (*s != *prefix)
			return false;
	return true;
}

enum ps_fdkind ps_fd_open_kind_slow(const char *path, int flags)
{
	enum ps_fdkind file = flags & O_DIRECT ? PS_FD_DIRECT : PS_FD_FILE;

	if (starts(path, "/dev/")) {
		const char *name = path + 5;
		/* Filesystems mounted under /dev hold ordinary files. */
		if (starts(name, "shm/") || starts(name, "hugepages/") || starts(name, "mqueue/"))
			return file;
		/* Reopening a descriptor: could be anything. */
		if (starts(name, "fd/") || starts(name, "std"))
			return PS_FD_NONE;
		/* O_DIRECT is refused on character devices: a block device. */
		return flags & O_DIRECT ? PS_FD_DIRECT : PS_FD_OTHER;
	}
	if (starts(path, "/proc/") && strstr(path + 6, "/fd/"))
		return PS_FD_NONE;
	return file;
}

void ps_fd_setfl(int fd, int flags)
{
	uint8_t v = ps_fd_entry(fd);
	enum ps_fdkind k = (enum ps_fdkind)(v & PS_FD_KIND_MASK);

	if (k == PS_FD_FILE || k == PS_FD_DIRECT)
		ps_fd_store(fd, (uint8_t)((flags & O_DIRECT ? PS_FD_DIRECT : PS_FD_FILE) |
					  (v & PS_FD_CHECKED)));
	else if (k == PS_FD_OTHER && (flags & O_DIRECT))
		ps_fd_forget(fd);   /* a block device turned O_DIRECT: look again */
}

bool ps_fd_is_direct_now(int fd, bool write)
{
	long fl = PS_SYSCALL(SYS_fcntl, fd, F_GETFL);
	if (fl < 0 || !(fl & O_DIRECT)) {
		/* The number was closed or reused behind the table's back. */
		ps_fd_forget(fd);
		return false;
	}
	/* O_APPEND writes must not be split or reordered. */
	if (write && (fl & O_APPEND))
		return false;
	if (ps_fd_entry(fd) & PS_FD_CHECKED)
		return true;
	/* Learnt from flags only: F_SETFL gives O_DIRECT to a FIFO too. */
	enum ps_fdkind k = ps_fd_probe(fd);
	if (k == PS_FD_NONE) {
		ps_fd_forget(fd);
		return false;
	}
	ps_fd_store(fd, (uint8_t)(k | PS_FD_CHECKED));
	return k == PS_FD_DIRECT;
}

unsigned ps_fd_chunks_mapped(void)
{
	return __atomic_load_n(&chunks_mapped, __ATOMIC_RELAXED);
}
