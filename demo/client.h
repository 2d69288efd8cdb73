/* SPDX-License-Identifier: MIT */
/*
 * The client side of HTTP for s3proxy (towards backends) and loadgen:
 * endpoint URLs, connecting with a timeout, and a small per-endpoint pool
 * of idle keep-alive connections.
 */
#ifndef DEMO_CLIENT_H
#define DEMO_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/socket.h>

struct endpoint {
	char host[256];
	char port[8];
	char hostport[272];     /* for Host: headers */
	struct sockaddr_storage addr;
	socklen_t alen;
	pthread_mutex_t mu;
	int idle[64];
	int nidle;
};

/* Parses "http://host[:port][/]" and resolves it.  Returns 0, -EINVAL
 * (malformed or not http) or -EHOSTUNREACH (cannot resolve); *why explains. */
int endpoint_parse(struct endpoint *e, const char *url, const char **why);
void endpoint_free(struct endpoint *e);
/* Connects within timeout_ms.  Returns the fd or -errno. */
int endpoint_connect(struct endpoint *e, int timeout_ms);
/* An idle pooled connection or -1; *reused tells which. */
int endpoint_get(struct endpoint *e, int timeout_ms, bool *reused);
/* Returns a connection that finished a response cleanly to the pool. */
void endpoint_put(struct endpoint *e, int fd);

#endif
