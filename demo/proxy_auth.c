/* SPDX-License-Identifier: MIT */
/*
 * s3proxy's request authentication (see proxy.h): AWS Signature Version 4
 * over what was actually received, never the client's idea of canonical
 * forms, and the request body read into a fresh buffer and checked against
 * the signed payload hash or the aws-chunked chunk signatures.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "proxy.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "s3.h"

/* ---------------------------------------------------------------------- */
/* Authentication                                                           */

static const struct cred *find_cred(const char *ak)
{
	for (int i = 0; i < pcfg.ncreds; i++)
		if (!strcmp(pcfg.creds[i].access_key, ak))
			return &pcfg.creds[i];
	return NULL;
}



/* Checks everything in the signature except a payload hash we have not
 * seen yet (PAYLOAD_ABSENT: payload_hash is filled by the caller first).
 * Returns 0 or responds with the S3 error and returns -1. */
int verify_signature(struct s3_req *r, struct auth_state *st)
{
	const struct http_msg *m = r->m;
	struct sbuf creq;
	char sig[65];
	int rc;

	sb_init(&creq);
	/* Canonical URI: what the path means, re-encoded the AWS way; a client
	 * that signed the path exactly as it sent it is accepted too. */
	struct sbuf uri;
	sb_init(&uri);
	sb_addc(&uri, '/');
	sb_add_uri(&uri, r->t.bucket, strlen(r->t.bucket), true);
	if (r->t.has_key || (r->t.raw_path_len > 1 && r->t.raw_path[r->t.raw_path_len - 1] == '/' &&
			     r->t.bucket[0])) {
		sb_addc(&uri, '/');
		if (r->t.has_key)
			sb_add_uri(&uri, r->t.key, r->t.key_len, true);
	}
	bool matched = false;
	for (int pass = 0; pass < 2 && !matched; pass++) {
		const char *u = pass ? r->t.raw_path : uri.p;
		size_t ul = pass ? r->t.raw_path_len : uri.len;
		if (pass && ul == uri.len && !memcmp(u, uri.p, ul))
			break;
		sb_reset(&creq);
		rc = sigv4_canonical_request(&creq, r->method, u, ul, r->t.raw_query, r->t.raw_query_len,
					     m->hdr, m->nhdr, st->a.signed_headers, st->payload_hash);
		if (rc == -ENOENT) {
			sb_free(&creq);
			sb_free(&uri);
			s3_error(r, 403, "SignatureDoesNotMatch",
				 "A header listed in SignedHeaders is missing from the request.");
			return -1;
		}
		if (rc) {
			sb_free(&creq);
			sb_free(&uri);
			s3_error(r, 400, "InvalidArgument", "The request could not be canonicalized.");
			return -1;
		}
		sigv4_signature(sig, st->key, st->amzdate, st->scope, creq.p, creq.len);
		matched = sigv4_sig_equal(sig, st->a.signature);
	}
	sb_free(&uri);
	if (!matched) {
		dbg("signature mismatch; canonical request was:\n%s", creq.p);
		sb_free(&creq);
		s3_error(r, 403, "SignatureDoesNotMatch",
			 "The request signature we calculated does not match the signature you provided. Check your key and signing method.");
		return -1;
	}
	sb_free(&creq);
	return 0;
}

static bool signed_header_listed(const char *list, const char *name, size_t nl)
{
	const char *p = list;
	while (*p) {
		const char *e = strchr(p, ';');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == nl && !strncasecmp(p, name, nl))
			return true;
		p += l;
		if (*p == ';')
			p++;
	}
	return false;
}

/* Parses and checks the Authorization header, date and credential scope.
 * Returns 0 or responds and returns -1. */
int check_auth_head(struct s3_req *r, struct auth_state *st)
{
	const struct http_msg *m = r->m;
	size_t n;
	const char *v;

	memset(st, 0, sizeof(*st));
	if (s3_query_get(&r->q, "X-Amz-Signature", NULL) || s3_query_get(&r->q, "X-Amz-Credential", NULL)) {
		s3_error(r, 403, "AccessDenied", "Query-string (presigned) authentication is not supported by this proxy.");
		return -1;
	}
	if (http_hdr_count(m, "authorization") > 1) {
		s3_error(r, 400, "InvalidArgument", "Only one Authorization header is allowed.");
		return -1;
	}
	v = http_hdr_get(m, "authorization", &n);
	if (!v) {
		s3_error(r, 403, "AccessDenied", "Access Denied: the request carries no Authorization header.");
		return -1;
	}
	if (sigv4_parse_auth(v, n, &st->a)) {
		if (n > 4 && !strncmp(v, "AWS ", 4))
			s3_error(r, 400, "InvalidRequest", "Please use AWS4-HMAC-SHA256 (Signature Version 4).");
		else
			s3_error(r, 400, "AuthorizationHeaderMalformed", "The authorization header is malformed.");
		return -1;
	}
	const struct cred *cr = find_cred(st->a.access_key);
	if (!cr) {
		s3_error(r, 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
		return -1;
	}
	if (strcmp(st->a.service, "s3")) {
		s3_error(r, 400, "AuthorizationHeaderMalformed", "The authorization header is malformed; incorrect service, expected 's3'.");
		return -1;
	}
	if (strcmp(st->a.region, pcfg.region)) {
		char msg[256];
		snprintf(msg, sizeof(msg), "The authorization header is malformed; the region '%.64s' is wrong; expecting '%.64s'.",
			 st->a.region, pcfg.region);
		s3_error(r, 400, "AuthorizationHeaderMalformed", msg);
		return -1;
	}
	if (!signed_header_listed(st->a.signed_headers, "host", 4)) {
		s3_error(r, 403, "AccessDenied", "The host header must be signed.");
		return -1;
	}
	/* Every x-amz-* header present must be covered by the signature. */
	for (int i = 0; i < m->nhdr; i++) {
		const struct http_hdr *h = &m->hdr[i];
		if (h->nlen > 6 && !strncasecmp(h->name, "x-amz-", 6) &&
		    !signed_header_listed(st->a.signed_headers, h->name, h->nlen)) {
			s3_error(r, 403, "AccessDenied", "There were headers present in the request which were not signed.");
			return -1;
		}
	}
	time_t t;
	v = http_hdr_get(m, "x-amz-date", &n);
	if (v) {
		if (sigv4_parse_amzdate(v, n, &t)) {
			s3_error(r, 403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header.");
			return -1;
		}
		memcpy(st->amzdate, v, 16);
	} else {
		char buf[64];
		struct tm tm;
		memset(&tm, 0, sizeof(tm));
		if (!http_hdr_str(m, "date", buf, sizeof(buf)) ||
		    !strptime(buf, "%a, %d %b %Y %H:%M:%S GMT", &tm)) {
			s3_error(r, 403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header.");
			return -1;
		}
		t = timegm(&tm);
		sigv4_format_amzdate(st->amzdate, t);
	}
	time_t now = time(NULL);
	if (t > now + pcfg.skew_s || t < now - pcfg.skew_s) {
		s3_error(r, 403, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large.");
		return -1;
	}
	if (memcmp(st->amzdate, st->a.date, 8)) {
		s3_error(r, 400, "AuthorizationHeaderMalformed", "The authorization header is malformed; Invalid credential date. Date is not the same as X-Amz-Date.");
		return -1;
	}
	snprintf(st->scope, sizeof(st->scope), "%s/%s/%s/aws4_request", st->a.date, st->a.region, st->a.service);
	sigv4_signing_key(st->key, cr->secret, st->a.date, st->a.region, st->a.service);

	v = http_hdr_get(m, "x-amz-content-sha256", &n);
	if (!v) {
		st->kind = PAYLOAD_ABSENT;
	} else if (strn_ieq(v, n, SIGV4_UNSIGNED)) {
		st->kind = PAYLOAD_UNSIGNED;
	} else if (n == strlen(SIGV4_STREAMING) && !memcmp(v, SIGV4_STREAMING, n)) {
		st->kind = PAYLOAD_STREAMING;
	} else if (n == strlen(SIGV4_STREAMING_UNSIGNED_TRAILER) &&
		   !memcmp(v, SIGV4_STREAMING_UNSIGNED_TRAILER, n)) {
		st->kind = PAYLOAD_STREAMING_UNSIGNED;
	} else if (n == 64 && strspn(v, "0123456789abcdefABCDEF") >= 64) {
		st->kind = PAYLOAD_HEX;
	} else if (n > 10 && !strncmp(v, "STREAMING-", 10)) {
		s3_error(r, 501, "NotImplemented", "This x-amz-content-sha256 streaming mode is not implemented.");
		return -1;
	} else {
		s3_error(r, 400, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, or a valid sha256 value.");
		return -1;
	}
	if (st->kind != PAYLOAD_ABSENT) {
		memcpy(st->payload_hash, v, n < 64 ? n : 64);
		st->payload_hash[n < 64 ? n : 64] = 0;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Request bodies                                                           */


/*
 * Reads the body into a fresh buffer, checks its hash or chunk signatures.
 * Returns 0 or responds and returns -1.
 */
int read_body(struct s3_req *r, struct auth_state *st, struct body *b)
{
	const struct http_msg *m = r->m;
	b->p = NULL;
	b->len = 0;

	if (m->content_length > 0 && (uint64_t)m->content_length > pcfg.max_body +
	    (st->kind == PAYLOAD_STREAMING || st->kind == PAYLOAD_STREAMING_UNSIGNED ? pcfg.max_body / 8 + 65536 : 0)) {
		r->close_after = true;
		s3_error(r, 413, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.");
		return -1;
	}
	if (m->content_length < 0 && !m->chunked) {
		if (st->kind == PAYLOAD_STREAMING || st->kind == PAYLOAD_STREAMING_UNSIGNED) {
			s3_error(r, 411, "MissingContentLength", "You must provide the Content-Length HTTP header.");
			return -1;
		}
		return 0;
	}
	size_t cap = m->content_length >= 0 ? (size_t)m->content_length : (size_t)pcfg.max_body;
	if (s3_continue(r)) {
		r->close_after = true;
		return -1;
	}
	if (m->content_length >= 0) {
		b->p = malloc(cap ? cap : 1);
		if (!b->p) {
			r->close_after = true;
			s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
			return -1;
		}
		ssize_t n = http_read_body_all(r->c, b->p, cap);
		if (n != (ssize_t)cap) {
			r->close_after = true;
			s3_error(r, 400, "IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.");
			goto fail;
		}
		b->len = n;
	} else {
		/* Chunked transfer coding: grow as it comes, up to the limit. */
		size_t bcap = 1 << 20;
		b->p = malloc(bcap);
		while (b->p && !m->complete) {
			if (b->len == bcap) {
				if (bcap >= cap) {
					r->close_after = true;
					s3_error(r, 413, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.");
					goto fail;
				}
				char *np = realloc(b->p, bcap * 2);
				if (!np)
					break;
				b->p = np;
				bcap *= 2;
			}
			ssize_t n = http_read_body(r->c, b->p + b->len, bcap - b->len);
			if (n < 0) {
				r->close_after = true;
				s3_error(r, 400, "IncompleteBody", "The request body terminated unexpectedly.");
				goto fail;
			}
			b->len += n;
		}
		if (!m->complete) {
			r->close_after = true;
			s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
			goto fail;
		}
	}

	if (st->kind == PAYLOAD_HEX) {
		char h[65];
		sha256_hex(h, b->p, b->len);
		if (strcasecmp(h, st->payload_hash)) {
			s3_error(r, 400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.");
			goto fail;
		}
	} else if (st->kind == PAYLOAD_STREAMING || st->kind == PAYLOAD_STREAMING_UNSIGNED) {
		char tmp[32];
		long dl;
		if (!http_hdr_str(m, "x-amz-decoded-content-length", tmp, sizeof(tmp)) ||
		    parse_long(tmp, 0, (long)(pcfg.max_body > (uint64_t)LONG_MAX ? LONG_MAX : pcfg.max_body), &dl)) {
			s3_error(r, 411, "MissingContentLength", "You must provide a valid x-amz-decoded-content-length header.");
			goto fail;
		}
		struct sigv4_stream ss;
		memset(&ss, 0, sizeof(ss));
		memcpy(ss.key, st->key, 32);
		memcpy(ss.amzdate, st->amzdate, sizeof(ss.amzdate));
		snprintf(ss.scope, sizeof(ss.scope), "%s", st->scope);
		memcpy(ss.prev_sig, st->a.signature, 65);
		ss.signed_chunks = st->kind == PAYLOAD_STREAMING;
		char *dec = malloc(dl ? dl : 1);
		if (!dec) {
			s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
			goto fail;
		}
		ssize_t k = sigv4_decode_chunked(&ss, b->p, b->len, dec, dl);
		if (k == -EACCES) {
			free(dec);
			s3_error(r, 403, "SignatureDoesNotMatch", "A chunk signature does not match.");
			goto fail;
		}
		if (k < 0 || k != dl) {
			free(dec);
			s3_error(r, 400, "IncompleteBody", "The aws-chunked body is malformed or does not match x-amz-decoded-content-length.");
			goto fail;
		}
		free(b->p);
		b->p = dec;
		b->len = k;
	}
	return 0;
fail:
	free(b->p);
	b->p = NULL;
	return -1;
}
