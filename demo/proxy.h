/* SPDX-License-Identifier: MIT */
/*
 * s3proxy's shared state and the interfaces between its parts:
 * proxy_auth.c checks SigV4 and reads request bodies, proxy_backend.c
 * routes, forwards and fans requests out to the backends, and s3proxy.c
 * implements the S3 operations on top of both.
 */
#ifndef DEMO_PROXY_H
#define DEMO_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "server.h"
#include "sigv4.h"
#include "util.h"

#define MAX_BACKENDS 64
#define MAX_CREDS 64

struct cred {
	char access_key[129];
	char secret[129];
};

/* Set once by main before serving; read-only afterwards. */
struct proxy_cfg {
	struct endpoint be[MAX_BACKENDS];
	int nbe;
	struct cred creds[MAX_CREDS];
	int ncreds;
	const char *region;
	struct sigv4_creds be_auth;
	bool be_signed;
	uint64_t max_body;
	int backend_ms;
	int skew_s;
};
extern struct proxy_cfg pcfg;

/* ---------------------------------------------------------------------- */
/* proxy_auth.c                                                             */

enum payload_kind { PAYLOAD_HEX, PAYLOAD_UNSIGNED, PAYLOAD_STREAMING, PAYLOAD_STREAMING_UNSIGNED, PAYLOAD_ABSENT };

struct auth_state {
	struct sigv4_auth a;
	unsigned char key[32];
	char amzdate[17];
	char scope[160];
	enum payload_kind kind;
	char payload_hash[65];
};

/* A request body, decoded and verified. */
struct body {
	char *p;
	size_t len;
};

/* Parses and checks the Authorization header, the date (skew) and the
 * credential scope, and classifies x-amz-content-sha256.  Returns 0, or
 * responds with the S3 error and returns -1. */
int check_auth_head(struct s3_req *r, struct auth_state *st);
/* Checks the signature over the canonical request (st->payload_hash must be
 * set).  Returns 0, or responds and returns -1. */
int verify_signature(struct s3_req *r, struct auth_state *st);
/* Reads the body into a fresh buffer sized from Content-Length and checks
 * its hash or its aws-chunked chunk signatures (decoding it).  Returns 0,
 * or responds and returns -1. */
int read_body(struct s3_req *r, struct auth_state *st, struct body *b);

/* ---------------------------------------------------------------------- */
/* proxy_backend.c                                                          */

/* The backend that owns bucket/key (rendezvous hashing). */
int route(const char *bucket, const char *key, size_t kl);
/* Forwards an object request to its backend and streams the response
 * back.  Always responds. */
void forward_object(struct s3_req *r, const struct body *b);

/* One backend call with everything in memory, for fan-out. */
struct call {
	int status;
	struct sbuf body;
	struct sbuf head;       /* response headers (call_object only) */
	int err;
};

/* Runs a bucket-level request against one backend (res->err = -errno when
 * it could not be reached). */
void call_backend(struct endpoint *e, const char *method, const char *bucket,
		  const char *query, const char *body, size_t blen,
		  const char *content_md5, struct call *res);

/* One object request to backend e with extra header lines hlines
 * ("name: value\r\n" each, may be NULL), the response body read whole (up
 * to max bytes) and its headers kept in res->head.  Free both sbufs. */
void call_object(struct endpoint *e, const char *method, const char *bucket, const char *key,
		 size_t kl, const char *query, const char *hlines, const char *body, size_t blen,
		 uint64_t max, struct call *res);

struct fan {
	struct endpoint *e;
	const char *method, *bucket, *query, *body, *md5;
	size_t blen;
	struct call res;
};

/* Thread body: call_backend with a struct fan's arguments. */
void *fan_main(void *p);
/* The same call on every backend in parallel; NULL when out of memory.
 * Free with fan_free. */
struct fan *fan_out(const char *method, const char *bucket, const char *query);
void fan_free(struct fan *f);
/* Passes a backend's answer (or 503 when unreachable) to the client. */
void pass_error(struct s3_req *r, const struct call *c);
/* Whether an error document carries this <Code>. */
bool xml_has_code(const struct sbuf *b, const char *code);

#endif
