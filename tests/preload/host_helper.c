// SPDX-License-Identifier: MIT
/*
 * Cases where the shim once changed what its host sees (issue 27), each
 * printing what the program observes so that the shell tests can run it
 * with and without the shim and compare the two outputs line for line.
 *
 *   errno          fclose of fmemopen/open_memstream streams; errno after a
 *                  failed posix_memalign; pvalloc's usable sizes
 *   sigview        what sigaction() and signal() report for TERM, INT, HUP
 *                  as the program sets and resets them
 *   vfork-dump     a handler on SIGTERM; a vfork child sets TERM to
 *                  SIG_DFL and execs; the parent raises TERM and must
 *                  survive through its handler (exit 0)
 *   vfork-dfl      TERM left at SIG_DFL; a vfork child installs a handler
 *                  and execs; the parent sees SIG_DFL still, then raises
 *                  TERM and dies from it
 *   wait-term      sets INT and HUP to SIG_DFL (a shell starts background
 *                  jobs with INT ignored), prints "ready", then waits for
 *                  a signal (pause)
 *   resethand      TERM and HUP get one-shot handlers (sysv_signal); each
 *                  is raised twice: handled, then the default ends the
 *                  program (TERM; HUP is set back to a handler first)
 *   small-stack    TERM blocked everywhere but in one thread of the
 *                  smallest stack (PTHREAD_STACK_MIN); prints "ready" and
 *                  waits for TERM to end it
 *   fork-work N F  a fork child makes N preads of 64 KiB from file F and
 *                  _exits(0); prints "child PID"
 *   cancel F       for each interposed call: a thread with a cancel pending
 *                  makes the call (F a scratch file); prints whether the
 *                  call was a cancellation point (cancelled) or returned
 *   keep-errno F   errno set to 4242 before each of the doors' successful
 *                  calls; prints any call that changed it
 *   sites          malloc(4 MiB) from one function and malloc(256 KiB)
 *                  from another, alternately, 400 times each
 *
 * Calls go through volatile pointers where the compiler knows the function
 * (posix_memalign, pvalloc) and could keep errno in a register across it.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static int (*volatile v_posix_memalign)(void **, size_t, size_t) = posix_memalign;
static void *(*volatile v_pvalloc)(size_t) = pvalloc;
static void *(*volatile v_memalign)(size_t, size_t) = memalign;
static int (*volatile v_fclose)(FILE *) = fclose;

static int errno_cases(void)
{
	char buf[64], *p = NULL;
	size_t n = 0;
	void *q = NULL;

	FILE *f = fmemopen(buf, sizeof(buf), "w");
	fputs("x", f);
	errno = 0;
	int r = v_fclose(f);
	printf("fclose(fmemopen) = %d errno %d\n", r, errno);
	f = open_memstream(&p, &n);
	fputs("x", f);
	errno = 0;
	r = v_fclose(f);
	printf("fclose(open_memstream) = %d errno %d\n", r, errno);
	free(p);
	f = fopen("/dev/null", "w");
	errno = 0;
	r = v_fclose(f);
	printf("fclose(/dev/null) = %d errno %d\n", r, errno);

	errno = 0;
	r = v_posix_memalign(&q, 4096, SIZE_MAX - 8192);
	printf("posix_memalign(4096, SIZE_MAX-8192) = %d errno %d\n", r, errno);
	errno = 0;
	r = v_posix_memalign(&q, 64, SIZE_MAX / 2);
	printf("posix_memalign(64, SIZE_MAX/2) = %d errno %d\n", r, errno);
	errno = 0;
	r = v_posix_memalign(&q, 3, 64);
	printf("posix_memalign(3, 64) = %d errno %d\n", r, errno);
	errno = 0;
	r = v_posix_memalign(&q, 4096, 100);
	printf("posix_memalign(4096, 100) = %d errno %d\n", r, errno);
	free(q);
	errno = 0;
	q = v_memalign(4096, SIZE_MAX - 8192);
	printf("memalign(4096, SIZE_MAX-8192) = %s errno %d\n", q ? "ptr" : "NULL", errno);
	static const size_t sizes[] = { 0, 1, 100, 4095, 4096, 4097, 5000, 8192, 20000 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		errno = 0;
		void *v = v_pvalloc(sizes[i]);
		printf("pvalloc(%zu): usable %zu, page aligned %d, errno %d\n", sizes[i],
		       malloc_usable_size(v), ((uintptr_t)v & 4095) == 0, errno);
		free(v);
	}
	errno = 0;
	q = v_pvalloc(SIZE_MAX - 100);
	printf("pvalloc(SIZE_MAX-100) = %s errno %d\n", q ? "ptr" : "NULL", errno);
	return 0;
}

static void show(const char *what, int sig)
{
	struct sigaction sa;
	if (sigaction(sig, NULL, &sa) != 0) {
		printf("%s: sigaction failed, errno %d\n", what, errno);
		return;
	}
	const char *h = sa.sa_handler == SIG_DFL ? "SIG_DFL" : sa.sa_handler == SIG_IGN ? "SIG_IGN" :
		"handler";
	printf("%s: %s flags %#x mask-term %d mask-int %d\n", what, h, (unsigned)sa.sa_flags,
	       sigismember(&sa.sa_mask, SIGTERM), sigismember(&sa.sa_mask, SIGINT));
}

static volatile sig_atomic_t got;
static void on_sig(int sig)
{
	got = sig;
}

static int sigview(void)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	static const char *const names[] = { "TERM", "INT", "HUP" };
	char what[64];

	for (int i = 0; i < 3; i++) {
		int s = sigs[i];
		snprintf(what, sizeof(what), "%s at start", names[i]);
		show(what, s);
		struct sigaction sa, old;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sig;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaddset(&sa.sa_mask, SIGINT);
		sigaction(s, &sa, &old);
		printf("%s: old was %s\n", names[i], old.sa_handler == SIG_DFL ? "SIG_DFL" : "other");
		snprintf(what, sizeof(what), "%s with a handler", names[i]);
		show(what, s);
		got = 0;
		raise(s);
		printf("%s: handler ran %d\n", names[i], got == s);
		void (*prev)(int) = signal(s, SIG_IGN);
		printf("%s: signal(SIG_IGN) returned %s\n", names[i], prev == on_sig ? "the handler" : "other");
		snprintf(what, sizeof(what), "%s ignored", names[i]);
		show(what, s);
		raise(s);
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sa.sa_flags = SA_NODEFER;
		sigaddset(&sa.sa_mask, SIGTERM);
		sigaction(s, &sa, &old);
		printf("%s: old was %s\n", names[i], old.sa_handler == SIG_IGN ? "SIG_IGN" : "other");
		snprintf(what, sizeof(what), "%s back to default", names[i]);
		show(what, s);
		prev = signal(s, SIG_DFL);
		printf("%s: signal(SIG_DFL) returned %s\n", names[i], prev == SIG_DFL ? "SIG_DFL" : "other");
		show(what, s);
	}
	fflush(stdout);
	return 0;
}

/* A vfork child changes TERM's disposition, then execs /bin/true. */
static int vfork_case(int child_disp_is_handler)
{
	pid_t pid = vfork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = child_disp_is_handler ? on_sig : SIG_DFL;
		sigaction(SIGTERM, &sa, NULL);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 3;
	return 0;
}

static int vfork_dump(void)
{
	signal(SIGTERM, on_sig);
	if (vfork_case(0) != 0)
		return 2;
	show("TERM after the vfork child", SIGTERM);
	fflush(stdout);
	raise(SIGTERM);
	printf("handler ran %d\n", got == SIGTERM);
	return 0;
}

static int vfork_dfl(void)
{
	if (vfork_case(1) != 0)
		return 2;
	show("TERM after the vfork child", SIGTERM);
	fflush(stdout);
	raise(SIGTERM);
	printf("still alive\n");
	return 0;
}

/*
 * Calls the shim counts (stdio's own writes are not seen), so that a
 * process killed afterwards has done work its live record holds.
 */
static void work(void)
{
	static char buf[4096];
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	for (int i = 0; fd >= 0 && i < 100; i++)
		if (write(fd, buf, sizeof(buf)) < 0)
			break;
	if (fd >= 0)
		close(fd);
}

static __attribute__((noreturn)) void wait_term(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	work();
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

static int resethand(void)
{
	work();
	sysv_signal(SIGHUP, on_sig);
	raise(SIGHUP);
	show("HUP after one delivery", SIGHUP);
	printf("HUP handled %d\n", got == SIGHUP);
	got = 0;
	sysv_signal(SIGTERM, on_sig);
	show("TERM one-shot", SIGTERM);
	raise(SIGTERM);
	printf("TERM handled %d\n", got == SIGTERM);
	show("TERM after one delivery", SIGTERM);
	fflush(stdout);
	raise(SIGTERM);
	printf("survived the second TERM\n");
	return 0;
}

static void *paused(void *arg)
{
	(void)arg;
	while (pause() < 0 || arg == NULL)
		;
	return NULL;
}

static int small_stack(void)
{
	sigset_t term, none;
	pthread_attr_t at;
	pthread_t t;

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigemptyset(&none);
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, PTHREAD_STACK_MIN);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	if (pthread_create(&t, &at, paused, NULL) != 0)
		return 2;
	pthread_sigmask(SIG_BLOCK, &term, NULL);
	work();
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

static int fork_work(int n, const char *path)
{
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		int fd = open(path, O_RDONLY);
		static char buf[65536];
		for (int i = 0; fd >= 0 && i < n; i++)
			if (pread(fd, buf, sizeof(buf), 0) < 0)
				_exit(3);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 3;
	fprintf(stderr, "child %d\n", (int)pid);
	return 0;
}


/* One descriptor of each kind the cases need, made before any thread. */
static int c_file, c_sock[2], c_pipe[2];
static const char *c_path;
static char c_buf[4096];

static int call_case(const char *name)
{
	struct iovec iov = { c_buf, 16 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (!strcmp(name, "read"))
		return (int)read(c_file, c_buf, 16);
	if (!strcmp(name, "write"))
		return (int)write(c_pipe[1], "x", 1);
	if (!strcmp(name, "pread"))
		return (int)pread(c_file, c_buf, 16, 0);
	if (!strcmp(name, "pwrite"))
		return (int)pwrite(c_file, "x", 1, 0);
	if (!strcmp(name, "readv"))
		return (int)readv(c_file, &iov, 1);
	if (!strcmp(name, "writev"))
		return (int)writev(c_pipe[1], &iov, 1);
	if (!strcmp(name, "preadv"))
		return (int)preadv(c_file, &iov, 1, 0);
	if (!strcmp(name, "pwritev"))
		return (int)pwritev(c_file, &iov, 1, 0);
	if (!strcmp(name, "send"))
		return (int)send(c_sock[0], "x", 1, 0);
	if (!strcmp(name, "sendto"))
		return (int)sendto(c_sock[0], "x", 1, 0, NULL, 0);
	if (!strcmp(name, "sendmsg"))
		return (int)sendmsg(c_sock[0], &mh, 0);
	if (!strcmp(name, "recv"))
		return (int)recv(c_sock[1], c_buf, 1, MSG_DONTWAIT);
	if (!strcmp(name, "recvfrom"))
		return (int)recvfrom(c_sock[1], c_buf, 1, MSG_DONTWAIT, NULL, NULL);
	if (!strcmp(name, "recvmsg"))
		return (int)recvmsg(c_sock[1], &mh, MSG_DONTWAIT);
	if (!strcmp(name, "open")) {
		int fd = open(c_path, O_RDONLY);
		return fd < 0 ? -1 : close(fd);
	}
	if (!strcmp(name, "openat")) {
		int fd = openat(AT_FDCWD, c_path, O_RDONLY);
		return fd < 0 ? -1 : close(fd);
	}
	if (!strcmp(name, "close"))
		return close(dup(c_file));
	if (!strcmp(name, "fclose"))
		return fclose(fopen(c_path, "r"));
	if (!strcmp(name, "fcntl-getfl"))
		return fcntl(c_file, F_GETFL);
	if (!strcmp(name, "dup"))
		return close(dup(c_file)) * 0;
	if (!strcmp(name, "malloc")) {
		void *p = malloc(1 << 20);
		free(p);
		return 0;
	}
	if (!strcmp(name, "sigaction")) {
		struct sigaction sa;
		return sigaction(SIGTERM, NULL, &sa);
	}
	return -2;
}

static const char *const cases[] = {
	"read", "write", "pread", "pwrite", "readv", "writev", "preadv", "pwritev", "send",
	"sendto", "sendmsg", "recv", "recvfrom", "recvmsg", "open", "openat", "close", "fclose",
	"fcntl-getfl", "dup", "malloc", "sigaction",
};

static void *cancel_thread(void *name)
{
	pthread_cancel(pthread_self());
	call_case(name);
	return (void *)1;
}

static int make_case_fds(const char *path)
{
	c_path = path;
	c_file = open(path, O_RDWR | O_CREAT, 0600);
	if (c_file < 0 || write(c_file, c_buf, sizeof(c_buf)) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, c_sock) < 0 || pipe(c_pipe) < 0)
		return -1;
	/* Data for the receives, and room for the sends. */
	for (int i = 0; i < 64; i++)
		if (send(c_sock[0], "y", 1, 0) < 0)
			return -1;
	return 0;
}

static int cancel_cases(const char *path)
{
	if (make_case_fds(path) < 0)
		return 2;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pthread_t t;
		void *ret;
		if (pthread_create(&t, NULL, cancel_thread, (void *)cases[i]) != 0 ||
		    pthread_join(t, &ret) != 0)
			return 2;
		printf("%s: %s\n", cases[i], ret == PTHREAD_CANCELED ? "cancelled" : "returned");
		/* Drain what the writes left in the pipe. */
		fcntl(c_pipe[0], F_SETFL, O_NONBLOCK);
		while (read(c_pipe[0], c_buf, sizeof(c_buf)) > 0)
			;
	}
	return 0;
}

static int keep_errno(const char *path)
{
	if (make_case_fds(path) < 0)
		return 2;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		errno = 4242;
		int r = call_case(cases[i]);
		if (errno != 4242)
			printf("%s: returned %d, errno %d\n", cases[i], r, errno);
	}
	printf("done\n");
	return 0;
}

static void *volatile sink;
static __attribute__((noinline)) void big_site(void)
{
	sink = malloc(4 << 20);
	free(sink);
}

static __attribute__((noinline)) void medium_site(void)
{
	sink = malloc(256 << 10);
	free(sink);
}

static int sites(void)
{
	for (int i = 0; i < 400; i++) {
		big_site();
		medium_site();
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(m, "errno") == 0)
		return errno_cases();
	if (strcmp(m, "sigview") == 0)
		return sigview();
	if (strcmp(m, "vfork-dump") == 0)
		return vfork_dump();
	if (strcmp(m, "vfork-dfl") == 0)
		return vfork_dfl();
	if (strcmp(m, "wait-term") == 0)
		wait_term();
	if (strcmp(m, "resethand") == 0)
		return resethand();
	if (strcmp(m, "small-stack") == 0)
		return small_stack();
	if (strcmp(m, "fork-work") == 0 && argc > 3)
		return fork_work(atoi(argv[2]), argv[3]);
	if (strcmp(m, "sites") == 0)
		return sites();
	if (strcmp(m, "cancel") == 0 && argc > 2)
		return cancel_cases(argv[2]);
	if (strcmp(m, "keep-errno") == 0 && argc > 2)
		return keep_errno(argv[2]);
	fprintf(stderr, "usage: host_helper errno|sigview|vfork-dump|vfork-dfl|wait-term|"
		"fork-work N FILE|sites|cancel FILE|keep-errno FILE\n");
	return 2;
}
