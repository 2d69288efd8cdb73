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
 *   fork-work N F  a fork child makes N preads of 64 KiB from file F and
 *                  _exits(0); prints "child PID"
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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

static __attribute__((noreturn)) void wait_term(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
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
	if (strcmp(m, "fork-work") == 0 && argc > 3)
		return fork_work(atoi(argv[2]), argv[3]);
	if (strcmp(m, "sites") == 0)
		return sites();
	fprintf(stderr, "usage: host_helper errno|sigview|vfork-dump|vfork-dfl|wait-term|"
		"fork-work N FILE|sites\n");
	return 2;
}
