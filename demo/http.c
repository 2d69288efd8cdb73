/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 message reading and writing for the demo programs (see http.h).
 * Framing is entirely http-parser's; this file adds the limits a server
 * exposed to clients needs (head size, slow heads, idle reads) and rejects
 * ambiguous framing that proxies and servers could disagree on.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "http.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

enum { HS_NONE, HS_FIELD, HS_VALUE };

static int on_url(http_parser *p, const char *at, size_t n);
static int on_status(http_parser *p, const char *at, size_t n);
static int on_header_field(http_parser *p, const char *at, size_t n);
static int on_header_value(http_parser *p, const char *at, size_t n);
static int on_headers_complete(http_parser *p);
static int on_body(http_parser *p, const char *at, size_t n);
static int on_message_complete(http_parser *p);

static const http_parser_settings settings = {
	.on_url = on_url,
	.on_status = on_status,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

static void set_err(struct http_msg *m, int status, const char *code, const char *msg)
{
	if (m->err_status)
		return;
	m->err_status = status;
	m->err_code = code;
	m->err_msg = msg;
}

/* Appends to the head store; fails (431) when the head outgrows it. */
static int store(struct http_conn *c, const char *at, size_t n)
{
	if (c->hlen + n + 1 > c->max_header) {
		set_err(&c->msg, 431, "RequestHeaderSectionTooLarge",
			"Your request header section exceeds the maximum allowed size.");
		return -1;
	}
	memcpy(c->hstore + c->hlen, at, n);
	c->hlen += n;
	c->hstore[c->hlen] = 0;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
	struct http_conn *c = p->data;
	if (!c->msg.url_len)
		c->msg.url = (const char *)(uintptr_t)c->hlen; /* offset until complete */
	c->msg.url_len += n;
	return store(c, at, n);
}

static int on_status(http_parser *p, const char *at, size_t n)
{
	return 0;
}

static void end_value(struct http_conn *c)
{
	if (c->hstate != HS_VALUE)
		return;
	struct http_hdr *h = &c->msg.hdr[c->msg.nhdr++];
	/* Offsets now, pointers once the head is complete. */
	h->name = (const char *)(uintptr_t)c->name_off;
	h->nlen = c->val_off - c->name_off - 1;
	h->value = (const char *)(uintptr_t)c->val_off;
	h->vlen = c->hlen - c->val_off;
	c->hlen++; /* keep the NUL terminator */
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
	struct http_conn *c = p->data;

	if (c->hstate != HS_FIELD) {
		if (c->hstate == HS_NONE && c->msg.url_len)
			c->hlen++; /* terminate the url */
		end_value(c);
		if (c->msg.nhdr >= HTTP_MAX_HDRS) {
			set_err(&c->msg, 431, "RequestHeaderSectionTooLarge",
				"Your request has too many header fields.");
			return -1;
		}
		c->name_off = c->hlen;
		c->hstate = HS_FIELD;
	}
	return store(c, at, n);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
	struct http_conn *c = p->data;

	if (c->hstate != HS_VALUE) {
		if (store(c, "", 1))  /* NUL after the name */
			return -1;
		c->val_off = c->hlen;
		c->hstate = HS_VALUE;
	}
	return store(c, at, n);
}

static void trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*n)--;
	}
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

/* RFC 9110 token characters: anything else in a field name (a space
 * before the colon, say) is a classic smuggling vector and is refused. */
static bool is_token(const char *s, size_t n)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c && strchr(extra, c))))
			return false;
	}
	return true;
}

static int on_headers_complete(http_parser *p)
{
	struct http_conn *c = p->data;
	struct http_msg *m = &c->msg;
	int ncl = 0, nte = 0;

	if (c->hstate == HS_NONE && m->url_len)
		c->hlen++;
	end_value(c);
	if (m->url_len)
		m->url = c->hstore + (uintptr_t)m->url;
	else
		m->url = "";
	for (int i = 0; i < m->nhdr; i++) {
		struct http_hdr *h = &m->hdr[i];
		h->name = c->hstore + (uintptr_t)h->name;
		h->value = c->hstore + (uintptr_t)h->value;
		trim(&h->value, &h->vlen);
		if (!is_token(h->name, h->nlen))
			set_err(m, 400, "InvalidRequest", "Malformed header field name.");
		if (strn_ieq(h->name, h->nlen, "content-length"))
			ncl++;
		else if (strn_ieq(h->name, h->nlen, "transfer-encoding")) {
			nte++;
			if (!strn_ieq(h->value, h->vlen, "chunked"))
				set_err(m, 400, "InvalidRequest",
					"Unsupported Transfer-Encoding.");
		} else if (strn_ieq(h->name, h->nlen, "expect")) {
			if (strn_ieq(h->value, h->vlen, "100-continue"))
				m->expect_continue = true;
		}
	}
	/* Framing two implementations could read differently is refused. */
	if (ncl > 1 || nte > 1 || (ncl && nte))
		set_err(m, 400, "InvalidRequest",
			"Ambiguous message framing (Content-Length/Transfer-Encoding).");
	m->headers_done = true;
	m->method = p->method;
	m->status = p->status_code;
	m->chunked = (p->flags & F_CHUNKED) != 0;
	m->content_length = -1;
	if (ncl == 1 && !m->chunked)
		m->content_length = (int64_t)p->content_length;
	m->keep_alive = http_should_keep_alive(p);
	if (m->err_status)
		return -1;
	http_parser_pause(p, 1);
	return c->no_body ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
	struct http_conn *c = p->data;

	/* The reader feeds no more than fits, so this never overflows; data
	 * received straight into the sink is already in place. */
	if (c->sink) {
		if (c->sink + c->sink_len != at)
			memcpy(c->sink + c->sink_len, at, n);
		c->sink_len += n;
	}
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct http_conn *c = p->data;
	c->msg.complete = true;
	http_parser_pause(p, 1);
	return 0;
}

int http_conn_init(struct http_conn *c, int fd, enum http_parser_type type,
		   size_t max_header, int idle_ms)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->max_header = max_header;
	c->idle_ms = idle_ms;
	c->rbuf = malloc(HTTP_RBUF_SIZE);
	c->hstore = malloc(max_header + 1);
	if (!c->rbuf || !c->hstore) {
		http_conn_free(c);
		return -ENOMEM;
	}
	http_parser_init(&c->parser, type);
	c->parser.data = c;
	http_conn_next(c);
	return 0;
}

void http_conn_free(struct http_conn *c)
{
	free(c->rbuf);
	free(c->hstore);
	c->rbuf = c->hstore = NULL;
}

void http_conn_next(struct http_conn *c)
{
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.content_length = -1;
	c->hlen = 0;
	c->head_bytes = 0;
	c->hstate = HS_NONE;
	c->sink = NULL;
	c->sink_len = c->sink_cap = 0;
	c->no_body = false;
}

ssize_t http_feed(struct http_conn *c, const char *p, size_t n)
{
	if (c->msg.err_status)
		return -1;
	size_t k = http_parser_execute(&c->parser, &settings, p, n);
	enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
	if (!c->msg.headers_done)
		c->head_bytes += k;
	if (e == HPE_PAUSED) {
		http_parser_pause(&c->parser, 0);
		return k;
	}
	if (e != HPE_OK) {
		if (e == HPE_HEADER_OVERFLOW)
			set_err(&c->msg, 431, "RequestHeaderSectionTooLarge",
				"Your request header section exceeds the maximum allowed size.");
		else if (e == HPE_UNEXPECTED_CONTENT_LENGTH)
			set_err(&c->msg, 400, "InvalidRequest",
				"Ambiguous message framing (Content-Length/Transfer-Encoding).");
		else
			set_err(&c->msg, 400, "BadRequest", http_errno_description(e));
		return -1;
	}
	if (!c->msg.headers_done && c->head_bytes > c->max_header) {
		set_err(&c->msg, 431, "RequestHeaderSectionTooLarge",
			"Your request header section exceeds the maximum allowed size.");
		return -1;
	}
	return k;
}

int http_wait_readable(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	for (;;) {
		int r = poll(&pfd, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		return r;
	}
}

/* Fills rbuf from the socket within ms.  1 data, 0 EOF, -ETIMEDOUT, -errno. */
static int fill(struct http_conn *c, int ms)
{
	if (c->rpos == c->rend)
		c->rpos = c->rend = 0;
	if (c->rend == HTTP_RBUF_SIZE) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rend - c->rpos);
		c->rend -= c->rpos;
		c->rpos = 0;
	}
	int r = http_wait_readable(c->fd, ms);
	if (r < 0)
		return r;
	if (r == 0)
		return -ETIMEDOUT;
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf + c->rend, HTTP_RBUF_SIZE - c->rend, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			c->eof = true;
			return 0;
		}
		c->rend += n;
		c->bytes_in += n;
		return 1;
	}
}

int http_read_head(struct http_conn *c, int head_ms)
{
	struct http_msg *m = &c->msg;
	uint64_t start = now_ms();
	bool started = false;

	for (;;) {
		if (c->rpos < c->rend) {
			started = true;
			ssize_t k = http_feed(c, c->rbuf + c->rpos, c->rend - c->rpos);
			if (k < 0)
				return -1;
			c->rpos += k;
			if (m->headers_done) {
				/* The parser paused on the head's final LF: feed
				 * that one byte so a body-less message completes
				 * now, without touching any body bytes. */
				if (c->rpos < c->rend) {
					k = http_feed(c, c->rbuf + c->rpos, 1);
					if (k < 0)
						return -1;
					c->rpos += k;
				}
				return 0;
			}
		}
		if (c->eof)
			return started ? -1 : 1;
		int ms;
		if (!started) {
			/* Idle keep-alive: wake up now and then to notice stop. */
			if (c->stop && *c->stop)
				return 1;
			uint64_t el = now_ms() - start;
			if (el >= (uint64_t)c->idle_ms)
				return 1;
			ms = c->idle_ms - el;
			if (c->stop && ms > 200)
				ms = 200;
		} else {
			uint64_t el = now_ms() - start;
			if (el >= (uint64_t)head_ms) {
				set_err(m, 408, "RequestTimeout",
					"Your socket connection to the server was not read from or written to within the timeout period.");
				return -1;
			}
			ms = head_ms - el;
			if (ms > c->idle_ms)
				ms = c->idle_ms;
		}
		int r = fill(c, ms);
		if (r == -ETIMEDOUT) {
			if (!started)
				continue;
			if (now_ms() - start >= (uint64_t)head_ms || ms == c->idle_ms) {
				set_err(m, 408, "RequestTimeout",
					"Your socket connection to the server was not read from or written to within the timeout period.");
				return -1;
			}
			continue;
		}
		if (r < 0)
			return -1;
		if (r == 0 && c->rpos == c->rend)
			return started ? -1 : 1;
		if (c->rpos < c->rend)
			started = true;
	}
}

ssize_t http_read_body(struct http_conn *c, void *dst, size_t cap)
{
	struct http_msg *m = &c->msg;

	if (!m->headers_done || m->err_status)
		return -1;
	c->sink = dst;
	c->sink_len = 0;
	c->sink_cap = cap;
	while (!m->complete && c->sink_len < cap) {
		size_t room = cap - c->sink_len;
		if (c->rpos < c->rend) {
			/* Never feed more than fits: body bytes <= fed bytes. */
			size_t n = c->rend - c->rpos;
			if (n > room)
				n = room;
			ssize_t k = http_feed(c, c->rbuf + c->rpos, n);
			if (k < 0)
				goto fail;
			c->rpos += k;
			continue;
		}
		if (c->eof)
			goto fail;
		int r = http_wait_readable(c->fd, c->idle_ms);
		if (r <= 0)
			goto fail;
		if (!m->chunked && c->parser.content_length != ULLONG_MAX &&
		    c->parser.content_length > 0) {
			/* Known length: receive straight into the caller's buffer
			 * and let the parser only account for it. */
			size_t want = room;
			if (want > c->parser.content_length)
				want = c->parser.content_length;
			char *at = (char *)dst + c->sink_len;
			ssize_t n;
			do
				n = recv(c->fd, at, want, 0);
			while (n < 0 && errno == EINTR);
			if (n <= 0) {
				if (n == 0)
					c->eof = true;
				goto fail;
			}
			c->bytes_in += n;
			ssize_t k = http_feed(c, at, n);
			if (k != n)
				goto fail;
			continue;
		}
		r = fill(c, c->idle_ms);
		if (r <= 0)
			goto fail;
	}
	c->sink = NULL;
	return c->sink_len;
fail:
	c->sink = NULL;
	return -1;
}

ssize_t http_read_body_all(struct http_conn *c, void *dst, size_t cap)
{
	size_t got = 0;

	while (!c->msg.complete) {
		if (got == cap) {
			char tmp[1];
			ssize_t n = http_read_body(c, tmp, 1);
			if (n < 0)
				return -1;
			if (n > 0)
				return -2;
			continue;
		}
		ssize_t n = http_read_body(c, (char *)dst + got, cap - got);
		if (n < 0)
			return -1;
		got += n;
	}
	return got;
}

int http_drain_body(struct http_conn *c, uint64_t max)
{
	char tmp[16384];
	uint64_t total = 0;

	while (!c->msg.complete) {
		ssize_t n = http_read_body(c, tmp, sizeof(tmp));
		if (n < 0)
			return -1;
		total += n;
		if (total > max)
			return -1;
	}
	return 0;
}

const char *http_hdr_get(const struct http_msg *m, const char *name, size_t *vlen)
{
	for (int i = 0; i < m->nhdr; i++) {
		if (strn_ieq(m->hdr[i].name, m->hdr[i].nlen, name)) {
			if (vlen)
				*vlen = m->hdr[i].vlen;
			return m->hdr[i].value;
		}
	}
	return NULL;
}

const char *http_hdr_str(const struct http_msg *m, const char *name, char *buf, size_t cap)
{
	size_t n;
	const char *v = http_hdr_get(m, name, &n);
	if (!v || !cap)
		return NULL;
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, v, n);
	buf[n] = 0;
	return buf;
}

int http_hdr_count(const struct http_msg *m, const char *name)
{
	int k = 0;
	for (int i = 0; i < m->nhdr; i++)
		if (strn_ieq(m->hdr[i].name, m->hdr[i].nlen, name))
			k++;
	return k;
}

int http_write_all(int fd, const void *p, size_t n)
{
	struct iovec iov = { .iov_base = (void *)p, .iov_len = n };
	return http_writev_all(fd, &iov, 1);
}

int http_writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = n };
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= w;
		}
	}
	return 0;
}

void http_linger_close(int fd)
{
	char tmp[16384];
	uint64_t end = now_ms() + 1000;
	size_t total = 0;

	shutdown(fd, SHUT_WR);
	while (total < (64u << 20)) {
		uint64_t t = now_ms();
		if (t >= end)
			break;
		if (http_wait_readable(fd, end - t) <= 0)
			break;
		ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
		if (n <= 0)
			break;
		total += n;
	}
	close(fd);
}

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Payload Too Large";
	case 416: return "Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Unknown";
	}
}
