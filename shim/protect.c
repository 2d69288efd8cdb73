// SPDX-License-Identifier: MIT
/*
 * The page-protection interposers.  Protection the program puts on pooled
 * memory must keep working for I/O: the pool remembers it, so that such
 * buffers stay off io_uring's fixed-buffer path (pool.c, uring.c).
 */
#include <sys/mman.h>

#include "compiler.h"
#include "pool.h"
#include "real.h"

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
