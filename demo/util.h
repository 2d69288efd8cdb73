/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the demo programs: a growable string buffer,
 * logging to stderr, clocks, hex/base64, percent-encoding, size parsing.
 * Nothing here knows about HTTP or S3.
 */
#ifndef DEMO_UTIL_H
#define DEMO_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A growable byte buffer, always NUL-terminated.  On allocation failure the
 * buffer is marked failed and further appends are ignored. */
struct sbuf {
	char *p;
	size_t len, cap;
	bool failed;
};

void sb_init(struct sbuf *b);
void sb_free(struct sbuf *b);
void sb_reset(struct sbuf *b);
void sb_add(struct sbuf *b, const void *s, size_t n);
void sb_adds(struct sbuf *b, const char *s);
void sb_addc(struct sbuf *b, char c);
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with XML special characters escaped. */
void sb_add_xml(struct sbuf *b, const char *s, size_t n);
/* Appends s percent-encoded the AWS way (RFC 3986 unreserved kept); keeps '/'
 * when keep_slash. */
void sb_add_uri(struct sbuf *b, const char *s, size_t n, bool keep_slash);
void sb_add_hex(struct sbuf *b, const unsigned char *s, size_t n);

/* Logging: "prog: message" on stderr with a UTC timestamp. */
void log_init(const char *prog);
void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int log_verbose;
#define dbg(...) do { if (log_verbose) logmsg(__VA_ARGS__); } while (0)

uint64_t now_ns(void);       /* CLOCK_MONOTONIC */
uint64_t now_ms(void);

void hex_encode(char *out, const unsigned char *in, size_t n);
/* Returns the number of bytes decoded, or -1 on a bad digit/odd length. */
ssize_t hex_decode(unsigned char *out, size_t cap, const char *in, size_t n);
/* Returns the decoded length or -1; out must hold 3*n/4+3 bytes. */
ssize_t b64_decode(unsigned char *out, const char *in, size_t n);
void b64_encode(char *out, const unsigned char *in, size_t n);

/* Decodes %XX escapes (and '+' when plus_space) into out (cap >= n+1,
 * NUL-terminated).  Returns the decoded length or -1 on a malformed escape. */
ssize_t uri_decode(char *out, const char *in, size_t n, bool plus_space);

/* "16MiB", "64k", "1G", "4096": bytes.  Returns 0 or -EINVAL. */
int parse_size(const char *s, uint64_t *out);
/* "10s", "500ms", "2m", "1.5": milliseconds.  Returns 0 or -EINVAL. */
int parse_duration_ms(const char *s, uint64_t *out);
/* Whole decimal number within [min, max].  Returns 0 or -EINVAL. */
int parse_long(const char *s, long min, long max, long *out);

/* Case-insensitive compare of a counted string with a C string. */
bool strn_ieq(const char *a, size_t alen, const char *b);

/* Formats t (Unix seconds) as RFC 1123 / ISO 8601 with milliseconds. */
void fmt_http_date(char out[32], time_t t);
void fmt_iso_date(char out[32], time_t t);

/* Fills buf with n random bytes (getrandom, falling back to a PRNG). */
void random_bytes(void *buf, size_t n);

#endif
