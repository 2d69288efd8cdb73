/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: demo/s3.c's list-parameter parsing (query strings,
 * continuation tokens) and the ListBucketResult built over them, the
 * CompleteMultipartUpload and Delete XML readers, XML unescaping and Range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct s3_query q;

	if (s3_query_parse(s, size, &q) == 0) {
		struct s3_list_params lp;
		const char *code, *msg;
		if (s3_list_params_parse(&q, &lp, &code, &msg) == 0) {
			struct sbuf b, x;
			sb_init(&b);
			sb_init(&x);
			s3_list_token(&b, lp.after ? lp.after : "", lp.after_len);
			/* The listing document over the parameters as given, the
			 * resume point standing in for a key and a prefix. */
			struct sbuf entries;
			sb_init(&entries);
			s3_list_add_key(&entries, &lp, lp.prefix, lp.prefix_len, b.p, b.len);
			s3_list_add_prefix(&entries, &lp, lp.delimiter, lp.delimiter_len);
			struct s3_list_result res = {
				.bucket = "fuzz", .count = 2, .truncated = lp.after != NULL,
				.next = lp.after, .next_len = lp.after_len, .entries = &entries,
			};
			s3_list_result_xml(&x, &lp, &res);
			sb_free(&entries);
			sb_free(&x);
			sb_free(&b);
			s3_list_params_free(&lp);
		}
		s3_query_free(&q);
	}

	struct s3_part_ref *parts;
	int n = s3_parse_complete(s, size, &parts);
	if (n > 0)
		free(parts);

	struct s3_delete_key *keys;
	bool quiet;
	n = s3_parse_delete(s, size, &keys, &quiet);
	if (n >= 0)
		s3_delete_keys_free(keys, n);

	char *out = malloc(size + 8);
	if (out) {
		xml_unescape(out, size + 8, s, size);
		free(out);
	}
	uint64_t a, b;
	s3_range_parse(s, size, 1000, &a, &b);
	s3_range_parse(s, size, 0, &a, &b);

	struct s3_target t;
	if (s3_target_parse(s, size, &t) == 0)
		s3_target_free(&t);
	return 0;
}
