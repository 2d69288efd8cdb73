/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/S3 server loop shared by storaged and s3proxy: a listening
 * socket, one thread per connection under a connection cap, keep-alive,
 * limits on slow or oversized heads, S3 error XML for every failure, and a
 * clean shutdown on SIGTERM/SIGINT that lets in-flight requests finish.
 */
#ifndef DEMO_SERVER_H
#define DEMO_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "s3.h"
#include "util.h"

struct s3_req {
	struct http_conn *c;
	struct http_msg *m;
	char reqid[20];
	struct s3_target t;
	struct s3_query q;
	const char *method;
	bool is_head;
	bool close_after;       /* handler asks to close the connection */
	bool responded;
	int status;
	char resource[512];     /* for error documents (truncated path) */
};

typedef void (*s3_handler)(struct s3_req *r, void *arg);

struct server_cfg {
	const char *name;
	const char *host;
	int port;
	int max_conns;
	int idle_ms;            /* keep-alive idle and per-read inactivity */
	int head_ms;            /* whole request head must arrive within this */
	size_t max_header;
	/* Descriptor budget: what one connection may hold besides its own
	 * socket (backend sockets, object files), and what the process keeps
	 * open regardless (pooled backend connections).  max_conns is lowered
	 * at start when RLIMIT_NOFILE cannot cover it, so a full house of
	 * clients never leaves a request without the descriptors it needs. */
	int fds_per_conn;
	int fds_fixed;
	s3_handler handler;
	void *arg;
};

/* Set by SIGTERM/SIGINT; handlers may poll it. */
extern volatile int server_stopping;

/* Binds, prints "listening on HOST:PORT", serves until SIGTERM/SIGINT, then
 * waits for connections to finish.  Returns 0, or 1 when it cannot listen. */
int server_run(const struct server_cfg *cfg);

/* Connections still being served. */
int server_active(void);

/* Complete response with an in-memory body.  hdrs are extra header lines,
 * each ending in "\r\n" (may be NULL).  Returns 0 or -errno. */
int s3_respond(struct s3_req *r, int status, const char *hdrs, const void *body, size_t len);
int s3_respond_xml(struct s3_req *r, int status, const struct sbuf *xml);
/* S3 error document. */
int s3_error(struct s3_req *r, int status, const char *code, const char *msg);
/* Head only, for a body the caller streams with http_write_all. */
int s3_send_head(struct s3_req *r, int status, const char *hdrs, uint64_t content_length);
/* "100 Continue" when the client asked for it. */
int s3_continue(struct s3_req *r);

#endif
