/* SPDX-License-Identifier: MIT */
/*
 * Connection handling for the demo servers (see server.h).  A thread per
 * connection keeps the model obvious; the cap bounds it, and every read has
 * a deadline so a slow client only ever holds its own thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "server.h"
#include "s3ops.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

volatile int server_stopping;
static atomic_int active_conns;
static atomic_uint_fast64_t reqid_counter;
static uint32_t reqid_base;

struct conn_arg {
	const struct server_cfg *cfg;
	int fd;
};

int server_active(void)
{
	return atomic_load(&active_conns);
}

static void on_signal(int sig)
{
	server_stopping = 1;
}

static int listen_on(const struct server_cfg *cfg)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res;
	char port[16];

	snprintf(port, sizeof(port), "%d", cfg->port);
	int rc = getaddrinfo(cfg->host, port, &hints, &res);
	if (rc) {
		logmsg("cannot resolve listen address %s: %s", cfg->host, gai_strerror(rc));
		return -1;
	}
	int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		logmsg("socket: %s", strerror(errno));
		freeaddrinfo(res);
		return -1;
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 1024)) {
		logmsg("cannot listen on %s:%d: %s", cfg->host, cfg->port, strerror(errno));
		close(fd);
		freeaddrinfo(res);
		return -1;
	}
	freeaddrinfo(res);

	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[64] = "?";
	int p = 0;
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		p = ntohs(s4->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		p = ntohs(s6->sin6_port);
	}
	printf("listening on %s:%d\n", host, p);
	fflush(stdout);
	logmsg("listening on %s:%d", host, p);
	return fd;
}

static bool body_pending(struct s3_req *r)
{
	return !r->m->complete;
}

static int send_head(struct s3_req *r, int status, const char *hdrs, uint64_t len,
		     bool has_len, const void *body, size_t blen)
{
	char date[32], head[1024];
	bool close_conn = r->close_after || !r->m->keep_alive || server_stopping;

	/* Leftover request body: a little is read and dropped so the
	 * connection stays usable, a lot means closing it.  A client still
	 * waiting for "100 Continue" sends no body until it times out, so
	 * waiting for it would hold this answer back: answer now and close,
	 * which tells the client the body is not wanted. */
	if (body_pending(r) && !close_conn) {
		if (r->m->expect_continue)
			close_conn = true;
		else if (r->m->content_length >= 0 && r->m->content_length <= 65536 &&
			 http_drain_body(r->c, 65536) == 0)
			;
		else
			close_conn = true;
	}
	if (close_conn)
		r->close_after = true;
	fmt_http_date(date, time(NULL));
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nServer: poolshim-demo\r\nDate: %s\r\n"
			 "x-amz-request-id: %s\r\n%s",
			 status, http_reason(status), date, r->reqid,
			 close_conn ? "Connection: close\r\n" : "");
	if (has_len && n > 0 && (size_t)n < sizeof(head))
		n += snprintf(head + n, sizeof(head) - n, "Content-Length: %llu\r\n",
			      (unsigned long long)len);
	if (n < 0 || (size_t)n >= sizeof(head))
		return -EOVERFLOW;
	struct iovec iov[4] = {
		{ head, n },
		{ (void *)(hdrs ? hdrs : ""), hdrs ? strlen(hdrs) : 0 },
		{ "\r\n", 2 },
		{ (void *)body, blen },
	};
	r->responded = true;
	r->status = status;
	int rc = http_writev_all(r->c->fd, iov, blen ? 4 : 3);
	if (rc)
		r->close_after = true;
	return rc;
}

int s3_respond(struct s3_req *r, int status, const char *hdrs, const void *body, size_t len)
{
	if (r->responded)
		return -EALREADY;
	return send_head(r, status, hdrs, len, true, r->is_head ? NULL : body,
			 r->is_head ? 0 : len);
}

int s3_respond_xml(struct s3_req *r, int status, const struct sbuf *xml)
{
	if (xml->failed)
		return s3_error(r, 500, "InternalError", "Out of memory.");
	return s3_respond(r, status, "Content-Type: application/xml\r\n", xml->p, xml->len);
}

int s3_error(struct s3_req *r, int status, const char *code, const char *msg)
{
	struct sbuf b;

	if (r->responded)
		return -EALREADY;
	if (status >= 500)
		logmsg("%s %.200s: %d %s: %s", r->method, r->resource, status, code, msg);
	else
		dbg("%s %.200s: %d %s: %s", r->method, r->resource, status, code, msg);
	sb_init(&b);
	s3_error_xml(&b, code, msg, r->resource, r->reqid);
	int rc = s3_respond(r, status, "Content-Type: application/xml\r\n", b.p, b.len);
	sb_free(&b);
	return rc;
}

int s3_send_head(struct s3_req *r, int status, const char *hdrs, uint64_t content_length)
{
	if (r->responded)
		return -EALREADY;
	return send_head(r, status, hdrs, content_length, true, NULL, 0);
}

int s3_continue(struct s3_req *r)
{
	static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
	if (!r->m->expect_continue)
		return 0;
	r->m->expect_continue = false;
	return http_write_all(r->c->fd, msg, sizeof(msg) - 1);
}

static void make_reqid(char out[20])
{
	uint64_t n = atomic_fetch_add(&reqid_counter, 1);
	snprintf(out, 20, "%08X%08X", reqid_base, (unsigned)(n & 0xffffffffu));
}

/* Errors found before a handler runs: always close afterwards. */
static void early_error(struct s3_req *r, int status, const char *code, const char *msg)
{
	r->close_after = true;
	s3_error(r, status, code, msg);
}

static void serve_one(const struct server_cfg *cfg, struct http_conn *c)
{
	for (;;) {
		struct s3_req r;
		memset(&r, 0, sizeof(r));
		r.c = c;
		r.m = &c->msg;
		make_reqid(r.reqid);
		r.method = "-";
		snprintf(r.resource, sizeof(r.resource), "/");

		int rc = http_read_head(c, cfg->head_ms);
		if (rc == 1)
			return;
		if (rc < 0) {
			if (c->msg.err_status) {
				if (c->msg.url_len && c->msg.headers_done)
					snprintf(r.resource, sizeof(r.resource), "%.*s",
						 (int)(c->msg.url_len < 400 ? c->msg.url_len : 400), c->msg.url);
				logmsg("rejected request: %d %s: %s", c->msg.err_status,
				       c->msg.err_code, c->msg.err_msg);
				early_error(&r, c->msg.err_status, c->msg.err_code, c->msg.err_msg);
			}
			return;
		}
		r.method = http_method_str(c->msg.method);
		r.is_head = c->msg.method == HTTP_HEAD;
		size_t ql = 0;
		while (ql < c->msg.url_len && c->msg.url[ql] != '?')
			ql++;
		snprintf(r.resource, sizeof(r.resource), "%.*s", (int)(ql < 500 ? ql : 500), c->msg.url);
		rc = s3_target_parse(c->msg.url, c->msg.url_len, &r.t);
		if (rc == -ENAMETOOLONG) {
			early_error(&r, 400, "KeyTooLongError", "Your key is too long.");
			return;
		}
		if (!rc && r.t.has_key && !s3_key_readable(r.t.key, r.t.key_len)) {
			/* S3 reads keys as UTF-8 and refuses what it cannot. */
			s3_target_free(&r.t);
			rc = -EINVAL;
		}
		if (rc) {
			early_error(&r, 400, "InvalidURI", "Couldn't parse the specified URI.");
			return;
		}
		if (s3_query_parse(r.t.raw_query, r.t.raw_query_len, &r.q)) {
			s3_target_free(&r.t);
			early_error(&r, 400, "InvalidArgument", "Couldn't parse the query string.");
			return;
		}
		cfg->handler(&r, cfg->arg);
		if (!r.responded)
			s3_error(&r, 500, "InternalError", "The request was not answered.");
		s3_target_free(&r.t);
		s3_query_free(&r.q);
		if (r.close_after || !c->msg.complete)
			return;
		http_conn_next(c);
	}
}

static void *conn_main(void *p)
{
	struct conn_arg *a = p;
	const struct server_cfg *cfg = a->cfg;
	int fd = a->fd;
	struct http_conn c;

	free(a);
	if (http_conn_init(&c, fd, HTTP_REQUEST, cfg->max_header, cfg->idle_ms) == 0) {
		c.stop = &server_stopping;
		serve_one(cfg, &c);
		http_conn_free(&c);
	}
	http_linger_close(fd);
	atomic_fetch_sub(&active_conns, 1);
	return NULL;
}

static void refuse(int fd)
{
	struct sbuf b;
	char head[256], id[20];

	make_reqid(id);
	sb_init(&b);
	s3_error_xml(&b, "SlowDown", "Too many connections; reduce your request rate.", "/", id);
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
			 "Content-Type: application/xml\r\nContent-Length: %zu\r\n\r\n", b.len);
	struct iovec iov[2] = { { head, n }, { b.p, b.len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	(void)!sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	sb_free(&b);
	close(fd);
}

/* The connection cap the descriptor limit can honour. */
static int conns_that_fit(const struct server_cfg *cfg)
{
	struct rlimit rl;
	/* stdio, the listening socket, the spare, log and data-directory
	 * descriptors, and some slack. */
	long fixed = 32 + cfg->fds_fixed, per = 1 + cfg->fds_per_conn;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > (rlim_t)INT32_MAX)
		return cfg->max_conns;
	long fit = ((long)rl.rlim_cur - fixed) / per;
	if (fit < 1)
		fit = 1;
	if (fit >= cfg->max_conns)
		return cfg->max_conns;
	logmsg("--max-conns %d lowered to %ld: RLIMIT_NOFILE is %ld and each connection may need %ld "
	       "descriptor(s)", cfg->max_conns, fit, (long)rl.rlim_cur, per);
	return (int)fit;
}

/*
 * accept() failed for want of descriptors (something other than the
 * clients holds them, or the system is out).  Leaving the connection in the
 * backlog makes the client wait for nothing and keeps the listening socket
 * readable, so the loop would spin: the spare descriptor is given up for a
 * moment to take the connection, answer 503 SlowDown and close it.
 */
static int spare_fd = -1;

static void shed_one(int lfd)
{
	if (spare_fd >= 0) {
		close(spare_fd);
		spare_fd = -1;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			refuse(fd);
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	/* Without the spare (another thread took the number), just wait. */
	if (spare_fd < 0)
		usleep(50000);
}

int server_run(const struct server_cfg *cfg)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	random_bytes(&reqid_base, sizeof(reqid_base));

	int lfd = listen_on(cfg);
	if (lfd < 0)
		return 1;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 512 * 1024);
	uint64_t refused = 0, starved = 0, starved_logged_ms = 0;
	int max_conns = conns_that_fit(cfg);
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	while (!server_stopping) {
		int r = http_wait_readable(lfd, 200);
		if (r <= 0)
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				int e = errno;
				/* One line now and then, not one per connection. */
				if (!starved++ || now_ms() - starved_logged_ms >= 10000) {
					logmsg("accept: %s (%llu time(s) so far): refusing with 503",
					       strerror(e), (unsigned long long)starved);
					starved_logged_ms = now_ms();
				}
				shed_one(lfd);
			}
			continue;
		}
		if (atomic_load(&active_conns) >= max_conns) {
			if (!refused++ || refused % 1000 == 0)
				logmsg("connection cap %d reached, refused %llu so far",
				       max_conns, (unsigned long long)refused);
			refuse(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct timeval tv = { .tv_sec = cfg->idle_ms / 1000, .tv_usec = (cfg->idle_ms % 1000) * 1000 };
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		struct conn_arg *a = malloc(sizeof(*a));
		if (!a) {
			close(fd);
			continue;
		}
		a->cfg = cfg;
		a->fd = fd;
		atomic_fetch_add(&active_conns, 1);
		pthread_t th;
		if (pthread_create(&th, &attr, conn_main, a)) {
			atomic_fetch_sub(&active_conns, 1);
			free(a);
			refuse(fd);
		}
	}
	close(lfd);
	if (spare_fd >= 0)
		close(spare_fd);
	logmsg("shutting down: waiting for %d connection(s)", atomic_load(&active_conns));
	uint64_t deadline = now_ms() + 10000;
	while (atomic_load(&active_conns) > 0 && now_ms() < deadline)
		usleep(20000);
	if (atomic_load(&active_conns) > 0)
		logmsg("%d connection(s) still open at exit", atomic_load(&active_conns));
	pthread_attr_destroy(&attr);
	logmsg("stopped");
	return 0;
}
