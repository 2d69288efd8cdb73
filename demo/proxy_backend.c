/* SPDX-License-Identifier: MIT */
/*
 * s3proxy's backend side (see proxy.h): rendezvous routing, building and
 * (re-)signing backend requests, pooled keep-alive connections with one
 * retry on a connection the backend closed, streaming responses back
 * through a fresh copy buffer, and parallel fan-out.
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
#include "s3ops.h"

#define COPY_MAX (8u << 20)
#define SMALL_BODY_MAX (16u << 20)

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
int route(const char *bucket, const char *key, size_t kl)
{
	int best = 0;
	uint64_t best_score = 0;
	for (int i = 0; i < pcfg.nbe; i++) {
		uint64_t h = fnv1a(0xcbf29ce484222325ull, pcfg.be[i].hostport, strlen(pcfg.be[i].hostport));
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
			s3_content_encoding_unchunked(&v, h->value, h->vlen);
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
	if (pcfg.be_signed) {
		out_hdr(o, "host", 4, e->hostport, strlen(e->hostport));
		out_hdr(o, "x-amz-date", 10, date, 16);
		out_hdr(o, "x-amz-content-sha256", 20, SIGV4_UNSIGNED, strlen(SIGV4_UNSIGNED));
	}
	qsort(o->h, o->nh, sizeof(o->h[0]), cmp_kv);
	sb_printf(&head, "%s %s%s%s HTTP/1.1\r\n", o->method, o->path.p ? o->path.p : "/",
		  o->query.len ? "?" : "", o->query.p ? o->query.p : "");
	if (!pcfg.be_signed)
		sb_printf(&head, "Host: %s\r\n", e->hostport);
	for (int i = 0; i < o->nh; i++)
		sb_printf(&head, "%s: %s\r\n", o->h[i].name, o->h[i].value);
	if (pcfg.be_signed) {
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
		sigv4_sign(&auth, &pcfg.be_auth, o->method, o->path.p, o->path.len,
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
		int fd = attempt ? endpoint_connect(e, pcfg.backend_ms) :
			 endpoint_get(e, pcfg.backend_ms, &reused);
		if (fd < 0)
			return fd;
		int err = http_conn_init(rc, fd, HTTP_RESPONSE, 64 * 1024, pcfg.backend_ms);
		if (err) {
			close(fd);
			return err;
		}
		rc->no_body = head_req;
		err = out_send(o, e, fd);
		if (!err) {
			int k = http_read_head(rc, pcfg.backend_ms);
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
		if (pcfg.be_signed) {
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

/* Reads a whole backend response body of up to max bytes.  Returns 0 or
 * -1. */
static int slurp_max(struct http_conn *rc, struct sbuf *out, uint64_t max)
{
	char tmp[16384];
	while (!rc->msg.complete) {
		ssize_t n = http_read_body(rc, tmp, sizeof(tmp));
		if (n < 0)
			return -1;
		sb_add(out, tmp, n);
		if (out->len > max || out->failed)
			return -1;
	}
	return 0;
}

/* Reads a whole (small) backend response body.  Returns 0 or -1. */
static int slurp(struct http_conn *rc, struct sbuf *out)
{
	return slurp_max(rc, out, SMALL_BODY_MAX);
}

/*
 * Answers with a backend's error, as this proxy's own error document: the
 * backend's Code and Message, but this request's RequestId (the one in the
 * x-amz-request-id header), as S3 clients expect them to match.
 */
static void answer_error(struct s3_req *r, int status, const struct sbuf *body)
{
	const char *code, *msg;
	size_t cl, ml, p1 = 0, p2 = 0;
	if (r->is_head || !body->p ||
	    !xml_find(body->p, body->len, &p1, "Code", &code, &cl) || cl > 64) {
		if (r->is_head || !body->len)
			s3_respond(r, status, NULL, NULL, 0);
		else
			s3_respond(r, status, "Content-Type: application/xml\r\n", body->p, body->len);
		return;
	}
	char c[65], *m = NULL;
	memcpy(c, code, cl);
	c[cl] = 0;
	if (xml_find(body->p, body->len, &p2, "Message", &msg, &ml)) {
		m = malloc(ml * 4 + 5);
		if (m && xml_unescape(m, ml * 4 + 5, msg, ml) < 0) {
			free(m);
			m = NULL;
		}
	}
	s3_error(r, status, c, m ? m : "");
	free(m);
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
	if (bm->status >= 400 || bm->content_length < 0) {
		/* No length from the backend (chunked), or an error document:
		 * buffer, then send. */
		struct sbuf body;
		sb_init(&body);
		if (slurp(rc, &body)) {
			sb_free(&body);
			sb_free(&h);
			release(e, rc, false);
			backend_unavailable(r, e, -EIO);
			return;
		}
		if (bm->status >= 400)
			answer_error(r, bm->status, &body);
		else
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
void forward_object(struct s3_req *r, const struct body *b)
{
	int bi = route(r->t.bucket, r->t.key, r->t.key_len);
	struct endpoint *e = &pcfg.be[bi];
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


/*
 * Sends o (consumed) with body to e and reads the answer into res: status,
 * the response's header lines when want_head, and a body of at most max
 * bytes (-EIO past it).  The connection goes back to e's pool when whole.
 */
static void finish_call(struct endpoint *e, struct outreq *o, const char *method,
			const char *body, size_t blen, uint64_t max, bool want_head,
			struct call *res)
{
	struct http_conn rc;

	o->body = body;
	o->blen = blen;
	o->send_length = !strcmp(method, "PUT") || !strcmp(method, "POST");
	res->err = exchange(o, e, &rc, !strcmp(method, "HEAD"));
	out_free(o);
	if (res->err)
		return;
	res->status = rc.msg.status;
	for (int i = 0; want_head && i < rc.msg.nhdr; i++) {
		const struct http_hdr *x = &rc.msg.hdr[i];
		sb_add(&res->head, x->name, x->nlen);
		sb_adds(&res->head, ": ");
		sb_add(&res->head, x->value, x->vlen);
		sb_adds(&res->head, "\r\n");
	}
	if (slurp_max(&rc, &res->body, max)) {
		res->err = -EIO;
		release(e, &rc, false);
		return;
	}
	release(e, &rc, true);
}

void call_backend(struct endpoint *e, const char *method, const char *bucket,
			 const char *query, const char *body, size_t blen,
			 const char *content_md5, struct call *res)
{
	struct outreq o;

	sb_init(&res->body);
	sb_init(&res->head);
	res->status = 0;
	out_init(&o, method);
	out_target(&o, bucket, NULL, 0, false, query, strlen(query));
	if (content_md5)
		out_hdr(&o, "content-md5", 11, content_md5, strlen(content_md5));
	finish_call(e, &o, method, body, blen, SMALL_BODY_MAX, false, res);
}


void call_object(struct endpoint *e, const char *method, const char *bucket, const char *key,
		 size_t kl, const char *query, const char *hlines, const char *body, size_t blen,
		 uint64_t max, struct call *res)
{
	struct outreq o;

	sb_init(&res->body);
	sb_init(&res->head);
	res->status = 0;
	out_init(&o, method);
	out_target(&o, bucket, key, kl, true, query, strlen(query));
	for (const char *p = hlines; p && *p;) {
		const char *eol = strstr(p, "\r\n"), *colon = strchr(p, ':');
		if (!eol || !colon || colon > eol)
			break;
		const char *v = colon + 1;
		while (*v == ' ')
			v++;
		out_hdr(&o, p, colon - p, v, eol - v);
		p = eol + 2;
	}
	finish_call(e, &o, method, body, blen, max, true, res);
}

void *fan_main(void *p)
{
	struct fan *f = p;
	call_backend(f->e, f->method, f->bucket, f->query, f->body, f->blen, f->md5, &f->res);
	return NULL;
}

/* Runs the same call on every backend in parallel. */
struct fan *fan_out(const char *method, const char *bucket, const char *query)
{
	struct fan *f = calloc(pcfg.nbe, sizeof(*f));
	pthread_t th[MAX_BACKENDS];
	bool started[MAX_BACKENDS] = { 0 };

	if (!f)
		return NULL;
	for (int i = 0; i < pcfg.nbe; i++) {
		f[i] = (struct fan){ .e = &pcfg.be[i], .method = method, .bucket = bucket, .query = query };
		if (i > 0 && pthread_create(&th[i], NULL, fan_main, &f[i]) == 0)
			started[i] = true;
		else if (i > 0)
			fan_main(&f[i]);
	}
	if (pcfg.nbe)
		fan_main(&f[0]);
	for (int i = 1; i < pcfg.nbe; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	return f;
}

void fan_free(struct fan *f)
{
	if (!f)
		return;
	for (int i = 0; i < pcfg.nbe; i++)
		sb_free(&f[i].res.body);
	free(f);
}

/* Passes a backend's error document through unchanged. */
void pass_error(struct s3_req *r, const struct call *c)
{
	if (c->err) {
		s3_error(r, 503, "ServiceUnavailable", "A storage backend is unavailable; please retry.");
		return;
	}
	answer_error(r, c->status, &c->body);
}

bool xml_has_code(const struct sbuf *b, const char *code)
{
	const char *v;
	size_t vl, pos = 0;
	return b->p && xml_find(b->p, b->len, &pos, "Code", &v, &vl) && strn_ieq(v, vl, code);
}
