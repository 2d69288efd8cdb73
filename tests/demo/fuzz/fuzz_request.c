/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the request side of demo/http.c (head limits, framing
 * checks, pipelining, body delivery) and the S3 request-target, query and
 * Range parsing that follows it in storaged and s3proxy, and the shared
 * object semantics over the same request (s3ops.c: readable keys,
 * conditions, the copy source and its range, refused headers, stored and
 * returned headers).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "s3.h"
#include "s3ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void after_head(struct http_conn *c)
{
	struct s3_target t;
	struct s3_query q;
	const char *v;
	size_t n;
	uint64_t a, b;

	if (s3_target_parse(c->msg.url, c->msg.url_len, &t) == 0) {
		if (t.has_key)
			s3_key_readable(t.key, t.key_len);
		if (s3_query_parse(t.raw_query, t.raw_query_len, &q) == 0) {
			struct s3_list_params lp;
			const char *code, *msg;
			if (s3_list_params_parse(&q, &lp, &code, &msg) == 0)
				s3_list_params_free(&lp);
			/* What storaged stores from this request, served back. */
			struct sbuf ct, meta, h;
			sb_init(&ct);
			sb_init(&meta);
			sb_init(&h);
			s3_collect_meta(&c->msg, &ct, &meta, 2048);
			s3_object_headers(&h, &q, ct.p, ct.len, meta.p ? meta.p : "", meta.len);
			sb_free(&ct);
			sb_free(&meta);
			sb_free(&h);
			s3_query_free(&q);
		}
		s3_target_free(&t);
	}
	struct s3_target src;
	if (s3_copy_source(&c->msg, &src) == 0)
		s3_target_free(&src);
	s3_check_get_conditions(&c->msg, "", "0123456789abcdef0123456789abcdef", 1700000000);
	s3_check_get_conditions(&c->msg, "x-amz-copy-source-", "0123", 0);
	s3_check_put_conditions(&c->msg, NULL);
	s3_check_put_conditions(&c->msg, "0123");
	const char *code, *msg;
	for (int has_key = 0; has_key < 2; has_key++) {
		int st = s3_refused_headers(&c->msg, has_key, &code, &msg);
		if (st && (st != 400 && st != 501))
			abort();
	}
	v = http_hdr_get(&c->msg, "range", &n);
	if (v) {
		s3_range_parse(v, n, 0, &a, &b);
		s3_range_parse(v, n, 10, &a, &b);
		s3_range_parse(v, n, UINT64_MAX, &a, &b);
	}
	v = http_hdr_get(&c->msg, "x-amz-copy-source-range", &n);
	if (v) {
		s3_copy_range_parse(v, n, 10, &a, &b);
		s3_copy_range_parse(v, n, UINT64_MAX, &a, &b);
	}
	http_hdr_count(&c->msg, "content-length");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_conn c;
	char body[4096];

	if (size < 1)
		return 0;
	/* The first byte picks how the input is split into reads. */
	size_t step = data[0] ? data[0] : 1;
	data++;
	size--;
	if (http_conn_init(&c, -1, HTTP_REQUEST, 2048, 1000))
		return 0;
	size_t pos = 0;
	int messages = 0;
	while (pos < size && messages < 64) {
		size_t n = size - pos < step ? size - pos : step;
		if (c.msg.headers_done && !c.msg.complete) {
			if (!c.sink) {
				c.sink = body;
				c.sink_cap = sizeof(body);
				c.sink_len = 0;
			}
			if (c.sink_len == c.sink_cap)
				c.sink_len = 0;
			if (n > c.sink_cap - c.sink_len)
				n = c.sink_cap - c.sink_len;
		}
		bool was_done = c.msg.headers_done;
		ssize_t k = http_feed(&c, (const char *)data + pos, n);
		if (k < 0)
			break;
		pos += k;
		if (!was_done && c.msg.headers_done)
			after_head(&c);
		if (c.msg.complete) {
			http_conn_next(&c);
			messages++;
		} else if (k == 0 && !c.msg.headers_done) {
			break;
		}
	}
	http_conn_free(&c);
	return 0;
}
