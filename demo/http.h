/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 message I/O for the demo programs, on top of Debian's
 * http-parser: reading a request or response head with limits and
 * smuggling checks, reading a body into a caller's buffer (straight from the
 * socket when the framing allows), and writing responses.  The same code
 * serves storaged, s3proxy (both directions) and loadgen.
 */
#ifndef DEMO_HTTP_H
#define DEMO_HTTP_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define HTTP_MAX_HDRS 128
#define HTTP_RBUF_SIZE (64 * 1024)

struct http_hdr {
	const char *name, *value;
	size_t nlen, vlen;
};

struct http_msg {
	int method;                 /* enum http_method (requests) */
	int status;                 /* responses */
	const char *url;
	size_t url_len;
	struct http_hdr hdr[HTTP_MAX_HDRS];
	int nhdr;
	int64_t content_length;     /* -1 when absent */
	bool chunked;
	bool keep_alive;
	bool headers_done;
	bool complete;              /* the whole body has been read */
	bool expect_continue;
	/* Set when the head is malformed or over a limit. */
	int err_status;
	const char *err_code, *err_msg;
};

struct http_conn {
	int fd;
	http_parser parser;
	struct http_msg msg;
	char *rbuf;
	size_t rpos, rend;
	char *hstore;               /* url and header strings, max_header bytes */
	size_t hlen, max_header, head_bytes;
	int hstate;
	size_t name_off, val_off;
	/* Body sink for http_read_body(). */
	char *sink;
	size_t sink_cap, sink_len;
	bool no_body;               /* response to HEAD */
	bool eof;
	int idle_ms;                /* per-read inactivity limit */
	const volatile int *stop;   /* read_head gives up while idle when set */
	uint64_t bytes_in, bytes_out;
};

/* Sets c up on fd (which may be -1 for parse-only use).  type is HTTP_REQUEST
 * or HTTP_RESPONSE.  Returns 0 or -ENOMEM. */
int http_conn_init(struct http_conn *c, int fd, enum http_parser_type type,
		   size_t max_header, int idle_ms);
void http_conn_free(struct http_conn *c);
/* Prepares for the next message on a keep-alive connection. */
void http_conn_next(struct http_conn *c);

/* Parses n bytes (parse-only use and fuzzing).  Returns the bytes consumed
 * (parsing stops after the head and after a complete message), or -1 with
 * msg.err_* set. */
ssize_t http_feed(struct http_conn *c, const char *p, size_t n);

/*
 * Reads a message head within head_ms (slow-client limit).  Returns 0 when
 * the head is complete, 1 when the peer closed (or stop was set) before a
 * byte of a new message, -1 on error with msg.err_status/err_code set
 * (400, 408, 431) or err_status 0 for an I/O error.
 */
int http_read_head(struct http_conn *c, int head_ms);

/*
 * Reads up to cap body bytes into dst.  Returns the count (0 once the body
 * is complete, check msg.complete) or -1 on error/timeout/EOF mid-body.
 */
ssize_t http_read_body(struct http_conn *c, void *dst, size_t cap);
/* Reads the whole body into dst (cap bytes).  Returns the length, or -1 on
 * error, or -2 when the body is longer than cap. */
ssize_t http_read_body_all(struct http_conn *c, void *dst, size_t cap);
/* Discards up to max body bytes; returns 0 when the body is done, -1 if not. */
int http_drain_body(struct http_conn *c, uint64_t max);

/* Looks up a header (case-insensitive); returns its value or NULL. */
const char *http_hdr_get(const struct http_msg *m, const char *name, size_t *vlen);
/* Same, returning a NUL-terminated copy in buf (truncated) or NULL. */
const char *http_hdr_str(const struct http_msg *m, const char *name, char *buf, size_t cap);
/* Counts headers with this name. */
int http_hdr_count(const struct http_msg *m, const char *name);

/* Writes everything; returns 0 or -errno. */
int http_write_all(int fd, const void *p, size_t n);
int http_writev_all(int fd, struct iovec *iov, int n);

/* Waits for fd readable up to ms; 1 ready, 0 timeout, -errno. */
int http_wait_readable(int fd, int ms);

/* Closes a connection after a response without resetting it under the
 * client's feet: shuts the write side and discards input for a moment. */
void http_linger_close(int fd);

const char *http_reason(int status);

#endif
