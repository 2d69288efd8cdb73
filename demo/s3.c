/* SPDX-License-Identifier: MIT */
/*
 * S3 protocol parsing and formatting shared by the demo programs (see s3.h).
 * Everything here works on counted strings, allocates only what it returns,
 * and treats every input as hostile: these are the fuzzed entry points.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "s3.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int s3_query_parse(const char *q, size_t n, struct s3_query *out)
{
	memset(out, 0, sizeof(*out));
	if (!n)
		return 0;
	out->store = malloc(n + S3_MAX_QUERY_PARAMS * 2 + 2);
	if (!out->store)
		return -ENOMEM;
	char *w = out->store;
	size_t i = 0;

	while (i <= n) {
		size_t j = i;
		while (j < n && q[j] != '&')
			j++;
		if (j > i) {
			if (out->n >= S3_MAX_QUERY_PARAMS)
				goto bad;
			struct s3_param *p = &out->p[out->n++];
			size_t eq = i;
			while (eq < j && q[eq] != '=')
				eq++;
			ssize_t k = uri_decode(w, q + i, eq - i, false);
			if (k < 0)
				goto bad;
			p->name = w;
			p->nlen = k;
			w += k + 1;
			p->has_value = eq < j;
			k = p->has_value ? uri_decode(w, q + eq + 1, j - eq - 1, false) : 0;
			if (k < 0)
				goto bad;
			if (!p->has_value)
				*w = 0;
			p->value = w;
			p->vlen = k;
			w += k + 1;
		}
		i = j + 1;
	}
	return 0;
bad:
	s3_query_free(out);
	return -EINVAL;
}

void s3_query_free(struct s3_query *q)
{
	free(q->store);
	memset(q, 0, sizeof(*q));
}

const char *s3_query_get(const struct s3_query *q, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	for (int i = 0; i < q->n; i++) {
		if (q->p[i].nlen == nl && !memcmp(q->p[i].name, name, nl)) {
			if (vlen)
				*vlen = q->p[i].vlen;
			return q->p[i].value;
		}
	}
	return NULL;
}

int s3_target_parse(const char *url, size_t n, struct s3_target *t)
{
	memset(t, 0, sizeof(*t));
	if (!n || url[0] != '/')
		return -EINVAL;
	size_t qm = 0;
	while (qm < n && url[qm] != '?')
		qm++;
	t->raw_path = url;
	t->raw_path_len = qm;
	t->raw_query = qm < n ? url + qm + 1 : url + n;
	t->raw_query_len = qm < n ? n - qm - 1 : 0;

	char *path = malloc(qm + 1);
	if (!path)
		return -ENOMEM;
	ssize_t pl = uri_decode(path, url, qm, false);
	if (pl < 0) {
		free(path);
		return -EINVAL;
	}
	size_t i = 1;
	while (i < (size_t)pl && path[i] != '/')
		i++;
	if (i - 1 >= sizeof(t->bucket)) {
		free(path);
		return -EINVAL;
	}
	memcpy(t->bucket, path + 1, i - 1);
	t->bucket[i - 1] = 0;
	if (memchr(t->bucket, 0, i - 1)) {
		free(path);
		return -EINVAL;
	}
	if (i + 1 < (size_t)pl) {
		size_t kl = pl - i - 1;
		if (kl > S3_MAX_KEY) {
			free(path);
			return -ENAMETOOLONG;
		}
		memmove(path, path + i + 1, kl);
		path[kl] = 0;
		t->key = path;
		t->key_len = kl;
		t->has_key = true;
	} else {
		free(path);
	}
	return 0;
}

void s3_target_free(struct s3_target *t)
{
	free(t->key);
	t->key = NULL;
}

bool s3_bucket_name_ok(const char *b)
{
	size_t n = strlen(b);
	bool all_digits_dots = true;

	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = b[i];
		if (!(islower(c) || isdigit(c) || c == '.' || c == '-'))
			return false;
		if (!isdigit(c) && c != '.')
			all_digits_dots = false;
		if (c == '.' && i && (b[i - 1] == '.' || b[i - 1] == '-'))
			return false;
		if (c == '-' && i && b[i - 1] == '.')
			return false;
	}
	if (!isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return false;
	return !all_digits_dots;
}

int s3_list_params_parse(const struct s3_query *q, struct s3_list_params *lp,
			 const char **code, const char **msg)
{
	size_t n;
	const char *v;

	memset(lp, 0, sizeof(*lp));
	lp->version = 1;
	lp->max_keys = 1000;
	lp->prefix = "";
	lp->delimiter = "";
	*code = "InvalidArgument";

	v = s3_query_get(q, "list-type", &n);
	if (v) {
		if (n != 1 || (v[0] != '1' && v[0] != '2')) {
			*msg = "Invalid list-type.";
			return -EINVAL;
		}
		lp->version = v[0] - '0';
	}
	v = s3_query_get(q, "prefix", &n);
	if (v) {
		lp->prefix = v;
		lp->prefix_len = n;
	}
	v = s3_query_get(q, "delimiter", &n);
	if (v) {
		lp->delimiter = v;
		lp->delimiter_len = n;
	}
	v = s3_query_get(q, "max-keys", &n);
	if (v) {
		long mk;
		if (parse_long(v, 0, 2147483647L, &mk)) {
			*msg = "Provided max-keys not an integer or within integer range.";
			return -EINVAL;
		}
		lp->max_keys = mk > 1000 ? 1000 : (int)mk;
	}
	v = s3_query_get(q, "encoding-type", &n);
	if (v) {
		if (strcmp(v, "url")) {
			*msg = "Invalid Encoding Method specified in Request.";
			return -EINVAL;
		}
		lp->url_encode = true;
	}
	v = s3_query_get(q, "fetch-owner", &n);
	lp->fetch_owner = v && !strcmp(v, "true");
	/* ListObjectVersions: a never-versioned bucket's listing, each key
	 * its one "null" version, resumed from key-marker. */
	if (s3_query_get(q, "versions", NULL))
		lp->version = 3;
	/* v1 and versions listings always name the owner. */
	if (lp->version != 2)
		lp->fetch_owner = true;

	const char *after = NULL;
	size_t after_len = 0;
	if (lp->version != 2) {
		after = s3_query_get(q, lp->version == 3 ? "key-marker" : "marker", &after_len);
		lp->marker_raw = after;
		lp->marker_raw_len = after_len;
	} else {
		after = s3_query_get(q, "start-after", &after_len);
		lp->marker_raw = after;
		lp->marker_raw_len = after_len;
		const char *tok = s3_query_get(q, "continuation-token", &n);
		if (tok) {
			lp->token_raw = tok;
			lp->token_raw_len = n;
			lp->after = malloc(n / 2 + 1);
			if (!lp->after) {
				*code = "InternalError";
				*msg = "Out of memory.";
				return -ENOMEM;
			}
			/* An empty token starts at the beginning, as S3's does. */
			ssize_t k = hex_decode((unsigned char *)lp->after, n / 2, tok, n);
			if (k < 0) {
				free(lp->after);
				lp->after = NULL;
				*msg = "The continuation token provided is incorrect.";
				return -EINVAL;
			}
			lp->after[k] = 0;
			lp->after_len = k;
			if (!k) {
				free(lp->after);
				lp->after = NULL;
			}
			/* The token supersedes start-after. */
			return 0;
		}
	}
	if (after && after_len) {
		lp->after = malloc(after_len + 1);
		if (!lp->after) {
			*code = "InternalError";
			*msg = "Out of memory.";
			return -ENOMEM;
		}
		memcpy(lp->after, after, after_len);
		lp->after[after_len] = 0;
		lp->after_len = after_len;
	}
	return 0;
}

void s3_list_params_free(struct s3_list_params *lp)
{
	free(lp->after);
	lp->after = NULL;
}

void s3_list_token(struct sbuf *out, const char *name, size_t n)
{
	sb_add_hex(out, (const unsigned char *)name, n);
}

static void add_list_name(struct sbuf *x, const struct s3_list_params *lp, const char *s, size_t n)
{
	if (lp->url_encode)
		sb_add_uri(x, s, n, true);
	else
		sb_add_xml(x, s, n);
}

void s3_list_add_key(struct sbuf *entries, const struct s3_list_params *lp,
		     const char *name, size_t n, const char *fields, size_t flen)
{
	const char *tag = lp->version == 3 ? "Version" : "Contents";
	sb_printf(entries, "<%s><Key>", tag);
	add_list_name(entries, lp, name, n);
	sb_adds(entries, "</Key>");
	if (lp->version == 3)
		sb_adds(entries, "<VersionId>null</VersionId><IsLatest>true</IsLatest>");
	sb_add(entries, fields, flen);
	sb_printf(entries, "</%s>", tag);
}

void s3_list_add_prefix(struct sbuf *entries, const struct s3_list_params *lp,
			const char *name, size_t n)
{
	sb_adds(entries, "<CommonPrefixes><Prefix>");
	add_list_name(entries, lp, name, n);
	sb_adds(entries, "</Prefix></CommonPrefixes>");
}

/* v2 names where to go on with a continuation token (ours: the hex of the
 * last name), v1 with the last name itself. */
static void add_list_resume(struct sbuf *x, const struct s3_list_params *lp,
			    const struct s3_list_result *res)
{
	if (lp->version == 2) {
		sb_printf(x, "<KeyCount>%d</KeyCount>", res->count);
		if (lp->token_raw) {
			sb_adds(x, "<ContinuationToken>");
			sb_add_xml(x, lp->token_raw, lp->token_raw_len);
			sb_adds(x, "</ContinuationToken>");
		}
		if (lp->marker_raw) {
			sb_adds(x, "<StartAfter>");
			add_list_name(x, lp, lp->marker_raw, lp->marker_raw_len);
			sb_adds(x, "</StartAfter>");
		}
		if (res->next) {
			sb_adds(x, "<NextContinuationToken>");
			s3_list_token(x, res->next, res->next_len);
			sb_adds(x, "</NextContinuationToken>");
		}
	} else if (lp->version == 3) {
		sb_adds(x, "<KeyMarker>");
		if (lp->marker_raw)
			add_list_name(x, lp, lp->marker_raw, lp->marker_raw_len);
		sb_adds(x, "</KeyMarker><VersionIdMarker></VersionIdMarker>");
		if (res->next) {
			sb_adds(x, "<NextKeyMarker>");
			add_list_name(x, lp, res->next, res->next_len);
			sb_adds(x, "</NextKeyMarker><NextVersionIdMarker>null</NextVersionIdMarker>");
		}
	} else {
		sb_adds(x, "<Marker>");
		if (lp->marker_raw)
			add_list_name(x, lp, lp->marker_raw, lp->marker_raw_len);
		sb_adds(x, "</Marker>");
		if (res->next) {
			sb_adds(x, "<NextMarker>");
			add_list_name(x, lp, res->next, res->next_len);
			sb_adds(x, "</NextMarker>");
		}
	}
}

void s3_list_result_xml(struct sbuf *x, const struct s3_list_params *lp,
			const struct s3_list_result *res)
{
	const char *root = lp->version == 3 ? "ListVersionsResult" : "ListBucketResult";
	sb_printf(x, S3_XML_HEAD "<%s " S3_XMLNS "><Name>", root);
	sb_adds(x, res->bucket);
	sb_adds(x, "</Name><Prefix>");
	/* ListObjects v1 echoes the prefix as given even under
	 * encoding-type=url: S3 clients (botocore) do not decode it there. */
	if (lp->version == 1)
		sb_add_xml(x, lp->prefix, lp->prefix_len);
	else
		add_list_name(x, lp, lp->prefix, lp->prefix_len);
	sb_adds(x, "</Prefix>");
	add_list_resume(x, lp, res);
	sb_printf(x, "<MaxKeys>%d</MaxKeys>", lp->max_keys);
	if (lp->delimiter_len) {
		sb_adds(x, "<Delimiter>");
		add_list_name(x, lp, lp->delimiter, lp->delimiter_len);
		sb_adds(x, "</Delimiter>");
	}
	if (lp->url_encode)
		sb_adds(x, "<EncodingType>url</EncodingType>");
	sb_printf(x, "<IsTruncated>%s</IsTruncated>", res->truncated ? "true" : "false");
	sb_add(x, res->entries->p ? res->entries->p : "", res->entries->len);
	sb_printf(x, "</%s>\n", root);
}

static int parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (!n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int s3_range_parse(const char *v, size_t n, uint64_t size, uint64_t *first, uint64_t *last)
{
	const char *p = v, *end = v + n;

	while (p < end && *p == ' ')
		p++;
	if ((size_t)(end - p) < 6 || strncasecmp(p, "bytes=", 6))
		return 0;
	p += 6;
	while (end > p && end[-1] == ' ')
		end--;
	if (memchr(p, ',', end - p))
		return 0;     /* multiple ranges: S3 serves the whole object */
	const char *dash = memchr(p, '-', end - p);
	if (!dash)
		return 0;
	uint64_t a, b;
	if (dash == p) {
		/* suffix: the last b bytes */
		if (parse_u64(dash + 1, end - dash - 1, &b))
			return 0;
		if (b == 0 || size == 0)
			return -1;
		*first = b >= size ? 0 : size - b;
		*last = size - 1;
		return 1;
	}
	if (parse_u64(p, dash - p, &a))
		return 0;
	if (dash + 1 == end) {
		b = UINT64_MAX;
	} else {
		if (parse_u64(dash + 1, end - dash - 1, &b))
			return 0;
		if (b < a)
			return 0;  /* syntactically invalid: ignored, as RFC 9110 says */
	}
	if (a >= size)
		return -1;
	*first = a;
	*last = b >= size ? size - 1 : b;
	return 1;
}

int s3_copy_range_parse(const char *v, size_t n, uint64_t size, uint64_t *first, uint64_t *last)
{
	const char *p = v, *end = v + n;
	uint64_t a, b;

	if (n < 6 || strncmp(p, "bytes=", 6))
		return -EINVAL;
	p += 6;
	const char *dash = memchr(p, '-', end - p);
	/* No suffix or open-ended forms, no lists: both numbers, in order. */
	if (!dash || parse_u64(p, dash - p, &a) || parse_u64(dash + 1, end - dash - 1, &b) || b < a)
		return -EINVAL;
	if (b >= size)
		return -ERANGE;
	*first = a;
	*last = b;
	return 0;
}

int xml_find(const char *x, size_t n, size_t *pos, const char *tag,
	     const char **val, size_t *vlen)
{
	size_t tl = strlen(tag);
	size_t i = *pos;

	while (i < n) {
		const char *lt = memchr(x + i, '<', n - i);
		if (!lt)
			break;
		i = lt - x + 1;
		if (n - i < tl + 1 || memcmp(x + i, tag, tl))
			continue;
		char c = x[i + tl];
		if (c != '>' && c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '/')
			continue;
		const char *gt = memchr(x + i, '>', n - i);
		if (!gt)
			return 0;
		size_t start = gt - x + 1;
		if (gt[-1] == '/') {
			/* <Tag/> */
			*val = x + start;
			*vlen = 0;
			*pos = start;
			return 1;
		}
		/* Find the matching close tag (no nesting of the same name
		 * in the documents we read). */
		size_t j = start;
		while (j < n) {
			const char *cl = memchr(x + j, '<', n - j);
			if (!cl)
				return 0;
			j = cl - x;
			if (n - j >= tl + 3 && x[j + 1] == '/' && !memcmp(x + j + 2, tag, tl) &&
			    x[j + 2 + tl] == '>') {
				*val = x + start;
				*vlen = j - start;
				*pos = j + tl + 3;
				return 1;
			}
			j++;
		}
		return 0;
	}
	return 0;
}

static size_t utf8_put(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = 0xc0 | cp >> 6;
		o[1] = 0x80 | (cp & 63);
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = 0xe0 | cp >> 12;
		o[1] = 0x80 | ((cp >> 6) & 63);
		o[2] = 0x80 | (cp & 63);
		return 3;
	}
	o[0] = 0xf0 | cp >> 18;
	o[1] = 0x80 | ((cp >> 12) & 63);
	o[2] = 0x80 | ((cp >> 6) & 63);
	o[3] = 0x80 | (cp & 63);
	return 4;
}

ssize_t xml_unescape(char *out, size_t cap, const char *in, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (o + 5 > cap)
			return -1;
		if (in[i] != '&') {
			out[o++] = in[i];
			continue;
		}
		const char *semi = memchr(in + i, ';', n - i);
		if (!semi || semi - (in + i) > 12)
			return -1;
		const char *e = in + i + 1;
		size_t el = semi - e;
		if (el == 3 && !memcmp(e, "amp", 3))
			out[o++] = '&';
		else if (el == 2 && !memcmp(e, "lt", 2))
			out[o++] = '<';
		else if (el == 2 && !memcmp(e, "gt", 2))
			out[o++] = '>';
		else if (el == 4 && !memcmp(e, "quot", 4))
			out[o++] = '"';
		else if (el == 4 && !memcmp(e, "apos", 4))
			out[o++] = '\'';
		else if (el >= 2 && e[0] == '#') {
			uint32_t cp = 0;
			bool hexd = e[1] == 'x' || e[1] == 'X';
			size_t k = hexd ? 2 : 1;
			if (k >= el)
				return -1;
			for (; k < el; k++) {
				int d;
				unsigned char c = e[k];
				if (isdigit(c))
					d = c - '0';
				else if (hexd && isxdigit(c))
					d = tolower(c) - 'a' + 10;
				else
					return -1;
				cp = cp * (hexd ? 16 : 10) + d;
				if (cp > 0x10ffff)
					return -1;
			}
			o += utf8_put(out + o, cp);
		} else {
			return -1;
		}
		i = semi - in;
	}
	if (o >= cap)
		return -1;
	out[o] = 0;
	return o;
}

static int cmp_part(const void *a, const void *b)
{
	const struct s3_part_ref *x = a, *y = b;
	return (x->number > y->number) - (x->number < y->number);
}

int s3_parse_complete(const char *x, size_t n, struct s3_part_ref **parts)
{
	size_t pos = 0, cap = 0;
	int count = 0;
	struct s3_part_ref *v = NULL;
	const char *blk;
	size_t blen;

	*parts = NULL;
	while (xml_find(x, n, &pos, "Part", &blk, &blen)) {
		const char *num, *etag;
		size_t nl, el, p2 = 0, p3 = 0;
		char tmp[80];
		long pn;

		if (!xml_find(blk, blen, &p2, "PartNumber", &num, &nl) ||
		    !xml_find(blk, blen, &p3, "ETag", &etag, &el))
			goto bad;
		if (nl >= sizeof(tmp))
			goto bad;
		memcpy(tmp, num, nl);
		tmp[nl] = 0;
		if (parse_long(tmp, 1, 10000, &pn))
			goto bad;
		ssize_t k = xml_unescape(tmp, sizeof(tmp), etag, el);
		if (k < 0)
			goto bad;
		char *e = tmp;
		while (*e == ' ' || *e == '"')
			e++;
		size_t len = strlen(e);
		while (len && (e[len - 1] == '"' || e[len - 1] == ' '))
			len--;
		/* A part sent again and listed again: the later entry stands. */
		if (count && v[count - 1].number == (int)pn)
			count--;
		if ((size_t)count == cap) {
			cap = cap ? cap * 2 : 16;
			if (cap > 10000)
				cap = 10000;
			if ((size_t)count >= cap)
				goto bad;
			struct s3_part_ref *nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[count].number = (int)pn;
		if (len >= sizeof(v[count].etag))
			goto bad;
		memcpy(v[count].etag, e, len);
		v[count].etag[len] = 0;
		count++;
	}
	if (!count)
		goto bad;
	(void)cmp_part;
	*parts = v;
	return count;
bad:
	free(v);
	return -EINVAL;
}

int s3_parse_delete(const char *x, size_t n, struct s3_delete_key **keys, bool *quiet)
{
	size_t pos = 0, cap = 0;
	int count = 0;
	struct s3_delete_key *v = NULL;
	const char *blk, *q;
	size_t blen, ql, qp = 0;

	*keys = NULL;
	*quiet = xml_find(x, n, &qp, "Quiet", &q, &ql) && ql == 4 && !memcmp(q, "true", 4);
	while (xml_find(x, n, &pos, "Object", &blk, &blen)) {
		const char *k;
		size_t kl, p2 = 0;

		if (!xml_find(blk, blen, &p2, "Key", &k, &kl))
			goto bad;
		if (count >= 1000)
			goto bad;
		if ((size_t)count == cap) {
			cap = cap ? cap * 2 : 16;
			struct s3_delete_key *nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
		}
		char *key = malloc(kl * 4 + 5);
		if (!key)
			goto nomem;
		ssize_t len = xml_unescape(key, kl * 4 + 5, k, kl);
		if (len <= 0 || len > S3_MAX_KEY) {
			free(key);
			goto bad;
		}
		v[count].key = key;
		v[count].len = len;
		count++;
	}
	*keys = v;
	return count;
bad:
	s3_delete_keys_free(v, count);
	return -EINVAL;
nomem:
	s3_delete_keys_free(v, count);
	return -ENOMEM;
}

void s3_delete_keys_free(struct s3_delete_key *k, int n)
{
	for (int i = 0; i < n; i++)
		free(k[i].key);
	free(k);
}

void s3_error_xml(struct sbuf *b, const char *code, const char *msg,
		  const char *resource, const char *request_id)
{
	sb_adds(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>");
	sb_add_xml(b, code, strlen(code));
	sb_adds(b, "</Code><Message>");
	sb_add_xml(b, msg, strlen(msg));
	sb_adds(b, "</Message><Resource>");
	sb_add_xml(b, resource, strlen(resource));
	sb_adds(b, "</Resource><RequestId>");
	sb_adds(b, request_id);
	sb_adds(b, "</RequestId></Error>\n");
}

bool s3_etag_ok(const char *e)
{
	size_t i = 0;
	for (; i < 32; i++)
		if (!isxdigit((unsigned char)e[i]))
			return false;
	if (!e[i])
		return true;
	if (e[i] != '-' || !e[i + 1])
		return false;
	for (i++; e[i]; i++)
		if (!isdigit((unsigned char)e[i]))
			return false;
	return true;
}
