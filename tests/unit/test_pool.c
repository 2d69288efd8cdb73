// SPDX-License-Identifier: MIT
/*
 * Slabs without preloading: reservation, back-to-back carving, lookup by
 * arithmetic, the cap, and the pool arena's routing through alloc.c (the
 * private jemalloc is linked in, the malloc interposers are not).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/alloc.h"
#include "core/blocks.h"
#include "format/config.h"
#include "core/pool.h"
#include "format/stats.h"
#include "suites.h"

/* Forget the slabs and the blocks placed in them (the pool never calls up into its placement). */
void pst_pool_forget(void)
{
	ps_blocks_reset_for_tests();
	ps_pool_reset_for_tests();
}

void pst_pool_setup(enum ps_hugepages mode, uint64_t size)
{
	struct ps_config cfg;

	ps_config_defaults(&cfg);
	cfg.hugepages = mode;
	cfg.pool_size = size;
	pst_pool_forget();
	ck_assert_int_eq(ps_pool_init(&cfg), 0);
}

START_TEST(test_reserve)
{
	pst_pool_setup(PS_HUGE_NONE, 64 << 20);
	/* Nothing is reserved until the pool is first used. */
	ck_assert_uint_eq(ps_pool_hi, 0);
	ck_assert(!ps_pool_contains((void *)4096));
	ck_assert(!ps_pool_within_slabs((void *)4096, 1));
	ck_assert_int_eq(ps_pool_prepare(), 0);
	ck_assert_uint_eq(ps_pool_lo % PS_UNIT, 0);
	/* One unit claimed, room for twice the size: reserved as used. */
	ck_assert_uint_eq(ps_pool_hi - ps_pool_lo, PS_UNIT);
	ck_assert_uint_eq(ps_pool_span, 128 << 20);
	ck_assert(!ps_pool_contains((void *)(ps_pool_lo - 1)));
	ck_assert(ps_pool_contains((void *)ps_pool_lo));
	ck_assert(ps_pool_contains((void *)(ps_pool_hi - 1)));
	ck_assert(!ps_pool_contains((void *)ps_pool_hi));
	ck_assert(!ps_pool_contains(NULL));
	ck_assert_int_eq(ps_pool_nslabs(), 0);
	ck_assert_int_eq(ps_pool_slab_of((void *)ps_pool_lo), -1);
}
END_TEST

/* The range grows with the slabs, never ahead of them. */
START_TEST(test_reserved_as_used)
{
	bool zeroed;
	enum ps_pool_fail why;
	struct ps_pool_info info;

	pst_pool_setup(PS_HUGE_NONE, 1 << 30);
	char *a = ps_pool_take(5 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(a);
	uintptr_t end = ((uintptr_t)a + (5 << 20) + PS_UNIT - 1) & ~(PS_UNIT - 1);
	ck_assert_uint_eq(ps_pool_hi, end);
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.reserve, ps_pool_hi - ps_pool_lo);
	char *b = ps_pool_take(16 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(b);
	end = ((uintptr_t)b + (16 << 20) + PS_UNIT - 1) & ~(PS_UNIT - 1);
	ck_assert_uint_eq(ps_pool_hi, end);
	memset(b, 1, 16 << 20);
	ck_assert(ps_pool_contains((char *)end - 1));
	ck_assert(!ps_pool_contains((char *)end));
	/* A slab is the size asked for, right after the last one. */
	char *c = ps_pool_take(24 << 20, 4096, 16 << 20, &zeroed, &why);
	ck_assert_ptr_eq(c, b + (16 << 20));
	ck_assert_uint_eq(ps_pool_hi, ((uintptr_t)c + (24 << 20) + PS_UNIT - 1) & ~(PS_UNIT - 1));
}
END_TEST

START_TEST(test_take_and_lookup)
{
	bool zeroed = false;
	enum ps_pool_fail why;

	pst_pool_setup(PS_HUGE_NONE, 64 << 20);
	char *a = ps_pool_take(3 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(a);
	ck_assert(zeroed);
	char *b = ps_pool_take(1 << 20, 4096, 0, &zeroed, &why);
	char *c = ps_pool_take(8192, 1 << 20, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_nonnull(c);
	/* back to back, alignment honoured */
	ck_assert_ptr_eq(b, a + (3 << 20));
	ck_assert_uint_eq((uintptr_t)c % (1 << 20), 0);
	ck_assert_ptr_eq(c, b + (1 << 20));
	/* usable and zero */
	for (size_t i = 0; i < (3u << 20); i += 4096)
		ck_assert_int_eq(a[i], 0);
	memset(a, 0xab, 3 << 20);
	memset(b, 0xcd, 1 << 20);

	/* Each followed the last on the same pages: one slab, grown. */
	ck_assert_int_eq(ps_pool_nslabs(), 1);
	ck_assert_int_eq(ps_pool_slab_of(a), 0);
	ck_assert_int_eq(ps_pool_slab_of(a + (3 << 20) - 1), 0);
	ck_assert_int_eq(ps_pool_slab_of(b), 0);
	ck_assert_int_eq(ps_pool_slab_of(b + (1 << 20) - 1), 0);
	ck_assert_int_eq(ps_pool_slab_of(c), 0);
	ck_assert_int_eq(ps_pool_slab_of(c + 8192), -1);   /* past the last slab */
	/* Back-to-back slabs are one range of memory: a buffer may span them. */
	ck_assert(ps_pool_within_slabs(a, 3 << 20));
	ck_assert(ps_pool_within_slabs(a + 4096, 3 << 20));
	ck_assert(ps_pool_within_slabs(a + (3 << 20) - 10, 20));
	ck_assert(ps_pool_within_slabs(a, (4 << 20) + 8192));    /* c follows b */
	ck_assert(!ps_pool_within_slabs(a, (4 << 20) + 8193));   /* past the last slab */
	/* An alignment gap ends a run: nothing spans it. */
	char *d = ps_pool_take(8192, 4 << 20, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_ne(d, c + 8192);
	ck_assert(ps_pool_within_slabs(d, 8192));
	ck_assert(!ps_pool_within_slabs(c, (size_t)(d - c) + 1));
	ck_assert(!ps_pool_within_slabs(c + 8192, 1));             /* the gap itself */

	struct ps_slab s;
	ck_assert(ps_pool_slab(0, &s));
	ck_assert_uint_eq(s.base, (uintptr_t)a);
	ck_assert_uint_eq(s.len, (4 << 20) + 8192);
	ck_assert_int_eq(s.backing, PS_BACK_4K);
	ck_assert(ps_pool_slab(1, &s));
	ck_assert_uint_eq(s.base, (uintptr_t)d);
	ck_assert_uint_eq(s.len, 8192);
	ck_assert(!ps_pool_slab(2, &s));

	struct ps_pool_info info;
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.slabs, 4);   /* taken four times */
	/*
	 * 3M + 1M, a 1M-aligned 8K slab, a 4M-aligned one: backed in whole
	 * 2 MiB units, but not the unit the alignment skipped (6-8M)
	 */
	ck_assert_uint_eq(info.backed, 8 << 20);
	ck_assert_uint_eq(info.backed_by[PS_BACK_4K], 8 << 20);

	/* Protection is read over every slab a range touches. */
	ck_assert(!ps_pool_range_protected(a, 4 << 20));
	ck_assert(!ps_pool_range_protected(d, 8192));
	char *e = ps_pool_take(8192, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(e, d + 8192);
	ck_assert_int_eq(ps_pool_slab_of(e), 1);             /* d's slab, grown */
	ps_pool_note_mprotect(b + 4096, 4096, PROT_READ);
	ck_assert(ps_pool_range_protected(a, 4 << 20));
	ck_assert(ps_pool_range_protected(b, 0));
	ck_assert(!ps_pool_range_protected(d, 16384));
	ps_pool_note_mprotect(e, 4096, PROT_NONE);
	ck_assert(ps_pool_range_protected(d, 0));
	/* A slab the program protected does not grow: the next is a slab of its own. */
	char *f = ps_pool_take(8192, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(f, e + 8192);
	ck_assert_int_eq(ps_pool_slab_of(f), 2);
	ck_assert(!ps_pool_range_protected(f, 8192));
	ck_assert(ps_pool_within_slabs(d, 3 * 8192));        /* one run all the same */
	ck_assert(!ps_pool_within_slabs(d, 3 * 8192 + 1));

	/* One lookup says it all: both ends' slabs, the backing, gapless, protected. */
	struct ps_pool_range r;
	ck_assert(ps_pool_range_of(a, 4 << 20, &r));
	ck_assert_int_eq(r.first, ps_pool_slab_of(a));
	ck_assert_int_eq(r.last, ps_pool_slab_of(b));
	ck_assert_int_eq(r.backing, PS_BACK_4K);
	ck_assert(r.within && r.protected);
	ck_assert(ps_pool_range_of(f, 8192, &r));
	ck_assert(r.first == r.last && !r.protected);
	ck_assert(ps_pool_range_of(e, 8192 + 4096, &r));     /* e's slab into f's: one run */
	ck_assert(r.first == 1 && r.last == 2 && r.within && r.protected);
	ck_assert(!ps_pool_range_of((void *)4096, 1, &r));
	ck_assert(r.first == -1 && r.last == -1 && !r.within && !r.protected);
	ck_assert(!ps_pool_range_of(c, (size_t)(d - c) + 1, &r));   /* across the alignment gap */
	ck_assert_int_eq(r.first, ps_pool_slab_of(c));
}
END_TEST

/*
 * The slab table is mapped a chunk (512 slabs) at a time: lookups, copies
 * and protection marks find the right slab on both sides of a chunk's end.
 */
START_TEST(test_slab_table_chunks)
{
	bool zeroed;
	enum ps_pool_fail why;
	enum { N = 1100 };
	static char *s[N];

	pst_pool_setup(PS_HUGE_NONE, 64 << 20);
	/*
	 * Close the small region first; then 4 KiB slabs aligned to 8 KiB,
	 * each after a gap of 4 KiB, so that none grows the last one.
	 */
	ck_assert_ptr_nonnull(ps_pool_take((2 << 20) + 4096, 4096, 0, &zeroed, &why));
	for (int i = 0; i < N; i++) {
		s[i] = ps_pool_take(4096, 8192, 0, &zeroed, &why);
		ck_assert_ptr_nonnull(s[i]);
	}
	ck_assert_int_eq(ps_pool_nslabs(), N + 1);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(ps_pool_slab_of(s[i]), i + 1);
		ck_assert_int_eq(ps_pool_slab_of(s[i] + 4095), i + 1);
		ck_assert_int_eq(ps_pool_slab_of(s[i] + 4096), -1);   /* the gap */
		ck_assert(ps_pool_within_slabs(s[i], 4096));
		ck_assert(!ps_pool_within_slabs(s[i] + 1, 4096));
	}
	struct ps_slab sl;
	ck_assert(ps_pool_slab(N, &sl));
	ck_assert_uint_eq(sl.base, (uintptr_t)s[N - 1]);
	ck_assert_uint_eq(sl.len, 4096);
	ck_assert(!ps_pool_slab(N + 1, &sl));
	/* A protection change over the chunks' seam marks the slabs on both sides. */
	ps_pool_note_mprotect(s[510], 5 * 4096, PROT_READ);
	ck_assert(!ps_pool_range_protected(s[509], 4096));
	ck_assert(ps_pool_range_protected(s[510], 4096));
	ck_assert(ps_pool_range_protected(s[511], 4096));
	ck_assert(ps_pool_range_protected(s[512], 4096));
	ck_assert(!ps_pool_range_protected(s[513], 4096));
	ck_assert(ps_pool_range_protected(s[509], 3 * 4096));
}
END_TEST

START_TEST(test_cap_and_too_large)
{
	bool zeroed;
	enum ps_pool_fail why;

	pst_pool_setup(PS_HUGE_NONE, 8 << 20);
	char *a = ps_pool_take(6 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(a);
	memset(a, 1, 6 << 20);
	ck_assert_ptr_null(ps_pool_take(4 << 20, 4096, 0, &zeroed, &why));
	ck_assert_int_eq(why, PS_FAIL_POOL_FULL);
	ck_assert_ptr_nonnull(ps_pool_take(2 << 20, 4096, 0, &zeroed, &why));
	/* The cap counts what is resident: purged memory makes room again. */
	ck_assert_int_eq(ps_pool_purge(a, 6 << 20), 0);
	char *b = ps_pool_take(4 << 20, 4096, 1 << 20, &zeroed, &why);
	ck_assert_ptr_nonnull(b);
	struct ps_pool_info full;
	ps_pool_get_info(&full);
	ck_assert_uint_eq(full.backed, 12 << 20);
	ck_assert_uint_eq(full.failures[PS_FAIL_POOL_FULL], 1);

	pst_pool_setup(PS_HUGE_NONE, 4ULL << 30);
	ck_assert_ptr_null(ps_pool_take(PS_SLAB_MAX + 4096, 4096, 0, &zeroed, &why));
	ck_assert_int_eq(why, PS_FAIL_TOO_LARGE);

	struct ps_pool_info info;
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.failures[PS_FAIL_TOO_LARGE], 1);
}
END_TEST

START_TEST(test_mode_reasons)
{
	struct ps_pool_info info;
	bool zeroed;
	enum ps_pool_fail why;

	pst_pool_setup(PS_HUGE_NONE, 64 << 20);
	/* The page kinds are probed with the reservation, on first use. */
	ps_pool_get_info(&info);
	ck_assert_ptr_null(info.hugetlb_reason);
	ck_assert_int_eq(ps_pool_prepare(), 0);
	ps_pool_get_info(&info);
	ck_assert_ptr_nonnull(info.hugetlb_reason);
	ck_assert_ptr_nonnull(strstr(info.thp_reason, "POOLSHIM_HUGEPAGES=none"));

	pst_pool_setup(PS_HUGE_THP, 64 << 20);
	ck_assert_ptr_nonnull(ps_pool_take(2 << 20, 4096, 0, &zeroed, &why));
	ps_pool_get_info(&info);
	ck_assert_ptr_nonnull(strstr(info.hugetlb_reason, "not requested"));
	if (info.thp_reason == NULL)
		ck_assert_uint_eq(info.backed_by[PS_BACK_THP], 2 << 20);

	/* A slab above POOLSHIM_HUGEPAGE_MAX (32 MiB by default) gets 4 KiB pages. */
	pst_pool_setup(PS_HUGE_THP, 256 << 20);
	char *big = ps_pool_take(34 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(big);
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.backed_by[PS_BACK_THP], 0);
	ck_assert_uint_ge(info.backed_by[PS_BACK_4K], 34 << 20);
	struct ps_pool_range r;
	ck_assert(ps_pool_range_of(big, 34 << 20, &r));
	ck_assert_int_eq(r.backing, PS_BACK_4K);
	if (info.thp_reason == NULL) {
		/* One at the limit still has hugepages. */
		ck_assert_ptr_nonnull(ps_pool_take(32 << 20, 2 << 20, 0, &zeroed, &why));
		ps_pool_get_info(&info);
		ck_assert_uint_eq(info.backed_by[PS_BACK_THP], 32 << 20);
	}
}
END_TEST

/* The first slabs are sized by need, backed in 64 KiB steps of 4 KiB pages. */
START_TEST(test_small_first)
{
	bool zeroed;
	enum ps_pool_fail why;
	struct ps_pool_info info;

	pst_pool_setup(PS_HUGE_NONE, 64 << 20);
	char *a = ps_pool_take((128 << 10) + 4096, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(a, (char *)ps_pool_lo);
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.backed, 192 << 10);
	ck_assert_uint_eq(info.backed_by[PS_BACK_4K], 192 << 10);
	ck_assert_uint_eq(info.failures[PS_FAIL_NONE], 0);
	memset(a, 1, (128 << 10) + 4096);
	/* the next one continues in the backed step, then a new step */
	char *b = ps_pool_take(100 << 10, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(b, a + (128 << 10) + 4096);
	memset(b, 2, 100 << 10);
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.backed, 256 << 10);
	ck_assert_int_eq(ps_pool_slab_of(b), 0);         /* a's slab, grown */
	ck_assert_int_eq(ps_pool_slab_of(a + 4096), 0);
	/* too big for the region: it closes, slabs go on at the next unit */
	char *c = ps_pool_take(3 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(c, (char *)ps_pool_lo + PS_UNIT);
	memset(c, 3, 3 << 20);
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.backed, (256 << 10) + (4 << 20));
	ck_assert_int_eq(ps_pool_slab_of(c), 1);
	ck_assert_int_eq(ps_pool_slab_of((char *)ps_pool_lo + (1 << 20)), -1);   /* the gap */
	ck_assert(!ps_pool_within_slabs(b, (size_t)(c - b)));

	/*
	 * With THP too: a first small buffer costs its 4 KiB pages, not a
	 * whole hugepage; the first request too big for the region goes to
	 * the next unit, which is THP.
	 */
	pst_pool_setup(PS_HUGE_THP, 64 << 20);
	char *d = ps_pool_take(64 << 10, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(d, (char *)ps_pool_lo);
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.backed, 64 << 10);
	ck_assert_uint_eq(info.backed_by[PS_BACK_4K], 64 << 10);
	char *e = ps_pool_take(4 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(e, (char *)ps_pool_lo + PS_UNIT);
	/* and hugepage slabs follow one another too, sharing a unit */
	char *f = ps_pool_take(3 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(f, e + (4 << 20));
	char *g = ps_pool_take(1 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_eq(g, f + (3 << 20));
	ck_assert(ps_pool_within_slabs(e, 8 << 20));
}
END_TEST

/* A length that wraps past the end of the address space is never "within". */
START_TEST(test_within_slab_wrap)
{
	bool zeroed;
	enum ps_pool_fail why;

	pst_pool_setup(PS_HUGE_NONE, 64 << 20);
	char *a = ps_pool_take(1 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(a);
	ck_assert(ps_pool_within_slabs(a + 4096, (1 << 20) - 4096));
	ck_assert(!ps_pool_within_slabs(a + 4096, (1 << 20) - 4095));
	ck_assert(!ps_pool_within_slabs(a + 4096, SIZE_MAX));
	ck_assert(!ps_pool_within_slabs(a + (1 << 20) - 1, SIZE_MAX - 4096));
	ck_assert(!ps_pool_within_slabs(a + 8192, (size_t)0 - 4096));
	ps_pool_note_mprotect(a, 4096, PROT_NONE);
	ck_assert(ps_pool_range_protected(a + 8192, (size_t)0 - 4096));
}
END_TEST

/* Free pages go back: any page range of 4 KiB units, whole THP units only. */
START_TEST(test_purge)
{
	bool zeroed;
	enum ps_pool_fail why;
	struct ps_pool_info info;

	pst_pool_setup(PS_HUGE_NONE, 64 << 20);
	char *a = ps_pool_take(4 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(a);
	memset(a, 0x5a, 4 << 20);
	ck_assert_int_eq(ps_pool_purge(a + 8192, 1 << 20), 0);
	ck_assert_int_eq(a[8192], 0);
	ck_assert_int_eq(a[8191], 0x5a);
	ck_assert_int_eq(a[8192 + (1 << 20)], 0x5a);
	ps_pool_get_info(&info);
	ck_assert_uint_eq(info.purged, 1 << 20);
	/* Purged pages are the pool's again, not protected ones: O_DIRECT stays on the ring. */
	ck_assert(!ps_pool_range_protected(a, 4 << 20));
	ck_assert_int_eq(ps_pool_purge((void *)4096, 4096), -EINVAL);

	pst_pool_setup(PS_HUGE_THP, 64 << 20);
	char *b = ps_pool_take(4 << 20, 4096, 0, &zeroed, &why);
	ck_assert_ptr_nonnull(b);
	ps_pool_get_info(&info);
	if (info.backed_by[PS_BACK_THP] == 0)
		return;   /* THP off here: 4 KiB units */
	ck_assert_uint_eq((uintptr_t)b % PS_UNIT, 0);
	memset(b, 0x5a, 4 << 20);
	ck_assert_int_eq(ps_pool_purge(b + 4096, (4 << 20) - 4096), -EAGAIN);
	ck_assert_int_eq(b[4096], 0x5a);      /* part of the first unit: kept */
	ck_assert_int_eq(b[PS_UNIT], 0);      /* the second unit, whole: gone */
}
END_TEST

/* Through alloc.c, with each allocator (_i): threshold routing, reuse, zeroing. */
START_TEST(test_arena_routing)
{
	struct ps_config cfg;

	ps_config_defaults(&cfg);
	cfg.pool_allocator = (enum ps_pool_allocator)_i;
	cfg.hugepages = PS_HUGE_NONE;
	cfg.pool_size = 256 << 20;
	pst_pool_forget();
	ck_assert_int_eq(ps_alloc_init(&cfg), 0);
	ck_assert(ps_alloc_pool_ready());

	void *small = ps_malloc(1000);
	void *big = ps_malloc(1 << 20);
	ck_assert(!ps_pool_contains(small));
	ck_assert(ps_pool_contains(big));
	ck_assert(ps_pool_within_slabs(big, 1 << 20));
	memset(big, 0x5a, 1 << 20);
	ps_free(big);
	/* the same size comes back from the pool, and calloc zeroes it */
	char *again = ps_calloc(1, 1 << 20);
	ck_assert(ps_pool_contains(again));
	for (size_t i = 0; i < (1u << 20); i++)
		if (again[i] != 0)
			ck_abort_msg("calloc left a non-zero byte at %zu", i);
	/* realloc across the threshold keeps the contents both ways */
	memset(again, 7, 1 << 20);
	char *down = ps_realloc(again, 100);
	ck_assert(!ps_pool_contains(down));
	ck_assert_int_eq(down[99], 7);
	char *up = ps_realloc(down, 200 << 10);
	ck_assert(ps_pool_contains(up));
	ck_assert_int_eq(up[0], 7);
	ck_assert_int_eq(up[99], 7);
	ps_free(up);
	ck_assert_uint_ge(ps_usable_size(small), 1000);
	ps_free(small);
	ps_alloc_counts_sync();      /* batched once a second thread made pooled calls */
	ck_assert_uint_eq(ps_gauges->pool_in_use, 0);
	ck_assert_uint_ge(ps_gauges->pool_peak, 1 << 20);
}
END_TEST

/*
 * Blocks freed on either side of a slab border merge: two 1 MiB blocks,
 * each a slab of its own, serve one 2 MiB request once both are free, and
 * the pool takes no new slab for it.
 */
START_TEST(test_arena_merges)
{
	struct ps_config cfg;

	ps_config_defaults(&cfg);
	cfg.pool_allocator = (enum ps_pool_allocator)_i;
	cfg.hugepages = PS_HUGE_NONE;
	cfg.pool_size = 256 << 20;
	cfg.pool_cache = 0;        /* the placement's merging, with no cache in front */
	pst_pool_forget();
	ck_assert_int_eq(ps_alloc_init(&cfg), 0);

	char *a = ps_malloc(1 << 20);
	char *b = ps_malloc(1 << 20);
	ck_assert(ps_pool_contains(a) && ps_pool_contains(b));
	ck_assert_ptr_eq(b, a + (1 << 20));
	struct ps_pool_info info;
	ps_pool_get_info(&info);
	ck_assert_uint_ge(info.slabs, 2);   /* b took memory of its own */
	int slabs = ps_pool_nslabs();
	ps_free(a);
	ps_free(b);
	char *c = ps_malloc(2 << 20);
	ck_assert_ptr_eq(c, a);
	ck_assert_int_eq(ps_pool_nslabs(), slabs);
	ck_assert(ps_pool_within_slabs(c, 2 << 20));
	memset(c, 1, 2 << 20);
	ps_free(c);
}
END_TEST

Suite *suite_pool(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("pool");

	tcase_add_test(tc, test_reserve);
	tcase_add_test(tc, test_reserved_as_used);
	tcase_add_test(tc, test_take_and_lookup);
	tcase_add_test(tc, test_slab_table_chunks);
	tcase_add_test(tc, test_cap_and_too_large);
	tcase_add_test(tc, test_mode_reasons);
	tcase_add_test(tc, test_small_first);
	tcase_add_test(tc, test_within_slab_wrap);
	tcase_add_test(tc, test_purge);
	tcase_add_loop_test(tc, test_arena_routing, 0, PS_POOL_ALLOC__COUNT);
	tcase_add_loop_test(tc, test_arena_merges, 0, PS_POOL_ALLOC__COUNT);
	suite_add_tcase(s, tc);
	return s;
}
