/* SPDX-License-Identifier: MIT */
/*
 * Outgoing HTTP connections (see client.h).  Pooled connections can be
 * closed by the server at any moment; callers retry once on a fresh one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int endpoint_parse(struct endpoint *e, const char *url, const char **why)
{
	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->mu, NULL);
	if (strncmp(url, "http://", 7)) {
		*why = strncmp(url, "https://", 8) ? "the URL must start with http://" :
		       "https is not supported (put a TLS terminator in front)";
		return -EINVAL;
	}
	const char *h = url + 7, *end = h + strlen(h);
	if (end > h && end[-1] == '/')
		end--;
	if (memchr(h, '/', end - h) || memchr(h, '@', end - h) || end == h) {
		*why = "expected http://HOST[:PORT] with no path";
		return -EINVAL;
	}
	const char *colon = NULL;
	if (*h == '[') {
		const char *rb = memchr(h, ']', end - h);
		if (!rb) {
			*why = "unbalanced [ in IPv6 address";
			return -EINVAL;
		}
		if ((size_t)(rb - h - 1) >= sizeof(e->host))
			goto toolong;
		memcpy(e->host, h + 1, rb - h - 1);
		if (rb + 1 < end) {
			if (rb[1] != ':') {
				*why = "expected :PORT after ]";
				return -EINVAL;
			}
			colon = rb + 1;
		}
	} else {
		colon = memchr(h, ':', end - h);
		size_t hl = (colon ? colon : end) - h;
		if (hl >= sizeof(e->host))
			goto toolong;
		memcpy(e->host, h, hl);
	}
	if (colon) {
		size_t pl = end - colon - 1;
		if (!pl || pl > 5 || strspn(colon + 1, "0123456789") < pl) {
			*why = "bad port";
			return -EINVAL;
		}
		memcpy(e->port, colon + 1, pl);
	} else {
		strcpy(e->port, "80");
	}
	if (atoi(e->port) < 1 || atoi(e->port) > 65535) {
		*why = "bad port";
		return -EINVAL;
	}
	snprintf(e->hostport, sizeof(e->hostport), "%.*s", (int)(end - h), h);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	if (getaddrinfo(e->host, e->port, &hints, &res)) {
		*why = "cannot resolve the host";
		return -EHOSTUNREACH;
	}
	memcpy(&e->addr, res->ai_addr, res->ai_addrlen);
	e->alen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
toolong:
	*why = "host name too long";
	return -EINVAL;
}

void endpoint_free(struct endpoint *e)
{
	pthread_mutex_lock(&e->mu);
	while (e->nidle)
		close(e->idle[--e->nidle]);
	pthread_mutex_unlock(&e->mu);
	pthread_mutex_destroy(&e->mu);
}

int endpoint_connect(struct endpoint *e, int timeout_ms)
{
	int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&e->addr, e->alen) && errno != EINPROGRESS) {
		int err = -errno;
		close(fd);
		return err;
	}
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int r;
	do
		r = poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (r <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || soerr) {
		close(fd);
		return r == 0 ? -ETIMEDOUT : soerr ? -soerr : -EIO;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

int endpoint_get(struct endpoint *e, int timeout_ms, bool *reused)
{
	for (;;) {
		int fd = -1;
		pthread_mutex_lock(&e->mu);
		if (e->nidle)
			fd = e->idle[--e->nidle];
		pthread_mutex_unlock(&e->mu);
		if (fd < 0)
			break;
		/* An idle connection with something to read has been closed
		 * (or broken) by the server: drop it. */
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 0) != 0) {
			close(fd);
			continue;
		}
		*reused = true;
		return fd;
	}
	*reused = false;
	return endpoint_connect(e, timeout_ms);
}

void endpoint_put(struct endpoint *e, int fd)
{
	pthread_mutex_lock(&e->mu);
	if (e->nidle < (int)(sizeof(e->idle) / sizeof(e->idle[0]))) {
		e->idle[e->nidle++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&e->mu);
	if (fd >= 0)
		close(fd);
}
