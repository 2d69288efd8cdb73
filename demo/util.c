/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers for the demo programs (see util.h): string buffers,
 * logging, clocks and the small encoders every S3 program needs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <pthread.h>

int log_verbose;
static const char *log_prog = "demo";

void sb_init(struct sbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void sb_free(struct sbuf *b)
{
	free(b->p);
	sb_init(b);
}

void sb_reset(struct sbuf *b)
{
	b->len = 0;
	b->failed = false;
	if (b->p)
		b->p[0] = 0;
}

static bool sb_grow(struct sbuf *b, size_t need)
{
	if (b->failed)
		return false;
	if (b->len + need + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + need + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->failed = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void sb_add(struct sbuf *b, const void *s, size_t n)
{
	if (!sb_grow(b, n) || !n)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void sb_adds(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

void sb_addc(struct sbuf *b, char c)
{
	sb_add(b, &c, 1);
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	char tmp[512];

	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		sb_add(b, tmp, n);
		return;
	}
	if (!sb_grow(b, n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, n + 1, fmt, ap);
	va_end(ap);
	b->len += n;
}

void sb_add_xml(struct sbuf *b, const char *s, size_t n)
{
	size_t run = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		const char *rep = NULL;
		char num[8];

		switch (c) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&apos;"; break;
		default:
			if (c < 0x20 && c != '\t' && c != '\n') {
				snprintf(num, sizeof(num), "&#x%X;", c);
				rep = num;
			}
		}
		if (rep) {
			sb_add(b, s + run, i - run);
			sb_adds(b, rep);
			run = i + 1;
		}
	}
	sb_add(b, s + run, n - run);
}

static bool unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

void sb_add_uri(struct sbuf *b, const char *s, size_t n, bool keep_slash)
{
	static const char hx[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (unreserved(c) || (keep_slash && c == '/')) {
			sb_addc(b, c);
		} else {
			char e[3] = { '%', hx[c >> 4], hx[c & 15] };
			sb_add(b, e, 3);
		}
	}
}

void sb_add_hex(struct sbuf *b, const unsigned char *s, size_t n)
{
	char tmp[129];

	while (n) {
		size_t k = n > 64 ? 64 : n;
		hex_encode(tmp, s, k);
		sb_add(b, tmp, 2 * k);
		s += k;
		n -= k;
	}
}

void log_init(const char *prog)
{
	log_prog = prog;
	const char *v = getenv("DEMO_VERBOSE");
	if (v && *v && strcmp(v, "0"))
		log_verbose = 1;
}

void logmsg(const char *fmt, ...)
{
	char buf[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(buf, sizeof(buf), "%02d:%02d:%02d.%03ld %s: ", tm.tm_hour,
			 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_prog);
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	size_t len = n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(buf) - 2)
		len = sizeof(buf) - 2;
	buf[len++] = '\n';
	fwrite(buf, 1, len, stderr);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

uint64_t now_ms(void)
{
	return now_ns() / 1000000;
}

void hex_encode(char *out, const unsigned char *in, size_t n)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = 0;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

ssize_t hex_decode(unsigned char *out, size_t cap, const char *in, size_t n)
{
	if (n % 2 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int h = hexval(in[2 * i]), l = hexval(in[2 * i + 1]);
		if (h < 0 || l < 0)
			return -1;
		out[i] = h << 4 | l;
	}
	return n / 2;
}

static int b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

ssize_t b64_decode(unsigned char *out, const char *in, size_t n)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0, pad = 0;

	for (size_t i = 0; i < n; i++) {
		if (in[i] == '=') {
			pad++;
			continue;
		}
		if (pad)
			return -1;
		int v = b64val(in[i]);
		if (v < 0)
			return -1;
		acc = acc << 6 | v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = acc >> bits;
		}
	}
	if (pad > 2 || (n % 4 && pad))
		return -1;
	return o;
}

void b64_encode(char *out, const unsigned char *in, size_t n)
{
	static const char tb[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0, i;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = in[i] << 16 | in[i + 1] << 8 | in[i + 2];
		out[o++] = tb[v >> 18];
		out[o++] = tb[(v >> 12) & 63];
		out[o++] = tb[(v >> 6) & 63];
		out[o++] = tb[v & 63];
	}
	if (i < n) {
		uint32_t v = in[i] << 16 | (i + 1 < n ? in[i + 1] << 8 : 0);
		out[o++] = tb[v >> 18];
		out[o++] = tb[(v >> 12) & 63];
		out[o++] = i + 1 < n ? tb[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = 0;
}

ssize_t uri_decode(char *out, const char *in, size_t n, bool plus_space)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (in[i] == '%') {
			if (i + 2 >= n)
				return -1;
			int h = hexval(in[i + 1]), l = hexval(in[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			out[o++] = h << 4 | l;
			i += 2;
		} else if (in[i] == '+' && plus_space) {
			out[o++] = ' ';
		} else {
			out[o++] = in[i];
		}
	}
	out[o] = 0;
	return o;
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	uint64_t mul = 1;
	if (*end) {
		switch (tolower((unsigned char)*end)) {
		case 'b': mul = 1; break;
		case 'k': mul = 1ull << 10; break;
		case 'm': mul = 1ull << 20; break;
		case 'g': mul = 1ull << 30; break;
		case 't': mul = 1ull << 40; break;
		default: return -EINVAL;
		}
		end++;
		/* Accept K, KB, KiB, k, kib. */
		if (mul > 1 && (*end == 'i' || *end == 'I'))
			end++;
		if (mul > 1 && (*end == 'b' || *end == 'B'))
			end++;
		if (*end)
			return -EINVAL;
	}
	v *= mul;
	if (v > 1e18)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	if (!*end || !strcmp(end, "s"))
		v *= 1000;
	else if (!strcmp(end, "ms"))
		;
	else if (!strcmp(end, "m"))
		v *= 60000;
	else if (!strcmp(end, "h"))
		v *= 3600000;
	else
		return -EINVAL;
	if (v > 1e15)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

int parse_long(const char *s, long min, long max, long *out)
{
	char *end;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

bool strn_ieq(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);
	return alen == blen && strncasecmp(a, b, alen) == 0;
}

void fmt_http_date(char out[32], time_t t)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

void fmt_iso_date(char out[32], time_t t)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

void random_bytes(void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* Not security relevant: ids and test data only. */
			static uint64_t x = 0x9e3779b97f4a7c15ull;
			static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
			pthread_mutex_lock(&m);
			x ^= now_ns();
			for (; n; n--) {
				x ^= x << 13; x ^= x >> 7; x ^= x << 17;
				*p++ = x;
			}
			pthread_mutex_unlock(&m);
			return;
		}
		p += r;
		n -= r;
	}
}
