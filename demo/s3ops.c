/* SPDX-License-Identifier: MIT */
/*
 * S3 object semantics shared by storaged and s3proxy (see s3ops.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "s3ops.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sigv4.h"

bool s3_has_param(const struct s3_query *q, const char *name)
{
	return s3_query_get(q, name, NULL) != NULL;
}

const char *s3_unsupported_subresource(const struct s3_query *q)
{
	static const char *const names[] = {
		"acl", "policy", "cors", "lifecycle", "versioning", "tagging",
		"website", "logging", "notification", "replication", "encryption",
		"object-lock", "retention", "legal-hold", "torrent", "accelerate",
		"requestPayment", "inventory", "metrics", "analytics", "ownershipControls",
		"publicAccessBlock", "intelligent-tiering", "restore", "select", "attributes",
		"policyStatus",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (s3_has_param(q, names[i]))
			return names[i];
	return NULL;
}

static bool has_prefix(const char *n, size_t l, const char *prefix)
{
	size_t pl = strlen(prefix);
	return l >= pl && !strncasecmp(n, prefix, pl);
}

int s3_refused_headers(const struct http_msg *m, bool has_key, const char **code, const char **msg)
{
	bool read = m->method == HTTP_GET || m->method == HTTP_HEAD;
	for (int i = 0; i < m->nhdr; i++) {
		const struct http_hdr *h = &m->hdr[i];
		/* SSE-S3, SSE-KMS, SSE-C, and SSE-C for a copy's source.  No
		 * object here is ever encrypted: a read naming a key is asking
		 * about encryption the object does not have, as S3 says. */
		if (has_prefix(h->name, h->nlen, "x-amz-server-side-encryption") ||
		    has_prefix(h->name, h->nlen, "x-amz-copy-source-server-side-encryption")) {
			if (read || has_prefix(h->name, h->nlen, "x-amz-copy-source-")) {
				*code = "InvalidRequest";
				*msg = "The encryption parameters are not applicable to this object.";
				return 400;
			}
			*code = "NotImplemented";
			*msg = "Server-side encryption is not implemented: the object would be stored unencrypted.";
			return 501;
		}
		if (!has_key && m->method == HTTP_PUT &&
		    strn_ieq(h->name, h->nlen, "x-amz-bucket-object-lock-enabled") &&
		    strn_ieq(h->value, h->vlen, "true")) {
			*code = "NotImplemented";
			*msg = "Object Lock is not implemented: the bucket would keep nothing from deletion.";
			return 501;
		}
		/* Retention and legal hold on a write: every bucket here lacks
		 * Object Lock (creating one with it is refused above), and S3
		 * refuses them on such a bucket. */
		if (has_key && !read && has_prefix(h->name, h->nlen, "x-amz-object-lock-")) {
			*code = "InvalidRequest";
			*msg = "Bucket is missing Object Lock Configuration";
			return 400;
		}
	}
	return 0;
}

bool s3_key_readable(const char *k, size_t n)
{
	const unsigned char *s = (const unsigned char *)k;
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i], len, cp;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (unsigned j = 1; j < len; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		/* Overlong forms, surrogates, past U+10FFFF, C1 controls. */
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
			return false;
		i += len;
	}
	return true;
}

/* The header prefix+name, or NULL. */
static const char *cond_hdr(const struct http_msg *m, const char *prefix, const char *name,
			    size_t *vl)
{
	char full[64];
	snprintf(full, sizeof(full), "%s%s", prefix, name);
	return http_hdr_get(m, full, vl);
}

/* Whether an If-Match / If-None-Match list names etag (or is "*"). */
static bool etag_listed(const char *v, size_t n, const char *etag)
{
	const char *p = v, *end = v + n;
	size_t el = strlen(etag);
	while (p < end) {
		const char *c = memchr(p, ',', end - p);
		const char *t = p, *te = c ? c : end;
		while (t < te && (*t == ' ' || *t == '\t'))
			t++;
		while (te > t && (te[-1] == ' ' || te[-1] == '\t'))
			te--;
		if (te - t >= 2 && t[0] == 'W' && t[1] == '/')
			t += 2;
		if (te - t >= 2 && *t == '"' && te[-1] == '"') {
			t++;
			te--;
		}
		if ((te - t == 1 && *t == '*') || ((size_t)(te - t) == el && !strncasecmp(t, etag, el)))
			return true;
		p = c ? c + 1 : end;
	}
	return false;
}

/* An HTTP date (RFC 1123, the form every S3 client sends).  Returns 0 or -1. */
static int parse_date(const char *v, size_t n, int64_t *out)
{
	char tmp[64];
	struct tm tm;
	if (n >= sizeof(tmp))
		return -1;
	memcpy(tmp, v, n);
	tmp[n] = 0;
	memset(&tm, 0, sizeof(tm));
	const char *e = strptime(tmp, "%a, %d %b %Y %H:%M:%S", &tm);
	if (!e)
		return -1;
	*out = timegm(&tm);
	return 0;
}

int s3_check_get_conditions(const struct http_msg *m, const char *prefix, const char *etag,
			    int64_t mtime)
{
	size_t n;
	int64_t t;
	const char *im = cond_hdr(m, prefix, "if-match", &n);
	if (im && !etag_listed(im, n, etag))
		return 412;
	const char *ius = cond_hdr(m, prefix, "if-unmodified-since", &n);
	/* A matching If-Match makes If-Unmodified-Since moot. */
	if (!im && ius && !parse_date(ius, n, &t) && mtime > t)
		return 412;
	const char *inm = cond_hdr(m, prefix, "if-none-match", &n);
	if (inm && etag_listed(inm, n, etag))
		return 304;
	const char *ims = cond_hdr(m, prefix, "if-modified-since", &n);
	if (!inm && ims && !parse_date(ims, n, &t) && mtime <= t)
		return 304;
	return 0;
}

int s3_check_put_conditions(const struct http_msg *m, const char *etag)
{
	size_t n;
	const char *inm = http_hdr_get(m, "if-none-match", &n);
	if (inm && etag && etag_listed(inm, n, etag))
		return 412;
	const char *im = http_hdr_get(m, "if-match", &n);
	if (im && !etag)
		return 404;
	if (im && !etag_listed(im, n, etag))
		return 412;
	return 0;
}

int s3_copy_source(const struct http_msg *m, struct s3_target *src)
{
	size_t n;
	const char *v = http_hdr_get(m, "x-amz-copy-source", &n);
	memset(src, 0, sizeof(*src));
	if (!v)
		return -ENOENT;
	if (!n || n > 4 * S3_MAX_KEY)
		return -EINVAL;
	char *u = malloc(n + 2);
	if (!u)
		return -ENOMEM;
	size_t k = 0;
	if (v[0] != '/')
		u[k++] = '/';
	memcpy(u + k, v, n);
	k += n;
	u[k] = 0;
	int rc = s3_target_parse(u, k, src);
	/* raw_* pointed into u: not kept. */
	src->raw_path = src->raw_query = NULL;
	src->raw_path_len = src->raw_query_len = 0;
	free(u);
	if (rc)
		return -EINVAL;
	if (!src->bucket[0] || !src->has_key) {
		s3_target_free(src);
		return -EINVAL;
	}
	return 0;
}

bool s3_copy_replaces_meta(const struct http_msg *m)
{
	size_t n;
	const char *v = http_hdr_get(m, "x-amz-metadata-directive", &n);
	return v && strn_ieq(v, n, "REPLACE");
}

void s3_copy_result_xml(struct sbuf *x, bool part, const char *etag, int64_t mtime)
{
	char d[32];
	fmt_iso_date(d, mtime);
	sb_printf(x, S3_XML_HEAD "<%s " S3_XMLNS "><LastModified>%s</LastModified>"
		  "<ETag>&quot;%s&quot;</ETag></%s>\n", part ? "CopyPartResult" : "CopyObjectResult",
		  d, etag, part ? "CopyPartResult" : "CopyObjectResult");
}

/* Headers an object keeps besides its metadata, as stored (lowercase). */
static const char *const kept[] = {
	"cache-control", "content-disposition", "content-encoding", "content-language", "expires",
};

static void add_line(struct sbuf *b, const char *name, size_t nl, const char *v, size_t vl)
{
	for (size_t k = 0; k < nl; k++)
		sb_addc(b, tolower((unsigned char)name[k]));
	sb_adds(b, ": ");
	/* A stored line is one line, whatever the client sent. */
	for (size_t k = 0; k < vl; k++)
		sb_addc(b, v[k] == '\r' || v[k] == '\n' ? ' ' : v[k]);
	sb_adds(b, "\r\n");
}

/* Walks the tokens of a Content-Encoding list (trimmed of blanks) and,
 * when out is set, appends every one but aws-chunked to it, each after the
 * client's own separator.  Returns true when any token is aws-chunked. */
static bool encoding_tokens(const char *v, size_t n, struct sbuf *out)
{
	const char *p = v, *e = v + n;
	bool chunked = false, first = true;

	while (p < e) {
		const char *c = memchr(p, ',', e - p);
		const char *t = p, *te = c ? c : e;
		while (t < te && (*t == ' ' || *t == '\t'))
			t++;
		while (te > t && (te[-1] == ' ' || te[-1] == '\t'))
			te--;
		if (te > t && strn_ieq(t, te - t, "aws-chunked")) {
			chunked = true;
		} else if (te > t && out) {
			/* The client's own separator before this token. */
			if (!first) {
				sb_addc(out, ',');
				sb_add(out, p, t - p);
			}
			sb_add(out, t, te - t);
			first = false;
		}
		p = c ? c + 1 : e;
	}
	return chunked;
}

void s3_content_encoding_unchunked(struct sbuf *out, const char *v, size_t n)
{
	/* Without aws-chunked the value is the object's, byte for byte. */
	if (!encoding_tokens(v, n, NULL))
		sb_add(out, v, n);
	else
		encoding_tokens(v, n, out);
}

int s3_collect_meta(const struct http_msg *m, struct sbuf *ct, struct sbuf *meta, size_t max)
{
	for (int i = 0; i < m->nhdr; i++) {
		const struct http_hdr *h = &m->hdr[i];
		if (strn_ieq(h->name, h->nlen, "content-type")) {
			sb_reset(ct);
			sb_add(ct, h->value, h->vlen < 256 ? h->vlen : 256);
		} else if (h->nlen > 11 && !strncasecmp(h->name, "x-amz-meta-", 11)) {
			add_line(meta, h->name, h->nlen, h->value, h->vlen);
		} else if (strn_ieq(h->name, h->nlen, "content-encoding")) {
			/* aws-chunked describes the request body, not the object. */
			struct sbuf v;
			sb_init(&v);
			s3_content_encoding_unchunked(&v, h->value, h->vlen);
			if (v.len)
				add_line(meta, h->name, h->nlen, v.p, v.len);
			sb_free(&v);
		} else {
			for (size_t k = 0; k < sizeof(kept) / sizeof(kept[0]); k++)
				if (strn_ieq(h->name, h->nlen, kept[k]))
					add_line(meta, h->name, h->nlen, h->value, h->vlen);
		}
	}
	return meta->len > max ? -E2BIG : 0;
}

static bool plain_ascii(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] >= 0x7f || ((unsigned char)v[i] < 0x20 && v[i] != '\t'))
			return false;
	return true;
}

/* The response-* parameter overriding header name, or NULL. */
static const char *override(const struct s3_query *q, const char *name, size_t nl, size_t *vl)
{
	char p[64];
	if (nl > 40)
		return NULL;
	snprintf(p, sizeof(p), "response-%.*s", (int)nl, name);
	for (char *c = p; *c; c++)
		*c = tolower((unsigned char)*c);
	return s3_query_get(q, p, vl);
}

void s3_object_headers(struct sbuf *h, const struct s3_query *q, const char *ct, size_t ctl,
		       const char *meta, size_t ml)
{
	static const char *const canon[] = {
		"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires",
	};
	size_t vl;
	const char *v = override(q, "content-type", 12, &vl);
	sb_adds(h, "Content-Type: ");
	if (v)
		sb_add(h, v, vl);
	else if (ctl)
		sb_add(h, ct, ctl);
	else
		sb_adds(h, "binary/octet-stream");
	sb_adds(h, "\r\n");
	const char *p = meta, *end = meta + ml;
	while (p < end) {
		const char *eol = memmem(p, end - p, "\r\n", 2);
		const char *le = eol ? eol : end;
		const char *colon = memchr(p, ':', le - p);
		if (colon && !(colon - p == (long)strlen(S3_PARTS_LINE) - 2 &&
			       !strncasecmp(p, S3_PARTS_LINE, colon - p)) &&
		    !override(q, p, colon - p, &vl)) {
			const char *val = colon + 1;
			while (val < le && *val == ' ')
				val++;
			sb_add(h, p, colon - p);
			sb_adds(h, ": ");
			if (plain_ascii(val, le - val)) {
				sb_add(h, val, le - val);
			} else {
				/* RFC 2047, as S3 sends non-ASCII metadata. */
				char *b = malloc(((le - val) + 2) / 3 * 4 + 1);
				if (b) {
					b64_encode(b, (const unsigned char *)val, le - val);
					sb_printf(h, "=?UTF-8?B?%s?=", b);
					free(b);
				}
			}
			sb_adds(h, "\r\n");
		}
		p = eol ? eol + 2 : end;
	}
	for (size_t i = 0; i < sizeof(canon) / sizeof(canon[0]); i++) {
		v = override(q, kept[i], strlen(kept[i]), &vl);
		if (v) {
			sb_printf(h, "%s: ", canon[i]);
			for (size_t k = 0; k < vl; k++)
				sb_addc(h, v[k] == '\r' || v[k] == '\n' ? ' ' : v[k]);
			sb_adds(h, "\r\n");
		}
	}
}

void s3_meta_value_decode(struct sbuf *out, const char *v, size_t n)
{
	if (n > 12 && !strncasecmp(v, "=?UTF-8?B?", 10) && !memcmp(v + n - 2, "?=", 2)) {
		unsigned char *b = malloc(n);
		ssize_t k = b ? b64_decode(b, v + 10, n - 12) : -1;
		if (k >= 0) {
			sb_add(out, b, k);
			free(b);
			return;
		}
		free(b);
	}
	sb_add(out, v, n);
}

int s3_content_md5_check(const struct http_msg *m, const unsigned char md5[16],
			 const char **code, const char **msg)
{
	size_t vl;
	const char *v = http_hdr_get(m, "content-md5", &vl);
	unsigned char want[64];

	if (!v)
		return 0;
	if (vl > 64 || b64_decode(want, v, vl) != 16) {
		*code = "InvalidDigest";
		*msg = "The Content-MD5 you specified was invalid.";
		return -1;
	}
	if (memcmp(want, md5, 16)) {
		*code = "BadDigest";
		*msg = "The Content-MD5 you specified did not match what we received.";
		return -1;
	}
	return 0;
}

void s3_location_xml(struct sbuf *x, const char *region)
{
	sb_adds(x, S3_XML_HEAD "<LocationConstraint " S3_XMLNS ">");
	/* us-east-1 is the empty constraint. */
	if (strcmp(region, "us-east-1"))
		sb_add_xml(x, region, strlen(region));
	sb_adds(x, "</LocationConstraint>\n");
}

void s3_multipart_etag(char out[48], const struct s3_part_ref *p, int n)
{
	unsigned char *bins = malloc(16 * (size_t)(n ? n : 1)), md5[16];
	if (!bins) {
		out[0] = 0;
		return;
	}
	for (int i = 0; i < n; i++)
		if (hex_decode(bins + 16 * i, 16, p[i].etag, 32) != 16)
			memset(bins + 16 * i, 0, 16);
	md5_bin(md5, bins, 16 * (size_t)n);
	free(bins);
	hex_encode(out, md5, 16);
	snprintf(out + 32, 16, "-%d", n);
}

void s3_parts_line(struct sbuf *meta, const uint64_t *sizes, int n)
{
	sb_adds(meta, S3_PARTS_LINE);
	for (int i = 0; i < n; i++)
		sb_printf(meta, "%s%llu", i ? "," : "", (unsigned long long)sizes[i]);
	sb_adds(meta, "\r\n");
}

int s3_part_range(const char *meta, size_t ml, uint64_t size, long pn, int *count,
		  uint64_t *first, uint64_t *last)
{
	size_t pl = strlen(S3_PARTS_LINE);
	const char *p = meta, *end = meta + ml;
	while (p < end) {
		const char *eol = memmem(p, end - p, "\r\n", 2);
		const char *le = eol ? eol : end;
		if ((size_t)(le - p) > pl && !strncasecmp(p, S3_PARTS_LINE, pl)) {
			uint64_t off = 0;
			int i = 0;
			const char *s = p + pl;
			*count = 1;
			for (const char *c = s; c < le; c++)
				*count += *c == ',';
			while (s < le) {
				uint64_t sz = strtoull(s, NULL, 10);
				if (++i == pn) {
					if (!sz)
						return -1;
					*first = off;
					*last = off + sz - 1;
					return *last < size ? 0 : -1;
				}
				off += sz;
				const char *c = memchr(s, ',', le - s);
				s = c ? c + 1 : le;
			}
			return -1;
		}
		p = eol ? eol + 2 : end;
	}
	*count = 1;
	if (pn != 1)
		return -1;
	*first = 0;
	*last = size ? size - 1 : 0;
	return 0;
}
