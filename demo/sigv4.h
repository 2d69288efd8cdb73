/* SPDX-License-Identifier: MIT */
/*
 * AWS Signature Version 4 for S3: parsing the Authorization header,
 * canonical requests, signing (loadgen, proxy re-signing) and verifying,
 * and decoding aws-chunked bodies with per-chunk signatures.  Hashes and
 * HMAC come from OpenSSL's libcrypto.
 */
#ifndef DEMO_SIGV4_H
#define DEMO_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "http.h"
#include "util.h"

#define SIGV4_QMAX 64
#define SIGV4_ALGO "AWS4-HMAC-SHA256"
#define SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"
#define SIGV4_STREAMING "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define SIGV4_STREAMING_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
#define SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct sigv4_auth {
	char access_key[129];
	char date[9];           /* YYYYMMDD */
	char region[64];
	char service[32];
	char signed_headers[1024];
	char signature[65];
};

struct sigv4_creds {
	char access_key[129];
	char secret[129];
	char region[64];
};

/*
 * Parses "AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/SERVICE/aws4_request,
 * SignedHeaders=a;b, Signature=hex", tolerating the spacing variants
 * clients send.  Returns 0 or -EINVAL.
 */
int sigv4_parse_auth(const char *v, size_t n, struct sigv4_auth *a);

/* Parses x-amz-date (YYYYMMDD'T'HHMMSS'Z').  Returns 0 or -EINVAL. */
int sigv4_parse_amzdate(const char *v, size_t n, time_t *out);
void sigv4_format_amzdate(char out[17], time_t t);

/* Appends the canonical form of an already-decoded path. */
void sigv4_canonical_uri(struct sbuf *b, const char *path, size_t n);
/* Appends the canonical query of a raw query string.  Returns 0 or -EINVAL. */
int sigv4_canonical_query(struct sbuf *b, const char *q, size_t n);

/*
 * Builds the canonical request from an already canonical uri, a raw query,
 * the request headers and the signed-header list.  Returns 0, -ENOENT when
 * a signed header is missing, -EINVAL on a bad query.
 */
int sigv4_canonical_request(struct sbuf *out, const char *method, const char *uri,
			    size_t ulen, const char *query, size_t qlen,
			    const struct http_hdr *hdrs, int nhdr,
			    const char *signed_headers, const char *payload_hash);

void sigv4_signing_key(unsigned char key[32], const char *secret, const char *date,
		       const char *region, const char *service);
/* Signature (64 hex) over the canonical request. */
void sigv4_signature(char out[65], const unsigned char key[32], const char *amzdate,
		     const char *scope, const char *creq, size_t creq_len);

/*
 * Signs a request as a client.  hdrs are lowercase, sorted by name, and
 * include host, x-amz-content-sha256 and x-amz-date; all are signed.
 * Appends the Authorization value to auth.
 */
void sigv4_sign(struct sbuf *auth, const struct sigv4_creds *cr, const char *method,
		const char *uri, size_t ulen, const char *query, size_t qlen,
		const struct http_hdr *hdrs, int nhdr, const char *payload_hash,
		const char *amzdate);

/* Constant-time equality of two 64-char hex signatures. */
bool sigv4_sig_equal(const char *a, const char *b);

/* State for checking an aws-chunked body. */
struct sigv4_stream {
	unsigned char key[32];
	char amzdate[17];
	char scope[160];
	char prev_sig[65];
	bool signed_chunks;     /* false: STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

/*
 * Decodes a complete aws-chunked body from in into out (cap bytes),
 * checking each chunk signature when signed_chunks.  Returns the decoded
 * length, -EINVAL on malformed framing, -EACCES on a bad chunk signature,
 * -E2BIG when the output does not fit.
 */
ssize_t sigv4_decode_chunked(struct sigv4_stream *st, const char *in, size_t n,
			     char *out, size_t cap);

/* Binary MD5 of a buffer. */
void md5_bin(unsigned char out[16], const void *p, size_t n);
/* Hex SHA-256 of a buffer. */
void sha256_hex(char out[65], const void *p, size_t n);

#endif
