/* SPDX-License-Identifier: MIT */
/*
 * storaged: a storage node speaking the S3 path-style API.
 *
 * Written the straightforward way on purpose: every request gets a fresh
 * buffer from posix_memalign sized from Content-Length or the object size,
 * objects are read and written with O_DIRECT, and nothing is pooled.  Each
 * object is one file named by the SHA-256 of its key, so a key is never a
 * path; the key itself lives in a 4 KiB header block in front of the data
 * (which keeps the data block-aligned for O_DIRECT).  Writes go to a
 * temporary file that is fsync'd and renamed into place.
 *
 * The on-disk side lives in objstore.c; this file is the S3 API.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "objstore.h"
#include "s3.h"
#include "s3ops.h"
#include "server.h"
#include "sigv4.h"
#include "util.h"

static struct {
	uint64_t max_object;
	uint64_t min_part;
	const char *region;
} opt = {
	.max_object = 1ull << 30,
	.min_part = 5u << 20,
	.region = "us-east-1",
};

/* ---------------------------------------------------------------------- */
/* Request helpers                                                          */

static int64_t now_s(void)
{
	return time(NULL);
}

static void etag_header(char *out, size_t cap, const char *etag)
{
	snprintf(out, cap, "ETag: \"%s\"\r\n", etag);
}

/* Collects Content-Type and the headers an object keeps, for storing.
 * Returns 0 or -E2BIG. */
static int collect_meta(struct s3_req *r, struct sbuf *ct, struct sbuf *meta)
{
	return s3_collect_meta(r->m, ct, meta, MAX_META);
}

/* Reads a small request body (XML) into a malloc'd buffer. */
static char *read_small_body(struct s3_req *r, size_t max, size_t *len)
{
	if (r->m->content_length < 0 && !r->m->chunked) {
		*len = 0;
		return calloc(1, 1);
	}
	if (r->m->content_length > (int64_t)max) {
		r->close_after = true;
		s3_error(r, 400, "MalformedXML", "The XML you provided was too large.");
		return NULL;
	}
	size_t cap = r->m->content_length >= 0 ? (size_t)r->m->content_length : max;
	char *b = malloc(cap + 1);
	if (!b) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return NULL;
	}
	s3_continue(r);
	ssize_t n = http_read_body_all(r->c, b, cap);
	if (n < 0) {
		free(b);
		r->close_after = true;
		if (n == -2)
			s3_error(r, 400, "MalformedXML", "The XML you provided was too large.");
		else
			s3_error(r, 400, "IncompleteBody", "The request body terminated unexpectedly.");
		return NULL;
	}
	b[n] = 0;
	*len = n;
	return b;
}

/* Content-MD5 check.  Returns 0 when absent or matching, else responds. */
static int check_content_md5(struct s3_req *r, const unsigned char md5[16])
{
	const char *code, *msg;
	if (!s3_content_md5_check(r->m, md5, &code, &msg))
		return 0;
	s3_error(r, 400, code, msg);
	return -1;
}

/*
 * Receives a body of exactly len bytes into a fresh aligned buffer with room
 * for the header block in front.  Returns the buffer or NULL (responded).
 */
static void *receive_object_body(struct s3_req *r, uint64_t *len_out, unsigned char md5[16])
{
	const struct http_msg *m = r->m;
	if (m->content_length < 0) {
		r->close_after = true;
		s3_error(r, 411, "MissingContentLength", "You must provide the Content-Length HTTP header.");
		return NULL;
	}
	uint64_t len = m->content_length;
	if (len > opt.max_object) {
		r->close_after = true;
		s3_error(r, 413, "EntityTooLarge",
			 "Your proposed upload exceeds the maximum allowed object size.");
		return NULL;
	}
	void *buf;
	if (posix_memalign(&buf, BLK, HDR_SIZE + round_up(len) + BLK)) {
		r->close_after = true;
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return NULL;
	}
	s3_continue(r);
	ssize_t n = http_read_body_all(r->c, (char *)buf + HDR_SIZE, len);
	if (n != (ssize_t)len) {
		free(buf);
		r->close_after = true;
		s3_error(r, 400, "IncompleteBody",
			 "You did not provide the number of bytes specified by the Content-Length HTTP header.");
		return NULL;
	}
	md5_bin(md5, (const char *)buf + HDR_SIZE, len);
	if (check_content_md5(r, md5)) {
		free(buf);
		return NULL;
	}
	*len_out = len;
	return buf;
}

/* ---------------------------------------------------------------------- */
/* Buckets                                                                  */

static void list_buckets(struct s3_req *r)
{
	struct sbuf x;
	char d[32];
	size_t n;
	struct bucket **v = bucket_list(&n);

	if (!v) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		return;
	}
	sb_init(&x);
	sb_adds(&x, S3_BUCKETS_HEAD);
	for (size_t i = 0; i < n; i++) {
		fmt_iso_date(d, v[i]->ctime);
		sb_printf(&x, "<Bucket><Name>%s</Name><CreationDate>%s</CreationDate></Bucket>",
			  v[i]->name, d);
	}
	free(v);
	sb_adds(&x, S3_BUCKETS_TAIL);
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
}

static void create_bucket(struct s3_req *r)
{
	const char *name = r->t.bucket;
	if (!s3_bucket_name_ok(name)) {
		s3_error(r, 400, "InvalidBucketName", "The specified bucket is not valid.");
		return;
	}
	/* A CreateBucketConfiguration body is accepted and ignored. */
	size_t bl;
	char *body = read_small_body(r, 64 * 1024, &bl);
	if (!body)
		return;
	free(body);
	int rc = bucket_create(name, now_s());
	if (rc == -EEXIST) {
		s3_error(r, 409, "BucketAlreadyOwnedByYou",
			 "Your previous request to create the named bucket succeeded and you already own it.");
		return;
	}
	if (rc) {
		s3_error(r, 500, "InternalError", strerror(-rc));
		return;
	}
	char loc[300];
	snprintf(loc, sizeof(loc), "Location: /%s\r\n", name);
	s3_respond(r, 200, loc, NULL, 0);
}

static void delete_bucket(struct s3_req *r)
{
	int rc = bucket_remove(r->t.bucket);
	if (rc == -ENOENT)
		s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
	else if (rc == -ENOTEMPTY)
		s3_error(r, 409, "BucketNotEmpty", "The bucket you tried to delete is not empty.");
	else if (rc)
		s3_error(r, 500, "InternalError", strerror(-rc));
	else
		s3_respond(r, 204, NULL, NULL, 0);
}

/* An object's elements after its Key in a listing. */
static void contents_fields(struct sbuf *f, const struct s3_list_params *lp, const struct obj *o)
{
	char d[32];
	fmt_iso_date(d, o->mtime);
	sb_printf(f, "<LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>"
		  "<Size>%llu</Size>", d, o->etag, (unsigned long long)o->size);
	if (lp->fetch_owner)
		sb_adds(f, S3_OWNER_XML);
	sb_adds(f, "<StorageClass>STANDARD</StorageClass>");
}

static void list_objects(struct s3_req *r, struct bucket *b)
{
	struct s3_list_params lp;
	const char *code, *msg;

	if (s3_list_params_parse(&r->q, &lp, &code, &msg)) {
		s3_error(r, 400, code, msg);
		return;
	}
	struct sbuf body, x, fields;
	sb_init(&body);
	sb_init(&x);
	sb_init(&fields);
	const char *pfx = lp.prefix, *dl = lp.delimiter;
	size_t pl = lp.prefix_len, dlen = lp.delimiter_len;
	int count = 0;
	bool truncated = false;
	/* The last name emitted (key or common prefix), for the next token. */
	const char *last = NULL;
	size_t last_len = 0;
	char *lastbuf = NULL;

	pthread_rwlock_rdlock(&b->lock);
	size_t i = idx_lower(b, pfx, pl);
	if (lp.after && store_key_cmp(lp.after, lp.after_len, pfx, pl) > 0)
		i = idx_lower(b, lp.after, lp.after_len);
	for (; i < b->n; i++) {
		const struct obj *o = &b->v[i];
		if (o->klen < pl || memcmp(o->key, pfx, pl))
			break;
		/* Group under the delimiter after the prefix. */
		size_t nl = o->klen;
		bool group = false;
		if (dlen) {
			const char *d = memmem(o->key + pl, o->klen - pl, dl, dlen);
			if (d) {
				nl = d - o->key + dlen;
				group = true;
			}
		}
		if (lp.after && store_key_cmp(o->key, nl, lp.after, lp.after_len) <= 0)
			continue;
		if (group && last && last_len == nl && !memcmp(last, o->key, nl))
			continue;
		if (count >= lp.max_keys) {
			truncated = true;
			break;
		}
		if (group) {
			s3_list_add_prefix(&body, &lp, o->key, nl);
		} else {
			sb_reset(&fields);
			contents_fields(&fields, &lp, o);
			s3_list_add_key(&body, &lp, o->key, o->klen, fields.p, fields.len);
		}
		last = o->key;
		last_len = nl;
		count++;
	}
	if (last) {
		lastbuf = malloc(last_len + 1);
		if (lastbuf)
			memcpy(lastbuf, last, last_len);
	}
	pthread_rwlock_unlock(&b->lock);

	struct s3_list_result res = {
		.bucket = b->name, .count = count, .truncated = truncated,
		.next = truncated ? lastbuf : NULL, .next_len = last_len, .entries = &body,
	};
	s3_list_result_xml(&x, &lp, &res);
	s3_respond_xml(r, 200, &x);
	free(lastbuf);
	sb_free(&fields);
	sb_free(&x);
	sb_free(&body);
	s3_list_params_free(&lp);
}

/* ---------------------------------------------------------------------- */
/* Objects                                                                  */

/*
 * Moves a new object's file (written, closed, in tmp/ as tname) into the
 * bucket under the request's key and indexes it, unless the bucket went
 * away or a PUT condition (If-Match, If-None-Match: *) no longer holds:
 * both are checked with the rename under the bucket's write lock.
 * Returns 0, or -1 once it has responded.
 */
static int place_object(struct s3_req *r, struct bucket *b, const char *tname, uint64_t len,
			int64_t mt, const char *etag)
{
	char fname[72];
	obj_name(fname, r->t.key, r->t.key_len);
	int dfd = openat(store.bfd, b->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* Rename and index update together, so the index always describes the
	 * file that is in place. */
	pthread_rwlock_wrlock(&b->lock);
	int rc = b->deleted || dfd < 0 ? -ENOENT : 0, cond = 0;
	if (!rc) {
		const struct obj *cur = idx_find(b, r->t.key, r->t.key_len);
		cond = s3_check_put_conditions(r->m, cur ? cur->etag : NULL);
	}
	if (!rc && !cond && renameat(store.tfd, tname, dfd, fname))
		rc = -errno;
	if (!rc && !cond)
		rc = idx_put(b, r->t.key, r->t.key_len, len, mt, etag);
	pthread_rwlock_unlock(&b->lock);
	if (rc || cond) {
		unlinkat(store.tfd, tname, 0);
		if (dfd >= 0)
			close(dfd);
		if (cond == 412)
			s3_error(r, 412, "PreconditionFailed", S3_PRECONDITION_MSG);
		else if (cond == 404 || rc == -ENOENT)
			s3_error(r, 404, cond ? "NoSuchKey" : "NoSuchBucket",
				 cond ? "The specified key does not exist." : "The specified bucket does not exist.");
		else
			s3_error(r, 500, "InternalError", strerror(-rc));
		return -1;
	}
	fsync_dir(dfd);
	close(dfd);
	return 0;
}

/* Writes buf (header block filled, len data bytes) to a temporary file
 * and places it under the key.  Returns 0, or -1 once it has responded. */
static int store_object(struct s3_req *r, struct bucket *b, void *buf, uint64_t len, int64_t mt,
			const char *etag)
{
	char tname[64];
	int fd = write_new_file(buf, len, tname);
	if (fd < 0) {
		s3_error(r, 500, "InternalError", strerror(-fd));
		return -1;
	}
	if (store.fsync && fsync(fd)) {
		int e = errno;
		tmp_abort(fd, tname);
		s3_error(r, 500, "InternalError", strerror(e));
		return -1;
	}
	close(fd);
	return place_object(r, b, tname, len, mt, etag);
}

static void copy_object(struct s3_req *r, struct bucket *b, const char *upload);

static void put_object(struct s3_req *r, struct bucket *b)
{
	struct sbuf ct, meta;
	unsigned char md5[16];
	char etag[48], eh[96];
	uint64_t len;

	if (http_hdr_get(r->m, "x-amz-copy-source", NULL)) {
		copy_object(r, b, NULL);
		return;
	}
	sb_init(&ct);
	sb_init(&meta);
	if (collect_meta(r, &ct, &meta)) {
		sb_free(&ct);
		sb_free(&meta);
		s3_error(r, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.");
		return;
	}
	void *buf = receive_object_body(r, &len, md5);
	if (!buf) {
		sb_free(&ct);
		sb_free(&meta);
		return;
	}
	hex_encode(etag, md5, 16);
	int64_t mt = now_s();
	fill_hdr(buf, r->t.key, r->t.key_len, len, mt, etag, ct.p ? ct.p : "", ct.len,
		 meta.p ? meta.p : "", meta.len);
	sb_free(&ct);
	sb_free(&meta);
	int rc = store_object(r, b, buf, len, mt, etag);
	free(buf);
	if (rc)
		return;
	etag_header(eh, sizeof(eh), etag);
	s3_respond(r, 200, eh, NULL, 0);
}

/* Opens key's file and reads its header block, checked, into a fresh
 * aligned block (*hbp).  Returns the descriptor, or -1 once it has
 * responded. */
static int open_object(struct s3_req *r, struct bucket *b, const char *key, size_t kl, void **hbp)
{
	char fname[72], path[340];
	void *hb;

	pthread_rwlock_rdlock(&b->lock);
	bool known = idx_find(b, key, kl) != NULL;
	pthread_rwlock_unlock(&b->lock);
	if (!known) {
		s3_error(r, 404, "NoSuchKey", "The specified key does not exist.");
		return -1;
	}
	obj_name(fname, key, kl);
	snprintf(path, sizeof(path), "%s/%s", b->name, fname);
	int fd = open_data(store.bfd, path, O_RDONLY, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			s3_error(r, 404, "NoSuchKey", "The specified key does not exist.");
		else
			s3_error(r, 500, "InternalError", strerror(errno));
		return -1;
	}
	if (posix_memalign(&hb, BLK, HDR_SIZE)) {
		close(fd);
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return -1;
	}
	ssize_t n = pread_full(fd, hb, HDR_SIZE, 0);
	const struct obj_hdr *oh = hb;
	if (n < 0 || check_hdr(hb, n) || store_key_cmp(hdr_key(oh), oh->klen, key, kl)) {
		free(hb);
		close(fd);
		s3_error(r, 500, "InternalError", "The stored object is damaged.");
		return -1;
	}
	*hbp = hb;
	return fd;
}

/* Answers a failed GET/HEAD condition (304 or 412).  Returns cond. */
static int condition_failed(struct s3_req *r, int cond, const struct obj_hdr *oh)
{
	if (cond == 304) {
		char d[32], eh[160];
		fmt_http_date(d, oh->mtime);
		snprintf(eh, sizeof(eh), "ETag: \"%s\"\r\nLast-Modified: %s\r\n", oh->etag, d);
		s3_respond(r, 304, eh, NULL, 0);
	} else if (cond) {
		s3_error(r, 412, "PreconditionFailed", S3_PRECONDITION_MSG);
	}
	return cond;
}

/* The bytes a GET/HEAD asks for: partNumber (one part of a multipart
 * object), else Range, else everything.  Adds Content-Range and
 * x-amz-mp-parts-count to h and sets *status.  Returns 0, or -1 once it
 * has responded. */
static int requested_range(struct s3_req *r, const struct obj_hdr *oh, struct sbuf *h,
			   uint64_t *first, uint64_t *last, int *status)
{
	uint64_t size = oh->size;
	const char *meta = hdr_key(oh) + oh->klen + oh->ctlen;
	const char *pv = s3_query_get(&r->q, "partNumber", NULL);
	size_t rl;
	const char *rv = http_hdr_get(r->m, "range", &rl);
	int k = 0;

	*first = 0;
	*last = size ? size - 1 : 0;
	*status = 200;
	if (pv) {
		long pn;
		int count;
		if (parse_long(pv, 1, 10000, &pn)) {
			s3_error(r, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive.");
			return -1;
		}
		if (s3_part_range(meta, oh->metalen, size, pn, &count, first, last)) {
			/* S3's answer for a part past the last one (not 416). */
			s3_error(r, 400, "InvalidPart", "The requested part number is past the object's last part.");
			return -1;
		}
		if (!strchr(oh->etag, '-'))
			return 0;
		sb_printf(h, "x-amz-mp-parts-count: %d\r\n", count);
		k = 1;
	} else if (rv) {
		k = s3_range_parse(rv, rl, size, first, last);
		if (k < 0) {
			s3_error(r, 416, "InvalidRange", "The requested range is not satisfiable");
			return -1;
		}
	}
	if (k > 0) {
		*status = 206;
		sb_printf(h, "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)*first,
			  (unsigned long long)*last, (unsigned long long)size);
	}
	return 0;
}

static void get_object(struct s3_req *r, struct bucket *b)
{
	void *hb = NULL, *buf = NULL;
	struct sbuf h;
	char d[32];

	int fd = open_object(r, b, r->t.key, r->t.key_len, &hb);
	if (fd < 0)
		return;
	sb_init(&h);
	const struct obj_hdr *oh = hb;
	uint64_t first, last;
	int status;
	if (condition_failed(r, s3_check_get_conditions(r->m, "", oh->etag, oh->mtime), oh) ||
	    requested_range(r, oh, &h, &first, &last, &status))
		goto out;
	const char *ct = hdr_key(oh) + oh->klen;
	s3_object_headers(&h, &r->q, ct, oh->ctlen, ct + oh->ctlen, oh->metalen);
	fmt_http_date(d, oh->mtime);
	sb_printf(&h, "Last-Modified: %s\r\nETag: \"%s\"\r\nAccept-Ranges: bytes\r\n", d, oh->etag);
	uint64_t size = oh->size;
	uint64_t len = size ? last - first + 1 : 0;
	if (h.failed) {
		s3_error(r, 500, "InternalError", "Out of memory.");
		goto out;
	}
	if (r->is_head) {
		s3_send_head(r, status, h.p, len);
		goto out;
	}
	/* A fresh read buffer for this response, sized from the object. */
	uint64_t off = HDR_SIZE + first;
	uint64_t aoff = off & ~(uint64_t)(BLK - 1);
	size_t skip = off - aoff;
	size_t bsz = round_up(len + skip);
	if (bsz > IO_CHUNK)
		bsz = IO_CHUNK;
	if (bsz < BLK)
		bsz = BLK;
	if (posix_memalign(&buf, BLK, bsz)) {
		buf = NULL;
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		goto out;
	}
	if (s3_send_head(r, status, h.p, len))
		goto out;
	uint64_t left = len;
	while (left) {
		ssize_t n = pread_full(fd, buf, bsz, aoff);
		if (n <= (ssize_t)skip) {
			logmsg("short read on %s/%.64s", b->name, r->t.key);
			r->close_after = true;
			break;
		}
		size_t avail = n - skip;
		if (avail > left)
			avail = left;
		if (http_write_all(r->c->fd, (char *)buf + skip, avail)) {
			r->close_after = true;
			break;
		}
		left -= avail;
		if (left && (n % BLK)) {
			r->close_after = true;
			break;
		}
		aoff += n;
		skip = 0;
	}
out:
	free(buf);
	free(hb);
	sb_free(&h);
	close(fd);
}

static void delete_object(struct s3_req *r, struct bucket *b)
{
	char fname[72], path[340];

	obj_name(fname, r->t.key, r->t.key_len);
	snprintf(path, sizeof(path), "%s/%s", b->name, fname);
	pthread_rwlock_wrlock(&b->lock);
	int rc = unlinkat(store.bfd, path, 0) ? -errno : 0;
	idx_del(b, r->t.key, r->t.key_len);
	pthread_rwlock_unlock(&b->lock);
	if (rc && rc != -ENOENT) {
		s3_error(r, 500, "InternalError", strerror(-rc));
		return;
	}
	s3_respond(r, 204, NULL, NULL, 0);
}

static void delete_objects(struct s3_req *r, struct bucket *b)
{
	size_t len;
	char *body = read_small_body(r, 2u << 20, &len);
	if (!body)
		return;
	unsigned char md5[16];
	md5_bin(md5, body, len);
	if (check_content_md5(r, md5)) {
		free(body);
		return;
	}
	struct s3_delete_key *keys;
	bool quiet;
	int n = s3_parse_delete(body, len, &keys, &quiet);
	free(body);
	if (n < 0) {
		s3_error(r, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.");
		return;
	}
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<DeleteResult " S3_XMLNS ">");
	int dfd = openat(store.bfd, b->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < n; i++) {
		char fname[72];
		obj_name(fname, keys[i].key, keys[i].len);
		pthread_rwlock_wrlock(&b->lock);
		int rc = dfd < 0 ? -ENOENT : unlinkat(dfd, fname, 0) ? -errno : 0;
		idx_del(b, keys[i].key, keys[i].len);
		pthread_rwlock_unlock(&b->lock);
		if (rc && rc != -ENOENT) {
			sb_adds(&x, "<Error><Key>");
			sb_add_xml(&x, keys[i].key, keys[i].len);
			sb_printf(&x, "</Key><Code>InternalError</Code><Message>%s</Message></Error>",
				  strerror(-rc));
		} else if (!quiet) {
			sb_adds(&x, "<Deleted><Key>");
			sb_add_xml(&x, keys[i].key, keys[i].len);
			sb_adds(&x, "</Key></Deleted>");
		}
	}
	if (dfd >= 0)
		close(dfd);
	sb_adds(&x, "</DeleteResult>\n");
	s3_delete_keys_free(keys, n);
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
}

/* ---------------------------------------------------------------------- */
/* Multipart uploads                                                        */

static bool upload_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n != 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", id[i]))
			return false;
	return true;
}

/* Reads an upload's info header; checks it belongs to bucket/key.  Returns
 * a malloc'd aligned header block or NULL. */
static void *upload_info(const char *id, const char *bucket, const char *key, size_t kl)
{
	char path[128];
	void *hb;

	if (!upload_id_ok(id))
		return NULL;
	snprintf(path, sizeof(path), "%s/info", id);
	int fd = open_data(store.ufd, path, O_RDONLY, 0);
	if (fd < 0)
		return NULL;
	if (posix_memalign(&hb, BLK, HDR_SIZE)) {
		close(fd);
		return NULL;
	}
	ssize_t n = pread_full(fd, hb, HDR_SIZE, 0);
	close(fd);
	const struct obj_hdr *h = hb;
	/* The info block stores "bucket/key" as its key. */
	size_t bl = strlen(bucket);
	if (n < 0 || check_hdr(hb, n) || h->klen != bl + 1 + kl ||
	    memcmp(hdr_key(h), bucket, bl) || hdr_key(h)[bl] != '/' ||
	    memcmp(hdr_key(h) + bl + 1, key, kl)) {
		free(hb);
		return NULL;
	}
	return hb;
}

static void initiate_upload(struct s3_req *r, struct bucket *b)
{
	unsigned char rnd[16];
	char id[33], tname[64];
	struct sbuf ct, meta, bk;
	void *hb;

	random_bytes(rnd, sizeof(rnd));
	hex_encode(id, rnd, 16);
	sb_init(&ct);
	sb_init(&meta);
	sb_init(&bk);
	if (collect_meta(r, &ct, &meta)) {
		s3_error(r, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.");
		goto out;
	}
	sb_printf(&bk, "%s/", b->name);
	sb_add(&bk, r->t.key, r->t.key_len);
	if (posix_memalign(&hb, BLK, HDR_SIZE + BLK)) {
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		goto out;
	}
	if (fill_hdr(hb, bk.p, bk.len, 0, now_s(), "", ct.p ? ct.p : "", ct.len,
		     meta.p ? meta.p : "", meta.len)) {
		free(hb);
		s3_error(r, 400, "KeyTooLongError", "Your key is too long.");
		goto out;
	}
	/* The upload comes into being under the bucket's lock, so that a
	 * DeleteBucket (which removes the bucket's uploads) either sees it
	 * whole or finds it refused here. */
	pthread_rwlock_rdlock(&b->lock);
	if (b->deleted) {
		pthread_rwlock_unlock(&b->lock);
		free(hb);
		s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
		goto out;
	}
	if (mkdirat(store.ufd, id, 0755)) {
		int e = errno;
		pthread_rwlock_unlock(&b->lock);
		free(hb);
		s3_error(r, 500, "InternalError", strerror(e));
		goto out;
	}
	int fd = write_new_file(hb, 0, tname);
	free(hb);
	int udfd = openat(store.ufd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || udfd < 0 || tmp_commit(fd, tname, udfd, "info")) {
		if (fd >= 0 && udfd < 0)
			tmp_abort(fd, tname);
		if (udfd >= 0)
			close(udfd);
		unlinkat(store.ufd, id, AT_REMOVEDIR);
		pthread_rwlock_unlock(&b->lock);
		s3_error(r, 500, "InternalError", "Could not create the upload.");
		goto out;
	}
	pthread_rwlock_unlock(&b->lock);
	fsync_dir(udfd);
	close(udfd);
	fsync_dir(store.ufd);
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<InitiateMultipartUploadResult " S3_XMLNS "><Bucket>");
	sb_adds(&x, b->name);
	sb_adds(&x, "</Bucket><Key>");
	sb_add_xml(&x, r->t.key, r->t.key_len);
	sb_printf(&x, "</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>\n", id);
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
out:
	sb_free(&ct);
	sb_free(&meta);
	sb_free(&bk);
}

/* Writes buf (room for the header block, then len data bytes with md5) as
 * part pn of upload id.  Returns 0 with the part's ETag in etag, or -1
 * once it has responded. */
static int store_part(struct s3_req *r, const char *id, long pn, void *buf, uint64_t len,
		      const unsigned char md5[16], char etag[48])
{
	char tname[64], pname[32];

	hex_encode(etag, md5, 16);
	fill_hdr(buf, "", 0, len, now_s(), etag, "", 0, "", 0);
	int fd = write_new_file(buf, len, tname);
	if (fd < 0) {
		s3_error(r, 500, "InternalError", strerror(-fd));
		return -1;
	}
	snprintf(pname, sizeof(pname), "part.%05ld", pn);
	int udfd = openat(store.ufd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (udfd < 0) {
		tmp_abort(fd, tname);
		s3_error(r, 404, "NoSuchUpload", "The specified multipart upload does not exist.");
		return -1;
	}
	int rc = tmp_commit(fd, tname, udfd, pname);
	if (!rc)
		fsync_dir(udfd);
	close(udfd);
	if (rc) {
		s3_error(r, 500, "InternalError", strerror(-rc));
		return -1;
	}
	return 0;
}

/* The part number of an UploadPart(Copy), checked, and the upload it
 * belongs to.  Returns 0, or -1 once it has responded. */
static int part_target(struct s3_req *r, struct bucket *b, const char *id, long *pn)
{
	const char *pv = s3_query_get(&r->q, "partNumber", NULL);
	if (!pv || parse_long(pv, 1, 10000, pn)) {
		s3_error(r, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive.");
		return -1;
	}
	void *info = upload_info(id, b->name, r->t.key, r->t.key_len);
	if (!info) {
		s3_error(r, 404, "NoSuchUpload", "The specified multipart upload does not exist.");
		return -1;
	}
	free(info);
	return 0;
}

static void upload_part(struct s3_req *r, struct bucket *b, const char *id)
{
	long pn;
	uint64_t len;
	unsigned char md5[16];
	char etag[48], eh[96];

	if (http_hdr_get(r->m, "x-amz-copy-source", NULL)) {
		copy_object(r, b, id);
		return;
	}
	if (part_target(r, b, id, &pn))
		return;
	void *buf = receive_object_body(r, &len, md5);
	if (!buf)
		return;
	int rc = store_part(r, id, pn, buf, len, md5, etag);
	free(buf);
	if (rc)
		return;
	etag_header(eh, sizeof(eh), etag);
	s3_respond(r, 200, eh, NULL, 0);
}

/* Reads a whole object, header block in front, into a fresh aligned
 * buffer (with a block to spare for padding).  Returns it, or NULL once it
 * has responded. */
static void *read_object(struct s3_req *r, struct bucket *b, const char *key, size_t kl)
{
	void *hb, *buf;
	int fd = open_object(r, b, key, kl, &hb);
	if (fd < 0)
		return NULL;
	uint64_t size = ((const struct obj_hdr *)hb)->size;
	free(hb);
	if (size > opt.max_object) {
		close(fd);
		s3_error(r, 400, "InvalidRequest", "The specified copy source is larger than the maximum allowable size for a copy source.");
		return NULL;
	}
	if (posix_memalign(&buf, BLK, HDR_SIZE + round_up(size) + BLK)) {
		close(fd);
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return NULL;
	}
	ssize_t n = pread_full(fd, buf, HDR_SIZE + round_up(size), 0);
	close(fd);
	if (n < (ssize_t)(HDR_SIZE + size) || check_hdr(buf, n)) {
		free(buf);
		s3_error(r, 500, "InternalError", "The stored object is damaged.");
		return NULL;
	}
	return buf;
}

/* The header block of a copy: the source's content type and headers, or
 * with x-amz-metadata-directive: REPLACE the request's (keeping the
 * source's part sizes).  Returns 0, or -1 once it has responded. */
static int copy_header(struct s3_req *r, void *buf, int64_t mt)
{
	const struct obj_hdr *oh = buf;
	const char *sct = hdr_key(oh) + oh->klen, *smeta = sct + oh->ctlen;
	struct sbuf ct, meta;
	char etag[48];
	uint64_t size = oh->size;
	int ret = 0;

	sb_init(&ct);
	sb_init(&meta);
	snprintf(etag, sizeof(etag), "%s", oh->etag);
	if (s3_copy_replaces_meta(r->m)) {
		int count;
		uint64_t first, last;
		ret = collect_meta(r, &ct, &meta);
		/* The parts line, if any, is the source's last line. */
		if (!ret && s3_part_range(smeta, oh->metalen, size, 1, &count, &first, &last) == 0 &&
		    count > 1) {
			const char *pl = memmem(smeta, oh->metalen, S3_PARTS_LINE, strlen(S3_PARTS_LINE));
			if (pl)
				sb_add(&meta, pl, smeta + oh->metalen - pl);
		}
	} else {
		sb_add(&ct, sct, oh->ctlen);
		sb_add(&meta, smeta, oh->metalen);
	}
	if (ret || meta.len > MAX_META || ct.failed || meta.failed) {
		s3_error(r, 400, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.");
		ret = -1;
	} else {
		fill_hdr(buf, r->t.key, r->t.key_len, size, mt, etag, ct.p ? ct.p : "", ct.len,
			 meta.p ? meta.p : "", meta.len);
	}
	sb_free(&ct);
	sb_free(&meta);
	return ret;
}

/*
 * CopyObject (upload NULL) and UploadPartCopy: the source object is read
 * whole into a fresh buffer, checked against the x-amz-copy-source-if-*
 * conditions, and written like a PUT of the same bytes (a part: the
 * x-amz-copy-source-range of them).
 */
static void copy_object(struct s3_req *r, struct bucket *b, const char *upload)
{
	struct s3_target src;
	long pn = 0;
	void *buf = NULL;
	struct sbuf x;

	sb_init(&x);
	if (upload && part_target(r, b, upload, &pn))
		return;
	int rc = s3_copy_source(r->m, &src);
	if (rc) {
		s3_error(r, 400, "InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey.");
		return;
	}
	struct bucket *sb = bucket_get(src.bucket);
	if (!sb) {
		s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
		goto out;
	}
	if (!upload && sb == b && !store_key_cmp(src.key, src.key_len, r->t.key, r->t.key_len) &&
	    !s3_copy_replaces_meta(r->m)) {
		s3_error(r, 400, "InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.");
		goto out;
	}
	buf = read_object(r, sb, src.key, src.key_len);
	if (!buf)
		goto out;
	const struct obj_hdr *oh = buf;
	if (s3_check_get_conditions(r->m, "x-amz-copy-source-", oh->etag, oh->mtime)) {
		s3_error(r, 412, "PreconditionFailed", S3_PRECONDITION_MSG);
		goto out;
	}
	int64_t mt = now_s();
	if (upload) {
		uint64_t first = 0, last = oh->size ? oh->size - 1 : 0, len = oh->size;
		size_t rl;
		const char *rv = http_hdr_get(r->m, "x-amz-copy-source-range", &rl);
		if (rv) {
			int k = s3_copy_range_parse(rv, rl, oh->size, &first, &last);
			if (k) {
				s3_error(r, 400, "InvalidArgument", k == -ERANGE ? S3_COPY_RANGE_OUTSIDE :
					 S3_COPY_RANGE_MALFORMED);
				goto out;
			}
			len = last - first + 1;
			memmove((char *)buf + HDR_SIZE, (char *)buf + HDR_SIZE + first, len);
		}
		unsigned char md5[16];
		char etag[48];
		md5_bin(md5, (char *)buf + HDR_SIZE, len);
		if (store_part(r, upload, pn, buf, len, md5, etag))
			goto out;
		s3_copy_result_xml(&x, true, etag, mt);
	} else {
		char etag[48];
		snprintf(etag, sizeof(etag), "%s", oh->etag);
		uint64_t size = oh->size;
		if (copy_header(r, buf, mt) || store_object(r, b, buf, size, mt, etag))
			goto out;
		s3_copy_result_xml(&x, false, etag, mt);
	}
	s3_respond_xml(r, 200, &x);
out:
	free(buf);
	sb_free(&x);
	s3_target_free(&src);
}

static void abort_upload(struct s3_req *r, struct bucket *b, const char *id)
{
	void *info = upload_info(id, b->name, r->t.key, r->t.key_len);
	if (!info) {
		s3_error(r, 404, "NoSuchUpload", "The specified multipart upload does not exist.");
		return;
	}
	free(info);
	upload_remove(id);
	s3_respond(r, 204, NULL, NULL, 0);
}

static void list_parts(struct s3_req *r, struct bucket *b, const char *id)
{
	void *info = upload_info(id, b->name, r->t.key, r->t.key_len);
	if (!info) {
		s3_error(r, 404, "NoSuchUpload", "The specified multipart upload does not exist.");
		return;
	}
	free(info);
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<ListPartsResult " S3_XMLNS "><Bucket>");
	sb_adds(&x, b->name);
	sb_adds(&x, "</Bucket><Key>");
	sb_add_xml(&x, r->t.key, r->t.key_len);
	sb_printf(&x, "</Key><UploadId>%s</UploadId><MaxParts>10000</MaxParts><IsTruncated>false</IsTruncated>", id);
	void *hb;
	if (posix_memalign(&hb, BLK, HDR_SIZE)) {
		sb_free(&x);
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return;
	}
	for (int pn = 1; pn <= 10000; pn++) {
		char path[96];
		snprintf(path, sizeof(path), "%s/part.%05d", id, pn);
		int fd = open_data(store.ufd, path, O_RDONLY, 0);
		if (fd < 0)
			continue;
		ssize_t n = pread_full(fd, hb, HDR_SIZE, 0);
		close(fd);
		const struct obj_hdr *h = hb;
		if (n < 0 || check_hdr(hb, n))
			continue;
		char d[32];
		fmt_iso_date(d, h->mtime);
		sb_printf(&x, "<Part><PartNumber>%d</PartNumber><LastModified>%s</LastModified>"
			  "<ETag>&quot;%s&quot;</ETag><Size>%llu</Size></Part>", pn, d, h->etag,
			  (unsigned long long)h->size);
	}
	free(hb);
	sb_adds(&x, "</ListPartsResult>\n");
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
}

static void list_uploads(struct s3_req *r, struct bucket *b)
{
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<ListMultipartUploadsResult " S3_XMLNS "><Bucket>");
	sb_adds(&x, b->name);
	sb_adds(&x, "</Bucket><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>");
	int fd = dup(store.ufd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	void *hb = NULL;
	if (d && !posix_memalign(&hb, BLK, HDR_SIZE)) {
		struct dirent *e;
		rewinddir(d);
		while ((e = readdir(d))) {
			char path[300];
			if (!upload_id_ok(e->d_name))
				continue;
			snprintf(path, sizeof(path), "%s/info", e->d_name);
			int ifd = open_data(store.ufd, path, O_RDONLY, 0);
			if (ifd < 0)
				continue;
			ssize_t n = pread_full(ifd, hb, HDR_SIZE, 0);
			close(ifd);
			const struct obj_hdr *h = hb;
			size_t bl = strlen(b->name);
			if (n < 0 || check_hdr(hb, n) || h->klen <= bl ||
			    memcmp(hdr_key(h), b->name, bl) || hdr_key(h)[bl] != '/')
				continue;
			char dt[32];
			fmt_iso_date(dt, h->mtime);
			sb_adds(&x, "<Upload><Key>");
			sb_add_xml(&x, hdr_key(h) + bl + 1, h->klen - bl - 1);
			sb_printf(&x, "</Key><UploadId>%s</UploadId><Initiated>%s</Initiated></Upload>",
				  e->d_name, dt);
		}
	}
	free(hb);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	sb_adds(&x, "</ListMultipartUploadsResult>\n");
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
}

/*
 * CompleteMultipartUpload, one step at a time: read the part list, check
 * it and every part it names before writing anything, assemble the object
 * in a temporary file, commit that under the key, answer.  Each step
 * returns 0, or -1 once it has sent the error response.
 */
struct completion {
	struct s3_part_ref *parts;  /* as the client listed them */
	int np;
	int *pfd;                   /* each part's file (-1: not open) */
	uint64_t *psize;            /* and its size */
	uint64_t total;
	void *hb;                   /* a part's header block, read back */
	char etag[48];              /* S3's multipart ETag */
};

static void completion_free(struct completion *c)
{
	if (c->pfd)
		for (int i = 0; i < c->np; i++)
			if (c->pfd[i] >= 0)
				close(c->pfd[i]);
	free(c->pfd);
	free(c->psize);
	free(c->parts);
	free(c->hb);
}

static int read_part_list(struct s3_req *r, struct completion *c)
{
	size_t blen;
	char *body = read_small_body(r, 4u << 20, &blen);
	if (!body)
		return -1;
	c->np = s3_parse_complete(body, blen, &c->parts);
	free(body);
	if (c->np < 0) {
		s3_error(r, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.");
		return -1;
	}
	return 0;
}

static int completion_alloc(struct s3_req *r, struct completion *c)
{
	c->pfd = malloc(c->np * sizeof(*c->pfd));
	if (c->pfd)
		for (int i = 0; i < c->np; i++)
			c->pfd[i] = -1;
	c->psize = malloc(c->np * sizeof(*c->psize));
	if (!c->pfd || !c->psize || posix_memalign(&c->hb, BLK, HDR_SIZE)) {
		c->hb = NULL;
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return -1;
	}
	return 0;
}

static int check_part_order(struct s3_req *r, const struct completion *c)
{
	for (int i = 1; i < c->np; i++) {
		if (c->parts[i].number <= c->parts[i - 1].number) {
			s3_error(r, 400, "InvalidPartOrder", "The list of parts was not in ascending order.");
			return -1;
		}
	}
	return 0;
}

/* Opens every part listed, checks its ETag, and takes in its size and MD5. */
static int open_parts(struct s3_req *r, const char *id, struct completion *c)
{
	for (int i = 0; i < c->np; i++) {
		char path[96];
		snprintf(path, sizeof(path), "%s/part.%05d", id, c->parts[i].number);
		c->pfd[i] = open_data(store.ufd, path, O_RDONLY, 0);
		ssize_t n = c->pfd[i] < 0 ? -1 : pread_full(c->pfd[i], c->hb, HDR_SIZE, 0);
		const struct obj_hdr *h = c->hb;
		if (n < 0 || check_hdr(c->hb, n) || strcasecmp(h->etag, c->parts[i].etag)) {
			s3_error(r, 400, "InvalidPart", "One or more of the specified parts could not be found or the specified entity tag did not match.");
			return -1;
		}
		c->psize[i] = h->size;
		c->total += h->size;
		/* The stored ETag, whatever case the client wrote it in. */
		snprintf(c->parts[i].etag, sizeof(c->parts[i].etag), "%s", h->etag);
	}
	return 0;
}

/* Every part but the last at least --min-part; the whole within 16 objects
 * of --max-object. */
static int check_part_sizes(struct s3_req *r, const struct completion *c)
{
	for (int i = 0; i < c->np - 1; i++) {
		if (c->psize[i] < opt.min_part) {
			s3_error(r, 400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.");
			return -1;
		}
	}
	if (c->total > opt.max_object * 16) {
		s3_error(r, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.");
		return -1;
	}
	return 0;
}

static void upload_etag(struct completion *c)
{
	s3_multipart_etag(c->etag, c->parts, c->np);
}

/* The object's file as it is written: whole pieces of one aligned buffer,
 * for O_DIRECT. */
struct obj_writer {
	int fd;
	void *buf;
	size_t cap, fill;
	uint64_t off;
};

/* Appends n bytes, writing the buffer out each time it fills.  Returns 0 or
 * -errno. */
static int writer_add(struct obj_writer *w, const void *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		size_t c = n - done < w->cap - w->fill ? n - done : w->cap - w->fill;
		memcpy((char *)w->buf + w->fill, (const char *)p + done, c);
		w->fill += c;
		done += c;
		if (w->fill == w->cap) {
			int rc = pwrite_full(w->fd, w->buf, w->cap, w->off);
			if (rc)
				return rc;
			w->off += w->cap;
			w->fill = 0;
		}
	}
	return 0;
}

/* Writes out what the buffer holds, zero-padded to whole blocks.  Returns 0
 * or -errno. */
static int writer_flush(struct obj_writer *w)
{
	if (!w->fill)
		return 0;
	size_t pad = round_up(w->fill);
	memset((char *)w->buf + w->fill, 0, pad - w->fill);
	return pwrite_full(w->fd, w->buf, pad, w->off);
}

/* Appends one part's data (what follows its header block). */
static int copy_part(struct s3_req *r, struct obj_writer *w, int fd, uint64_t size)
{
	size_t isz = round_up(size) < IO_CHUNK ? round_up(size) : IO_CHUNK;
	if (isz < BLK)
		isz = BLK;
	void *ib;
	if (posix_memalign(&ib, BLK, isz)) {
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return -1;
	}
	int ret = 0;
	uint64_t done = 0;
	while (done < size) {
		ssize_t n = pread_full(fd, ib, isz, HDR_SIZE + done);
		if (n <= 0) {
			s3_error(r, 500, "InternalError", "A part could not be read.");
			ret = -1;
			break;
		}
		size_t take = n;
		if (take > size - done)
			take = size - done;
		int rc = writer_add(w, ib, take);
		if (rc) {
			s3_error(r, 500, "InternalError", strerror(-rc));
			ret = -1;
			break;
		}
		done += take;
	}
	free(ib);
	return ret;
}

/* Every part after the header block, then the tail, the exact length, and
 * (unless --no-fsync) the data on disk. */
static int write_parts(struct s3_req *r, const struct completion *c, struct obj_writer *w)
{
	for (int i = 0; i < c->np; i++)
		if (copy_part(r, w, c->pfd[i], c->psize[i]))
			return -1;
	int rc = writer_flush(w);
	if (rc) {
		s3_error(r, 500, "InternalError", strerror(-rc));
		return -1;
	}
	if (ftruncate(w->fd, HDR_SIZE + c->total)) {
		s3_error(r, 500, "InternalError", strerror(errno));
		return -1;
	}
	if (store.fsync && fsync(w->fd)) {
		s3_error(r, 500, "InternalError", strerror(errno));
		return -1;
	}
	return 0;
}

/* Writes the whole object, header block (the upload's content type and
 * metadata) and parts, to a new temporary file, named in tname and closed. */
static int assemble(struct s3_req *r, const struct completion *c, const void *info, int64_t mt,
		    char tname[64])
{
	const struct obj_hdr *ih = info;
	const char *ip = hdr_key(ih) + ih->klen;
	struct obj_writer w = { .fd = -1, .cap = IO_CHUNK, .fill = HDR_SIZE };

	if (posix_memalign(&w.buf, BLK, w.cap)) {
		s3_error(r, 503, "SlowDown", "Not enough memory for this request right now.");
		return -1;
	}
	/* The part sizes go with the object (GET ?partNumber), when they fit. */
	struct sbuf meta;
	sb_init(&meta);
	sb_add(&meta, ip + ih->ctlen, ih->metalen);
	s3_parts_line(&meta, c->psize, c->np);
	if (meta.failed || meta.len > MAX_META)
		meta.len = ih->metalen;
	fill_hdr(w.buf, r->t.key, r->t.key_len, c->total, mt, c->etag, ip, ih->ctlen,
		 meta.p ? meta.p : "", meta.len);
	sb_free(&meta);
	w.fd = tmp_create(tname);
	if (w.fd < 0) {
		s3_error(r, 500, "InternalError", strerror(-w.fd));
		free(w.buf);
		return -1;
	}
	int ret = write_parts(r, c, &w);
	free(w.buf);
	if (ret) {
		tmp_abort(w.fd, tname);
		return -1;
	}
	close(w.fd);
	return 0;
}

/* Moves the assembled file into the bucket under the key and indexes it,
 * as a PUT would. */
static int commit_object(struct s3_req *r, struct bucket *b, const char *tname,
			 const struct completion *c, int64_t mt)
{
	return place_object(r, b, tname, c->total, mt, c->etag);
}

static void send_complete_result(struct s3_req *r, struct bucket *b, const char *etag)
{
	struct sbuf x;
	sb_init(&x);
	sb_adds(&x, S3_XML_HEAD "<CompleteMultipartUploadResult " S3_XMLNS "><Location>/");
	sb_adds(&x, b->name);
	sb_addc(&x, '/');
	sb_add_uri(&x, r->t.key, r->t.key_len, true);
	sb_adds(&x, "</Location><Bucket>");
	sb_adds(&x, b->name);
	sb_adds(&x, "</Bucket><Key>");
	sb_add_xml(&x, r->t.key, r->t.key_len);
	sb_printf(&x, "</Key><ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>\n", etag);
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
}

/* A CompleteMultipartUpload repeated after it succeeded: the upload is
 * gone, but when the key holds the object those parts made, S3 answers
 * with the same result again.  Returns true once it has. */
static bool completed_before(struct s3_req *r, struct bucket *b, const struct completion *c)
{
	char etag[48];
	for (int i = 0; i < c->np; i++)
		if (strlen(c->parts[i].etag) != 32 || !s3_etag_ok(c->parts[i].etag))
			return false;
	s3_multipart_etag(etag, c->parts, c->np);
	pthread_rwlock_rdlock(&b->lock);
	const struct obj *o = idx_find(b, r->t.key, r->t.key_len);
	bool same = o && !strcmp(o->etag, etag);
	pthread_rwlock_unlock(&b->lock);
	if (same)
		send_complete_result(r, b, etag);
	return same;
}

static void complete_upload(struct s3_req *r, struct bucket *b, const char *id)
{
	struct completion c = { 0 };
	char tname[64];
	int64_t mt;
	void *info = NULL;

	if (read_part_list(r, &c))
		goto out;
	info = upload_info(id, b->name, r->t.key, r->t.key_len);
	if (!info) {
		if (!completed_before(r, b, &c))
			s3_error(r, 404, "NoSuchUpload", "The specified multipart upload does not exist.");
		goto out;
	}
	/* Every part is checked before anything is written. */
	if (completion_alloc(r, &c) || check_part_order(r, &c) ||
	    open_parts(r, id, &c) || check_part_sizes(r, &c))
		goto out;
	upload_etag(&c);
	mt = now_s();
	if (assemble(r, &c, info, mt, tname) || commit_object(r, b, tname, &c, mt))
		goto out;
	upload_remove(id);
	send_complete_result(r, b, c.etag);
out:
	completion_free(&c);
	free(info);
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                 */

static bool has_param(struct s3_req *r, const char *name)
{
	return s3_has_param(&r->q, name);
}

static void bucket_location(struct s3_req *r)
{
	struct sbuf x;
	sb_init(&x);
	s3_location_xml(&x, opt.region);
	s3_respond_xml(r, 200, &x);
	sb_free(&x);
}

static void handle(struct s3_req *r, void *arg)
{
	int m = r->m->method;

	if (!r->t.bucket[0]) {
		if (m == HTTP_GET || m == HTTP_HEAD)
			list_buckets(r);
		else
			s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
		return;
	}
	if (s3_unsupported_subresource(&r->q)) {
		s3_error(r, 501, "NotImplemented", "A header or query you provided implies functionality that is not implemented.");
		return;
	}
	const char *code, *msg;
	int refused = s3_refused_headers(r->m, r->t.has_key, &code, &msg);
	if (refused) {
		s3_error(r, refused, code, msg);
		return;
	}
	if (!r->t.has_key) {
		if (m == HTTP_PUT) {
			create_bucket(r);
			return;
		}
		if (m == HTTP_DELETE) {
			delete_bucket(r);
			return;
		}
	}
	struct bucket *b = bucket_get(r->t.bucket);
	if (!b) {
		s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
		return;
	}
	if (!r->t.has_key) {
		if (m == HTTP_HEAD)
			s3_respond(r, 200, NULL, NULL, 0);
		else if (m == HTTP_GET && has_param(r, "location"))
			bucket_location(r);
		else if (m == HTTP_GET && has_param(r, "uploads"))
			list_uploads(r, b);
		else if (m == HTTP_GET)
			list_objects(r, b);
		else if (m == HTTP_POST && has_param(r, "delete"))
			delete_objects(r, b);
		else
			s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
		return;
	}
	/* Buckets are never versioned: each object is its one "null" version. */
	const char *vid = s3_query_get(&r->q, "versionId", NULL);
	if (vid && strcmp(vid, "null")) {
		s3_error(r, 400, "InvalidArgument", "Invalid version id specified");
		return;
	}
	const char *upload = s3_query_get(&r->q, "uploadId", NULL);
	switch (m) {
	case HTTP_PUT:
		if (upload)
			upload_part(r, b, upload);
		else
			put_object(r, b);
		break;
	case HTTP_GET:
		if (upload)
			list_parts(r, b, upload);
		else
			get_object(r, b);
		break;
	case HTTP_HEAD:
		get_object(r, b);
		break;
	case HTTP_DELETE:
		if (upload)
			abort_upload(r, b, upload);
		else
			delete_object(r, b);
		break;
	case HTTP_POST:
		if (has_param(r, "uploads"))
			initiate_upload(r, b);
		else if (upload)
			complete_upload(r, b, upload);
		else
			s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
		break;
	default:
		s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
	}
}

/* ---------------------------------------------------------------------- */
/* Startup                                                                  */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: storaged --dir DIR [options]\n"
		"A storage node speaking the S3 path-style API (no authentication:\n"
		"run it behind s3proxy).\n\n"
		"  -d, --dir DIR            data directory (created if missing; required)\n"
		"  -H, --host ADDR          listen address (default 127.0.0.1)\n"
		"  -p, --port N             listen port, 0 for any free one (default 8480)\n"
		"      --max-conns N        connection cap (default 512)\n"
		"      --max-object-size S  largest single PUT or part (default 1GiB)\n"
		"      --min-part-size S    smallest non-final multipart part (default 5MiB)\n"
		"      --max-header S       largest request head (default 16KiB)\n"
		"      --idle-timeout T     keep-alive idle and read inactivity (default 30s)\n"
		"      --header-timeout T   a request head must arrive within T (default 10s)\n"
		"      --region R           region reported by GetBucketLocation (default us-east-1)\n"
		"      --no-fsync           skip fsync (unsafe; for benchmarks only)\n"
		"  -v, --verbose            log every error response\n"
		"  -h, --help               this text\n\n"
		"Sizes take K/M/G suffixes (KiB, MiB also accepted); times take ms/s/m.\n"
		"Prints \"listening on ADDR:PORT\" on stdout once ready; SIGTERM stops it.\n");
}

static int bad_flag(const char *flag, const char *val, const char *what)
{
	fprintf(stderr, "storaged: invalid value '%s' for %s: expected %s\n", val, flag, what);
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "max-conns", required_argument, NULL, 1 },
		{ "max-object-size", required_argument, NULL, 2 },
		{ "min-part-size", required_argument, NULL, 3 },
		{ "max-header", required_argument, NULL, 4 },
		{ "idle-timeout", required_argument, NULL, 5 },
		{ "header-timeout", required_argument, NULL, 6 },
		{ "region", required_argument, NULL, 7 },
		{ "no-fsync", no_argument, NULL, 8 },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct server_cfg cfg = {
		.name = "storaged", .host = "127.0.0.1", .port = 8480, .max_conns = 512,
		.idle_ms = 30000, .head_ms = 10000, .max_header = 16384, .handler = handle,
	};
	const char *dir = NULL;
	bool use_fsync = true;
	int c;
	long l;
	uint64_t u;

	log_init("storaged");
	while ((c = getopt_long(argc, argv, "d:H:p:vh", lo, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'H': cfg.host = optarg; break;
		case 'p':
			if (parse_long(optarg, 0, 65535, &l))
				return bad_flag("--port", optarg, "a port number 0-65535");
			cfg.port = l;
			break;
		case 1:
			if (parse_long(optarg, 1, 100000, &l))
				return bad_flag("--max-conns", optarg, "a number 1-100000");
			cfg.max_conns = l;
			break;
		case 2:
			if (parse_size(optarg, &u) || u == 0 || u > (64ull << 30))
				return bad_flag("--max-object-size", optarg, "a size between 1 and 64GiB");
			opt.max_object = u;
			break;
		case 3:
			if (parse_size(optarg, &u) || u > (5ull << 30))
				return bad_flag("--min-part-size", optarg, "a size up to 5GiB");
			opt.min_part = u;
			break;
		case 4:
			if (parse_size(optarg, &u) || u < 1024 || u > (1u << 20))
				return bad_flag("--max-header", optarg, "a size between 1KiB and 1MiB");
			cfg.max_header = u;
			break;
		case 5:
			if (parse_duration_ms(optarg, &u) || u < 10 || u > 86400000)
				return bad_flag("--idle-timeout", optarg, "a duration like 30s or 500ms");
			cfg.idle_ms = u;
			break;
		case 6:
			if (parse_duration_ms(optarg, &u) || u < 10 || u > 86400000)
				return bad_flag("--header-timeout", optarg, "a duration like 10s or 500ms");
			cfg.head_ms = u;
			break;
		case 7: opt.region = optarg; break;
		case 8: use_fsync = false; break;
		case 'v': log_verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "storaged: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	if (!dir) {
		fprintf(stderr, "storaged: --dir is required (see --help)\n");
		return 2;
	}
	if (store_open(dir, use_fsync))
		return 1;
	/* A write holds its temporary file and, to fsync it, the directory. */
	cfg.fds_per_conn = 2;
	int rc = server_run(&cfg);
	uint64_t fb = store_direct_fallbacks();
	if (fb)
		logmsg("%llu O_DIRECT fallback(s) to buffered I/O", (unsigned long long)fb);
	/* With every connection finished nothing can still touch the index:
	 * free it, which keeps leak checkers quiet. */
	store_close(server_active() == 0);
	return rc;
}
