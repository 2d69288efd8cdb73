/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the Range header parser (s3_range_parse), which
 * storaged uses to pick the bytes of a GET, and the stricter
 * x-amz-copy-source-range parser (s3_copy_range_parse) of UploadPartCopy.
 *
 * Input: 8 bytes of object size (little-endian, kept below 2^62), then
 * the header value.  For any value, a range it accepts must lie inside
 * the object, and writing that range back as "bytes=FIRST-LAST" must parse
 * to the same range.  Then the first 16 bytes of the value, read as two
 * numbers a and b, are formatted as "bytes=a-b", "bytes=a-" and
 * "bytes=-b" and the result is compared with the rule S3 follows (RFC
 * 9110), computed here on its own.  A copy range must be exactly
 * "bytes=a-b" with a <= b inside the object, and what it accepts, sent on
 * as a Range (as s3proxy does across nodes), must select the same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(int rc, uint64_t size, uint64_t first, uint64_t last)
{
	if (rc < -1 || rc > 1)
		abort();
	if (rc == 1 && (size == 0 || first > last || last >= size))
		abort();
}

/* Parses s (no terminator needed: an exact-size heap copy). */
static int parse(const char *s, size_t n, uint64_t size, uint64_t *first, uint64_t *last)
{
	char *v = malloc(n ? n : 1);
	if (!v)
		abort();
	memcpy(v, s, n);
	int rc = s3_range_parse(v, n, size, first, last);
	free(v);
	check_accepted(rc, size, *first, *last);
	return rc;
}

/* The copy-range parser over s; what it accepts must lie inside the
 * object and read the same as a Range. */
static int parse_copy(const char *s, size_t n, uint64_t size, uint64_t *first, uint64_t *last)
{
	char *v = malloc(n ? n : 1);
	if (!v)
		abort();
	memcpy(v, s, n);
	int rc = s3_copy_range_parse(v, n, size, first, last);
	if (rc != 0 && rc != -EINVAL && rc != -ERANGE)
		abort();
	if (!rc) {
		uint64_t f, l;
		if (*first > *last || *last >= size || s3_range_parse(v, n, size, &f, &l) != 1 ||
		    f != *first || l != *last)
			abort();
	}
	free(v);
	return rc;
}

static void expect_copy(const char *s, uint64_t size, int want, uint64_t wf, uint64_t wl)
{
	uint64_t f = 0, l = 0;
	int rc = parse_copy(s, strlen(s), size, &f, &l);
	if (rc != want || (!rc && (f != wf || l != wl))) {
		fprintf(stderr, "copy range '%s' of %" PRIu64 " bytes: got %d, want %d\n", s, size,
			rc, want);
		abort();
	}
}

static void expect(const char *s, uint64_t size, int want, uint64_t wf, uint64_t wl)
{
	uint64_t f = 0, l = 0;
	int rc = parse(s, strlen(s), size, &f, &l);
	if (rc != want || (rc == 1 && (f != wf || l != wl))) {
		fprintf(stderr, "'%s' of %" PRIu64 " bytes: got %d [%" PRIu64 ", %" PRIu64
			"], want %d [%" PRIu64 ", %" PRIu64 "]\n", s, size, rc, f, l, want, wf, wl);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t osize, first = 0, last = 0;
	char buf[96];

	if (size < 8)
		return 0;
	memcpy(&osize, data, 8);
	data += 8;
	size -= 8;
	/* Small sizes matter most; keep some large ones. */
	osize = osize & 0x100 ? osize >> 2 : osize % 4096;

	int rc = parse((const char *)data, size, osize, &first, &last);
	if (rc == 1) {
		snprintf(buf, sizeof(buf), "bytes=%" PRIu64 "-%" PRIu64, first, last);
		expect(buf, osize, 1, first, last);
	}
	parse_copy((const char *)data, size, osize, &first, &last);

	if (size < 16)
		return 0;
	uint64_t a, b;
	memcpy(&a, data, 8);
	memcpy(&b, data + 8, 8);
	/* Mostly numbers near the object's size, where the edges are. */
	bool near_a = !(a & 1), near_b = !(b & 1);
	a >>= 2;
	b >>= 2;
	if (near_a)
		a %= 2 * osize + 3;
	if (near_b)
		b %= 2 * osize + 3;

	/* bytes=a-b: ignored when b < a; unsatisfiable when a is past the end. */
	snprintf(buf, sizeof(buf), "bytes=%" PRIu64 "-%" PRIu64, a, b);
	if (b < a)
		expect(buf, osize, 0, 0, 0);
	else if (a >= osize)
		expect(buf, osize, -1, 0, 0);
	else
		expect(buf, osize, 1, a, b < osize ? b : osize - 1);
	/* The same as a copy range: no clamping, nothing ignored. */
	if (b < a)
		expect_copy(buf, osize, -EINVAL, 0, 0);
	else if (b >= osize)
		expect_copy(buf, osize, -ERANGE, 0, 0);
	else
		expect_copy(buf, osize, 0, a, b);

	/* bytes=a-: from a to the end. */
	snprintf(buf, sizeof(buf), "bytes=%" PRIu64 "-", a);
	if (a >= osize)
		expect(buf, osize, -1, 0, 0);
	else
		expect(buf, osize, 1, a, osize - 1);
	expect_copy(buf, osize, -EINVAL, 0, 0);

	/* bytes=-b: the last b bytes (all of them when b is larger). */
	snprintf(buf, sizeof(buf), "bytes=-%" PRIu64, b);
	if (b == 0 || osize == 0)
		expect(buf, osize, -1, 0, 0);
	else
		expect(buf, osize, 1, b >= osize ? 0 : osize - b, osize - 1);
	expect_copy(buf, osize, -EINVAL, 0, 0);
	return 0;
}
