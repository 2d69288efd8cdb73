/* SPDX-License-Identifier: MIT */
/*
 * The rules POSIX and glibc set for the malloc family's arguments, written
 * once for both heaps: ours (alloc.c) and the allocator that owns the heap
 * when we do not (heap.c).  Pure, inline, no errno: the callers turn a
 * false into the errno their function's contract names.
 */
#ifndef PS_POSIX_H
#define PS_POSIX_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/sys.h"

static inline bool ps_posix_pow2(size_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* calloc and reallocarray: n * size in *total; false when it overflows (ENOMEM). */
static inline bool ps_posix_array(size_t n, size_t size, size_t *total)
{
	return !__builtin_mul_overflow(n, size, total);
}

/*
 * memalign(3), aligned_alloc(3): glibc raises an alignment below min to
 * min and rounds one that is not a power of two up to the next.  false
 * when no power of two is that large (EINVAL).
 */
static inline bool ps_posix_align(size_t *align, size_t min)
{
	size_t a = *align < min ? min : *align;
	if (a > SIZE_MAX / 2 + 1)
		return false;
	*align = ps_posix_pow2(a) ? a : (size_t)1 << (64 - __builtin_clzl(a));
	return true;
}

/* posix_memalign(3): a power of two and a multiple of sizeof(void *), else EINVAL. */
static inline bool ps_posix_memalign_ok(size_t align)
{
	return ps_posix_pow2(align) && align % sizeof(void *) == 0;
}

/*
 * pvalloc(3) as glibc 2.36 rounds: size plus a page less one, masked with
 * -(page - 1) rather than -page, so pvalloc(0) asks for 1 byte (page
 * aligned, usable size 24) and most sizes for one byte more than whole
 * pages.  The manual says "rounded up to the next multiple of the page
 * size"; a program sees glibc's numbers, so ours are glibc's.  false on
 * overflow (ENOMEM).
 */
static inline bool ps_posix_pages(size_t size, size_t *rounded)
{
	size_t r;
	if (__builtin_add_overflow(size, PS_PAGE - 1, &r))
		return false;
	*rounded = r & -(PS_PAGE - 1);
	return true;
}

/*
 * posix_memalign(3) from a memalign-like function: 0 or the errno value.
 * errno is untouched on success; on failure it is what memalign left, as
 * glibc's posix_memalign leaves its _mid_memalign's ENOMEM (POSIX says
 * nothing of errno here, and programs that test it see glibc's value).
 */
static inline int ps_posix_memalign_via(void *(*memalign_fn)(size_t, size_t), void **out,
					size_t align, size_t size)
{
	if (!ps_posix_memalign_ok(align))
		return EINVAL;
	int saved_errno = errno;
	void *p = memalign_fn(align, size);
	if (!p)
		return ENOMEM;
	errno = saved_errno;
	*out = p;
	return 0;
}

#endif
