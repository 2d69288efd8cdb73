/* SPDX-License-Identifier: MIT */
/*
 * loadgen: an S3 load generator in the spirit of warp and elbencho.
 *
 * Workers (one thread and one keep-alive connection each) run put, get,
 * delete and list operations, or a weighted mix, against any S3 endpoint,
 * signing with SigV4 and UNSIGNED-PAYLOAD so payloads are never hashed.
 * Payloads are cut from a pool of random bytes generated once: the bytes of
 * object K at offset i are pool[(start(K) + i) % POOL], and the size of K is
 * a function of K too, so --verify can check every byte read back without a
 * checksum in the hot path.  Each worker owns its keys, so no operation
 * races another worker's.  Like the servers, it allocates a fresh buffer
 * per request.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "http.h"
#include "s3.h"
#include "sigv4.h"
#include "util.h"

#define POOL_SIZE (1u << 20)
#define MAX_WORKERS 4096
#define MAX_ERR_KINDS 32

enum op { OP_PUT, OP_GET, OP_DELETE, OP_LIST, NOPS };
static const char *const op_names[NOPS] = { "put", "get", "delete", "list" };

static struct {
	struct endpoint ep;
	struct sigv4_creds cr;
	const char *bucket;
	char prefix[256];
	int weights[NOPS];
	uint64_t size_min, size_max;
	int conc;
	uint64_t duration_ms;
	uint64_t ops;
	uint64_t warmup_ms;
	bool warmup_set;
	uint64_t objects;
	bool verify;
	const char *json;
	uint64_t seed;
	int timeout_ms;
	bool create_bucket;
	bool cleanup;
	bool quiet;
	FILE *oplog;            /* --op-log: one line per operation */
} cfg = {
	.bucket = "loadgen",
	.size_min = 1 << 20,
	.size_max = 1 << 20,
	.conc = 8,
	.duration_ms = 10000,
	.timeout_ms = 30000,
	.create_bucket = true,
};

static unsigned char *pool;     /* POOL_SIZE + slack, random */
static volatile int stop_now;
static atomic_uint_fast64_t ops_claimed;
static uint64_t t_start_ns, t_measure_ns, t_end_ns;

/* ---------------------------------------------------------------------- */
/* Deterministic object content                                             */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static uint64_t key_hash(const char *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ cfg.seed;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)k[i];
		h *= 0x100000001b3ull;
	}
	return mix64(h);
}

/* Size of an object: fixed, or log-uniform over [min, max], from its key. */
static uint64_t key_size(uint64_t h)
{
	if (cfg.size_min == cfg.size_max)
		return cfg.size_min;
	double u = (double)(mix64(h ^ 0x5151) >> 11) / 9007199254740992.0;
	double lo = log((double)(cfg.size_min ? cfg.size_min : 1)), hi = log((double)cfg.size_max);
	uint64_t s = (uint64_t)exp(lo + u * (hi - lo));
	if (s < cfg.size_min)
		s = cfg.size_min;
	if (s > cfg.size_max)
		s = cfg.size_max;
	return s;
}

static size_t key_start(uint64_t h)
{
	return h % POOL_SIZE;
}

/* Fills buf with the object's bytes [off, off+n). */
static void fill_payload(char *buf, uint64_t h, uint64_t off, size_t n)
{
	size_t pos = (key_start(h) + off) % POOL_SIZE;
	while (n) {
		size_t run = POOL_SIZE - pos < n ? POOL_SIZE - pos : n;
		memcpy(buf, pool + pos, run);
		buf += run;
		n -= run;
		pos = 0;
	}
}

/* Checks buf against the object's bytes at off; returns the first bad
 * offset or -1. */
static int64_t check_payload(const char *buf, uint64_t h, uint64_t off, size_t n)
{
	size_t pos = (key_start(h) + off) % POOL_SIZE, done = 0;
	while (done < n) {
		size_t run = POOL_SIZE - pos < n - done ? POOL_SIZE - pos : n - done;
		if (memcmp(buf + done, pool + pos, run)) {
			for (size_t i = 0; i < run; i++)
				if (buf[done + i] != (char)pool[pos + i])
					return off + done + i;
		}
		done += run;
		pos = 0;
	}
	return -1;
}

/* ---------------------------------------------------------------------- */
/* Per-worker state and statistics                                          */

struct lat {
	uint32_t *v;            /* microseconds */
	size_t n, cap;
};

static void lat_add(struct lat *l, uint64_t ns)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		uint32_t *nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv)
			return;
		l->v = nv;
		l->cap = cap;
	}
	uint64_t us = ns / 1000;
	l->v[l->n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

struct opstats {
	uint64_t count, errors, bytes;
	struct lat lat, ttfb;
};

struct errkind {
	char name[96];
	uint64_t count;
};

struct live {
	uint64_t seq;
};

struct worker {
	int id;
	pthread_t th;
	int fd;
	struct http_conn hc;
	bool hc_ready;
	uint64_t rng;
	uint64_t next_seq;
	uint64_t *live;         /* sequence numbers of this worker's objects */
	size_t nlive, caplive;
	struct opstats st[NOPS];
	struct errkind errs[MAX_ERR_KINDS];
	int nerrs;
	uint64_t verified_bytes, mismatches;
	unsigned char skey[32];
	char skey_date[9];
};

static uint64_t rnd(struct worker *w)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return w->rng;
}

static void note_error(struct worker *w, const char *kind)
{
	for (int i = 0; i < w->nerrs; i++)
		if (!strcmp(w->errs[i].name, kind)) {
			w->errs[i].count++;
			return;
		}
	if (w->nerrs < MAX_ERR_KINDS) {
		snprintf(w->errs[w->nerrs].name, sizeof(w->errs[0].name), "%s", kind);
		w->errs[w->nerrs++].count = 1;
	}
}

static void key_name(char *out, size_t cap, int wid, uint64_t seq)
{
	snprintf(out, cap, "%sw%04d-%010" PRIu64, cfg.prefix, wid, seq);
}

/* ---------------------------------------------------------------------- */
/* HTTP                                                                     */

static void drop_conn(struct worker *w)
{
	if (w->hc_ready)
		http_conn_free(&w->hc);
	w->hc_ready = false;
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

static int ensure_conn(struct worker *w)
{
	if (w->fd >= 0)
		return 0;
	int fd = endpoint_connect(&cfg.ep, cfg.timeout_ms);
	if (fd < 0)
		return fd;
	if (http_conn_init(&w->hc, fd, HTTP_RESPONSE, 64 * 1024, cfg.timeout_ms)) {
		close(fd);
		return -ENOMEM;
	}
	w->fd = fd;
	w->hc_ready = true;
	return 0;
}

struct result {
	int status;
	char code[64];
	uint64_t ttfb_ns;
	int err;                /* transport error (-errno) */
	/* Filled by a PUT when --op-log is on. */
	uint64_t size;
	char md5[33];           /* of the payload sent */
	char etag[40];          /* as the server returned it, unquoted */
};

/* Signing key for today, cached per worker. */
static const unsigned char *signing_key(struct worker *w, const char *amzdate)
{
	if (memcmp(w->skey_date, amzdate, 8)) {
		memcpy(w->skey_date, amzdate, 8);
		w->skey_date[8] = 0;
		sigv4_signing_key(w->skey, cfg.cr.secret, w->skey_date, cfg.cr.region, "s3");
	}
	return w->skey;
}

/*
 * Sends one signed request and reads the response head.  path is already
 * encoded, query canonical.  Returns 0 with the head in w->hc, or -errno.
 */
static int send_request(struct worker *w, const char *method, const char *path, const char *query,
			const char *body, size_t blen, bool has_body, uint64_t t0, struct result *res)
{
	char amzdate[17], sig[65], scope[128], head[2048];
	struct sbuf creq;
	struct http_hdr hh[3];

	memset(res, 0, sizeof(*res));
	int rc = ensure_conn(w);
	if (rc)
		return rc;
	sigv4_format_amzdate(amzdate, time(NULL));
	hh[0] = (struct http_hdr){ "host", cfg.ep.hostport, 4, strlen(cfg.ep.hostport) };
	hh[1] = (struct http_hdr){ "x-amz-content-sha256", SIGV4_UNSIGNED, 20, strlen(SIGV4_UNSIGNED) };
	hh[2] = (struct http_hdr){ "x-amz-date", amzdate, 10, 16 };
	sb_init(&creq);
	sigv4_canonical_request(&creq, method, path, strlen(path), query, strlen(query), hh, 3,
				"host;x-amz-content-sha256;x-amz-date", SIGV4_UNSIGNED);
	snprintf(scope, sizeof(scope), "%.8s/%s/s3/aws4_request", amzdate, cfg.cr.region);
	sigv4_signature(sig, signing_key(w, amzdate), amzdate, scope, creq.p ? creq.p : "", creq.len);
	sb_free(&creq);
	int n = snprintf(head, sizeof(head),
			 "%s %s%s%s HTTP/1.1\r\nHost: %s\r\nx-amz-content-sha256: %s\r\n"
			 "x-amz-date: %s\r\nAuthorization: %s Credential=%s/%s,"
			 "SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=%s\r\n",
			 method, path, *query ? "?" : "", query, cfg.ep.hostport, SIGV4_UNSIGNED,
			 amzdate, SIGV4_ALGO, cfg.cr.access_key, scope, sig);
	if (has_body && n > 0 && (size_t)n < sizeof(head))
		n += snprintf(head + n, sizeof(head) - n, "Content-Length: %zu\r\n", blen);
	if (n < 0 || (size_t)n + 2 >= sizeof(head))
		return -EOVERFLOW;
	memcpy(head + n, "\r\n", 2);
	n += 2;
	struct iovec iov[2] = { { head, n }, { (void *)body, blen } };
	http_conn_next(&w->hc);
	w->hc.no_body = !strcmp(method, "HEAD");
	rc = http_writev_all(w->fd, iov, blen ? 2 : 1);
	if (rc) {
		drop_conn(w);
		return rc;
	}
	int k = http_read_head(&w->hc, cfg.timeout_ms);
	if (k != 0) {
		drop_conn(w);
		return k == 1 ? -ECONNRESET : -EPROTO;
	}
	res->ttfb_ns = now_ns() - t0;
	res->status = w->hc.msg.status;
	return 0;
}

/* Reads an error body for its <Code>. */
static void read_error(struct worker *w, struct result *res)
{
	char buf[8192];
	size_t got = 0;
	while (!w->hc.msg.complete && got < sizeof(buf) - 1) {
		ssize_t n = http_read_body(&w->hc, buf + got, sizeof(buf) - 1 - got);
		if (n < 0) {
			drop_conn(w);
			return;
		}
		got += n;
	}
	if (!w->hc.msg.complete) {
		if (http_drain_body(&w->hc, 1 << 20)) {
			drop_conn(w);
		}
	}
	const char *v;
	size_t vl, pos = 0;
	if (xml_find(buf, got, &pos, "Code", &v, &vl) && vl < sizeof(res->code))
		snprintf(res->code, sizeof(res->code), "%.*s", (int)vl, v);
}

/* After a response: keep the connection only when the server allows. */
static void finish_response(struct worker *w)
{
	if (w->fd >= 0 && (!w->hc.msg.complete || !w->hc.msg.keep_alive))
		drop_conn(w);
}

static void record_failure(struct worker *w, enum op op, struct result *res)
{
	char kind[96];
	if (res->err)
		snprintf(kind, sizeof(kind), "%s: %s", op_names[op], strerror(-res->err));
	else
		snprintf(kind, sizeof(kind), "%s: HTTP %d %s", op_names[op], res->status,
			 res->code[0] ? res->code : "");
	note_error(w, kind);
}

/* ---------------------------------------------------------------------- */
/* Operations: each returns true on success; bytes moved in *bytes.         */

static void encode_key_path(char *out, size_t cap, const char *key)
{
	struct sbuf b;
	sb_init(&b);
	sb_addc(&b, '/');
	sb_add_uri(&b, cfg.bucket, strlen(cfg.bucket), false);
	sb_addc(&b, '/');
	sb_add_uri(&b, key, strlen(key), true);
	snprintf(out, cap, "%s", b.p ? b.p : "/");
	sb_free(&b);
}

static bool do_put(struct worker *w, uint64_t seq, uint64_t t0, struct result *res, uint64_t *bytes)
{
	char key[384], path[1200];
	key_name(key, sizeof(key), w->id, seq);
	uint64_t h = key_hash(key, strlen(key));
	uint64_t size = key_size(h);
	/* A fresh buffer for every request, like the servers. */
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		res->err = -ENOMEM;
		return false;
	}
	fill_payload(buf, h, 0, size);
	encode_key_path(path, sizeof(path), key);
	unsigned char md5[16];
	if (cfg.oplog)
		md5_bin(md5, buf, size);
	int rc = send_request(w, "PUT", path, "", buf, size, true, t0, res);
	free(buf);
	if (rc) {
		res->err = rc;
		return false;
	}
	if (cfg.oplog) {
		/* send_request cleared res: fill in what the log wants now. */
		res->size = size;
		hex_encode(res->md5, md5, 16);
		size_t el;
		const char *e = http_hdr_get(&w->hc.msg, "etag", &el);
		if (e && el >= 2 && e[0] == '"' && e[el - 1] == '"') {
			e++;
			el -= 2;
		}
		if (e && el > 0 && el < sizeof(res->etag) && !memchr(e, ' ', el))
			snprintf(res->etag, sizeof(res->etag), "%.*s", (int)el, e);
	}
	if (res->status != 200) {
		read_error(w, res);
		finish_response(w);
		return false;
	}
	if (http_drain_body(&w->hc, 1 << 20))
		drop_conn(w);
	finish_response(w);
	*bytes = size;
	return true;
}

static bool do_get(struct worker *w, uint64_t seq, uint64_t t0, struct result *res, uint64_t *bytes)
{
	char key[384], path[1200];
	key_name(key, sizeof(key), w->id, seq);
	uint64_t h = key_hash(key, strlen(key));
	encode_key_path(path, sizeof(path), key);
	int rc = send_request(w, "GET", path, "", NULL, 0, false, t0, res);
	if (rc) {
		res->err = rc;
		return false;
	}
	if (res->status != 200) {
		read_error(w, res);
		finish_response(w);
		return false;
	}
	int64_t len = w->hc.msg.content_length;
	if (len < 0) {
		drop_conn(w);
		snprintf(res->code, sizeof(res->code), "NoContentLength");
		return false;
	}
	char *buf = malloc(len ? len : 1);
	if (!buf) {
		drop_conn(w);
		res->err = -ENOMEM;
		return false;
	}
	ssize_t n = http_read_body_all(&w->hc, buf, len);
	if (n != len) {
		free(buf);
		drop_conn(w);
		res->err = -EPIPE;
		return false;
	}
	finish_response(w);
	*bytes = len;
	if (cfg.verify) {
		uint64_t want = key_size(h);
		int64_t bad = (uint64_t)len != want ? 0 : check_payload(buf, h, 0, len);
		w->verified_bytes += len;
		if ((uint64_t)len != want || bad >= 0) {
			w->mismatches++;
			if (w->mismatches <= 5)
				logmsg("verify: %s: %s at offset %" PRId64 " (size %" PRId64 ", expected %" PRIu64 ")",
				       key, (uint64_t)len != want ? "wrong size" : "wrong byte", bad, len, want);
			free(buf);
			snprintf(res->code, sizeof(res->code), "VerifyMismatch");
			return false;
		}
	}
	free(buf);
	return true;
}

static bool do_delete(struct worker *w, uint64_t seq, uint64_t t0, struct result *res)
{
	char key[384], path[1200];
	key_name(key, sizeof(key), w->id, seq);
	encode_key_path(path, sizeof(path), key);
	int rc = send_request(w, "DELETE", path, "", NULL, 0, false, t0, res);
	if (rc) {
		res->err = rc;
		return false;
	}
	if (res->status != 204 && res->status != 200) {
		read_error(w, res);
		finish_response(w);
		return false;
	}
	if (http_drain_body(&w->hc, 1 << 20))
		drop_conn(w);
	finish_response(w);
	return true;
}

static bool do_list(struct worker *w, uint64_t t0, struct result *res, uint64_t *bytes)
{
	char path[300];
	struct sbuf q;
	snprintf(path, sizeof(path), "/%s", cfg.bucket);
	sb_init(&q);
	sb_adds(&q, "list-type=2&max-keys=100&prefix=");
	sb_add_uri(&q, cfg.prefix, strlen(cfg.prefix), false);
	char pfx[32];
	snprintf(pfx, sizeof(pfx), "w%04d-", w->id);
	sb_add_uri(&q, pfx, strlen(pfx), false);
	int rc = send_request(w, "GET", path, q.p ? q.p : "", NULL, 0, false, t0, res);
	sb_free(&q);
	if (rc) {
		res->err = rc;
		return false;
	}
	if (res->status != 200) {
		read_error(w, res);
		finish_response(w);
		return false;
	}
	int64_t len = w->hc.msg.content_length;
	char *buf = malloc(len > 0 ? len : 1);
	ssize_t n = buf && len >= 0 ? http_read_body_all(&w->hc, buf, len) : -1;
	free(buf);
	if (n < 0) {
		drop_conn(w);
		res->err = -EPIPE;
		return false;
	}
	finish_response(w);
	*bytes = n;
	return true;
}

static void live_add(struct worker *w, uint64_t seq)
{
	if (w->nlive == w->caplive) {
		size_t cap = w->caplive ? w->caplive * 2 : 256;
		uint64_t *nv = realloc(w->live, cap * sizeof(*nv));
		if (!nv)
			return;
		w->live = nv;
		w->caplive = cap;
	}
	w->live[w->nlive++] = seq;
}

static enum op pick_op(struct worker *w)
{
	int total = 0;
	for (int i = 0; i < NOPS; i++)
		total += cfg.weights[i];
	int x = rnd(w) % total;
	for (int i = 0; i < NOPS; i++) {
		if (x < cfg.weights[i])
			return i;
		x -= cfg.weights[i];
	}
	return OP_PUT;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * --op-log line: START_MS END_MS OP ok|err KEY SIZE MD5 ETAG DETAIL, times
 * in Unix milliseconds (wall clock, so a test can line them up with what
 * it did to the servers), "-" for fields that do not apply.  A "put ok"
 * line is an acknowledged write: the server answered 200 for a payload
 * whose MD5 is given.  Any operation that reached the server, recorded or
 * not (warm-up, initial objects), is logged.
 */
static void oplog_write(struct worker *w, enum op op, uint64_t seq, bool ok,
			const struct result *res, uint64_t start_ms)
{
	char key[384] = "-", detail[96] = "-";
	if (op != OP_LIST)
		key_name(key, sizeof(key), w->id, seq);
	if (!ok) {
		if (res->err)
			snprintf(detail, sizeof(detail), "%s", strerror(-res->err));
		else
			snprintf(detail, sizeof(detail), "HTTP %d %s", res->status,
				 res->code[0] ? res->code : "");
	}
	/* One fprintf per line: stdio's lock keeps lines from interleaving. */
	if (op == OP_PUT && res->md5[0])
		fprintf(cfg.oplog, "%" PRIu64 " %" PRIu64 " %s %s %s %" PRIu64 " %s %s %s\n",
			start_ms, wall_ms(), op_names[op], ok ? "ok" : "err", key, res->size,
			res->md5, res->etag[0] ? res->etag : "-", detail);
	else
		fprintf(cfg.oplog, "%" PRIu64 " %" PRIu64 " %s %s %s - - - %s\n",
			start_ms, wall_ms(), op_names[op], ok ? "ok" : "err", key, detail);
}

/* Runs one operation; records it when rec. */
static void run_op(struct worker *w, enum op op, bool rec)
{
	struct result res = { 0 };
	uint64_t bytes = 0, t0 = now_ns(), wall0 = cfg.oplog ? wall_ms() : 0;
	bool ok;
	size_t li = 0;
	uint64_t seq = 0;

	if ((op == OP_GET || op == OP_DELETE) && !w->nlive)
		op = OP_PUT;
	switch (op) {
	case OP_PUT:
		seq = w->next_seq++;
		ok = do_put(w, seq, t0, &res, &bytes);
		if (ok)
			live_add(w, seq);
		break;
	case OP_GET:
		li = rnd(w) % w->nlive;
		seq = w->live[li];
		ok = do_get(w, seq, t0, &res, &bytes);
		break;
	case OP_DELETE:
		li = rnd(w) % w->nlive;
		seq = w->live[li];
		ok = do_delete(w, seq, t0, &res);
		if (ok)
			w->live[li] = w->live[--w->nlive];
		break;
	default:
		ok = do_list(w, t0, &res, &bytes);
		break;
	}
	uint64_t dt = now_ns() - t0;
	if (cfg.oplog)
		oplog_write(w, op, seq, ok, &res, wall0);
	if (!rec)
		return;
	struct opstats *s = &w->st[op];
	s->count++;
	if (!ok) {
		s->errors++;
		record_failure(w, op, &res);
		/* Do not spin on a server that is down. */
		if (res.err == -ECONNREFUSED || res.err == -ETIMEDOUT)
			usleep(10000);
		return;
	}
	s->bytes += bytes;
	lat_add(&s->lat, dt);
	if (op == OP_GET)
		lat_add(&s->ttfb, res.ttfb_ns);
}

static void *worker_main(void *p)
{
	struct worker *w = p;
	/* Warm-up: operations before t_measure are run but not recorded. */
	for (;;) {
		if (stop_now)
			break;
		uint64_t t = now_ns();
		bool rec = t >= t_measure_ns;
		if (cfg.ops) {
			if (rec && atomic_fetch_add(&ops_claimed, 1) >= cfg.ops)
				break;
		} else if (t >= t_end_ns) {
			break;
		}
		run_op(w, pick_op(w), rec);
	}
	return NULL;
}

/* Creates this worker's share of the initial objects (not recorded). */
static void *prepare_main(void *p)
{
	struct worker *w = p;
	uint64_t share = cfg.objects / cfg.conc + ((uint64_t)w->id < cfg.objects % cfg.conc);
	for (uint64_t i = 0; i < share && !stop_now; i++) {
		struct result res;
		uint64_t bytes, seq = w->next_seq++, wall0 = cfg.oplog ? wall_ms() : 0;
		bool ok = do_put(w, seq, now_ns(), &res, &bytes);
		if (cfg.oplog)
			oplog_write(w, OP_PUT, seq, ok, &res, wall0);
		if (ok)
			live_add(w, seq);
		else
			record_failure(w, OP_PUT, &res);
	}
	return NULL;
}

static void *cleanup_main(void *p)
{
	struct worker *w = p;
	while (w->nlive && !stop_now) {
		struct result res;
		uint64_t seq = w->live[--w->nlive], wall0 = cfg.oplog ? wall_ms() : 0;
		bool ok = do_delete(w, seq, now_ns(), &res);
		if (cfg.oplog)
			oplog_write(w, OP_DELETE, seq, ok, &res, wall0);
	}
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* Results                                                                  */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static double pct(const struct lat *l, double p)
{
	if (!l->n)
		return 0;
	size_t i = (size_t)ceil(p / 100.0 * l->n);
	if (i)
		i--;
	if (i >= l->n)
		i = l->n - 1;
	return l->v[i] / 1000.0;
}

static void lat_merge(struct lat *dst, const struct lat *src)
{
	if (!src->n)
		return;
	uint32_t *nv = realloc(dst->v, (dst->n + src->n) * sizeof(*nv));
	if (!nv)
		return;
	dst->v = nv;
	memcpy(dst->v + dst->n, src->v, src->n * sizeof(*nv));
	dst->n += src->n;
	dst->cap = dst->n;
}

static void json_lat(FILE *f, const struct lat *l)
{
	fprintf(f, "{\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f, \"p99.9\": %.3f, \"max\": %.3f}",
		pct(l, 50), pct(l, 90), pct(l, 99), pct(l, 99.9), pct(l, 100));
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* The workers' results together: per operation, all operations, the
 * errors by kind, and what --verify checked. */
struct totals {
	double secs;            /* the measured window */
	struct opstats op[NOPS], all;
	struct errkind errs[MAX_ERR_KINDS * 4];
	int nerrs;
	uint64_t verified, mism;
};

/* Adds one worker's errors to t's, by name (kinds past the table's size
 * are left out). */
static void merge_errors(struct totals *t, const struct worker *w)
{
	for (int e = 0; e < w->nerrs; e++) {
		int k;
		for (k = 0; k < t->nerrs; k++)
			if (!strcmp(t->errs[k].name, w->errs[e].name))
				break;
		if (k == t->nerrs) {
			if (t->nerrs == (int)(sizeof(t->errs) / sizeof(t->errs[0])))
				continue;
			t->errs[t->nerrs] = w->errs[e];
			t->errs[t->nerrs++].count = 0;
		}
		t->errs[k].count += w->errs[e].count;
	}
}

/* Sums the workers into t, latencies sorted for the percentiles. */
static void merge_totals(struct totals *t, struct worker *ws)
{
	memset(t, 0, sizeof(*t));
	t->secs = (t_end_ns - t_measure_ns) / 1e9;
	if (t->secs <= 0)
		t->secs = 1e-9;
	for (int i = 0; i < cfg.conc; i++) {
		struct worker *w = &ws[i];
		for (int o = 0; o < NOPS; o++) {
			t->op[o].count += w->st[o].count;
			t->op[o].errors += w->st[o].errors;
			t->op[o].bytes += w->st[o].bytes;
			lat_merge(&t->op[o].lat, &w->st[o].lat);
			lat_merge(&t->op[o].ttfb, &w->st[o].ttfb);
		}
		merge_errors(t, w);
		t->verified += w->verified_bytes;
		t->mism += w->mismatches;
	}
	for (int o = 0; o < NOPS; o++) {
		if (t->op[o].lat.n)
			qsort(t->op[o].lat.v, t->op[o].lat.n, sizeof(uint32_t), cmp_u32);
		if (t->op[o].ttfb.n)
			qsort(t->op[o].ttfb.v, t->op[o].ttfb.n, sizeof(uint32_t), cmp_u32);
		t->all.count += t->op[o].count;
		t->all.errors += t->op[o].errors;
		t->all.bytes += t->op[o].bytes;
		lat_merge(&t->all.lat, &t->op[o].lat);
	}
	if (t->all.lat.n)
		qsort(t->all.lat.v, t->all.lat.n, sizeof(uint32_t), cmp_u32);
}

static void free_totals(struct totals *t)
{
	for (int k = 0; k < NOPS; k++) {
		free(t->op[k].lat.v);
		free(t->op[k].ttfb.v);
	}
	free(t->all.lat.v);
}

/* Row k of the tables: an operation (k < NOPS), or all of them (NOPS). */
static const struct opstats *totals_row(const struct totals *t, int k)
{
	return k < NOPS ? &t->op[k] : &t->all;
}

/* The table on stdout. */
static void print_totals(const struct totals *t)
{
	FILE *o = stdout;
	double secs = t->secs;
	fprintf(o, "\nloadgen: %s, %d worker(s), %.2f s measured, sizes %" PRIu64 "-%" PRIu64 " bytes%s\n",
		cfg.ep.hostport, cfg.conc, secs, cfg.size_min, cfg.size_max, cfg.verify ? ", verify" : "");
	fprintf(o, "%-7s %9s %7s %10s %9s %8s %8s %8s %8s %8s %9s %9s\n", "op", "ops", "errors",
		"ops/s", "MiB/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "ttfb p50", "ttfb p99");
	for (int k = 0; k <= NOPS; k++) {
		const struct opstats *s = totals_row(t, k);
		if (k < NOPS && !s->count)
			continue;
		fprintf(o, "%-7s %9" PRIu64 " %7" PRIu64 " %10.1f %9.1f %8.2f %8.2f %8.2f %8.2f %8.2f",
			k < NOPS ? op_names[k] : "total", s->count, s->errors, s->count / secs,
			s->bytes / secs / 1048576.0, pct(&s->lat, 50), pct(&s->lat, 90), pct(&s->lat, 99),
			pct(&s->lat, 99.9), pct(&s->lat, 100));
		if (k == OP_GET)
			fprintf(o, " %9.2f %9.2f\n", pct(&s->ttfb, 50), pct(&s->ttfb, 99));
		else
			fprintf(o, " %9s %9s\n", "-", "-");
	}
	if (cfg.verify)
		fprintf(o, "verify: %.1f MiB checked, %" PRIu64 " mismatch(es)\n", t->verified / 1048576.0, t->mism);
	if (t->nerrs) {
		fprintf(o, "errors by kind:\n");
		for (int k = 0; k < t->nerrs; k++)
			fprintf(o, "  %8" PRIu64 "  %s\n", t->errs[k].count, t->errs[k].name);
	}
	fflush(o);
}

/* The same as JSON, into --json's file. */
static void write_json(const struct totals *t, FILE *f)
{
	double secs = t->secs;
	fprintf(f, "{\n  \"endpoint\": ");
	json_str(f, cfg.ep.hostport);
	fprintf(f, ",\n  \"bucket\": ");
	json_str(f, cfg.bucket);
	fprintf(f, ",\n  \"concurrency\": %d,\n  \"seconds\": %.3f,\n  \"size_min\": %" PRIu64
		",\n  \"size_max\": %" PRIu64 ",\n  \"verify\": %s,\n  \"ops\": {",
		cfg.conc, secs, cfg.size_min, cfg.size_max, cfg.verify ? "true" : "false");
	bool first = true;
	for (int k = 0; k <= NOPS; k++) {
		const struct opstats *s = totals_row(t, k);
		if (k < NOPS && !s->count)
			continue;
		fprintf(f, "%s\n    \"%s\": {\"count\": %" PRIu64 ", \"errors\": %" PRIu64
			", \"bytes\": %" PRIu64 ", \"ops_per_s\": %.3f, \"mib_per_s\": %.3f, \"latency_ms\": ",
			first ? "" : ",", k < NOPS ? op_names[k] : "total", s->count, s->errors,
			s->bytes, s->count / secs, s->bytes / secs / 1048576.0);
		json_lat(f, &s->lat);
		if (k == OP_GET) {
			fprintf(f, ", \"ttfb_ms\": ");
			json_lat(f, &s->ttfb);
		}
		fprintf(f, "}");
		first = false;
	}
	fprintf(f, "\n  },\n  \"verified_bytes\": %" PRIu64 ",\n  \"mismatches\": %" PRIu64
		",\n  \"errors\": {", t->verified, t->mism);
	for (int k = 0; k < t->nerrs; k++) {
		fprintf(f, "%s\n    ", k ? "," : "");
		json_str(f, t->errs[k].name);
		fprintf(f, ": %" PRIu64, t->errs[k].count);
	}
	fprintf(f, "%s}\n}\n", t->nerrs ? "\n  " : "");
}

/* Prints the results (and writes --json); the number of failed operations
 * and mismatches. */
static uint64_t report(struct worker *ws)
{
	struct totals t;

	merge_totals(&t, ws);
	print_totals(&t);
	if (cfg.json) {
		FILE *f = fopen(cfg.json, "w");
		if (!f) {
			logmsg("cannot write %s: %s", cfg.json, strerror(errno));
		} else {
			write_json(&t, f);
			fclose(f);
		}
	}
	uint64_t bad = t.all.errors + t.mism;
	free_totals(&t);
	return bad;
}

/* ---------------------------------------------------------------------- */
/* Setup                                                                    */

static int ensure_bucket(struct worker *w)
{
	char path[300];
	struct result res;
	snprintf(path, sizeof(path), "/%s", cfg.bucket);
	int rc = send_request(w, "PUT", path, "", NULL, 0, true, now_ns(), &res);
	if (rc) {
		fprintf(stderr, "loadgen: cannot reach %s: %s\n", cfg.ep.hostport, strerror(-rc));
		return -1;
	}
	if (res.status == 200) {
		http_drain_body(&w->hc, 1 << 20);
		finish_response(w);
		return 0;
	}
	read_error(w, &res);
	finish_response(w);
	if (res.status == 409 && !strcmp(res.code, "BucketAlreadyOwnedByYou"))
		return 0;
	fprintf(stderr, "loadgen: cannot create bucket %s: HTTP %d %s\n", cfg.bucket, res.status, res.code);
	return -1;
}

static int parse_mix(const char *s)
{
	char *dup = strdup(s), *save = NULL;
	if (!dup)
		return -1;
	memset(cfg.weights, 0, sizeof(cfg.weights));
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		long v;
		int k;
		if (!eq)
			goto bad;
		*eq = 0;
		for (k = 0; k < NOPS; k++)
			if (!strcmp(t, op_names[k]))
				break;
		if (k == NOPS || parse_long(eq + 1, 0, 1000000, &v))
			goto bad;
		cfg.weights[k] = v;
	}
	free(dup);
	int total = 0;
	for (int k = 0; k < NOPS; k++)
		total += cfg.weights[k];
	return total > 0 ? 0 : -1;
bad:
	free(dup);
	return -1;
}

static void on_signal(int sig)
{
	stop_now = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: loadgen [options]\n"
		"Drives an S3 endpoint with put/get/delete/list operations and reports\n"
		"throughput and latency.\n\n"
		"  -e, --endpoint URL     http://HOST:PORT (default $S3_ENDPOINT)\n"
		"      --access-key AK    (default $AWS_ACCESS_KEY_ID)\n"
		"      --secret-key SK    (default $AWS_SECRET_ACCESS_KEY)\n"
		"      --region R         (default $AWS_DEFAULT_REGION or us-east-1)\n"
		"  -b, --bucket NAME      bucket to use, created if missing (default loadgen)\n"
		"      --prefix P         key prefix (default loadgen/PID-TIME/)\n"
		"  -o, --op OP            put, get, delete, list or mix (default put)\n"
		"      --mix SPEC         weights for mix (default put=30,get=55,delete=10,list=5)\n"
		"  -s, --size S           object size, fixed (1MiB) or a log-uniform range\n"
		"                         (64KiB-16MiB); default 1MiB\n"
		"  -c, --concurrency N    workers, one connection each (default 8)\n"
		"  -d, --duration T       run time after warm-up (default 10s)\n"
		"  -n, --ops N            run N recorded operations instead of a duration\n"
		"  -w, --warmup T         unrecorded warm-up (default 1s; 0 with --ops)\n"
		"      --objects N        objects created before get/delete/mix runs (default 4/worker)\n"
		"      --verify           check every byte read back\n"
		"  -j, --json FILE        also write the results as JSON\n"
		"      --op-log FILE      log every operation: times, outcome, key, and for\n"
		"                         acknowledged puts the payload's MD5 and the ETag\n"
		"      --seed N           payload/key seed (default random)\n"
		"      --timeout T        per-request I/O limit (default 30s)\n"
		"      --no-create-bucket do not create the bucket\n"
		"      --cleanup          delete this run's objects at the end\n"
		"  -h, --help             this text\n\n"
		"Exit status: 0 when every recorded operation succeeded, 1 when some\n"
		"failed or verification found a mismatch, 2 for usage errors.\n");
}

static int bad_flag(const char *flag, const char *val, const char *what)
{
	fprintf(stderr, "loadgen: invalid value '%s' for %s: expected %s\n", val, flag, what);
	return 2;
}

/* What the command line gave beyond cfg: the raw strings checked later,
 * and which defaults were overridden. */
struct cli {
	const char *endpoint, *ak, *sk, *region;
	const char *op, *mix;
	bool objects_set, seed_set;
};

/* --size: SIZE, or MIN-MAX for log-uniform sizes.  Returns 0 or 2. */
static int parse_size_flag(const char *v)
{
	const char *dash = strchr(v, '-');
	if (dash) {
		char a[64];
		snprintf(a, sizeof(a), "%.*s", (int)(dash - v), v);
		if (parse_size(a, &cfg.size_min) || parse_size(dash + 1, &cfg.size_max) ||
		    cfg.size_min > cfg.size_max || cfg.size_min == 0)
			return bad_flag("--size", v, "SIZE or MIN-MAX, e.g. 1MiB or 64KiB-16MiB");
	} else {
		if (parse_size(v, &cfg.size_min))
			return bad_flag("--size", v, "SIZE or MIN-MAX, e.g. 1MiB or 64KiB-16MiB");
		cfg.size_max = cfg.size_min;
	}
	if (cfg.size_max > (5ull << 30))
		return bad_flag("--size", v, "at most 5GiB");
	return 0;
}

/* One flag (getopt_long's c and optarg) into cfg or cli.  Returns -1 to go
 * on, or the status to exit with. */
static int parse_flag(int c, const char *arg, struct cli *cli)
{
	long l;
	uint64_t u;

	switch (c) {
	case 'e': cli->endpoint = arg; break;
	case 1: cli->ak = arg; break;
	case 2: cli->sk = arg; break;
	case 3: cli->region = arg; break;
	case 'b':
		if (!s3_bucket_name_ok(arg))
			return bad_flag("--bucket", arg, "a valid S3 bucket name");
		cfg.bucket = arg;
		break;
	case 4:
		if (strlen(arg) > 200)
			return bad_flag("--prefix", arg, "at most 200 bytes");
		snprintf(cfg.prefix, sizeof(cfg.prefix), "%s", arg);
		break;
	case 'o': cli->op = arg; break;
	case 5: cli->mix = arg; break;
	case 's':
		if (parse_size_flag(arg))
			return 2;
		break;
	case 'c':
		if (parse_long(arg, 1, MAX_WORKERS, &l))
			return bad_flag("--concurrency", arg, "1-4096");
		cfg.conc = l;
		break;
	case 'd':
		if (parse_duration_ms(arg, &u) || u == 0)
			return bad_flag("--duration", arg, "a duration like 10s");
		cfg.duration_ms = u;
		break;
	case 'n':
		if (parse_size(arg, &u) || u == 0)
			return bad_flag("--ops", arg, "a positive count");
		cfg.ops = u;
		break;
	case 'w':
		if (parse_duration_ms(arg, &u))
			return bad_flag("--warmup", arg, "a duration like 2s");
		cfg.warmup_ms = u;
		cfg.warmup_set = true;
		break;
	case 6:
		if (parse_size(arg, &cfg.objects))
			return bad_flag("--objects", arg, "a count");
		cli->objects_set = true;
		break;
	case 7: cfg.verify = true; break;
	case 'j': cfg.json = arg; break;
	case 8:
		if (parse_size(arg, &cfg.seed))
			return bad_flag("--seed", arg, "a number");
		cli->seed_set = true;
		break;
	case 9:
		if (parse_duration_ms(arg, &u) || u < 10 || u > 3600000)
			return bad_flag("--timeout", arg, "a duration like 30s");
		cfg.timeout_ms = u;
		break;
	case 10: cfg.create_bucket = false; break;
	case 11: cfg.cleanup = true; break;
	case 12:
		cfg.oplog = fopen(arg, "w");
		if (!cfg.oplog) {
			fprintf(stderr, "loadgen: cannot write --op-log %s: %s\n", arg, strerror(errno));
			return 2;
		}
		break;
	case 'h': usage(stdout); return 0;
	default: usage(stderr); return 2;
	}
	return -1;
}

/* The command line into cfg and cli, the environment's defaults first.
 * Returns -1 to go on, or the status to exit with (0 after --help, 2 for a
 * usage error). */
static int parse_options(int argc, char **argv, struct cli *cli)
{
	static const struct option lo[] = {
		{ "endpoint", required_argument, NULL, 'e' },
		{ "access-key", required_argument, NULL, 1 },
		{ "secret-key", required_argument, NULL, 2 },
		{ "region", required_argument, NULL, 3 },
		{ "bucket", required_argument, NULL, 'b' },
		{ "prefix", required_argument, NULL, 4 },
		{ "op", required_argument, NULL, 'o' },
		{ "mix", required_argument, NULL, 5 },
		{ "size", required_argument, NULL, 's' },
		{ "concurrency", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'd' },
		{ "ops", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "objects", required_argument, NULL, 6 },
		{ "verify", no_argument, NULL, 7 },
		{ "json", required_argument, NULL, 'j' },
		{ "seed", required_argument, NULL, 8 },
		{ "timeout", required_argument, NULL, 9 },
		{ "no-create-bucket", no_argument, NULL, 10 },
		{ "cleanup", no_argument, NULL, 11 },
		{ "op-log", required_argument, NULL, 12 },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int c;

	cli->endpoint = getenv("S3_ENDPOINT");
	cli->ak = getenv("AWS_ACCESS_KEY_ID");
	cli->sk = getenv("AWS_SECRET_ACCESS_KEY");
	cli->region = getenv("AWS_DEFAULT_REGION");
	cli->op = "put";
	while ((c = getopt_long(argc, argv, "e:b:o:s:c:d:n:w:j:h", lo, NULL)) != -1) {
		int rc = parse_flag(c, optarg, cli);
		if (rc >= 0)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "loadgen: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	return -1;
}

/* The endpoint and the credentials to sign with.  Returns 0 or 2. */
static int set_endpoint(const struct cli *cli)
{
	const char *why;
	if (!cli->endpoint) {
		fprintf(stderr, "loadgen: no endpoint: use --endpoint or set S3_ENDPOINT\n");
		return 2;
	}
	if (endpoint_parse(&cfg.ep, cli->endpoint, &why)) {
		fprintf(stderr, "loadgen: invalid endpoint '%s': %s\n", cli->endpoint, why);
		return 2;
	}
	const char *ak = cli->ak, *sk = cli->sk, *region = cli->region;
	if (!ak || !sk || !*ak || !*sk) {
		fprintf(stderr, "loadgen: no credentials: use --access-key/--secret-key or set "
			"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\n");
		return 2;
	}
	if (strlen(ak) >= sizeof(cfg.cr.access_key) || strlen(sk) >= sizeof(cfg.cr.secret)) {
		fprintf(stderr, "loadgen: credentials too long\n");
		return 2;
	}
	strcpy(cfg.cr.access_key, ak);
	strcpy(cfg.cr.secret, sk);
	snprintf(cfg.cr.region, sizeof(cfg.cr.region), "%s", region && *region ? region : "us-east-1");
	return 0;
}

/* --op and --mix into the operation weights.  Returns 0 or 2. */
static int set_weights(const char *op, const char *mix)
{
	if (!strcmp(op, "mix")) {
		if (parse_mix(mix ? mix : "put=30,get=55,delete=10,list=5")) {
			fprintf(stderr, "loadgen: invalid --mix '%s': expected OP=WEIGHT,... with OP in put, get, delete, list\n",
				mix);
			return 2;
		}
		return 0;
	}
	int k;
	for (k = 0; k < NOPS; k++)
		if (!strcmp(op, op_names[k]))
			break;
	if (k == NOPS)
		return bad_flag("--op", op, "put, get, delete, list or mix");
	if (mix) {
		fprintf(stderr, "loadgen: --mix needs --op mix\n");
		return 2;
	}
	cfg.weights[k] = 1;
	return 0;
}

/* Defaults that depend on other flags: warm-up, initial objects, seed, prefix. */
static void set_defaults(const struct cli *cli)
{
	if (!cfg.warmup_set)
		cfg.warmup_ms = cfg.ops ? 0 : 1000;
	if (!cli->objects_set)
		cfg.objects = (cfg.weights[OP_GET] || cfg.weights[OP_DELETE]) ? (uint64_t)cfg.conc * 4 : 0;
	if (!cli->seed_set)
		random_bytes(&cfg.seed, sizeof(cfg.seed));
	if (!cfg.prefix[0])
		snprintf(cfg.prefix, sizeof(cfg.prefix), "loadgen/%d-%ld/", (int)getpid(), (long)time(NULL));
}

static void set_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The payload pool: random bytes generated once from the seed.  Returns 0
 * or -ENOMEM. */
static int make_pool(void)
{
	pool = malloc(POOL_SIZE);
	if (!pool)
		return -ENOMEM;
	uint64_t x = cfg.seed | 1;
	for (size_t i = 0; i < POOL_SIZE; i += 8) {
		x = mix64(x + 0x9e3779b97f4a7c15ull);
		memcpy(pool + i, &x, 8);
	}
	return 0;
}

/* cfg.conc workers, not connected yet; NULL when out of memory. */
static struct worker *make_workers(void)
{
	struct worker *ws = calloc(cfg.conc, sizeof(*ws));
	if (!ws)
		return NULL;
	for (int i = 0; i < cfg.conc; i++) {
		ws[i].id = i;
		ws[i].fd = -1;
		ws[i].rng = mix64(cfg.seed + i + 1) | 1;
	}
	return ws;
}

static void free_workers(struct worker *ws)
{
	for (int i = 0; i < cfg.conc; i++) {
		drop_conn(&ws[i]);
		for (int o = 0; o < NOPS; o++) {
			free(ws[i].st[o].lat.v);
			free(ws[i].st[o].ttfb.v);
		}
		free(ws[i].live);
	}
	free(ws);
}

/* Runs fn on one thread per worker and waits for them all (the unmeasured
 * phases: creating the initial objects, cleaning up). */
static void run_all(struct worker *ws, void *(*fn)(void *))
{
	for (int i = 0; i < cfg.conc; i++)
		pthread_create(&ws[i].th, NULL, fn, &ws[i]);
	for (int i = 0; i < cfg.conc; i++)
		pthread_join(ws[i].th, NULL);
}

/* The objects get, delete and mix runs start from.  Returns 0, or -1 after
 * saying what failed. */
static int create_objects(struct worker *ws)
{
	if (!cfg.quiet)
		logmsg("creating %" PRIu64 " object(s) first", cfg.objects);
	run_all(ws, prepare_main);
	int fails = 0;
	for (int i = 0; i < cfg.conc; i++)
		fails += ws[i].nerrs;
	if (!fails)
		return 0;
	fprintf(stderr, "loadgen: creating the initial objects failed:\n");
	for (int i = 0; i < cfg.conc; i++)
		for (int e = 0; e < ws[i].nerrs; e++)
			fprintf(stderr, "  %s: %" PRIu64 "\n", ws[i].errs[e].name, ws[i].errs[e].count);
	return -1;
}

/* The run itself: warm-up, then the measured duration or count of
 * operations; t_end_ns ends up at the end of what was measured. */
static void run_measured(struct worker *ws)
{
	t_start_ns = now_ns();
	t_measure_ns = t_start_ns + cfg.warmup_ms * 1000000ull;
	t_end_ns = t_measure_ns + cfg.duration_ms * 1000000ull;
	for (int i = 0; i < cfg.conc; i++)
		if (pthread_create(&ws[i].th, NULL, worker_main, &ws[i])) {
			fprintf(stderr, "loadgen: cannot start worker %d\n", i);
			stop_now = 1;
			cfg.conc = i;
			break;
		}
	for (int i = 0; i < cfg.conc; i++)
		pthread_join(ws[i].th, NULL);
	uint64_t end = now_ns();
	if (cfg.ops || stop_now || end < t_end_ns)
		t_end_ns = end;
}

int main(int argc, char **argv)
{
	struct cli cli = { 0 };
	int rc;

	log_init("loadgen");
	rc = parse_options(argc, argv, &cli);
	if (rc >= 0)
		return rc;
	if (set_endpoint(&cli) || set_weights(cli.op, cli.mix))
		return 2;
	set_defaults(&cli);
	set_signals();

	if (make_pool()) {
		fprintf(stderr, "loadgen: out of memory\n");
		return 1;
	}
	struct worker *ws = make_workers();
	if (!ws) {
		fprintf(stderr, "loadgen: out of memory\n");
		return 1;
	}
	if (cfg.create_bucket && ensure_bucket(&ws[0]))
		return 1;
	if (cfg.objects && create_objects(ws))
		return 1;
	run_measured(ws);
	uint64_t bad = report(ws);
	if (cfg.cleanup) {
		stop_now = 0;
		run_all(ws, cleanup_main);
	}
	free_workers(ws);
	free(pool);
	endpoint_free(&cfg.ep);
	if (cfg.oplog && fclose(cfg.oplog)) {
		fprintf(stderr, "loadgen: writing the --op-log failed: %s\n", strerror(errno));
		return 1;
	}
	return bad ? 1 : 0;
}
