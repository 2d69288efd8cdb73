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
 *
 * This file holds the S3 operations and main; authentication is in
 * proxy_auth.c and the backend side in proxy_backend.c.
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

#include "proxy.h"
#include "client.h"
#include "http.h"
#include "s3.h"
#include "s3ops.h"
#include "server.h"
#include "sigv4.h"
#include "util.h"

struct proxy_cfg pcfg = {
	.region = "us-east-1",
	.max_body = 1ull << 30,
	.backend_ms = 60000,
	.skew_s = 900,
};

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
	for (int i = 0; i < pcfg.nbe; i++) {
		if (f[i].res.err || f[i].res.status != 200) {
			pass_error(r, &f[i].res);
			fan_free(f);
			return;
		}
	}
	for (int i = 0; i < pcfg.nbe; i++) {
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
	sb_adds(&x, S3_BUCKETS_HEAD);
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
	sb_adds(&x, S3_BUCKETS_TAIL);
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
	for (int i = 0; i < pcfg.nbe; i++) {
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
	for (int i = 0; i < pcfg.nbe; i++) {
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
	if (missing == pcfg.nbe) {
		s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
		return;
	}
	f = fan_out("DELETE", r->t.bucket, "");
	if (!f) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	for (int i = 0; i < pcfg.nbe; i++) {
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
	for (int i = 0; i < pcfg.nbe; i++) {
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
	call_backend(&pcfg.be[0], "HEAD", r->t.bucket, "", NULL, 0, NULL, &c);
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
	s3_location_xml(&x, pcfg.region);
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
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

/* Asks every backend for the same page, with one name more than max-keys
 * (to tell a full page from a truncated one) and from where the client
 * resumes.  NULL when out of memory. */
static struct fan *fan_out_list(const char *bucket, const struct s3_list_params *lp)
{
	struct sbuf q;
	sb_init(&q);
	sb_printf(&q, "list-type=2&max-keys=%d", lp->max_keys < 1000 ? lp->max_keys + 1 : 1000);
	if (lp->prefix_len) {
		sb_adds(&q, "&prefix=");
		sb_add_uri(&q, lp->prefix, lp->prefix_len, false);
	}
	if (lp->delimiter_len) {
		sb_adds(&q, "&delimiter=");
		sb_add_uri(&q, lp->delimiter, lp->delimiter_len, false);
	}
	if (lp->fetch_owner)
		sb_adds(&q, "&fetch-owner=true");
	if (lp->after_len) {
		sb_adds(&q, "&start-after=");
		sb_add_uri(&q, lp->after, lp->after_len, false);
	}
	struct fan *f = q.failed ? NULL : fan_out("GET", bucket, q.p);
	sb_free(&q);
	return f;
}

/* The backends' listings together: every name, and the least of the last
 * names the truncated ones returned (past it, one of them may hold names
 * it has not sent). */
struct merged {
	struct name_ent *v;
	size_t n, cap;
	bool truncated;
	const char *bound;
	size_t bound_len;
};

static void merged_free(struct merged *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].name);
		free(m->v[i].extra);
	}
	free(m->v);
}

/* Collects every backend's listing into m, sorted.  Returns 0, or -1 once
 * it has sent the error (a backend's, or an unreadable listing). */
static int merge_listings(struct s3_req *r, struct fan *f, struct merged *m)
{
	for (int i = 0; i < pcfg.nbe; i++) {
		struct call *c = &f[i].res;
		if (c->err || c->status != 200) {
			pass_error(r, c);
			return -1;
		}
		bool tr;
		char *last = NULL;
		size_t ll = 0;
		if (collect_listing(&c->body, &m->v, &m->n, &m->cap, &tr, &last, &ll)) {
			s3_error(r, 502, "InternalError", "A storage backend sent a listing that could not be parsed.");
			return -1;
		}
		if (tr) {
			m->truncated = true;
			if (last && (!m->bound || name_cmp(last, ll, m->bound, m->bound_len) < 0)) {
				m->bound = last;
				m->bound_len = ll;
			}
		}
	}
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), cmp_name);
	return 0;
}

/* The client's page of the merged names: after its marker, each common
 * prefix once, up to max-keys and not past the bound. */
static void send_page(struct s3_req *r, const struct s3_list_params *lp, const struct merged *m)
{
	struct sbuf body, x;
	sb_init(&body);
	sb_init(&x);
	int count = 0;
	bool truncated = m->truncated;
	const char *lastn = NULL;
	size_t lastl = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct name_ent *e = &m->v[i];
		if (lp->after && name_cmp(e->name, e->len, lp->after, lp->after_len) <= 0)
			continue;
		if (lastn && e->prefix && !name_cmp(e->name, e->len, lastn, lastl))
			continue;
		if (m->bound && name_cmp(e->name, e->len, m->bound, m->bound_len) > 0)
			break;
		if (count >= lp->max_keys) {
			truncated = true;
			break;
		}
		if (e->prefix)
			s3_list_add_prefix(&body, lp, e->name, e->len);
		else
			s3_list_add_key(&body, lp, e->name, e->len, e->extra, e->extra_len);
		lastn = e->name;
		lastl = e->len;
		count++;
	}
	if (lp->max_keys == 0)
		truncated = false;
	struct s3_list_result res = {
		.bucket = r->t.bucket, .count = count, .truncated = truncated && lastn,
		.next = truncated ? lastn : NULL, .next_len = lastl, .entries = &body,
	};
	s3_list_result_xml(&x, lp, &res);
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
	sb_free(&body);
}

static void list_objects(struct s3_req *r)
{
	struct s3_list_params lp;
	const char *code, *msg;

	if (s3_list_params_parse(&r->q, &lp, &code, &msg)) {
		s3_error(r, 400, code, msg);
		return;
	}
	struct fan *f = fan_out_list(r->t.bucket, &lp);
	if (!f) {
		s3_list_params_free(&lp);
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	struct merged m = { 0 };
	if (!merge_listings(r, f, &m))
		send_page(r, &lp, &m);
	merged_free(&m);
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
	for (int i = 0; i < pcfg.nbe; i++) {
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
	const char *code, *msg;

	md5_bin(md5, b->p ? b->p : "", b->len);
	if (s3_content_md5_check(r->m, md5, &code, &msg)) {
		s3_error(r, 400, code, msg);
		return;
	}
	int n = s3_parse_delete(b->p ? b->p : "", b->len, &keys, &quiet);
	if (n < 0) {
		s3_error(r, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.");
		return;
	}
	struct fan *f = calloc(pcfg.nbe, sizeof(*f));
	struct sbuf *docs = calloc(pcfg.nbe, sizeof(*docs));
	char (*md5s)[32] = calloc(pcfg.nbe, 32);
	if (!f || !docs || !md5s) {
		free(f);
		free(docs);
		free(md5s);
		s3_delete_keys_free(keys, n);
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	for (int i = 0; i < pcfg.nbe; i++) {
		sb_init(&docs[i]);
		sb_printf(&docs[i], S3_XML_HEAD "<Delete><Quiet>%s</Quiet>", quiet ? "true" : "false");
	}
	int *count = calloc(pcfg.nbe, sizeof(int));
	for (int k = 0; k < n && count; k++) {
		int bi = route(r->t.bucket, keys[k].key, keys[k].len);
		sb_adds(&docs[bi], "<Object><Key>");
		sb_add_xml(&docs[bi], keys[k].key, keys[k].len);
		sb_adds(&docs[bi], "</Key></Object>");
		count[bi]++;
	}
	pthread_t th[MAX_BACKENDS];
	bool started[MAX_BACKENDS] = { 0 };
	for (int i = 0; i < pcfg.nbe && count; i++) {
		if (!count[i])
			continue;
		sb_adds(&docs[i], "</Delete>\n");
		unsigned char d[16];
		md5_bin(d, docs[i].p, docs[i].len);
		b64_encode(md5s[i], d, 16);
		f[i] = (struct fan){ .e = &pcfg.be[i], .method = "POST", .bucket = r->t.bucket,
				     .query = "delete", .body = docs[i].p, .blen = docs[i].len,
				     .md5 = md5s[i] };
		started[i] = pthread_create(&th[i], NULL, fan_main, &f[i]) == 0;
		if (!started[i])
			fan_main(&f[i]);
	}
	for (int i = 0; i < pcfg.nbe; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<DeleteResult " S3_XMLNS ">");
	bool failed = !count;
	for (int i = 0; i < pcfg.nbe && !failed; i++) {
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
	for (int i = 0; i < pcfg.nbe; i++) {
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
	return s3_has_param(&r->q, name);
}

/* Header lines for the source GET of a copy: x-amz-copy-source-if-* as
 * If-*, and for a part its x-amz-copy-source-range as Range. */
static void copy_get_headers(struct s3_req *r, struct sbuf *h, bool part)
{
	static const char *const cond[] = {
		"if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
	};
	char name[64];
	size_t vl;
	const char *v;
	for (size_t i = 0; i < sizeof(cond) / sizeof(cond[0]); i++) {
		snprintf(name, sizeof(name), "x-amz-copy-source-%s", cond[i]);
		if ((v = http_hdr_get(r->m, name, &vl)))
			sb_printf(h, "%s: %.*s\r\n", cond[i], (int)vl, v);
	}
	if (part && (v = http_hdr_get(r->m, "x-amz-copy-source-range", &vl)))
		sb_printf(h, "range: %.*s\r\n", (int)vl, v);
}

/* Whether a header belongs to the object (and goes with a copy). */
static bool object_header(const char *n, size_t l)
{
	static const char *const names[] = {
		"content-type", "cache-control", "content-disposition", "content-encoding",
		"content-language", "expires",
	};
	if (l > 11 && !strncasecmp(n, "x-amz-meta-", 11))
		return true;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strn_ieq(n, l, names[i]))
			return true;
	return false;
}

/* Header lines for the destination PUT of a CopyObject: the request's
 * object headers under x-amz-metadata-directive: REPLACE, else the
 * source's as its GET returned them (user metadata decoded back from RFC
 * 2047, as it was given). */
static void copy_put_headers(struct s3_req *r, const struct sbuf *src_head, struct sbuf *h)
{
	if (s3_copy_replaces_meta(r->m)) {
		for (int i = 0; i < r->m->nhdr; i++) {
			const struct http_hdr *x = &r->m->hdr[i];
			if (object_header(x->name, x->nlen))
				sb_printf(h, "%.*s: %.*s\r\n", (int)x->nlen, x->name, (int)x->vlen, x->value);
		}
		return;
	}
	const char *p = src_head->p ? src_head->p : "", *end = p + src_head->len;
	while (p < end) {
		const char *eol = memmem(p, end - p, "\r\n", 2);
		const char *colon = eol ? memchr(p, ':', eol - p) : NULL;
		if (!eol)
			break;
		if (colon && object_header(p, colon - p)) {
			const char *v = colon + 1;
			while (v < eol && *v == ' ')
				v++;
			sb_add(h, p, colon - p);
			sb_adds(h, ": ");
			s3_meta_value_decode(h, v, eol - v);
			sb_adds(h, "\r\n");
		}
		p = eol + 2;
	}
}

/* The value of header name (lowercase, with its colon) among a
 * response's header lines, blanks trimmed in front; NULL when absent. */
static const char *head_value(const struct sbuf *head, const char *name, size_t *vl)
{
	const char *p = head->p ? head->p : "", *end = p + head->len;
	size_t nl = strlen(name);
	while (p < end) {
		const char *eol = memmem(p, end - p, "\r\n", 2);
		if (!eol)
			break;
		if ((size_t)(eol - p) >= nl && !strncasecmp(p, name, nl)) {
			const char *v = p + nl;
			while (v < eol && *v == ' ')
				v++;
			*vl = eol - v;
			return v;
		}
		p = eol + 2;
	}
	return NULL;
}

/* The unquoted ETag among a response's header lines (into out). */
static void head_etag(const struct sbuf *head, char out[72])
{
	size_t n;
	const char *v = head_value(head, "etag:", &n);
	out[0] = 0;
	if (!v)
		return;
	while (n && *v == '"') {
		v++;
		n--;
	}
	while (n && v[n - 1] == '"')
		n--;
	snprintf(out, 72, "%.*s", (int)(n < 71 ? n : 71), v);
}

/*
 * The bytes an UploadPartCopy across backends asked for, out of the
 * source's answer to a GET with Range: bytes=first-last.  A Range server
 * clamps a last byte past the end and may ignore Range altogether; S3
 * refuses such a copy range, so the proxy checks the answer (Content-Range,
 * or the whole body of a 200) against what was asked, and keeps only those
 * bytes in g->body.  Returns 0, or -1 once it has responded.
 */
static int copy_range_fetched(struct s3_req *r, struct call *g, uint64_t first, uint64_t last)
{
	if (g->status == 200) {
		if (last >= g->body.len) {
			s3_error(r, 400, "InvalidArgument", S3_COPY_RANGE_OUTSIDE);
			return -1;
		}
		memmove(g->body.p, g->body.p + first, last - first + 1);
		g->body.len = last - first + 1;
		return 0;
	}
	size_t vl;
	const char *v = head_value(&g->head, "content-range:", &vl);
	char cr[96];
	unsigned long long f, l, size;
	int end = 0;
	snprintf(cr, sizeof(cr), "%.*s", v ? (int)(vl < 95 ? vl : 95) : 0, v ? v : "");
	if (sscanf(cr, "bytes %llu-%llu/%llu%n", &f, &l, &size, &end) != 3 || (size_t)end != strlen(cr) ||
	    l < f || l - f + 1 != g->body.len) {
		s3_error(r, 502, "InternalError", "A storage backend answered a ranged read without a usable Content-Range.");
		return -1;
	}
	if (f != first || l != last) {
		s3_error(r, 400, "InvalidArgument", S3_COPY_RANGE_OUTSIDE);
		return -1;
	}
	return 0;
}

/*
 * CopyObject or UploadPartCopy (upload set) whose source lives on another
 * backend than the destination: the proxy reads the source (with the copy's
 * conditions and range) into a fresh buffer and writes it to the
 * destination's backend, then answers as S3 does.  Copies within one
 * backend go to that backend as they are.
 */
static void copy_across(struct s3_req *r, const struct s3_target *src, int sbi, int dbi,
			bool part)
{
	struct sbuf gh, ph, x;
	struct call g, p;
	uint64_t first = 0, last = 0;
	size_t rl;
	const char *rv = part ? http_hdr_get(r->m, "x-amz-copy-source-range", &rl) : NULL;

	/* The form of the range is checked before anything is read, its
	 * extent against the source's answer: as storaged does for a copy
	 * within one node, whatever the placement. */
	if (rv && s3_copy_range_parse(rv, rl, UINT64_MAX, &first, &last)) {
		s3_error(r, 400, "InvalidArgument", S3_COPY_RANGE_MALFORMED);
		return;
	}
	sb_init(&gh);
	sb_init(&ph);
	sb_init(&x);
	copy_get_headers(r, &gh, part);
	call_object(&pcfg.be[sbi], "GET", src->bucket, src->key, src->key_len, "", gh.p, NULL, 0,
		    pcfg.max_body, &g);
	if (g.err || (g.status != 200 && g.status != 206)) {
		if (!g.err && (g.status == 304 || g.status == 412))
			s3_error(r, 412, "PreconditionFailed", S3_PRECONDITION_MSG);
		else if (!g.err && g.status == 416 && rv)
			s3_error(r, 400, "InvalidArgument", S3_COPY_RANGE_OUTSIDE);
		else
			pass_error(r, &g);
		goto out;
	}
	if (rv && copy_range_fetched(r, &g, first, last))
		goto out;
	if (!part)
		copy_put_headers(r, &g.head, &ph);
	call_object(&pcfg.be[dbi], "PUT", r->t.bucket, r->t.key, r->t.key_len,
		    part ? r->t.raw_query : "", ph.p, g.body.p, g.body.len, 1u << 20, &p);
	if (p.err || p.status != 200) {
		pass_error(r, &p);
	} else {
		char etag[72];
		head_etag(&p.head, etag);
		s3_copy_result_xml(&x, part, etag, time(NULL));
		s3_respond_xml(r, 200, &x);
	}
	sb_free(&p.body);
	sb_free(&p.head);
out:
	sb_free(&g.body);
	sb_free(&g.head);
	sb_free(&gh);
	sb_free(&ph);
	sb_free(&x);
}

/* A request with x-amz-copy-source: to the destination's backend when the
 * source lives there too, else copy_across. */
static void copy_object(struct s3_req *r, const struct body *b)
{
	struct s3_target src;
	if (s3_copy_source(r->m, &src)) {
		s3_error(r, 400, "InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey.");
		return;
	}
	int sbi = route(src.bucket, src.key, src.key_len);
	int dbi = route(r->t.bucket, r->t.key, r->t.key_len);
	if (sbi == dbi)
		forward_object(r, b);
	else
		copy_across(r, &src, sbi, dbi, s3_query_get(&r->q, "uploadId", NULL) != NULL);
	s3_target_free(&src);
}

/*
 * A request without any authentication.  S3 tells a bucket or key that does
 * not exist (404) from one the caller may not read (403): so does the
 * proxy, asking the backends.  Only a read can miss a key; a write is
 * refused (403) whether the key exists or not, and a CreateBucket whether
 * the bucket exists or not.
 */
static void anonymous(struct s3_req *r)
{
	struct call c = { 0 };
	const char *code = NULL;
	bool read = r->m->method == HTTP_GET || r->m->method == HTTP_HEAD;
	bool create = !r->t.has_key && r->m->method == HTTP_PUT;

	if (!r->t.bucket[0] || create) {
		/* ListBuckets and CreateBucket: nothing to look up. */
	} else if (!s3_bucket_name_ok(r->t.bucket)) {
		code = "NoSuchBucket";
	} else {
		call_backend(&pcfg.be[0], "HEAD", r->t.bucket, "", NULL, 0, NULL, &c);
		if (!c.err && c.status == 404)
			code = "NoSuchBucket";
		sb_free(&c.body);
		if (!code && r->t.has_key && read) {
			int bi = route(r->t.bucket, r->t.key, r->t.key_len);
			call_object(&pcfg.be[bi], "HEAD", r->t.bucket, r->t.key, r->t.key_len, "", NULL,
				    NULL, 0, 0, &c);
			if (!c.err && c.status == 404)
				code = "NoSuchKey";
			sb_free(&c.body);
			sb_free(&c.head);
		}
	}
	if (!code)
		s3_error(r, 403, "AccessDenied", "Access Denied: the request carries no Authorization header.");
	else if (!strcmp(code, "NoSuchBucket"))
		s3_error(r, 404, code, "The specified bucket does not exist.");
	else
		s3_error(r, 404, code, "The specified key does not exist.");
}

/*
 * What no backend is asked for: an out-of-scope sub-resource (501), and
 * the headers s3_refused_headers names (server-side encryption, Object
 * Lock), checked here rather than left to the backends, since CreateBucket
 * does not pass its headers on and another S3 server might do what is
 * asked.  Returns true once it has responded.
 */
static bool refuse(struct s3_req *r)
{
	const char *code, *msg;
	int status;

	if (!r->t.bucket[0])
		return false;
	if (s3_unsupported_subresource(&r->q)) {
		s3_error(r, 501, "NotImplemented", "A header or query you provided implies functionality that is not implemented.");
		return true;
	}
	status = s3_refused_headers(r->m, r->t.has_key, &code, &msg);
	if (status)
		s3_error(r, status, code, msg);
	return status != 0;
}

static void handle(struct s3_req *r, void *arg)
{
	struct auth_state st;
	struct body b = { 0 };
	int m = r->m->method;

	if (!http_hdr_get(r->m, "authorization", NULL) && !has_param(r, "X-Amz-Signature") &&
	    !has_param(r, "X-Amz-Credential")) {
		anonymous(r);
		return;
	}
	if (check_auth_head(r, &st))
		return;
	if (st.kind != PAYLOAD_ABSENT && verify_signature(r, &st))
		return;
	/* Refused before the body is read whenever the signature allows:
	 * a client waiting on Expect: 100-continue gets the answer at once. */
	if (st.kind != PAYLOAD_ABSENT && refuse(r))
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
	if (refuse(r))
		goto out;
	if (r->t.has_key && http_hdr_get(r->m, "x-amz-copy-source", NULL) && m == HTTP_PUT) {
		copy_object(r, &b);
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
	if (!al || !sl || al >= sizeof(pcfg.creds[0].access_key) || sl >= sizeof(pcfg.creds[0].secret) ||
	    memchr(ak, '/', al)) {
		fprintf(stderr, "s3proxy: bad credentials in %s: the access key (no '/') and secret must be 1-128 characters\n", where);
		return -1;
	}
	if (pcfg.ncreds >= MAX_CREDS) {
		fprintf(stderr, "s3proxy: too many credentials (max %d)\n", MAX_CREDS);
		return -1;
	}
	memcpy(pcfg.creds[pcfg.ncreds].access_key, ak, al);
	memcpy(pcfg.creds[pcfg.ncreds].secret, sk, sl);
	pcfg.ncreds++;
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
			if (pcfg.nbe >= MAX_BACKENDS) {
				fprintf(stderr, "s3proxy: at most %d backends\n", MAX_BACKENDS);
				return 2;
			}
			if (endpoint_parse(&pcfg.be[pcfg.nbe], optarg, &why)) {
				fprintf(stderr, "s3proxy: invalid --backend '%s': %s\n", optarg, why);
				return 2;
			}
			for (int i = 0; i < pcfg.nbe; i++)
				if (!strcmp(pcfg.be[i].hostport, pcfg.be[pcfg.nbe].hostport)) {
					fprintf(stderr, "s3proxy: --backend %s given twice\n", optarg);
					return 2;
				}
			pcfg.nbe++;
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
			pcfg.region = optarg;
			break;
		case 2:
			if (parse_long(optarg, 1, 100000, &l))
				return bad_flag("--max-conns", optarg, "a number 1-100000");
			sc.max_conns = l;
			break;
		case 3:
			if (parse_size(optarg, &u) || u == 0 || u > (64ull << 30))
				return bad_flag("--max-body", optarg, "a size between 1 and 64GiB");
			pcfg.max_body = u;
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
			pcfg.backend_ms = u;
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
			snprintf(pcfg.be_auth.access_key, sizeof(pcfg.be_auth.access_key), "%s", a);
			snprintf(pcfg.be_auth.secret, sizeof(pcfg.be_auth.secret), "%s", s1 + 1);
			snprintf(pcfg.be_auth.region, sizeof(pcfg.be_auth.region), "%s", s2 ? s2 + 1 : "us-east-1");
			pcfg.be_signed = true;
			free(a);
			break;
		}
		case 9:
			if (parse_duration_ms(optarg, &u) || u < 1000 || u > 7 * 86400000ull)
				return bad_flag("--max-skew", optarg, "a duration like 15m");
			pcfg.skew_s = u / 1000;
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
	if (!pcfg.nbe) {
		fprintf(stderr, "s3proxy: at least one --backend is required (see --help)\n");
		return 2;
	}
	/* S3PROXY_* always count; AWS_* only when nothing else names a
	 * credential, so a user's own AWS keys do not open the proxy by
	 * accident. */
	const char *ak = getenv("S3PROXY_ACCESS_KEY"), *sk = getenv("S3PROXY_SECRET_KEY");
	const char *src = "S3PROXY_ACCESS_KEY/S3PROXY_SECRET_KEY";
	if (!ak && !sk && !pcfg.ncreds) {
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
	if (!pcfg.ncreds) {
		fprintf(stderr, "s3proxy: no client credentials: use --credentials FILE or set "
			"S3PROXY_ACCESS_KEY/S3PROXY_SECRET_KEY (see --help)\n");
		return 2;
	}
	logmsg("%d backend(s), %d credential(s), region %s%s", pcfg.nbe, pcfg.ncreds, pcfg.region,
	       pcfg.be_signed ? ", signing backend requests" : "");
	/* A fan-out request holds a socket to every backend at once, and
	 * each backend keeps a pool of idle connections. */
	sc.fds_per_conn = pcfg.nbe;
	sc.fds_fixed = pcfg.nbe * (int)(sizeof(pcfg.be[0].idle) / sizeof(pcfg.be[0].idle[0]));
	int rc = server_run(&sc);
	for (int i = 0; i < pcfg.nbe; i++)
		endpoint_free(&pcfg.be[i]);
	return rc;
}
