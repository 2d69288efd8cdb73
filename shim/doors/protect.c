// SPDX-License-Identifier: MIT
/*
 * The page-protection interposers.  Protection the program puts on pooled
 * memory must keep working for I/O.  io_uring's plain READ/WRITE SQEs
 * check it as pread does (the kernel pins the pages per request), but a
 * request split into chunks could answer a partly protected buffer
 * differently from one system call; the pool remembers protected slabs
 * and their I/O takes the plain calls (pool.c, uring.c).  A raw mprotect
 * system call is not seen here: the kernel's own check at I/O time still
 * gives EFAULT, and uring.c answers EFAULT for the whole call as one
 * O_DIRECT system call does.
 */
#include <sys/mman.h>

#include "format/compiler.h"
#include "core/pool.h"
#include "doors/real.h"

PS_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	int r = REAL(mprotect)(addr, len, prot);
	if (r == 0)
		ps_pool_note_mprotect(addr, len, prot);
	return r;
}

PS_EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	int r = REAL(pkey_mprotect)(addr, len, prot, pkey);
	if (r == 0)
		/* A protection key can take access away whatever prot says. */
		ps_pool_note_mprotect(addr, len, pkey == -1 ? prot : PROT_NONE);
	return r;
}
