/* SPDX-License-Identifier: MIT */
/*
 * The private jemalloc of POOLSHIM_POOL_ALLOCATOR=jemalloc: Debian's
 * libjemalloc_pic.a with its public names renamed to psje_* at build time
 * (shim/local.mk), linked into libpoolshim-jemalloc.so only.
 * Types and MALLOCX_* flags come from jemalloc's own header.
 */
#ifndef PS_JEMALLOC_PS_H
#define PS_JEMALLOC_PS_H

#include <stdbool.h>
#include <stddef.h>
#include <jemalloc/jemalloc.h>

/*
 * Weak, and hidden: libpoolshim.so is linked without the copy (pages
 * placement only), and there they are NULL; libpoolshim-jemalloc.so and
 * the test builds link it in (shim/local.mk: JEMALLOC_PS_LINK).
 */
#define PS_JE_WEAK __attribute__((weak, visibility("hidden")))
PS_JE_WEAK void *psje_mallocx(size_t size, int flags);
PS_JE_WEAK void *psje_rallocx(void *ptr, size_t size, int flags);
PS_JE_WEAK size_t psje_sallocx(const void *ptr, int flags);
PS_JE_WEAK void psje_dallocx(void *ptr, int flags);
PS_JE_WEAK int psje_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
			    size_t newlen);
/* The private jemalloc's options (set before it initialises: alloc.c). */
PS_JE_WEAK extern bool je_opt_cache_oblivious;
PS_JE_WEAK extern bool je_opt_retain;
PS_JE_WEAK extern size_t je_opt_lg_extent_max_active_fit;
PS_JE_WEAK extern bool je_opt_tcache;
PS_JE_WEAK extern unsigned je_opt_narenas;

/* Whether this library holds the copy. */
static inline bool ps_have_jemalloc(void)
{
	return psje_mallocx != NULL;
}

#endif
