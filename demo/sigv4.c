/* SPDX-License-Identifier: MIT */
/*
 * AWS Signature Version 4 (see sigv4.h).  The server side never trusts the
 * client's view of canonical forms: it rebuilds the canonical request from
 * what it received and compares signatures in constant time.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sigv4.h"

#include <ctype.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

static void skip_ws(const char **p, const char *end)
{
	while (*p < end && (**p == ' ' || **p == '\t' || **p == ','))
		(*p)++;
}

static int copy_field(char *dst, size_t cap, const char *s, size_t n)
{
	if (n == 0 || n >= cap)
		return -EINVAL;
	memcpy(dst, s, n);
	dst[n] = 0;
	return 0;
}

int sigv4_parse_auth(const char *v, size_t n, struct sigv4_auth *a)
{
	const char *p = v, *end = v + n;
	bool have_cred = false, have_sh = false, have_sig = false;

	memset(a, 0, sizeof(*a));
	while (p < end && *p == ' ')
		p++;
	size_t al = strlen(SIGV4_ALGO);
	if ((size_t)(end - p) <= al || memcmp(p, SIGV4_ALGO, al) || (p[al] != ' ' && p[al] != '\t'))
		return -EINVAL;
	p += al;
	for (;;) {
		skip_ws(&p, end);
		if (p == end)
			break;
		const char *name = p;
		while (p < end && *p != '=' && *p != ' ' && *p != ',')
			p++;
		size_t nl = p - name;
		while (p < end && *p == ' ')
			p++;
		if (p == end || *p != '=')
			return -EINVAL;
		p++;
		while (p < end && *p == ' ')
			p++;
		const char *val = p;
		while (p < end && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		size_t vl = p - val;

		if (nl == 10 && !memcmp(name, "Credential", 10)) {
			/* AK/DATE/REGION/SERVICE/aws4_request; the access key
			 * itself may not contain '/'. */
			const char *f[5];
			size_t fl[5];
			int k = 0;
			const char *s = val, *e = val + vl;
			while (k < 5) {
				const char *sl = memchr(s, '/', e - s);
				f[k] = s;
				fl[k] = (sl ? sl : e) - s;
				k++;
				if (!sl)
					break;
				s = sl + 1;
			}
			if (k != 5 || f[4] + fl[4] != e)
				return -EINVAL;
			if (copy_field(a->access_key, sizeof(a->access_key), f[0], fl[0]) ||
			    fl[1] != 8 ||
			    copy_field(a->date, sizeof(a->date), f[1], fl[1]) ||
			    copy_field(a->region, sizeof(a->region), f[2], fl[2]) ||
			    copy_field(a->service, sizeof(a->service), f[3], fl[3]) ||
			    fl[4] != 12 || memcmp(f[4], "aws4_request", 12))
				return -EINVAL;
			for (int i = 0; i < 8; i++)
				if (!isdigit((unsigned char)a->date[i]))
					return -EINVAL;
			have_cred = true;
		} else if (nl == 13 && !memcmp(name, "SignedHeaders", 13)) {
			if (copy_field(a->signed_headers, sizeof(a->signed_headers), val, vl))
				return -EINVAL;
			have_sh = true;
		} else if (nl == 9 && !memcmp(name, "Signature", 9)) {
			if (vl != 64 || copy_field(a->signature, sizeof(a->signature), val, vl))
				return -EINVAL;
			for (int i = 0; i < 64; i++)
				if (!isxdigit((unsigned char)a->signature[i]))
					return -EINVAL;
			have_sig = true;
		} else {
			return -EINVAL;
		}
	}
	return have_cred && have_sh && have_sig ? 0 : -EINVAL;
}

int sigv4_parse_amzdate(const char *v, size_t n, time_t *out)
{
	struct tm tm;
	char buf[17];

	if (n != 16 || v[8] != 'T' || v[15] != 'Z')
		return -EINVAL;
	for (int i = 0; i < 15; i++)
		if (i != 8 && !isdigit((unsigned char)v[i]))
			return -EINVAL;
	memcpy(buf, v, 16);
	buf[16] = 0;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = (buf[0] - '0') * 1000 + (buf[1] - '0') * 100 + (buf[2] - '0') * 10 + (buf[3] - '0') - 1900;
	tm.tm_mon = (buf[4] - '0') * 10 + (buf[5] - '0') - 1;
	tm.tm_mday = (buf[6] - '0') * 10 + (buf[7] - '0');
	tm.tm_hour = (buf[9] - '0') * 10 + (buf[10] - '0');
	tm.tm_min = (buf[11] - '0') * 10 + (buf[12] - '0');
	tm.tm_sec = (buf[13] - '0') * 10 + (buf[14] - '0');
	if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
	    tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
		return -EINVAL;
	*out = timegm(&tm);
	return 0;
}

void sigv4_format_amzdate(char out[17], time_t t)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

void sigv4_canonical_uri(struct sbuf *b, const char *path, size_t n)
{
	if (!n || path[0] != '/')
		sb_addc(b, '/');
	sb_add_uri(b, path, n, true);
}

struct qpair {
	char *name, *value;
};

static int cmp_qpair(const void *a, const void *b)
{
	const struct qpair *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

int sigv4_canonical_query(struct sbuf *b, const char *q, size_t n)
{
	struct qpair pairs[SIGV4_QMAX];
	int np = 0, rc = 0;
	char *tmp = NULL;
	struct sbuf enc;

	if (!n)
		return 0;
	sb_init(&enc);
	tmp = malloc(n + 1);
	if (!tmp)
		return -ENOMEM;
	size_t i = 0;
	while (i <= n) {
		size_t j = i;
		while (j < n && q[j] != '&')
			j++;
		if (j > i) {
			if (np >= SIGV4_QMAX) {
				rc = -EINVAL;
				goto out;
			}
			size_t eq = i;
			while (eq < j && q[eq] != '=')
				eq++;
			ssize_t k = uri_decode(tmp, q + i, eq - i, false);
			if (k < 0) {
				rc = -EINVAL;
				goto out;
			}
			size_t off = enc.len;
			sb_add_uri(&enc, tmp, k, false);
			sb_addc(&enc, 0);
			size_t voff = enc.len;
			k = eq < j ? uri_decode(tmp, q + eq + 1, j - eq - 1, false) : 0;
			if (k < 0) {
				rc = -EINVAL;
				goto out;
			}
			sb_add_uri(&enc, tmp, k, false);
			sb_addc(&enc, 0);
			pairs[np].name = (char *)off;
			pairs[np].value = (char *)voff;
			np++;
		}
		i = j + 1;
	}
	if (enc.failed) {
		rc = -ENOMEM;
		goto out;
	}
	for (int k = 0; k < np; k++) {
		pairs[k].name = enc.p + (uintptr_t)pairs[k].name;
		pairs[k].value = enc.p + (uintptr_t)pairs[k].value;
	}
	qsort(pairs, np, sizeof(pairs[0]), cmp_qpair);
	for (int k = 0; k < np; k++) {
		if (k)
			sb_addc(b, '&');
		sb_adds(b, pairs[k].name);
		sb_addc(b, '=');
		sb_adds(b, pairs[k].value);
	}
out:
	free(tmp);
	sb_free(&enc);
	return rc;
}

/* Appends a header value trimmed, with inner runs of spaces collapsed. */
static void add_header_value(struct sbuf *b, const char *v, size_t n)
{
	size_t i = 0;
	while (i < n && (v[i] == ' ' || v[i] == '\t'))
		i++;
	while (n > i && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	bool sp = false;
	for (; i < n; i++) {
		if (v[i] == ' ' || v[i] == '\t') {
			sp = true;
			continue;
		}
		if (sp)
			sb_addc(b, ' ');
		sp = false;
		sb_addc(b, v[i]);
	}
}

int sigv4_canonical_request(struct sbuf *out, const char *method, const char *uri,
			    size_t ulen, const char *query, size_t qlen,
			    const struct http_hdr *hdrs, int nhdr,
			    const char *signed_headers, const char *payload_hash)
{
	sb_adds(out, method);
	sb_addc(out, '\n');
	sb_add(out, uri, ulen);
	sb_addc(out, '\n');
	int rc = sigv4_canonical_query(out, query, qlen);
	if (rc)
		return rc;
	sb_addc(out, '\n');
	const char *p = signed_headers;
	while (*p) {
		const char *e = strchr(p, ';');
		size_t nl = e ? (size_t)(e - p) : strlen(p);
		bool found = false;
		if (!nl)
			return -EINVAL;
		sb_add(out, p, nl);
		sb_addc(out, ':');
		for (int i = 0; i < nhdr; i++) {
			if (hdrs[i].nlen != nl || strncasecmp(hdrs[i].name, p, nl))
				continue;
			if (found)
				sb_addc(out, ',');
			add_header_value(out, hdrs[i].value, hdrs[i].vlen);
			found = true;
		}
		if (!found)
			return -ENOENT;
		sb_addc(out, '\n');
		p += nl;
		if (*p == ';')
			p++;
	}
	sb_addc(out, '\n');
	sb_adds(out, signed_headers);
	sb_addc(out, '\n');
	sb_adds(out, payload_hash);
	return out->failed ? -ENOMEM : 0;
}

static void hmac(unsigned char out[32], const void *key, size_t klen, const void *msg, size_t n)
{
	unsigned int len = 32;
	HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &len);
}

void sigv4_signing_key(unsigned char key[32], const char *secret, const char *date,
		       const char *region, const char *service)
{
	char k0[160];
	unsigned char a[32], b[32];

	snprintf(k0, sizeof(k0), "AWS4%s", secret);
	hmac(a, k0, strlen(k0), date, strlen(date));
	hmac(b, a, 32, region, strlen(region));
	hmac(a, b, 32, service, strlen(service));
	hmac(key, a, 32, "aws4_request", 12);
	OPENSSL_cleanse(k0, sizeof(k0));
}

void md5_bin(unsigned char out[16], const void *p, size_t n)
{
	EVP_Digest(p, n, out, NULL, EVP_md5(), NULL);
}

void sha256_hex(char out[65], const void *p, size_t n)
{
	unsigned char h[32];
	SHA256(p, n, h);
	hex_encode(out, h, 32);
}

void sigv4_signature(char out[65], const unsigned char key[32], const char *amzdate,
		     const char *scope, const char *creq, size_t creq_len)
{
	struct sbuf sts;
	char h[65];
	unsigned char sig[32];

	sb_init(&sts);
	sha256_hex(h, creq, creq_len);
	sb_printf(&sts, "%s\n%s\n%s\n%s", SIGV4_ALGO, amzdate, scope, h);
	hmac(sig, key, 32, sts.p ? sts.p : "", sts.len);
	hex_encode(out, sig, 32);
	sb_free(&sts);
}

void sigv4_sign(struct sbuf *auth, const struct sigv4_creds *cr, const char *method,
		const char *uri, size_t ulen, const char *query, size_t qlen,
		const struct http_hdr *hdrs, int nhdr, const char *payload_hash,
		const char *amzdate)
{
	struct sbuf sh, creq;
	char date[9], scope[160], sig[65];
	unsigned char key[32];

	sb_init(&sh);
	sb_init(&creq);
	for (int i = 0; i < nhdr; i++) {
		if (i)
			sb_addc(&sh, ';');
		sb_add(&sh, hdrs[i].name, hdrs[i].nlen);
	}
	memcpy(date, amzdate, 8);
	date[8] = 0;
	snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", date, cr->region);
	sigv4_canonical_request(&creq, method, uri, ulen, query, qlen, hdrs, nhdr,
				sh.p ? sh.p : "", payload_hash);
	sigv4_signing_key(key, cr->secret, date, cr->region, "s3");
	sigv4_signature(sig, key, amzdate, scope, creq.p ? creq.p : "", creq.len);
	sb_printf(auth, "%s Credential=%s/%s,SignedHeaders=%s,Signature=%s", SIGV4_ALGO,
		  cr->access_key, scope, sh.p ? sh.p : "", sig);
	sb_free(&sh);
	sb_free(&creq);
}

bool sigv4_sig_equal(const char *a, const char *b)
{
	char x[64], y[64];
	/* Compare lowercase forms, in constant time. */
	for (int i = 0; i < 64; i++) {
		x[i] = tolower((unsigned char)a[i]);
		y[i] = tolower((unsigned char)b[i]);
	}
	return CRYPTO_memcmp(x, y, 64) == 0;
}

static bool chunk_sig_ok(struct sigv4_stream *st, const char *sig, const char *data, size_t n)
{
	char h[65], sts[512], out[65];
	unsigned char mac[32];

	sha256_hex(h, data, n);
	int k = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s",
			 st->amzdate, st->scope, st->prev_sig, SIGV4_EMPTY_SHA256, h);
	if (k < 0 || (size_t)k >= sizeof(sts))
		return false;
	hmac(mac, st->key, 32, sts, k);
	hex_encode(out, mac, 32);
	if (!sigv4_sig_equal(out, sig))
		return false;
	memcpy(st->prev_sig, out, 65);
	return true;
}

ssize_t sigv4_decode_chunked(struct sigv4_stream *st, const char *in, size_t n,
			     char *out, size_t cap)
{
	size_t pos = 0, o = 0;

	for (;;) {
		/* chunk header: hex-size[;chunk-signature=sig]\r\n */
		const char *line = in + pos;
		const char *cr = NULL;
		for (size_t i = pos; i + 1 < n; i++) {
			if (in[i] == '\r' && in[i + 1] == '\n') {
				cr = in + i;
				break;
			}
			if (i - pos > 200)
				return -EINVAL;
		}
		if (!cr)
			return -EINVAL;
		size_t ll = cr - line, i = 0;
		uint64_t size = 0;
		while (i < ll && isxdigit((unsigned char)line[i])) {
			if (size > (1ull << 40))
				return -EINVAL;
			size = size * 16 + (isdigit((unsigned char)line[i]) ? line[i] - '0' :
					    tolower((unsigned char)line[i]) - 'a' + 10);
			i++;
		}
		if (i == 0)
			return -EINVAL;
		const char *sig = NULL;
		if (st->signed_chunks) {
			static const char tag[] = ";chunk-signature=";
			if (ll - i != sizeof(tag) - 1 + 64 || memcmp(line + i, tag, sizeof(tag) - 1))
				return -EINVAL;
			sig = line + i + sizeof(tag) - 1;
			for (int k = 0; k < 64; k++)
				if (!isxdigit((unsigned char)sig[k]))
					return -EINVAL;
		} else if (i != ll) {
			return -EINVAL;
		}
		pos = cr - in + 2;
		if (size > n - pos)
			return -EINVAL;
		if (sig && !chunk_sig_ok(st, sig, in + pos, size))
			return -EACCES;
		if (size == 0) {
			if (st->signed_chunks) {
				if (n - pos != 2 || in[pos] != '\r' || in[pos + 1] != '\n')
					return -EINVAL;
			} else {
				/* Trailer lines (checksums) until an empty line. */
				for (;;) {
					const char *e = NULL;
					for (size_t j = pos; j + 1 < n; j++)
						if (in[j] == '\r' && in[j + 1] == '\n') {
							e = in + j;
							break;
						}
					if (!e)
						return -EINVAL;
					bool empty = e == in + pos;
					pos = e - in + 2;
					if (empty)
						break;
				}
				if (pos != n)
					return -EINVAL;
			}
			return o;
		}
		if (size > cap - o)
			return -E2BIG;
		memcpy(out + o, in + pos, size);
		o += size;
		pos += size;
		if (n - pos < 2 || in[pos] != '\r' || in[pos + 1] != '\n')
			return -EINVAL;
		pos += 2;
	}
}
