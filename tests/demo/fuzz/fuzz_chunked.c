/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the aws-chunked body decoder (sigv4_decode_chunked),
 * which s3proxy runs on every streaming upload before anything is checked.
 *
 * The first byte picks a mode; the rest is the input.
 *   mode 0/1: the input is a body, decoded without/with chunk signatures
 *             into an output buffer whose size the second byte picks
 *             (smaller than the body, or just large enough).  Whatever it
 *             returns must be in range; the sanitizers catch the rest.
 *   mode 2/3: the input is a payload plus chunk lengths; the target frames
 *             it itself (unsigned with a trailer, or with a correct
 *             signature chain, the way S3 clients sign) and the decoder
 *             must give the payload back exactly.  In mode 3 one byte of
 *             the first chunk is then changed, and the decoder must refuse
 *             it as a bad signature.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void stream_init(struct sigv4_stream *st, bool signed_chunks)
{
	memset(st, 0, sizeof(*st));
	for (int i = 0; i < 32; i++)
		st->key[i] = (unsigned char)(i * 7 + 1);
	memcpy(st->amzdate, "20240101T000000Z", 17);
	strcpy(st->scope, "20240101/us-east-1/s3/aws4_request");
	memset(st->prev_sig, 'a', 64);
	st->signed_chunks = signed_chunks;
}

static void to_hex(char *out, const unsigned char *in, size_t n)
{
	static const char d[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[in[i] >> 4];
		out[2 * i + 1] = d[in[i] & 15];
	}
	out[2 * n] = 0;
}

/* The chunk signature a client computes, written here independently of
 * sigv4.c from the published format. */
static void chunk_sig(char out[65], const struct sigv4_stream *st, const char *prev,
		      const uint8_t *p, size_t n)
{
	unsigned char h[32], mac[32];
	char hh[65], sts[512];
	unsigned int ml = 32;

	SHA256(p, n, h);
	to_hex(hh, h, 32);
	int k = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s",
			 st->amzdate, st->scope, prev,
			 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", hh);
	HMAC(EVP_sha256(), st->key, 32, (const unsigned char *)sts, k, mac, &ml);
	to_hex(out, mac, 32);
}

/* Frames payload p (n bytes) into chunks whose lengths come from lens. */
static size_t frame(char *out, const struct sigv4_stream *st, const uint8_t *p, size_t n,
		    const uint8_t *lens, size_t nlens, size_t *first_at, size_t *first_len)
{
	char prev[65], sig[65];
	size_t o = 0, pos = 0, li = 0;

	memcpy(prev, st->prev_sig, 65);
	*first_at = SIZE_MAX;
	*first_len = 0;
	for (;;) {
		size_t c = n - pos;
		if (c && li < nlens) {
			size_t want = (size_t)lens[li++] + 1;
			if (want < c)
				c = want;
		}
		o += sprintf(out + o, "%zx", c);
		if (st->signed_chunks) {
			chunk_sig(sig, st, prev, p + pos, c);
			memcpy(prev, sig, 65);
			o += sprintf(out + o, ";chunk-signature=%s", sig);
		}
		o += sprintf(out + o, "\r\n");
		if (c && *first_at == SIZE_MAX) {
			*first_at = o;
			*first_len = c;
		}
		memcpy(out + o, p + pos, c);
		o += c;
		pos += c;
		if (c == 0)
			break;
		o += sprintf(out + o, "\r\n");
	}
	if (st->signed_chunks)
		o += sprintf(out + o, "\r\n");
	else
		o += sprintf(out + o, "x-amz-checksum-crc32:AAAAAA==\r\n\r\n");
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sigv4_stream st;

	if (size < 2)
		return 0;
	int mode = data[0] & 3;
	uint8_t knob = data[1];
	data += 2;
	size -= 2;

	if (mode < 2) {
		stream_init(&st, mode == 1);
		/* An exact-size heap copy, so a read past the end is caught. */
		char *in = malloc(size ? size : 1);
		size_t cap = knob & 1 ? size : size * (knob >> 1) / 128;
		char *out = malloc(cap ? cap : 1);
		if (in && out) {
			memcpy(in, data, size);
			ssize_t r = sigv4_decode_chunked(&st, in, size, out, cap);
			if (r > (ssize_t)cap || (r < 0 && r != -EINVAL && r != -EACCES && r != -E2BIG))
				abort();
		}
		free(in);
		free(out);
		return 0;
	}

	/* Mode 2/3: the first knob bytes of the input are chunk lengths. */
	size_t nlens = knob % 16;
	if (nlens > size)
		nlens = size;
	const uint8_t *lens = data, *p = data + nlens;
	size_t n = size - nlens;
	stream_init(&st, mode == 3);
	/* Worst case: one-byte chunks, each with a header and CRLF. */
	size_t bound = n * (1 + 100) + 200;
	char *body = malloc(bound);
	char *out = malloc(n ? n : 1);
	if (!body || !out)
		abort();
	size_t at, alen;
	size_t bl = frame(body, &st, p, n, lens, nlens, &at, &alen);
	if (bl > bound)
		abort();
	struct sigv4_stream d = st;
	ssize_t r = sigv4_decode_chunked(&d, body, bl, out, n);
	if (r != (ssize_t)n || memcmp(out, p, n))
		abort();       /* a well-formed body did not decode to its payload */
	if (mode == 3 && n > 0) {
		body[at + knob % alen] ^= 0x20;
		d = st;
		if (sigv4_decode_chunked(&d, body, bl, out, n) != -EACCES)
			abort();       /* a changed byte got past the chunk signature */
	}
	free(body);
	free(out);
	return 0;
}
