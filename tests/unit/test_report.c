// SPDX-License-Identifier: MIT
/* Report rendering from known numbers (text and JSON) and path expansion. */
#include <errno.h>
#include <string.h>

#include "format/emit.h"
#include "format/fmt.h"
#include "format/report.h"
#include "suites.h"

static struct ps_tstats totals;

static void sample(struct ps_report_data *d)
{
	memset(&totals, 0, sizeof(totals));
	memset(d, 0, sizeof(*d));
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].calls = 3;
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].bytes = (1 << 20) + 2 * 65536;
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[16] = 2;
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[20] = 1;
	totals.c[PS_CALL_READ][PS_FD_SOCKET].calls = 10;
	totals.c[PS_CALL_READ][PS_FD_SOCKET].errors = 4;
	totals.c[PS_CALL_READ][PS_FD_SOCKET].eagain = 4;
	totals.c[PS_CALL_READ][PS_FD_SOCKET].timed = 10;
	totals.c[PS_CALL_READ][PS_FD_SOCKET].nsec = 10000;
	totals.c[PS_CALL_READ][PS_FD_SOCKET].lat_hist[10] = 10;
	totals.errnos[PS_CALL_READ][EAGAIN] = 4;
	totals.events[PS_EV_POOL_ALLOC] = 3;
	totals.events[PS_EV_FB_POOL_FULL] = 2;
	d->pid = 4242;
	d->program = "my\"prog";
	d->totals = &totals;
	d->pool_ready = true;
	d->pool.requested = PS_HUGE_AUTO;
	d->allocator = "pages";
	d->pool.first_mode = PS_BACK_HUGETLB;
	d->pool.slabs = 2;
	d->pool.backed = 4 << 20;
	d->pool.backed_by[PS_BACK_HUGETLB] = 4 << 20;
	d->pool.cap = 1 << 30;
	d->pool_in_use = 1 << 20;
	d->pool_peak = 3 << 20;
	d->pool_min = 65536;
	d->minflt = 77;
	d->threads = 2;
}

START_TEST(test_text)
{
	struct ps_report_data d;
	static char storage[16384];
	struct ps_buf b;

	sample(&d);
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_TEXT);
	const char *s = ps_buf_str(&b);
	ck_assert(!b.truncated);
	ck_assert_ptr_nonnull(strstr(s, "pid 4242"));
	ck_assert_ptr_nonnull(strstr(s, "mode hugetlb (requested auto); placement pages; 2 slabs, 4M backed"));
	ck_assert_ptr_nonnull(strstr(s, "in use 1M, peak 3M, cap 1G"));
	ck_assert_ptr_nonnull(strstr(s, "3 allocations served"));
	ck_assert_ptr_nonnull(strstr(s, "pool_full 2"));
	ck_assert_ptr_nonnull(strstr(s, "page faults 77 minor"));
	ck_assert_ptr_nonnull(strstr(s, "malloc          -                3       1.1M"));
	ck_assert_ptr_nonnull(strstr(s, "read            socket          10"));
	ck_assert_ptr_nonnull(strstr(s, "EAGAIN:4"));
	/* average over the timed calls */
	ck_assert_ptr_nonnull(strstr(s, "       4        4     1000  EAGAIN:4"));
	ck_assert_ptr_nonnull(strstr(s, " 64K:2 1M:1"));
	ck_assert_ptr_nonnull(strstr(s, " 1024:10"));
}
END_TEST

START_TEST(test_json)
{
	struct ps_report_data d;
	static char storage[16384];
	struct ps_buf b;

	sample(&d);
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_JSON);
	const char *s = ps_buf_str(&b);
	ck_assert(!b.truncated);
	ck_assert_ptr_nonnull(strstr(s, "{\"schema\":\"poolshim-report\",\"version\":3,\"pid\":4242,"
				       "\"program\":\"my\\\"prog\""));
	ck_assert_ptr_nonnull(strstr(s, "\"mode\":\"hugetlb\""));
	ck_assert_ptr_nonnull(strstr(s, "\"hugetlb_reason\":null"));
	ck_assert_ptr_nonnull(strstr(s, "\"allocator\":\"pages\""));
	ck_assert_ptr_nonnull(strstr(s, "\"fallbacks\":{\"pool_full\":2,"));
	ck_assert_ptr_nonnull(strstr(s, "{\"call\":\"malloc\",\"kind\":\"none\",\"calls\":3,"
				       "\"bytes\":1179648"));
	ck_assert_ptr_nonnull(strstr(s, "\"size_hist\":[[65536,2],[1048576,1]]"));
	ck_assert_ptr_nonnull(strstr(s, "\"errnos\":{\"EAGAIN\":4}"));
	ck_assert_ptr_nonnull(strstr(s, "\"lat_hist\":[[1024,10]]"));
	/* balanced braces and brackets: a cheap structural check (python validates fully) */
	int depth = 0;
	bool in_str = false;
	for (const char *p = s; *p; p++) {
		if (*p == '\\' && in_str) {
			p++;
			continue;
		}
		if (*p == '"')
			in_str = !in_str;
		else if (!in_str && (*p == '{' || *p == '['))
			depth++;
		else if (!in_str && (*p == '}' || *p == ']'))
			ck_assert_int_ge(--depth, 0);
	}
	ck_assert_int_eq(depth, 0);
}
END_TEST

START_TEST(test_path)
{
	char out[64];

	ck_assert_int_eq(ps_report_path(out, sizeof(out), "/tmp/r-%e-%p.json", 12, "nginx"), 0);
	ck_assert_str_eq(out, "/tmp/r-nginx-12.json");
	ck_assert_int_eq(ps_report_path(out, sizeof(out), "100%%", 1, "x"), 0);
	ck_assert_str_eq(out, "100%");
	ck_assert_int_eq(ps_report_path(out, sizeof(out), "%q", 1, "x"), -EINVAL);
	ck_assert_int_eq(ps_report_path(out, 8, "/tmp/%e", 1, "averylongname"), -ENAMETOOLONG);
}
END_TEST

/* One walk over the emitter, written both ways. */
static const char *emit_both(char *out, size_t cap, bool json)
{
	struct ps_buf b;
	struct ps_emit e;
	const char *none = NULL, *name = "read";
	uint64_t bytes = 1536;

	ps_buf_init(&b, out, cap, -1);
	ps_emit_init(&e, &b, json);
	ps_emit_object_begin(&e, NULL);
	ps_emit_line(&e, "run %{n}u x, %{size}z, %{cpu}t, %{why}s, %{id}d\n", (uint64_t)7,
		     (uint64_t)2048, (uint64_t)1500000, "a\"b", -3);
	ps_emit_kv(&e, "none", PS_EMIT_STR, &none);
	ps_emit_array_begin(&e, "rows");
	for (int i = 0; i < 2; i++) {
		ps_emit_row_begin(&e);
		ps_emit_col(&e, "call", -6, PS_EMIT_NAME, &name);
		ps_emit_col(&e, "bytes", 6, PS_EMIT_SIZE, &bytes);
		ps_emit_row_end(&e);
	}
	ps_emit_array_end(&e);
	ps_emit_array_begin(&e, "h");
	ps_emit_pair(&e, 1, 2);
	ps_emit_pair(&e, 4, 5);
	ps_emit_array_end(&e);
	ps_emit_text(&e, "end\n");
	ps_emit_object_end(&e);
	return ps_buf_str(&b);
}

START_TEST(test_emit)
{
	char out[512];

	ck_assert_str_eq(emit_both(out, sizeof(out), false),
			 "run 7 x, 2K, 1.5s, a\"b, -3\nread    1.5K\nread    1.5K\nend\n");
	ck_assert_str_eq(emit_both(out, sizeof(out), true),
			 "{\"n\":7,\"size\":2048,\"cpu\":1500000,\"why\":\"a\\\"b\",\"id\":-3,"
			 "\"none\":null,\"rows\":[\n{\"call\":\"read\",\"bytes\":1536},"
			 "\n{\"call\":\"read\",\"bytes\":1536}],\"h\":[[1,2],[4,5]]}\n");
}
END_TEST

/* JSON render of d: whether its advice names POOLSHIM_HUGEPAGES=hugetlb. */
static bool advises_hugetlb(const struct ps_report_data *d)
{
	static char storage[16384];
	struct ps_buf b;

	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, d, PS_FORMAT_JSON);
	const char *s = ps_buf_str(&b);
	ck_assert(!b.truncated);
	return strstr(s, "{\"id\":\"hugetlb_pays\",") != NULL &&
	       strstr(s, "\"variable\":\"POOLSHIM_HUGEPAGES\"") != NULL &&
	       strstr(s, "\"suggested\":\"hugetlb\"") != NULL;
}

/*
 * O_DIRECT through the ring on a THP pool, never forked, hugetlb pages
 * free: the report suggests POOLSHIM_HUGEPAGES=hugetlb, with the fork
 * caveat; not after a fork, without enough free pages, on a pool already
 * on hugetlb, or without O_DIRECT I/O.
 */
START_TEST(test_hugetlb_advice)
{
	struct ps_report_data d;

	sample(&d);
	totals.events[PS_EV_FB_POOL_FULL] = 0;
	d.pool.first_mode = PS_BACK_THP;
	d.pool.backed_by[PS_BACK_HUGETLB] = 0;
	d.pool.backed_by[PS_BACK_THP] = 4 << 20;
	totals.uring.sqes = 300;
	d.hugetlb_free = 64;
	ck_assert(advises_hugetlb(&d));

	static char storage[16384];
	struct ps_buf b;
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_TEXT);
	const char *s = ps_buf_str(&b);
	ck_assert_ptr_nonnull(strstr(s, "on THP pages while 64 hugetlb pages are free"));
	ck_assert_ptr_nonnull(strstr(s, "dies of SIGBUS"));

	d.pool.forks = 1;
	ck_assert(!advises_hugetlb(&d));
	d.pool.forks = 0;
	d.hugetlb_free = 0;
	ck_assert(!advises_hugetlb(&d));
	d.hugetlb_free = 1;                 /* fewer than the 2 pages the pool holds */
	ck_assert(!advises_hugetlb(&d));
	d.hugetlb_free = 64;
	totals.uring.sqes = 0;
	ck_assert(!advises_hugetlb(&d));
	totals.uring.sqes = 300;
	d.pool.backed_by[PS_BACK_THP] = 0;
	d.pool.backed_by[PS_BACK_HUGETLB] = 4 << 20;
	ck_assert(!advises_hugetlb(&d));
	d.pool.backed_by[PS_BACK_HUGETLB] = 0;
	d.pool.backed_by[PS_BACK_4K] = 4 << 20;
	ck_assert(advises_hugetlb(&d));
}
END_TEST

/* Text render of d into a static buffer. */
/* d rendered in format (a buffer of its own per format, kept until the next call). */
static const char *render(const struct ps_report_data *d, enum ps_stats_format format)
{
	static char storage[2][32768];
	struct ps_buf b;
	char *at = storage[format == PS_FORMAT_JSON];

	ps_buf_init(&b, at, sizeof(storage[0]), -1);
	ps_report_render(&b, d, format);
	ck_assert(!b.truncated);
	return ps_buf_str(&b);
}

static const char *render_text(const struct ps_report_data *d)
{
	return render(d, PS_FORMAT_TEXT);
}

static const char *render_json(const struct ps_report_data *d)
{
	return render(d, PS_FORMAT_JSON);
}

/*
 * "Why nothing": a pool that served (next to) nothing gets a reason in the
 * program's terms: the largest allocation against the threshold, the
 * settings of a program known by name, what sendfile means.  None when the
 * pool worked, or when the largest allocation reached the threshold.
 */
START_TEST(test_why_nothing)
{
	struct ps_report_data d;
	const char *s;

	sample(&d);                       /* 3 pooled, one 1M allocation: the threshold is not why */
	totals.events[PS_EV_FB_POOL_FULL] = 0;
	s = render_text(&d);
	ck_assert_ptr_null(strstr(s, "the pool served"));

	/* a Debian-default nginx: 16K-32K allocations at most, 40 sendfile calls */
	d.program = "nginx";
	totals.events[PS_EV_POOL_ALLOC] = 0;
	memset(totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist, 0,
	       sizeof(totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist));
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[10] = 900;
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[14] = 7;
	totals.c[PS_CALL_SENDFILE][PS_FD_SOCKET].calls = 40;
	totals.c[PS_CALL_SENDFILE][PS_FD_SOCKET].bytes = 40 << 20;
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "the pool served 0 allocations: the largest allocations "
					"this process made were 16K-32K (7 of them), below "
					"POOLSHIM_POOL_MIN=64K"));
	ck_assert_ptr_nonnull(strstr(s, "proxy_buffer_size and proxy_buffers"));
	ck_assert_ptr_nonnull(strstr(s, "output_buffers with directio"));
	ck_assert_ptr_nonnull(strstr(s, "client_body_buffer_size"));
	/*
	 * The figures are docs/results.md's "Should I deploy it?", against
	 * what nginx runs without the shim (Debian's sendfile on), not the
	 * same settings without it; whole, not cut at the message's room.
	 */
	ck_assert_ptr_null(strstr(s, "2.14x"));
	ck_assert_ptr_null(strstr(s, "4.60x"));
	ck_assert_ptr_nonnull(strstr(s, "output_buffers 2 16m measured 0.55x [0.47-0.60] sendfile on, "
					"MISSED (5 rounds); proxy_buffers 16 1m under it 1.11x "
					"[1.02-1.14] the better of the default buffers and 16 1m "
					"without it, met\n"));
	ck_assert_ptr_nonnull(strstr(s, "the shim measured 0.55x [0.47-0.60] sendfile on without it, "
					"MISSED (docs/results.md, \"Should I deploy it?\")\n"));
	ck_assert_ptr_nonnull(strstr(s, "40 sendfile/splice calls moved 40M inside the kernel"));
	ck_assert_ptr_nonnull(strstr(s, "nginx with `sendfile on` (Debian's nginx.conf sets it)"));

	static char storage[32768];
	struct ps_buf b;
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_JSON);
	s = ps_buf_str(&b);
	ck_assert(!b.truncated);
	ck_assert_ptr_nonnull(strstr(s, "{\"id\":\"pool_idle\","));
	ck_assert_ptr_nonnull(strstr(s, "\"variable\":\"nginx: proxy_buffers\""));
	ck_assert_ptr_nonnull(strstr(s, "\"suggested\":\"16 1m\""));
	ck_assert_ptr_nonnull(strstr(s, "{\"id\":\"sendfile\","));

	d.program = "haproxy";
	totals.c[PS_CALL_SENDFILE][PS_FD_SOCKET] = (struct ps_counter){ 0 };
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "tune.bufsize"));
	ck_assert_ptr_nonnull(strstr(s, "at par, 0.99x [0.95-1.02] the same haproxy without it; "
					"the 1.33x with the shim also in the storage node behind it "
					"was the node's\n"));
	ck_assert_ptr_null(strstr(s, "sendfile/splice"));
	/* The program's item before the generic one. */
	ck_assert_ptr_nonnull(strstr(s, "advice\n  - haproxy moves data"));
	/*
	 * The haproxy trap: under POOLSHIM_POOL_MIN=16K the pool served its 33
	 * buffers, all fresh (kept in haproxy's own pools): nothing saved, so
	 * the haproxy item stays, and the verdict is still idle.
	 */
	totals.events[PS_EV_POOL_ALLOC] = 33;
	totals.events[PS_EV_POOL_FRESH] = 33;
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "the pool served 33 allocations and reused memory for 0"));
	ck_assert_ptr_nonnull(strstr(s, "0.99x [0.95-1.02]"));
	ck_assert_ptr_null(strstr(s, "0.83x"));
	ck_assert_ptr_nonnull(strstr(s, "\nverdict  pool idle: haproxy keeps its buffers in its own "
					"pools (33 pooled, 0 reused); the shim only counts here\n"));
	totals.events[PS_EV_POOL_ALLOC] = 0;
	totals.events[PS_EV_POOL_FRESH] = 0;

	d.program = "radosgw";
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "rgw_max_chunk_size and rgw_obj_stripe_size"));
	ck_assert_ptr_nonnull(strstr(s, "GET 16 MiB 1.20x, GET 1 MiB 1.22x (256 -> 1 faults per GET), "
					"PUT at par\n"));
	ck_assert_ptr_null(strstr(s, "1.24x"));

	d.program = "nginxish";          /* not a known name: the threshold line only */
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "the pool served 0 allocations"));
	ck_assert_ptr_null(strstr(s, "proxy_buffers"));

	/*
	 * 20 allocations of 32K-64K just below the threshold: glibc reuses
	 * blocks that small from its own heap, so no pool_min (pooling them
	 * saves nothing); the threshold line says why the pool was idle.
	 */
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[15] = 20;
	s = render_text(&d);
	ck_assert_ptr_null(strstr(s, "would pool them"));
	ck_assert_ptr_nonnull(strstr(s, "the pool served 0 allocations"));
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[15] = 0;

	/* 20 of 256K-512K under a 1M threshold: pool_min says why and what to set, alone */
	d.pool_min = 1 << 20;
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[18] = 20;
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "POOLSHIM_POOL_MIN=256K would pool them"));
	ck_assert_ptr_nonnull(strstr(s, "\nverdict  pool idle: allocations just below POOLSHIM_POOL_MIN=1M; "
					"POOLSHIM_POOL_MIN=256K would pool them"));
	ck_assert_ptr_null(strstr(s, "the pool served 0 allocations"));
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[18] = 0;
	d.pool_min = 65536;

	/* no allocation at all */
	totals.c[PS_CALL_MALLOC][PS_FD_NONE] = (struct ps_counter){ 0 };
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "this process made no counted allocation"));

	/* the largest allocation reached the threshold: the fallbacks say why, not this */
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].calls = 1;
	totals.c[PS_CALL_MALLOC][PS_FD_NONE].size_hist[16] = 1;
	d.program = "nginx";
	s = render_text(&d);
	ck_assert_ptr_null(strstr(s, "the pool served"));
	ck_assert_ptr_nonnull(strstr(s, "proxy_buffers"));   /* the settings still apply */

	/* a pool that worked: nothing to explain */
	totals.events[PS_EV_POOL_ALLOC] = 500;
	s = render_text(&d);
	ck_assert_ptr_null(strstr(s, "proxy_buffers"));
}
END_TEST

/*
 * POOLSHIM_POOL=off: mode off, nothing saved, and the advice says the run
 * is a baseline (with the calls the pool would serve), not why the pool
 * did nothing, even for a program whose settings the advice knows.
 */
START_TEST(test_pool_off)
{
	struct ps_report_data d;
	const char *s;

	sample(&d);
	d.pool_off = true;
	d.pool_ready = false;
	d.pool.slabs = 0;
	d.pool.backed = d.pool.backed_by[PS_BACK_HUGETLB] = 0;
	d.pool_in_use = d.pool_peak = 0;
	totals.events[PS_EV_POOL_ALLOC] = 0;
	totals.events[PS_EV_FB_POOL_FULL] = 0;
	totals.c[PS_CALL_SENDFILE][PS_FD_SOCKET].calls = 40;
	totals.c[PS_CALL_SENDFILE][PS_FD_SOCKET].bytes = 40 << 20;
	d.program = "nginx";
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "pool     mode off (requested auto); placement pages; 0 slabs"));
	ck_assert_ptr_nonnull(strstr(s, "\nsaved    nothing: the pool was off (POOLSHIM_POOL=off)"));
	ck_assert_ptr_nonnull(strstr(s, "  - the pool was off (POOLSHIM_POOL=off): every allocation "
					"went to the program's own heap"));
	/* the sample's two 64K mallocs and its 1M one */
	ck_assert_ptr_nonnull(strstr(s, "; 3 allocating calls were of POOLSHIM_POOL_MIN=64K or more"));
	ck_assert_ptr_null(strstr(s, "the pool served"));
	ck_assert_ptr_null(strstr(s, "proxy_buffers"));
	ck_assert_ptr_null(strstr(s, "sendfile/splice"));

	static char storage[32768];
	struct ps_buf b;
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_JSON);
	s = ps_buf_str(&b);
	ck_assert(!b.truncated);
	ck_assert_ptr_nonnull(strstr(s, "\"pool\":{\"mode\":\"off\","));
	ck_assert_ptr_nonnull(strstr(s, "\"saved\":{\"allocations\":0,\"reused\":0,\"fresh\":0,"));
	ck_assert_ptr_nonnull(strstr(s, "{\"id\":\"pool_off\","));
	ck_assert_ptr_nonnull(strstr(s, "\"variable\":\"POOLSHIM_POOL\",\"suggested\":\"on\""));
	ck_assert_ptr_null(strstr(s, "pool_idle"));
}
END_TEST

/*
 * The placement (POOLSHIM_POOL_ALLOCATOR): said by name, and where a record
 * carries no configuration, unknown in the text and null in the JSON
 * rather than a default that may not be what ran.
 */
START_TEST(test_placement)
{
	struct ps_report_data d;
	static char storage[16384];
	struct ps_buf b;
	const char *s;

	sample(&d);
	d.allocator = "jemalloc";
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "\npool     mode hugetlb (requested auto); placement jemalloc; 2 slabs"));
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_JSON);
	ck_assert(!b.truncated);
	ck_assert_ptr_nonnull(strstr(ps_buf_str(&b), "\"allocator\":\"jemalloc\","));

	d.allocator = NULL;
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "(requested auto); placement unknown; 2 slabs"));
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_JSON);
	ck_assert(!b.truncated);
	ck_assert_ptr_nonnull(strstr(ps_buf_str(&b), "\"allocator\":null,"));
}
END_TEST

/* The page-exact placement's free blocks: a line and an object, else null. */
START_TEST(test_free_blocks)
{
	struct ps_report_data d;
	static char storage[16384];
	struct ps_buf b;
	const char *s;

	sample(&d);
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_JSON);
	ck_assert_ptr_nonnull(strstr(ps_buf_str(&b), "\"free\":null,"));
	ck_assert_ptr_null(strstr(render_text(&d), "pool     free blocks"));

	d.free_known = true;
	d.free_blocks = 3;
	d.free_bytes = 12 << 20;
	d.free_zero_bytes = 4 << 20;
	d.free_largest = 8 << 20;
	s = render_text(&d);
	ck_assert_ptr_nonnull(strstr(s, "\npool     free blocks 3, 12M (largest 8M); up to 8M of it "
				     "resident, 4M known to be given back or never touched\n"));
	ps_buf_init(&b, storage, sizeof(storage), -1);
	ps_report_render(&b, &d, PS_FORMAT_JSON);
	ck_assert(!b.truncated);
	ck_assert_ptr_nonnull(strstr(ps_buf_str(&b), "\"free\":{\"blocks\":3,\"bytes\":12582912,"
				     "\"largest\":8388608,\"resident_max\":8388608,\"zero\":4194304}"));
	/* The largest not known (a record whose counts do not add up): not said. */
	d.free_largest = 0;
	ck_assert_ptr_nonnull(strstr(render_text(&d), "\npool     free blocks 3, 12M; up to 8M"));
}
END_TEST

/*
 * The page placement's arenas: in the text once threads use more than
 * one, in JSON whenever the free blocks are known, else null.
 */
START_TEST(test_arenas)
{
	struct ps_report_data d;

	sample(&d);
	ck_assert_ptr_nonnull(strstr(render_json(&d), "\"arenas\":null,"));
	d.free_known = true;         /* a live record's: free blocks known, arenas not */
	ck_assert_ptr_nonnull(strstr(render_json(&d), "\"arenas\":null,"));

	d.arenas_used = 1;
	d.arenas_max = 0;
	ck_assert_ptr_nonnull(strstr(render_text(&d), "; placement pages; 2 slabs"));
	ck_assert_ptr_nonnull(strstr(render_json(&d), "\"arenas\":{\"used\":1,\"max\":0},"));

	d.arenas_used = 3;
	d.arenas_max = 8;
	ck_assert_ptr_nonnull(strstr(render_text(&d), "; placement pages (3 of 8 arenas); 2 slabs"));
	ck_assert_ptr_nonnull(strstr(render_json(&d), "\"arenas\":{\"used\":3,\"max\":8},"));
}
END_TEST

Suite *suite_report(void)
{
	Suite *s = suite_create("report");
	TCase *tc = tcase_create("report");

	tcase_add_test(tc, test_text);
	tcase_add_test(tc, test_json);
	tcase_add_test(tc, test_arenas);
	tcase_add_test(tc, test_path);
	tcase_add_test(tc, test_emit);
	tcase_add_test(tc, test_hugetlb_advice);
	tcase_add_test(tc, test_why_nothing);
	tcase_add_test(tc, test_pool_off);
	tcase_add_test(tc, test_placement);
	tcase_add_test(tc, test_free_blocks);
	suite_add_tcase(s, tc);
	return s;
}
