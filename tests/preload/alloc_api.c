// SPDX-License-Identifier: MIT
/*
 * The malloc family's contract under the shim: zeroing of recycled pool
 * memory, alignments up to 2 MiB, usable sizes, realloc across the pool
 * threshold, zero sizes, overflow and failure errnos, and small blocks left
 * to glibc.  Runs with or without the shim; pool placement is asserted
 * only when the shim is loaded and on.
 */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib.h"

/* Large buffers land in the pool when the shim is loaded and not switched off. */
static bool expect_pool(void)
{
	const char *off = getenv("POOLSHIM");
	return pst_shim_loaded() && !(off && (!strcmp(off, "off") || !strcmp(off, "0")));
}

/* volatile: keep the compiler from rejecting the sizes at build time */
static volatile size_t half_max = SIZE_MAX / 2, near_max = SIZE_MAX - 4096;

START_TEST(test_pool_placement)
{
	void *small = malloc(1000);
	void *big = malloc(1 << 20);
	ck_assert_ptr_nonnull(small);
	ck_assert_ptr_nonnull(big);
	ck_assert(!pst_pooled(small));
	ck_assert_int_eq(pst_pooled(big), expect_pool());
	free(small);
	free(big);
}
END_TEST

/*
 * Below the threshold the program keeps its own allocator: glibc's heap
 * holds the blocks, so glibc's own statistics (mallinfo2, which the shim
 * does not interpose) count them, as they would without the shim.
 */
START_TEST(test_small_blocks_are_glibcs)
{
	enum { N = 64, SIZE = 1000 };
	void *p[N];
	size_t before = mallinfo2().uordblks;
	for (int i = 0; i < N; i++) {
		p[i] = i % 2 ? malloc(SIZE) : calloc(1, SIZE);
		ck_assert_ptr_nonnull(p[i]);
	}
	size_t grew = mallinfo2().uordblks - before;
	ck_assert_msg(grew >= (size_t)N * SIZE,
		      "glibc's heap grew by %zu bytes for %d blocks of %d", grew, N, SIZE);
	for (int i = 0; i < N; i++)
		free(p[i]);
}
END_TEST

START_TEST(test_calloc_zeroes_recycled)
{
	for (size_t size = 64 << 10; size <= (8u << 20); size *= 2) {
		for (int round = 0; round < 3; round++) {
			unsigned char *p = malloc(size);
			ck_assert_ptr_nonnull(p);
			memset(p, 0xff, size);
			free(p);
			unsigned char *q = calloc(1, size);
			ck_assert_ptr_nonnull(q);
			for (size_t i = 0; i < size; i++)
				if (q[i] != 0)
					ck_abort_msg("calloc(%zu) byte %zu is %d", size, i, q[i]);
			memset(q, 0xee, size);
			free(q);
		}
	}
}
END_TEST

START_TEST(test_alignments)
{
	for (size_t align = sizeof(void *); align <= (2u << 20); align *= 2) {
		size_t sizes[] = { 1, 100, 4096, 64 << 10, 1 << 20, 3 << 20 };
		for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++) {
			void *p = NULL;
			ck_assert_int_eq(posix_memalign(&p, align, sizes[k]), 0);
			ck_assert_uint_eq((uintptr_t)p % align, 0);
			ck_assert_uint_ge(malloc_usable_size(p), sizes[k]);
			memset(p, 1, sizes[k]);
			free(p);
			p = aligned_alloc(align, sizes[k]);
			ck_assert_ptr_nonnull(p);
			ck_assert_uint_eq((uintptr_t)p % align, 0);
			free(p);
			p = memalign(align, sizes[k]);
			ck_assert_ptr_nonnull(p);
			ck_assert_uint_eq((uintptr_t)p % align, 0);
			free(p);
		}
	}
	/* glibc rounds a memalign alignment that is not a power of two up */
	void *p = memalign(3000, 100);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq((uintptr_t)p % 4096, 0);
	free(p);
	long page = sysconf(_SC_PAGESIZE);
	p = valloc(10);
	ck_assert_uint_eq((uintptr_t)p % (uintptr_t)page, 0);
	free(p);
	p = pvalloc(10);
	ck_assert_uint_eq((uintptr_t)p % (uintptr_t)page, 0);
	ck_assert_uint_ge(malloc_usable_size(p), (size_t)page);
	free(p);
	p = valloc(1 << 20);
	ck_assert_uint_eq((uintptr_t)p % (uintptr_t)page, 0);
	ck_assert_int_eq(pst_pooled(p), expect_pool());
	free(p);
}
END_TEST

START_TEST(test_posix_memalign_errors)
{
	void *p = (void *)0x1;
	errno = 1234;
	ck_assert_int_eq(posix_memalign(&p, 3, 100), EINVAL);
	ck_assert_int_eq(posix_memalign(&p, 4, 100), EINVAL);   /* not a multiple of void* */
	ck_assert_int_eq(posix_memalign(&p, 0, 100), EINVAL);
	ck_assert_ptr_eq(p, (void *)0x1);
	ck_assert_int_eq(errno, 1234);
	/* On failure glibc 2.36 leaves memalign's ENOMEM in errno (host_errno.sh compares). */
	ck_assert_int_eq(posix_memalign(&p, 64, (size_t)half_max), ENOMEM);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_ptr_eq(p, (void *)0x1);
}
END_TEST

START_TEST(test_usable_size)
{
	ck_assert_uint_eq(malloc_usable_size(NULL), 0);
	for (size_t n = 1; n <= (32u << 20); n = n * 3 + 1) {
		unsigned char *p = malloc(n);
		size_t u = malloc_usable_size(p);
		ck_assert_uint_ge(u, n);
		memset(p, 0xa5, u);   /* the whole usable size is ours */
		free(p);
	}
}
END_TEST

START_TEST(test_realloc_across_threshold)
{
	size_t sizes[] = { 10, 1000, 60 << 10, 64 << 10, 200 << 10, 3 << 20, 17 << 20,
			   100 << 10, 50, 5 << 20, 1 };
	size_t have = 0;
	unsigned char *p = NULL;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++) {
		size_t n = sizes[k];
		p = realloc(p, n);
		ck_assert_ptr_nonnull(p);
		size_t keep = have < n ? have : n;
		ck_assert_msg(pst_check(p, keep, 99), "realloc to %zu lost data", n);
		pst_fill(p, n, 99);
		have = n;
		if (n >= (64u << 10))
			ck_assert_int_eq(pst_pooled(p), expect_pool());
		else
			ck_assert(!pst_pooled(p));
	}
	free(p);
}
END_TEST

START_TEST(test_zero_sizes)
{
	void *a = malloc(0), *b = malloc(0);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_ne(a, b);
	free(a);
	free(b);
	void *c = calloc(0, 10);
	ck_assert_ptr_nonnull(c);
	free(c);
	/* glibc: realloc(p, 0) frees p and returns NULL */
	void *d = malloc(100);
	ck_assert_ptr_null(realloc(d, 0));
	void *e = realloc(NULL, 0);
	ck_assert_ptr_nonnull(e);
	free(e);
	free(NULL);
}
END_TEST

START_TEST(test_failures)
{
	errno = 0;
	ck_assert_ptr_null(calloc(half_max, 3));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	ck_assert_ptr_null(malloc(near_max));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	void *p = malloc(10);
	ck_assert_ptr_null(reallocarray(p, half_max, 3));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	ck_assert_ptr_null(realloc(p, near_max));
	ck_assert_int_eq(errno, ENOMEM);
	free(p);   /* still valid after a failed realloc */
	errno = 0;
	ck_assert_ptr_null(aligned_alloc(4096, near_max));
	ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

START_TEST(test_errno_untouched_on_success)
{
	errno = 4321;
	void *a = malloc(5 << 20);
	void *b = calloc(10, 100);
	a = realloc(a, 7 << 20);
	void *c = NULL;
	ck_assert_int_eq(posix_memalign(&c, 4096, 1 << 20), 0);
	free(a);
	free(b);
	free(c);
	ck_assert_int_eq(errno, 4321);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("alloc_api");
	TCase *tc = tcase_create("api");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pool_placement);
	tcase_add_test(tc, test_small_blocks_are_glibcs);
	tcase_add_test(tc, test_calloc_zeroes_recycled);
	tcase_add_test(tc, test_alignments);
	tcase_add_test(tc, test_posix_memalign_errors);
	tcase_add_test(tc, test_usable_size);
	tcase_add_test(tc, test_realloc_across_threshold);
	tcase_add_test(tc, test_zero_sizes);
	tcase_add_test(tc, test_failures);
	tcase_add_test(tc, test_errno_untouched_on_success);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
