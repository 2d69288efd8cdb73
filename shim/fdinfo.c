// SPDX-License-Identifier: MIT
/* The descriptor-kind cache behind the per-kind I/O counters. */
#include "fdinfo.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "sys.h"

uint8_t ps_fd_cache[PS_FD_CACHE];

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

void ps_fd_forget_range(unsigned lo, unsigned hi)
{
	if (lo >= PS_FD_CACHE)
		return;
	if (hi >= PS_FD_CACHE)
		hi = PS_FD_CACHE - 1;
	for (unsigned fd = lo; fd <= hi; fd++)
		__atomic_store_n(&ps_fd_cache[fd], 0, __ATOMIC_RELAXED);
}

int ps_fd_is_direct_now(int fd, bool write)
{
	long fl = PS_SYSCALL(SYS_fcntl, fd, F_GETFL);
	return fl >= 0 && (fl & O_DIRECT) && !(write && (fl & O_APPEND));
}
