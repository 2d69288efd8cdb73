/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: demo/sigv4.c, the Authorization header parser, dates,
 * canonical query and request building, and the aws-chunked decoder with
 * and without chunk signatures.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct sigv4_auth a;
	time_t t;

	/* Input: AUTH '\n' QUERY '\n' CHUNKED-BODY */
	const char *nl1 = memchr(s, '\n', size);
	size_t l1 = nl1 ? (size_t)(nl1 - s) : size;
	const char *rest = nl1 ? nl1 + 1 : s + size;
	size_t rl = size - (rest - s);
	const char *nl2 = memchr(rest, '\n', rl);
	size_t l2 = nl2 ? (size_t)(nl2 - rest) : rl;
	const char *body = nl2 ? nl2 + 1 : rest + rl;
	size_t bl = size - (body - s);

	int ok = sigv4_parse_auth(s, l1, &a) == 0;
	sigv4_parse_amzdate(s, l1, &t);

	struct sbuf out;
	sb_init(&out);
	sigv4_canonical_query(&out, rest, l2);
	sb_reset(&out);
	struct http_hdr h[3] = {
		{ "Host", "example.com", 4, 11 },
		{ "x-amz-date", s, 10, l1 },
		{ "X-Amz-Content-Sha256", rest, 20, l2 },
	};
	sigv4_canonical_request(&out, "GET", "/b/k", 4, rest, l2, h, 3,
				ok ? a.signed_headers : "host;x-amz-date", SIGV4_UNSIGNED);
	sb_free(&out);

	struct sigv4_stream st;
	memset(&st, 0, sizeof(st));
	memcpy(st.amzdate, "20240101T000000Z", 17);
	strcpy(st.scope, "20240101/us-east-1/s3/aws4_request");
	memset(st.prev_sig, 'a', 64);
	char *dec = malloc(bl + 1);
	if (dec) {
		st.signed_chunks = true;
		sigv4_decode_chunked(&st, body, bl, dec, bl);
		st.signed_chunks = false;
		sigv4_decode_chunked(&st, body, bl, dec, bl);
		free(dec);
	}
	return 0;
}
