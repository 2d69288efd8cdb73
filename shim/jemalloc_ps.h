/* SPDX-License-Identifier: MIT */
/*
 * The private jemalloc linked into the shim: Debian's libjemalloc_pic.a
 * with its public names renamed to psje_* at build time (Makefile.am).
 * Types and MALLOCX_* flags come from jemalloc's own header.
 */
#ifndef PS_JEMALLOC_PS_H
#define PS_JEMALLOC_PS_H

#include <stddef.h>
#include <jemalloc/jemalloc.h>

void *psje_mallocx(size_t size, int flags);
void *psje_rallocx(void *ptr, size_t size, int flags);
size_t psje_xallocx(void *ptr, size_t size, size_t extra, int flags);
size_t psje_sallocx(const void *ptr, int flags);
void psje_dallocx(void *ptr, int flags);
void psje_sdallocx(void *ptr, size_t size, int flags);
size_t psje_nallocx(size_t size, int flags);
int psje_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

#endif
