// SPDX-License-Identifier: MIT
/*
 * The malloc-family interposers.  Each one is a thin door: on, it calls the
 * core allocator (alloc.c); with POOLSHIM=off, glibc's own allocator through
 * its __libc_* entry points, so the program runs as if we were not loaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "alloc.h"
#include "compiler.h"
#include "init.h"
#include "pool.h"

/* glibc's allocator, reachable whatever the symbol search order says. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

/* Gone from glibc's headers, still reachable by old binaries. */
void cfree(void *p);

PS_EXPORT void *malloc(size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_malloc(size);
	return __libc_malloc(size);
}

PS_EXPORT void free(void *p)
{
	if (ps_likely(ps_enabled()))
		ps_free(p);
	else
		__libc_free(p);
}

PS_EXPORT void cfree(void *p)
{
	free(p);
}

PS_EXPORT void *calloc(size_t n, size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_calloc(n, size);
	return __libc_calloc(n, size);
}

PS_EXPORT void *realloc(void *p, size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_realloc(p, size);
	return __libc_realloc(p, size);
}

PS_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (ps_likely(ps_enabled()))
		return ps_reallocarray(p, n, size);
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return __libc_realloc(p, total);
}

PS_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_posix_memalign(out, align, size);
	if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *) != 0)
		return EINVAL;
	int saved_errno = errno;
	void *p = __libc_memalign(align, size);
	errno = saved_errno;
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

PS_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_aligned_alloc(align, size);
	return __libc_memalign(align, size);
}

PS_EXPORT void *memalign(size_t align, size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_memalign(align, size);
	return __libc_memalign(align, size);
}

PS_EXPORT void *valloc(size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_valloc(size);
	return __libc_valloc(size);
}

PS_EXPORT void *pvalloc(size_t size)
{
	if (ps_likely(ps_enabled()))
		return ps_pvalloc(size);
	return __libc_pvalloc(size);
}

PS_EXPORT size_t malloc_usable_size(void *p)
{
	static size_t (*real_usable)(void *);

	if (ps_likely(ps_enabled()))
		return ps_usable_size(p);
	if (!real_usable) {
		real_usable = (size_t (*)(void *))dlvsym(RTLD_NEXT, "malloc_usable_size", "GLIBC_2.2.5");
		if (!real_usable)
			real_usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
	}
	return real_usable ? real_usable(p) : 0;
}

/*
 * Page protection the program puts on pooled memory must keep working for
 * I/O: remember it, so such buffers stay off the fixed-buffer path.
 */
PS_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	static int (*real_mprotect)(void *, size_t, int);

	if (!real_mprotect)
		real_mprotect = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "mprotect");
	if (!real_mprotect) {
		errno = ENOSYS;
		return -1;
	}
	int r = real_mprotect(addr, len, prot);
	if (r == 0)
		ps_pool_note_mprotect(addr, len, prot);
	return r;
}

PS_EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	static int (*real_pkey_mprotect)(void *, size_t, int, int);

	if (!real_pkey_mprotect)
		real_pkey_mprotect = (int (*)(void *, size_t, int, int))dlsym(RTLD_NEXT, "pkey_mprotect");
	if (!real_pkey_mprotect) {
		errno = ENOSYS;
		return -1;
	}
	int r = real_pkey_mprotect(addr, len, prot, pkey);
	if (r == 0)
		/* A protection key can take access away whatever prot says. */
		ps_pool_note_mprotect(addr, len, pkey == -1 ? prot : PROT_NONE);
	return r;
}
