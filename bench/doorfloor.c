// SPDX-License-Identifier: MIT
/*
 * The least any malloc interposer can cost: a preloaded library whose
 * malloc family checks a size against a threshold and jumps to glibc's
 * own entry points, nothing else.  scripts/bench allocthreads runs it
 * beside the shim, so that the ratio to no shim can be read against the
 * floor every interposer pays (the program's call now lands in a second
 * object, which compares and jumps on), not only against 1.0.
 */
#include <stddef.h>
#include <stdlib.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);

#define EXPORT __attribute__((visibility("default")))

/* Volatile through a pointer the compiler cannot see: the compare stays. */
static size_t floor_threshold = 64 << 10;
static void *(*volatile floor_big_malloc)(size_t) = __libc_malloc;

EXPORT void *malloc(size_t size)
{
	if (__builtin_expect(size < floor_threshold, 1))
		return __libc_malloc(size);
	return floor_big_malloc(size);
}

EXPORT void *calloc(size_t n, size_t size)
{
	return __libc_calloc(n, size);
}

EXPORT void *realloc(void *p, size_t size)
{
	return __libc_realloc(p, size);
}

EXPORT void free(void *p)
{
	__libc_free(p);
}
