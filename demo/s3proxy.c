/* SPDX-License-Identifier: MIT */
/*
 * s3proxy: a stateless S3 frontend.  It checks AWS Signature Version 4 on
 * every request, reads the body into a fresh buffer sized from
 * Content-Length (verifying the payload hash or the aws-chunked chunk
 * signatures), routes each bucket/key to one of N backends by rendezvous
 * hashing, and streams the backend's response back through a fresh copy
 * buffer.  Bucket operations and listings fan out to every backend and are
 * merged.  A backend is the bundled storaged or any S3-compatible server,
 * which the proxy then signs its own requests for.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "http.h"
#include "s3.h"
#include "server.h"
#include "sigv4.h"
#include "util.h"

#define MAX_BACKENDS 64
#define MAX_CREDS 64
#define COPY_MAX (8u << 20)
#define SMALL_BODY_MAX (16u << 20)

struct cred {
	char access_key[129];
	char secret[129];
};

static struct {
	struct endpoint be[MAX_BACKENDS];
	int nbe;
	struct cred creds[MAX_CREDS];
	int ncreds;
	const char *region;
	struct sigv4_creds be_auth;
	bool be_signed;
	uint64_t max_body;
	int backend_ms;
	int skew_s;
} cfg = {
	.region = "us-east-1",
	.max_body = 1ull << 30,
	.backend_ms = 60000,
	.skew_s = 900,
};

/* ---------------------------------------------------------------------- */
/* Authentication                                                           */

static const struct cred *find_cred(const char *ak)
{
	for (int i = 0; i < cfg.ncreds; i++)
		if (!strcmp(cfg.creds[i].access_key, ak))
			return &cfg.creds[i];
	return NULL;
}

enum payload_kind { PAYLOAD_HEX, PAYLOAD_UNSIGNED, PAYLOAD_STREAMING, PAYLOAD_STREAMING_UNSIGNED, PAYLOAD_ABSENT };

struct auth_state {
	struct sigv4_auth a;
	unsigned char key[32];
	char amzdate[17];
	char scope[160];
	enum payload_kind kind;
	char payload_hash[65];
};

/* Checks everything in the signature except a payload hash we have not
 * seen yet (PAYLOAD_ABSENT: payload_hash is filled by the caller first).
 * Returns 0 or responds with the S3 error and returns -1. */
static int verify_signature(struct s3_req *r, struct auth_state *st)
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
static int check_auth_head(struct s3_req *r, struct auth_state *st)
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
	if (strcmp(st->a.region, cfg.region)) {
		char msg[256];
		snprintf(msg, sizeof(msg), "The authorization header is malformed; the region '%.64s' is wrong; expecting '%.64s'.",
			 st->a.region, cfg.region);
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
	if (t > now + cfg.skew_s || t < now - cfg.skew_s) {
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

struct body {
	char *p;
	size_t len;
};

/*
 * Reads the body into a fresh buffer, checks its hash or chunk signatures.
 * Returns 0 or responds and returns -1.
 */
static int read_body(struct s3_req *r, struct auth_state *st, struct body *b)
{
	const struct http_msg *m = r->m;
	b->p = NULL;
	b->len = 0;

	if (m->content_length > 0 && (uint64_t)m->content_length > cfg.max_body +
	    (st->kind == PAYLOAD_STREAMING || st->kind == PAYLOAD_STREAMING_UNSIGNED ? cfg.max_body / 8 + 65536 : 0)) {
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
	size_t cap = m->content_length >= 0 ? (size_t)m->content_length : (size_t)cfg.max_body;
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
		    parse_long(tmp, 0, (long)(cfg.max_body > (uint64_t)LONG_MAX ? LONG_MAX : cfg.max_body), &dl)) {
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

/* ---------------------------------------------------------------------- */
/* Talking to backends                                                      */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Rendezvous (highest random weight) hashing: each backend scores the
 * object; the highest score wins.  Adding a backend moves only the objects
 * it now wins. */
static int route(const char *bucket, const char *key, size_t kl)
{
	int best = 0;
	uint64_t best_score = 0;
	for (int i = 0; i < cfg.nbe; i++) {
		uint64_t h = fnv1a(0xcbf29ce484222325ull, cfg.be[i].hostport, strlen(cfg.be[i].hostport));
		h = fnv1a(h, "\n", 1);
		h = fnv1a(h, bucket, strlen(bucket));
		h = fnv1a(h, "/", 1);
		h = fnv1a(h, key, kl);
		uint64_t s = mix64(h);
		if (i == 0 || s > best_score) {
			best = i;
			best_score = s;
		}
	}
	return best;
}

struct hdr_kv {
	char *name;             /* lowercase */
	char *value;
};

static int cmp_kv(const void *a, const void *b)
{
	return strcmp(((const struct hdr_kv *)a)->name, ((const struct hdr_kv *)b)->name);
}

/* Request headers worth passing on to a backend. */
static bool forwardable(const char *n, size_t l)
{
	static const char *const keep[] = {
		"content-type", "content-md5", "content-disposition", "content-language",
		"cache-control", "expires", "range", "if-match", "if-none-match",
		"if-modified-since", "if-unmodified-since", "content-encoding",
	};
	if (l > 6 && !strncasecmp(n, "x-amz-", 6)) {
		return !strn_ieq(n, l, "x-amz-content-sha256") && !strn_ieq(n, l, "x-amz-date") &&
		       !strn_ieq(n, l, "x-amz-decoded-content-length") &&
		       !strn_ieq(n, l, "x-amz-security-token") && !strn_ieq(n, l, "x-amz-trailer") &&
		       !(l > 17 && !strncasecmp(n, "x-amz-checksum-", 15));
	}
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (strn_ieq(n, l, keep[i]))
			return true;
	return false;
}

struct outreq {
	const char *method;
	struct sbuf path;       /* canonical encoded path */
	struct sbuf query;      /* canonical query */
	struct hdr_kv h[HTTP_MAX_HDRS + 8];
	int nh;
	struct sbuf store;      /* names and values */
	const char *body;
	size_t blen;
	bool send_length;
};

static void out_init(struct outreq *o, const char *method)
{
	memset(o, 0, sizeof(*o));
	o->method = method;
	sb_init(&o->path);
	sb_init(&o->query);
	sb_init(&o->store);
}

static void out_free(struct outreq *o)
{
	for (int i = 0; i < o->nh; i++) {
		free(o->h[i].name);
		free(o->h[i].value);
	}
	sb_free(&o->path);
	sb_free(&o->query);
	sb_free(&o->store);
}

static void out_hdr(struct outreq *o, const char *name, size_t nl, const char *value, size_t vl)
{
	if (o->nh >= (int)(sizeof(o->h) / sizeof(o->h[0])))
		return;
	char *n = malloc(nl + 1), *v = malloc(vl + 1);
	if (!n || !v) {
		free(n);
		free(v);
		return;
	}
	for (size_t i = 0; i < nl; i++)
		n[i] = tolower((unsigned char)name[i]);
	n[nl] = 0;
	memcpy(v, value, vl);
	v[vl] = 0;
	o->h[o->nh].name = n;
	o->h[o->nh].value = v;
	o->nh++;
}

static void out_target(struct outreq *o, const char *bucket, const char *key, size_t kl,
		       bool has_key, const char *q, size_t ql)
{
	sb_addc(&o->path, '/');
	if (bucket && *bucket) {
		sb_add_uri(&o->path, bucket, strlen(bucket), false);
		if (has_key) {
			sb_addc(&o->path, '/');
			sb_add_uri(&o->path, key, kl, true);
		}
	}
	if (ql)
		sigv4_canonical_query(&o->query, q, ql);
}

/* Copies the client's forwardable headers, dropping aws-chunked. */
static void out_copy_headers(struct outreq *o, const struct http_msg *m)
{
	for (int i = 0; i < m->nhdr; i++) {
		const struct http_hdr *h = &m->hdr[i];
		if (!forwardable(h->name, h->nlen))
			continue;
		if (strn_ieq(h->name, h->nlen, "content-encoding")) {
			/* Strip the aws-chunked token the proxy has decoded. */
			struct sbuf v;
			sb_init(&v);
			const char *p = h->value, *e = h->value + h->vlen;
			while (p < e) {
				const char *c = memchr(p, ',', e - p);
				const char *t = p, *te = c ? c : e;
				while (t < te && *t == ' ')
					t++;
				while (te > t && te[-1] == ' ')
					te--;
				if (te > t && !strn_ieq(t, te - t, "aws-chunked")) {
					if (v.len)
						sb_addc(&v, ',');
					sb_add(&v, t, te - t);
				}
				p = c ? c + 1 : e;
			}
			if (v.len)
				out_hdr(o, "content-encoding", 16, v.p, v.len);
			sb_free(&v);
			continue;
		}
		out_hdr(o, h->name, h->nlen, h->value, h->vlen);
	}
}

/* Writes the request head and body.  Returns 0 or -errno. */
static int out_send(struct outreq *o, struct endpoint *e, int fd)
{
	struct sbuf head;
	char date[17];
	int rc;

	sb_init(&head);
	sigv4_format_amzdate(date, time(NULL));
	if (cfg.be_signed) {
		out_hdr(o, "host", 4, e->hostport, strlen(e->hostport));
		out_hdr(o, "x-amz-date", 10, date, 16);
		out_hdr(o, "x-amz-content-sha256", 20, SIGV4_UNSIGNED, strlen(SIGV4_UNSIGNED));
	}
	qsort(o->h, o->nh, sizeof(o->h[0]), cmp_kv);
	sb_printf(&head, "%s %s%s%s HTTP/1.1\r\n", o->method, o->path.p ? o->path.p : "/",
		  o->query.len ? "?" : "", o->query.p ? o->query.p : "");
	if (!cfg.be_signed)
		sb_printf(&head, "Host: %s\r\n", e->hostport);
	for (int i = 0; i < o->nh; i++)
		sb_printf(&head, "%s: %s\r\n", o->h[i].name, o->h[i].value);
	if (cfg.be_signed) {
		/* Sign host, x-amz-*, content-md5 and content-type. */
		struct http_hdr sh[HTTP_MAX_HDRS + 8];
		int ns = 0;
		for (int i = 0; i < o->nh; i++) {
			const char *n = o->h[i].name;
			if (!strcmp(n, "host") || !strncmp(n, "x-amz-", 6) || !strcmp(n, "content-md5") ||
			    !strcmp(n, "content-type")) {
				sh[ns].name = n;
				sh[ns].nlen = strlen(n);
				sh[ns].value = o->h[i].value;
				sh[ns].vlen = strlen(o->h[i].value);
				ns++;
			}
		}
		struct sbuf auth;
		sb_init(&auth);
		sigv4_sign(&auth, &cfg.be_auth, o->method, o->path.p, o->path.len,
			   o->query.p ? o->query.p : "", o->query.len, sh, ns, SIGV4_UNSIGNED, date);
		sb_printf(&head, "Authorization: %s\r\n", auth.p);
		sb_free(&auth);
	}
	if (o->blen || o->send_length)
		sb_printf(&head, "Content-Length: %zu\r\n", o->blen);
	sb_adds(&head, "\r\n");
	if (head.failed) {
		sb_free(&head);
		return -ENOMEM;
	}
	struct iovec iov[2] = { { head.p, head.len }, { (void *)o->body, o->blen } };
	rc = http_writev_all(fd, iov, o->blen ? 2 : 1);
	sb_free(&head);
	return rc;
}

/*
 * Sends o to backend e and reads the response head into rc (a fresh
 * response-mode connection).  Retries once on a fresh connection when a
 * pooled one turns out to be dead.  Returns 0 or -errno.
 */
static int exchange(struct outreq *o, struct endpoint *e, struct http_conn *rc, bool head_req)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		bool reused = false;
		/* The retry always uses a fresh connection. */
		int fd = attempt ? endpoint_connect(e, cfg.backend_ms) :
			 endpoint_get(e, cfg.backend_ms, &reused);
		if (fd < 0)
			return fd;
		int err = http_conn_init(rc, fd, HTTP_RESPONSE, 64 * 1024, cfg.backend_ms);
		if (err) {
			close(fd);
			return err;
		}
		rc->no_body = head_req;
		err = out_send(o, e, fd);
		if (!err) {
			int k = http_read_head(rc, cfg.backend_ms);
			if (k == 0)
				return 0;
			err = k == 1 ? -ECONNRESET : rc->msg.err_status ? -EPROTO : -EIO;
		}
		http_conn_free(rc);
		close(fd);
		/* A pooled connection the backend already closed: retry. */
		if (!reused || err == -EPROTO)
			return err;
		/* Headers were added for signing; drop them before resending. */
		if (cfg.be_signed) {
			int k = 0;
			for (int i = 0; i < o->nh; i++) {
				if (!strcmp(o->h[i].name, "host") || !strcmp(o->h[i].name, "x-amz-date") ||
				    !strcmp(o->h[i].name, "x-amz-content-sha256")) {
					free(o->h[i].name);
					free(o->h[i].value);
					continue;
				}
				o->h[k++] = o->h[i];
			}
			o->nh = k;
		}
	}
	return -EIO;
}

/* Finishes with a backend connection: pools it when reusable. */
static void release(struct endpoint *e, struct http_conn *rc, bool ok)
{
	int fd = rc->fd;
	bool reuse = ok && rc->msg.complete && rc->msg.keep_alive && rc->rpos == rc->rend;
	http_conn_free(rc);
	if (reuse)
		endpoint_put(e, fd);
	else
		close(fd);
}

/* Reads a whole (small) backend response body.  Returns 0 or -1. */
static int slurp(struct http_conn *rc, struct sbuf *out)
{
	char tmp[16384];
	while (!rc->msg.complete) {
		ssize_t n = http_read_body(rc, tmp, sizeof(tmp));
		if (n < 0)
			return -1;
		sb_add(out, tmp, n);
		if (out->len > SMALL_BODY_MAX || out->failed)
			return -1;
	}
	return 0;
}

static void backend_unavailable(struct s3_req *r, struct endpoint *e, int err)
{
	logmsg("backend %s: %s", e->hostport, strerror(-err));
	s3_error(r, 503, "ServiceUnavailable", "A storage backend is unavailable; please retry.");
}

/* Response headers that describe the object or the operation. */
static bool relay_header(const char *n, size_t l)
{
	static const char *const drop[] = {
		"connection", "keep-alive", "transfer-encoding", "content-length", "server",
		"date", "x-amz-request-id", "x-amz-id-2", "proxy-connection", "upgrade", "te",
		"trailer",
	};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (strn_ieq(n, l, drop[i]))
			return false;
	return true;
}

/* Streams the backend's response to the client through a fresh buffer. */
static void relay(struct s3_req *r, struct endpoint *e, struct http_conn *rc)
{
	const struct http_msg *bm = &rc->msg;
	struct sbuf h;

	sb_init(&h);
	for (int i = 0; i < bm->nhdr; i++) {
		const struct http_hdr *x = &bm->hdr[i];
		if (!relay_header(x->name, x->nlen))
			continue;
		sb_add(&h, x->name, x->nlen);
		sb_adds(&h, ": ");
		sb_add(&h, x->value, x->vlen);
		sb_adds(&h, "\r\n");
	}
	if (h.failed) {
		sb_free(&h);
		release(e, rc, false);
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	if (r->is_head || bm->status == 204 || bm->status == 304) {
		uint64_t len = bm->content_length > 0 ? (uint64_t)bm->content_length : 0;
		if (bm->status == 204 || bm->status == 304)
			s3_respond(r, bm->status, h.p, NULL, 0);
		else
			s3_send_head(r, bm->status, h.p, len);
		release(e, rc, true);
		sb_free(&h);
		return;
	}
	if (bm->content_length < 0) {
		/* No length from the backend (chunked): buffer, then send. */
		struct sbuf body;
		sb_init(&body);
		if (slurp(rc, &body)) {
			sb_free(&body);
			sb_free(&h);
			release(e, rc, false);
			backend_unavailable(r, e, -EIO);
			return;
		}
		s3_respond(r, bm->status, h.p, body.p, body.len);
		sb_free(&body);
		sb_free(&h);
		release(e, rc, true);
		return;
	}
	uint64_t len = bm->content_length;
	size_t bsz = len < COPY_MAX ? (size_t)len : COPY_MAX;
	char *buf = malloc(bsz ? bsz : 1);
	if (!buf) {
		sb_free(&h);
		release(e, rc, false);
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return;
	}
	bool ok = s3_send_head(r, bm->status, h.p, len) == 0;
	uint64_t left = len;
	while (ok && left) {
		ssize_t n = http_read_body(rc, buf, bsz);
		if (n <= 0) {
			logmsg("backend %s: response body cut short", e->hostport);
			ok = false;
			break;
		}
		if (http_write_all(r->c->fd, buf, n))
			ok = false;
		left -= n;
	}
	if (!ok)
		r->close_after = true;
	free(buf);
	sb_free(&h);
	release(e, rc, ok);
}

/* Forwards an object request to the backend that owns the key. */
static void forward_object(struct s3_req *r, const struct body *b)
{
	int bi = route(r->t.bucket, r->t.key, r->t.key_len);
	struct endpoint *e = &cfg.be[bi];
	struct outreq o;
	struct http_conn rc;

	out_init(&o, r->method);
	out_target(&o, r->t.bucket, r->t.key, r->t.key_len, true, r->t.raw_query, r->t.raw_query_len);
	out_copy_headers(&o, r->m);
	o.body = b->p;
	o.blen = b->len;
	o.send_length = r->m->method == HTTP_PUT || r->m->method == HTTP_POST;
	int err = exchange(&o, e, &rc, r->is_head);
	out_free(&o);
	if (err) {
		backend_unavailable(r, e, err);
		return;
	}
	relay(r, e, &rc);
}

/* One backend call with everything in memory, for fan-out. */
struct call {
	int status;
	struct sbuf body;
	int err;
};

static void call_backend(struct endpoint *e, const char *method, const char *bucket,
			 const char *query, const char *body, size_t blen,
			 const char *content_md5, struct call *res)
{
	struct outreq o;
	struct http_conn rc;

	sb_init(&res->body);
	res->status = 0;
	out_init(&o, method);
	out_target(&o, bucket, NULL, 0, false, query, strlen(query));
	if (content_md5)
		out_hdr(&o, "content-md5", 11, content_md5, strlen(content_md5));
	o.body = body;
	o.blen = blen;
	o.send_length = !strcmp(method, "PUT") || !strcmp(method, "POST");
	res->err = exchange(&o, e, &rc, !strcmp(method, "HEAD"));
	out_free(&o);
	if (res->err)
		return;
	res->status = rc.msg.status;
	if (slurp(&rc, &res->body)) {
		res->err = -EIO;
		release(e, &rc, false);
		return;
	}
	release(e, &rc, true);
}

struct fan {
	struct endpoint *e;
	const char *method, *bucket, *query, *body, *md5;
	size_t blen;
	struct call res;
};

static void *fan_main(void *p)
{
	struct fan *f = p;
	call_backend(f->e, f->method, f->bucket, f->query, f->body, f->blen, f->md5, &f->res);
	return NULL;
}

/* Runs the same call on every backend in parallel. */
static struct fan *fan_out(const char *method, const char *bucket, const char *query)
{
	struct fan *f = calloc(cfg.nbe, sizeof(*f));
	pthread_t th[MAX_BACKENDS];
	bool started[MAX_BACKENDS] = { 0 };

	if (!f)
		return NULL;
	for (int i = 0; i < cfg.nbe; i++) {
		f[i] = (struct fan){ .e = &cfg.be[i], .method = method, .bucket = bucket, .query = query };
		if (i > 0 && pthread_create(&th[i], NULL, fan_main, &f[i]) == 0)
			started[i] = true;
		else if (i > 0)
			fan_main(&f[i]);
	}
	if (cfg.nbe)
		fan_main(&f[0]);
	for (int i = 1; i < cfg.nbe; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	return f;
}

static void fan_free(struct fan *f)
{
	if (!f)
		return;
	for (int i = 0; i < cfg.nbe; i++)
		sb_free(&f[i].res.body);
	free(f);
}

/* Passes a backend's error document through unchanged. */
static void pass_error(struct s3_req *r, const struct call *c)
{
	if (c->err) {
		s3_error(r, 503, "ServiceUnavailable", "A storage backend is unavailable; please retry.");
		return;
	}
	if (r->is_head || !c->body.len) {
		s3_respond(r, c->status, NULL, NULL, 0);
		return;
	}
	s3_respond(r, c->status, "Content-Type: application/xml\r\n", c->body.p, c->body.len);
}

static bool xml_has_code(const struct sbuf *b, const char *code)
{
	const char *v;
	size_t vl, pos = 0;
	return b->p && xml_find(b->p, b->len, &pos, "Code", &v, &vl) && strn_ieq(v, vl, code);
}

/* ---------------------------------------------------------------------- */
/* Fan-out operations                                                       */

struct name_ent {
	char *name;
	size_t len;
	char *extra;            /* raw XML after <Key>..</Key> for Contents */
	size_t extra_len;
	bool prefix;
};

static int cmp_name(const void *a, const void *b)
{
	const struct name_ent *x = a, *y = b;
	int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	if (c)
		return c;
	if (x->len != y->len)
		return (x->len > y->len) - (x->len < y->len);
	return (int)x->prefix - (int)y->prefix;
}

static int name_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

static void list_buckets(struct s3_req *r)
{
	struct fan *f = fan_out("GET", "", "");
	struct name_ent *v = NULL;
	size_t n = 0, cap = 0;

	if (!f) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	for (int i = 0; i < cfg.nbe; i++) {
		if (f[i].res.err || f[i].res.status != 200) {
			pass_error(r, &f[i].res);
			fan_free(f);
			return;
		}
	}
	for (int i = 0; i < cfg.nbe; i++) {
		const struct sbuf *b = &f[i].res.body;
		size_t pos = 0;
		const char *blk;
		size_t bl;
		while (b->p && xml_find(b->p, b->len, &pos, "Bucket", &blk, &bl)) {
			const char *nm, *cd;
			size_t nl, cl, p2 = 0, p3 = 0;
			if (!xml_find(blk, bl, &p2, "Name", &nm, &nl))
				continue;
			if (!xml_find(blk, bl, &p3, "CreationDate", &cd, &cl))
				cl = 0;
			bool dup = false;
			for (size_t k = 0; k < n; k++)
				if (!name_cmp(v[k].name, v[k].len, nm, nl))
					dup = true;
			if (dup)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				struct name_ent *nv = realloc(v, cap * sizeof(*v));
				if (!nv)
					break;
				v = nv;
			}
			v[n].name = strndup(nm, nl);
			v[n].len = nl;
			v[n].extra = strndup(cd, cl);
			v[n].extra_len = cl;
			v[n].prefix = false;
			if (!v[n].name || !v[n].extra) {
				free(v[n].name);
				free(v[n].extra);
				break;
			}
			n++;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_name);
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<ListAllMyBucketsResult " S3_XMLNS ">"
		"<Owner><ID>poolshim</ID><DisplayName>poolshim</DisplayName></Owner><Buckets>");
	for (size_t k = 0; k < n; k++) {
		/* Names and dates are passed through as the backends escaped them. */
		sb_adds(&x, "<Bucket><Name>");
		sb_add(&x, v[k].name, v[k].len);
		sb_adds(&x, "</Name><CreationDate>");
		sb_add(&x, v[k].extra, v[k].extra_len);
		sb_adds(&x, "</CreationDate></Bucket>");
		free(v[k].name);
		free(v[k].extra);
	}
	free(v);
	sb_adds(&x, "</Buckets></ListAllMyBucketsResult>\n");
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
	fan_free(f);
}

static void create_bucket(struct s3_req *r, const struct body *b)
{
	if (!s3_bucket_name_ok(r->t.bucket)) {
		s3_error(r, 400, "InvalidBucketName", "The specified bucket is not valid.");
		return;
	}
	(void)b; /* A CreateBucketConfiguration is not passed on: backends use their own. */
	struct fan *f = fan_out("PUT", r->t.bucket, "");
	if (!f) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	int created = 0, owned = 0;
	for (int i = 0; i < cfg.nbe; i++) {
		struct call *c = &f[i].res;
		if (!c->err && c->status == 200)
			created++;
		else if (!c->err && c->status == 409 && xml_has_code(&c->body, "BucketAlreadyOwnedByYou"))
			owned++;
		else {
			pass_error(r, c);
			fan_free(f);
			return;
		}
	}
	fan_free(f);
	if (!created) {
		s3_error(r, 409, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.");
		return;
	}
	char loc[300];
	snprintf(loc, sizeof(loc), "Location: /%s\r\n", r->t.bucket);
	s3_respond(r, 200, loc, NULL, 0);
}

static void delete_bucket(struct s3_req *r)
{
	struct fan *f = fan_out("GET", r->t.bucket, "list-type=2&max-keys=1");
	if (!f) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	int missing = 0;
	for (int i = 0; i < cfg.nbe; i++) {
		struct call *c = &f[i].res;
		if (!c->err && c->status == 404) {
			missing++;
			continue;
		}
		if (c->err || c->status != 200) {
			pass_error(r, c);
			fan_free(f);
			return;
		}
		const char *v;
		size_t vl, pos = 0;
		if (xml_find(c->body.p, c->body.len, &pos, "Contents", &v, &vl) ||
		    (pos = 0, xml_find(c->body.p, c->body.len, &pos, "CommonPrefixes", &v, &vl))) {
			fan_free(f);
			s3_error(r, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty.");
			return;
		}
	}
	fan_free(f);
	if (missing == cfg.nbe) {
		s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
		return;
	}
	f = fan_out("DELETE", r->t.bucket, "");
	if (!f) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	for (int i = 0; i < cfg.nbe; i++) {
		struct call *c = &f[i].res;
		if (!c->err && (c->status == 204 || c->status == 200 || c->status == 404))
			continue;
		pass_error(r, c);
		fan_free(f);
		return;
	}
	fan_free(f);
	s3_respond(r, 204, NULL, NULL, 0);
}

static void head_bucket(struct s3_req *r)
{
	struct fan *f = fan_out("HEAD", r->t.bucket, "");
	if (!f) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	for (int i = 0; i < cfg.nbe; i++) {
		if (f[i].res.err || f[i].res.status != 200) {
			if (!f[i].res.err && f[i].res.status == 404)
				s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
			else
				pass_error(r, &f[i].res);
			fan_free(f);
			return;
		}
	}
	fan_free(f);
	s3_respond(r, 200, "x-amz-bucket-region: us-east-1\r\n", NULL, 0);
}

static void bucket_location(struct s3_req *r)
{
	struct call c;
	call_backend(&cfg.be[0], "HEAD", r->t.bucket, "", NULL, 0, NULL, &c);
	if (c.err || c.status != 200) {
		if (!c.err && c.status == 404)
			s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
		else
			pass_error(r, &c);
		sb_free(&c.body);
		return;
	}
	sb_free(&c.body);
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<LocationConstraint " S3_XMLNS ">");
	if (strcmp(cfg.region, "us-east-1"))
		sb_add_xml(&x, cfg.region, strlen(cfg.region));
	sb_adds(&x, "</LocationConstraint>\n");
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
}

static void add_name(struct sbuf *x, const char *s, size_t n, bool url)
{
	if (url)
		sb_add_uri(x, s, n, true);
	else
		sb_add_xml(x, s, n);
}

/* Pulls Contents and CommonPrefixes out of one backend's listing. */
static int collect_listing(const struct sbuf *b, struct name_ent **v, size_t *n, size_t *cap,
			   bool *truncated, char **last, size_t *last_len)
{
	size_t pos = 0;
	const char *blk, *t;
	size_t bl, tl;

	*truncated = false;
	if (xml_find(b->p, b->len, &pos, "IsTruncated", &t, &tl))
		*truncated = tl == 4 && !memcmp(t, "true", 4);
	for (int pass = 0; pass < 2; pass++) {
		pos = 0;
		const char *tag = pass ? "CommonPrefixes" : "Contents";
		while (xml_find(b->p, b->len, &pos, tag, &blk, &bl)) {
			const char *k;
			size_t kl, p2 = 0;
			if (!xml_find(blk, bl, &p2, pass ? "Prefix" : "Key", &k, &kl))
				return -1;
			if (*n == *cap) {
				*cap = *cap ? *cap * 2 : 256;
				struct name_ent *nv = realloc(*v, *cap * sizeof(**v));
				if (!nv)
					return -1;
				*v = nv;
			}
			struct name_ent *ne = &(*v)[*n];
			ne->name = malloc(kl * 4 + 5);
			if (!ne->name)
				return -1;
			ssize_t len = xml_unescape(ne->name, kl * 4 + 5, k, kl);
			if (len < 0) {
				free(ne->name);
				return -1;
			}
			ne->len = len;
			ne->prefix = pass;
			ne->extra = NULL;
			ne->extra_len = 0;
			if (!pass) {
				size_t el = bl - p2;
				ne->extra = malloc(el + 1);
				if (!ne->extra) {
					free(ne->name);
					return -1;
				}
				memcpy(ne->extra, blk + p2, el);
				ne->extra_len = el;
			}
			(*n)++;
		}
	}
	/* The furthest name this backend vouched for, when it has more. */
	if (*truncated) {
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < *n; i++)
			if (best == SIZE_MAX || name_cmp((*v)[i].name, (*v)[i].len, (*v)[best].name, (*v)[best].len) > 0)
				best = i;
		if (best != SIZE_MAX) {
			*last = (*v)[best].name;
			*last_len = (*v)[best].len;
		}
	}
	return 0;
}

static void list_objects(struct s3_req *r)
{
	struct s3_list_params lp;
	const char *code, *msg;

	if (s3_list_params_parse(&r->q, &lp, &code, &msg)) {
		s3_error(r, 400, code, msg);
		return;
	}
	struct sbuf q;
	sb_init(&q);
	sb_printf(&q, "list-type=2&max-keys=%d", lp.max_keys < 1000 ? lp.max_keys + 1 : 1000);
	if (lp.prefix_len) {
		sb_adds(&q, "&prefix=");
		sb_add_uri(&q, lp.prefix, lp.prefix_len, false);
	}
	if (lp.delimiter_len) {
		sb_adds(&q, "&delimiter=");
		sb_add_uri(&q, lp.delimiter, lp.delimiter_len, false);
	}
	if (lp.after_len) {
		sb_adds(&q, "&start-after=");
		sb_add_uri(&q, lp.after, lp.after_len, false);
	}
	struct fan *f = q.failed ? NULL : fan_out("GET", r->t.bucket, q.p);
	sb_free(&q);
	if (!f) {
		s3_list_params_free(&lp);
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	struct name_ent *v = NULL;
	size_t n = 0, cap = 0;
	bool any_trunc = false;
	char *bound = NULL;
	size_t bound_len = 0;
	for (int i = 0; i < cfg.nbe; i++) {
		struct call *c = &f[i].res;
		if (c->err || c->status != 200) {
			pass_error(r, c);
			goto out;
		}
		size_t before = n;
		bool tr;
		char *last = NULL;
		size_t ll = 0;
		if (collect_listing(&c->body, &v, &n, &cap, &tr, &last, &ll)) {
			s3_error(r, 502, "InternalError", "A storage backend sent a listing that could not be parsed.");
			goto out;
		}
		(void)before;
		if (tr) {
			any_trunc = true;
			if (last && (!bound || name_cmp(last, ll, bound, bound_len) < 0)) {
				bound = last;
				bound_len = ll;
			}
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_name);

	struct sbuf body, x;
	sb_init(&body);
	sb_init(&x);
	int count = 0;
	bool truncated = any_trunc;
	const char *lastn = NULL;
	size_t lastl = 0;
	for (size_t i = 0; i < n; i++) {
		struct name_ent *e = &v[i];
		if (lp.after && name_cmp(e->name, e->len, lp.after, lp.after_len) <= 0)
			continue;
		if (lastn && e->prefix && !name_cmp(e->name, e->len, lastn, lastl))
			continue;
		if (bound && name_cmp(e->name, e->len, bound, bound_len) > 0)
			break;
		if (count >= lp.max_keys) {
			truncated = true;
			break;
		}
		if (e->prefix) {
			sb_adds(&body, "<CommonPrefixes><Prefix>");
			add_name(&body, e->name, e->len, lp.url_encode);
			sb_adds(&body, "</Prefix></CommonPrefixes>");
		} else {
			sb_adds(&body, "<Contents><Key>");
			add_name(&body, e->name, e->len, lp.url_encode);
			sb_adds(&body, "</Key>");
			sb_add(&body, e->extra, e->extra_len);
			sb_adds(&body, "</Contents>");
		}
		lastn = e->name;
		lastl = e->len;
		count++;
	}
	if (lp.max_keys == 0)
		truncated = false;
	sb_adds(&x, S3_XML_HEAD "<ListBucketResult " S3_XMLNS "><Name>");
	sb_adds(&x, r->t.bucket);
	sb_adds(&x, "</Name><Prefix>");
	add_name(&x, lp.prefix, lp.prefix_len, lp.url_encode);
	sb_adds(&x, "</Prefix>");
	if (lp.version == 2) {
		sb_printf(&x, "<KeyCount>%d</KeyCount>", count);
		if (lp.token_raw) {
			sb_adds(&x, "<ContinuationToken>");
			sb_add_xml(&x, lp.token_raw, lp.token_raw_len);
			sb_adds(&x, "</ContinuationToken>");
		}
		if (lp.marker_raw) {
			sb_adds(&x, "<StartAfter>");
			add_name(&x, lp.marker_raw, lp.marker_raw_len, lp.url_encode);
			sb_adds(&x, "</StartAfter>");
		}
		if (truncated && lastn) {
			sb_adds(&x, "<NextContinuationToken>");
			s3_list_token(&x, lastn, lastl);
			sb_adds(&x, "</NextContinuationToken>");
		}
	} else {
		sb_adds(&x, "<Marker>");
		if (lp.marker_raw)
			add_name(&x, lp.marker_raw, lp.marker_raw_len, lp.url_encode);
		sb_adds(&x, "</Marker>");
		if (truncated && lastn) {
			sb_adds(&x, "<NextMarker>");
			add_name(&x, lastn, lastl, lp.url_encode);
			sb_adds(&x, "</NextMarker>");
		}
	}
	sb_printf(&x, "<MaxKeys>%d</MaxKeys>", lp.max_keys);
	if (lp.delimiter_len) {
		sb_adds(&x, "<Delimiter>");
		add_name(&x, lp.delimiter, lp.delimiter_len, lp.url_encode);
		sb_adds(&x, "</Delimiter>");
	}
	if (lp.url_encode)
		sb_adds(&x, "<EncodingType>url</EncodingType>");
	sb_printf(&x, "<IsTruncated>%s</IsTruncated>", truncated && lastn ? "true" : "false");
	sb_add(&x, body.p ? body.p : "", body.len);
	sb_adds(&x, "</ListBucketResult>\n");
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
	sb_free(&body);
out:
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].extra);
	}
	free(v);
	fan_free(f);
	s3_list_params_free(&lp);
}

static void list_uploads(struct s3_req *r)
{
	struct fan *f = fan_out("GET", r->t.bucket, "uploads");
	if (!f) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<ListMultipartUploadsResult " S3_XMLNS "><Bucket>");
	sb_adds(&x, r->t.bucket);
	sb_adds(&x, "</Bucket><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>");
	for (int i = 0; i < cfg.nbe; i++) {
		struct call *c = &f[i].res;
		if (c->err || c->status != 200) {
			pass_error(r, c);
			sb_free(&x);
			fan_free(f);
			return;
		}
		size_t pos = 0;
		const char *blk;
		size_t bl;
		while (xml_find(c->body.p, c->body.len, &pos, "Upload", &blk, &bl)) {
			sb_adds(&x, "<Upload>");
			sb_add(&x, blk, bl);
			sb_adds(&x, "</Upload>");
		}
	}
	sb_adds(&x, "</ListMultipartUploadsResult>\n");
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
	fan_free(f);
}

static void delete_objects(struct s3_req *r, const struct body *b)
{
	struct s3_delete_key *keys;
	bool quiet;
	unsigned char md5[16];
	size_t ml;
	const char *mv = http_hdr_get(r->m, "content-md5", &ml);

	if (mv) {
		unsigned char want[64];
		md5_bin(md5, b->p ? b->p : "", b->len);
		if (ml > 64 || b64_decode(want, mv, ml) != 16) {
			s3_error(r, 400, "InvalidDigest", "The Content-MD5 you specified was invalid.");
			return;
		}
		if (memcmp(want, md5, 16)) {
			s3_error(r, 400, "BadDigest", "The Content-MD5 you specified did not match what we received.");
			return;
		}
	}
	int n = s3_parse_delete(b->p ? b->p : "", b->len, &keys, &quiet);
	if (n < 0) {
		s3_error(r, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.");
		return;
	}
	struct fan *f = calloc(cfg.nbe, sizeof(*f));
	struct sbuf *docs = calloc(cfg.nbe, sizeof(*docs));
	char (*md5s)[32] = calloc(cfg.nbe, 32);
	if (!f || !docs || !md5s) {
		free(f);
		free(docs);
		free(md5s);
		s3_delete_keys_free(keys, n);
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	for (int i = 0; i < cfg.nbe; i++) {
		sb_init(&docs[i]);
		sb_printf(&docs[i], S3_XML_HEAD "<Delete><Quiet>%s</Quiet>", quiet ? "true" : "false");
	}
	int *count = calloc(cfg.nbe, sizeof(int));
	for (int k = 0; k < n && count; k++) {
		int bi = route(r->t.bucket, keys[k].key, keys[k].len);
		sb_adds(&docs[bi], "<Object><Key>");
		sb_add_xml(&docs[bi], keys[k].key, keys[k].len);
		sb_adds(&docs[bi], "</Key></Object>");
		count[bi]++;
	}
	pthread_t th[MAX_BACKENDS];
	bool started[MAX_BACKENDS] = { 0 };
	for (int i = 0; i < cfg.nbe && count; i++) {
		if (!count[i])
			continue;
		sb_adds(&docs[i], "</Delete>\n");
		unsigned char d[16];
		md5_bin(d, docs[i].p, docs[i].len);
		b64_encode(md5s[i], d, 16);
		f[i] = (struct fan){ .e = &cfg.be[i], .method = "POST", .bucket = r->t.bucket,
				     .query = "delete", .body = docs[i].p, .blen = docs[i].len,
				     .md5 = md5s[i] };
		started[i] = pthread_create(&th[i], NULL, fan_main, &f[i]) == 0;
		if (!started[i])
			fan_main(&f[i]);
	}
	for (int i = 0; i < cfg.nbe; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<DeleteResult " S3_XMLNS ">");
	bool failed = !count;
	for (int i = 0; i < cfg.nbe && !failed; i++) {
		if (!count[i])
			continue;
		struct call *c = &f[i].res;
		if (c->err || c->status != 200) {
			pass_error(r, c);
			failed = true;
			break;
		}
		size_t pos = 0;
		const char *blk;
		size_t bl;
		while (xml_find(c->body.p, c->body.len, &pos, "Deleted", &blk, &bl)) {
			sb_adds(&x, "<Deleted>");
			sb_add(&x, blk, bl);
			sb_adds(&x, "</Deleted>");
		}
		pos = 0;
		while (xml_find(c->body.p, c->body.len, &pos, "Error", &blk, &bl)) {
			sb_adds(&x, "<Error>");
			sb_add(&x, blk, bl);
			sb_adds(&x, "</Error>");
		}
	}
	sb_adds(&x, "</DeleteResult>\n");
	if (!failed)
		s3_respond_xml(r, 200, &x);
	else if (!r->responded)
		s3_error(r, 500, "InternalError", "Out of memory.");
	sb_free(&x);
	for (int i = 0; i < cfg.nbe; i++) {
		sb_free(&docs[i]);
		sb_free(&f[i].res.body);
	}
	free(count);
	free(docs);
	free(md5s);
	free(f);
	s3_delete_keys_free(keys, n);
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                 */

static bool has_param(struct s3_req *r, const char *name)
{
	return s3_query_get(&r->q, name, NULL) != NULL;
}

static const char *unsupported_subresource(struct s3_req *r)
{
	static const char *const names[] = {
		"acl", "policy", "cors", "lifecycle", "versioning", "versions", "tagging",
		"website", "logging", "notification", "replication", "encryption",
		"object-lock", "retention", "legal-hold", "torrent", "accelerate",
		"requestPayment", "inventory", "metrics", "analytics", "ownershipControls",
		"publicAccessBlock", "intelligent-tiering", "restore", "select", "attributes",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (has_param(r, names[i]))
			return names[i];
	return NULL;
}

static void handle(struct s3_req *r, void *arg)
{
	struct auth_state st;
	struct body b = { 0 };
	int m = r->m->method;

	if (check_auth_head(r, &st))
		return;
	if (st.kind != PAYLOAD_ABSENT && verify_signature(r, &st))
		return;
	if (read_body(r, &st, &b))
		return;
	if (st.kind == PAYLOAD_ABSENT) {
		/* Signed without x-amz-content-sha256: the hash of the body is
		 * part of the signature, so check it now. */
		sha256_hex(st.payload_hash, b.p ? b.p : "", b.len);
		if (verify_signature(r, &st))
			goto out;
	}
	if (m != HTTP_GET && m != HTTP_HEAD && m != HTTP_PUT && m != HTTP_POST && m != HTTP_DELETE) {
		s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
		goto out;
	}
	if (!r->t.bucket[0]) {
		if (m == HTTP_GET || m == HTTP_HEAD)
			list_buckets(r);
		else
			s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
		goto out;
	}
	if (!s3_bucket_name_ok(r->t.bucket) && m != HTTP_PUT) {
		s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
		goto out;
	}
	if (unsupported_subresource(r) || http_hdr_get(r->m, "x-amz-copy-source", NULL)) {
		s3_error(r, 501, "NotImplemented", "A header or query you provided implies functionality that is not implemented.");
		goto out;
	}
	if (r->t.has_key) {
		forward_object(r, &b);
		goto out;
	}
	switch (m) {
	case HTTP_PUT:
		create_bucket(r, &b);
		break;
	case HTTP_DELETE:
		delete_bucket(r);
		break;
	case HTTP_HEAD:
		head_bucket(r);
		break;
	case HTTP_GET:
		if (has_param(r, "location"))
			bucket_location(r);
		else if (has_param(r, "uploads"))
			list_uploads(r);
		else
			list_objects(r);
		break;
	case HTTP_POST:
		if (has_param(r, "delete"))
			delete_objects(r, &b);
		else
			s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
		break;
	}
out:
	free(b.p);
}

/* ---------------------------------------------------------------------- */
/* Startup                                                                  */

static int add_cred(const char *ak, size_t al, const char *sk, size_t sl, const char *where)
{
	if (!al || !sl || al >= sizeof(cfg.creds[0].access_key) || sl >= sizeof(cfg.creds[0].secret) ||
	    memchr(ak, '/', al)) {
		fprintf(stderr, "s3proxy: bad credentials in %s: the access key (no '/') and secret must be 1-128 characters\n", where);
		return -1;
	}
	if (cfg.ncreds >= MAX_CREDS) {
		fprintf(stderr, "s3proxy: too many credentials (max %d)\n", MAX_CREDS);
		return -1;
	}
	memcpy(cfg.creds[cfg.ncreds].access_key, ak, al);
	memcpy(cfg.creds[cfg.ncreds].secret, sk, sl);
	cfg.ncreds++;
	return 0;
}

/* File format: one "ACCESS_KEY SECRET" (or "ACCESS_KEY:SECRET") per line;
 * blank lines and lines starting with # are ignored. */
static int load_creds(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int lineno = 0;

	if (!f) {
		fprintf(stderr, "s3proxy: cannot read credentials file %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		size_t n = strlen(p);
		while (n && isspace((unsigned char)p[n - 1]))
			p[--n] = 0;
		char *sep = p + strcspn(p, " \t:");
		if (!*sep) {
			fprintf(stderr, "s3proxy: %s:%d: expected \"ACCESS_KEY SECRET\"\n", path, lineno);
			fclose(f);
			return -1;
		}
		char *sk = sep + 1;
		while (*sk == ' ' || *sk == '\t')
			sk++;
		char where[300];
		snprintf(where, sizeof(where), "%s:%d", path, lineno);
		if (add_cred(p, sep - p, sk, strlen(sk), where)) {
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: s3proxy --backend URL [--backend URL ...] [options]\n"
		"An S3 frontend: verifies SigV4, routes objects to backends by rendezvous\n"
		"hashing, fans out bucket operations and listings.\n\n"
		"  -b, --backend URL        a backend, http://HOST:PORT (repeat for more)\n"
		"      --backend-auth AK:SK[:REGION]\n"
		"                           sign backend requests with these credentials\n"
		"                           (for MinIO, Ceph RGW, Garage, ...; default: unsigned)\n"
		"  -c, --credentials FILE   client credentials, \"ACCESS_KEY SECRET\" per line\n"
		"  -H, --host ADDR          listen address (default 127.0.0.1)\n"
		"  -p, --port N             listen port, 0 for any free one (default 9000)\n"
		"      --region R           region clients must sign for (default us-east-1)\n"
		"      --max-conns N        connection cap (default 1024)\n"
		"      --max-body S         largest request body (default 1GiB)\n"
		"      --max-header S       largest request head (default 16KiB)\n"
		"      --idle-timeout T     keep-alive idle and read inactivity (default 30s)\n"
		"      --header-timeout T   a request head must arrive within T (default 10s)\n"
		"      --backend-timeout T  connect/read limit towards backends (default 60s)\n"
		"      --max-skew T         allowed client clock skew (default 15m)\n"
		"  -v, --verbose            log every error response\n"
		"  -h, --help               this text\n\n"
		"Credentials also come from the environment: S3PROXY_ACCESS_KEY and\n"
		"S3PROXY_SECRET_KEY; AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are used\n"
		"only when neither --credentials nor S3PROXY_* give any.\n"
		"Prints \"listening on ADDR:PORT\" on stdout once ready; SIGTERM stops it.\n");
}

static int bad_flag(const char *flag, const char *val, const char *what)
{
	fprintf(stderr, "s3proxy: invalid value '%s' for %s: expected %s\n", val, flag, what);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "credentials", required_argument, NULL, 'c' },
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "region", required_argument, NULL, 1 },
		{ "max-conns", required_argument, NULL, 2 },
		{ "max-body", required_argument, NULL, 3 },
		{ "max-header", required_argument, NULL, 4 },
		{ "idle-timeout", required_argument, NULL, 5 },
		{ "header-timeout", required_argument, NULL, 6 },
		{ "backend-timeout", required_argument, NULL, 7 },
		{ "backend-auth", required_argument, NULL, 8 },
		{ "max-skew", required_argument, NULL, 9 },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct server_cfg sc = {
		.name = "s3proxy", .host = "127.0.0.1", .port = 9000, .max_conns = 1024,
		.idle_ms = 30000, .head_ms = 10000, .max_header = 16384, .handler = handle,
	};
	int c;
	long l;
	uint64_t u;
	const char *why;

	log_init("s3proxy");
	while ((c = getopt_long(argc, argv, "b:c:H:p:vh", lo, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (cfg.nbe >= MAX_BACKENDS) {
				fprintf(stderr, "s3proxy: at most %d backends\n", MAX_BACKENDS);
				return 2;
			}
			if (endpoint_parse(&cfg.be[cfg.nbe], optarg, &why)) {
				fprintf(stderr, "s3proxy: invalid --backend '%s': %s\n", optarg, why);
				return 2;
			}
			for (int i = 0; i < cfg.nbe; i++)
				if (!strcmp(cfg.be[i].hostport, cfg.be[cfg.nbe].hostport)) {
					fprintf(stderr, "s3proxy: --backend %s given twice\n", optarg);
					return 2;
				}
			cfg.nbe++;
			break;
		case 'c':
			if (load_creds(optarg))
				return 2;
			break;
		case 'H': sc.host = optarg; break;
		case 'p':
			if (parse_long(optarg, 0, 65535, &l))
				return bad_flag("--port", optarg, "a port number 0-65535");
			sc.port = l;
			break;
		case 1:
			if (!*optarg || strlen(optarg) >= 64 || strchr(optarg, '/'))
				return bad_flag("--region", optarg, "a region name like us-east-1");
			cfg.region = optarg;
			break;
		case 2:
			if (parse_long(optarg, 1, 100000, &l))
				return bad_flag("--max-conns", optarg, "a number 1-100000");
			sc.max_conns = l;
			break;
		case 3:
			if (parse_size(optarg, &u) || u == 0 || u > (64ull << 30))
				return bad_flag("--max-body", optarg, "a size between 1 and 64GiB");
			cfg.max_body = u;
			break;
		case 4:
			if (parse_size(optarg, &u) || u < 1024 || u > (1u << 20))
				return bad_flag("--max-header", optarg, "a size between 1KiB and 1MiB");
			sc.max_header = u;
			break;
		case 5:
			if (parse_duration_ms(optarg, &u) || u < 10 || u > 86400000)
				return bad_flag("--idle-timeout", optarg, "a duration like 30s or 500ms");
			sc.idle_ms = u;
			break;
		case 6:
			if (parse_duration_ms(optarg, &u) || u < 10 || u > 86400000)
				return bad_flag("--header-timeout", optarg, "a duration like 10s or 500ms");
			sc.head_ms = u;
			break;
		case 7:
			if (parse_duration_ms(optarg, &u) || u < 10 || u > 86400000)
				return bad_flag("--backend-timeout", optarg, "a duration like 60s");
			cfg.backend_ms = u;
			break;
		case 8: {
			char *a = strdup(optarg);
			char *s1 = a ? strchr(a, ':') : NULL;
			char *s2 = s1 ? strchr(s1 + 1, ':') : NULL;
			if (!s1 || s1 == a || !s1[1] || s1 - a >= 129 || (s2 && !s2[1])) {
				free(a);
				return bad_flag("--backend-auth", optarg, "ACCESS_KEY:SECRET[:REGION]");
			}
			*s1 = 0;
			if (s2)
				*s2 = 0;
			snprintf(cfg.be_auth.access_key, sizeof(cfg.be_auth.access_key), "%s", a);
			snprintf(cfg.be_auth.secret, sizeof(cfg.be_auth.secret), "%s", s1 + 1);
			snprintf(cfg.be_auth.region, sizeof(cfg.be_auth.region), "%s", s2 ? s2 + 1 : "us-east-1");
			cfg.be_signed = true;
			free(a);
			break;
		}
		case 9:
			if (parse_duration_ms(optarg, &u) || u < 1000 || u > 7 * 86400000ull)
				return bad_flag("--max-skew", optarg, "a duration like 15m");
			cfg.skew_s = u / 1000;
			break;
		case 'v': log_verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "s3proxy: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	if (!cfg.nbe) {
		fprintf(stderr, "s3proxy: at least one --backend is required (see --help)\n");
		return 2;
	}
	/* S3PROXY_* always count; AWS_* only when nothing else names a
	 * credential, so a user's own AWS keys do not open the proxy by
	 * accident. */
	const char *ak = getenv("S3PROXY_ACCESS_KEY"), *sk = getenv("S3PROXY_SECRET_KEY");
	const char *src = "S3PROXY_ACCESS_KEY/S3PROXY_SECRET_KEY";
	if (!ak && !sk && !cfg.ncreds) {
		ak = getenv("AWS_ACCESS_KEY_ID");
		sk = getenv("AWS_SECRET_ACCESS_KEY");
		src = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY";
	}
	if ((ak && *ak) || (sk && *sk)) {
		if (!ak || !sk) {
			fprintf(stderr, "s3proxy: %s: both must be set\n", src);
			return 2;
		}
		if (add_cred(ak, strlen(ak), sk, strlen(sk), src))
			return 2;
	}
	if (!cfg.ncreds) {
		fprintf(stderr, "s3proxy: no client credentials: use --credentials FILE or set "
			"S3PROXY_ACCESS_KEY/S3PROXY_SECRET_KEY (see --help)\n");
		return 2;
	}
	logmsg("%d backend(s), %d credential(s), region %s%s", cfg.nbe, cfg.ncreds, cfg.region,
	       cfg.be_signed ? ", signing backend requests" : "");
	int rc = server_run(&sc);
	for (int i = 0; i < cfg.nbe; i++)
		endpoint_free(&cfg.be[i]);
	return rc;
}
