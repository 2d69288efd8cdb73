// SPDX-License-Identifier: MIT
/*
 * For signal_sem.sh: one signal-semantics scenario per run, printing what
 * the program observes, so the driver can compare a run under the shim
 * (with POOLSHIM_DUMP_SIGNAL naming that signal) with a run without it.
 * The output must be identical: the dump must not change what the kernel
 * does with the program's own disposition (restart, mask, SA_NODEFER,
 * SA_RESETHAND, SIG_IGN across exec, the flags sigaction() reports).
 *
 *   read SIG restart|norestart  blocking pipe read; SIG arrives first, data later
 *   mask SIG [nodefer]          the blocked set inside the handler
 *   resethand SIG               one delivery, the disposition reported, SIG again
 *   flags SIG                   what sigaction() reports after installing
 *   report SIG                  the disposition this image started with, then SIG_DFL
 *   ign-exec SIG                SIG_IGN, then exec "report SIG"
 *   ign-raise SIG               SIG_IGN, then SIG sent (with SEM_PROBE: no dump)
 *   family SIG                  sysv_signal, siginterrupt, sigset, sigignore
 *   reap                        SIGCHLD at SIG_IGN: children reaped by the kernel
 *
 * With SEM_PROBE=FILE the handler also says on stderr whether FILE exists
 * when it runs (the dump is written before the program's handler is called).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static volatile sig_atomic_t other_blocked = -1, self_blocked = -1;
static int the_sig, other_sig;
static const char *probe;
static volatile sig_atomic_t probe_seen = -1;

static void on_sig(int sig)
{
	sigset_t cur;

	(void)sig;
	handled++;
	if (probe)
		probe_seen = access(probe, F_OK) == 0;
	if (sigprocmask(SIG_BLOCK, NULL, &cur) == 0) {
		other_blocked = sigismember(&cur, other_sig);
		self_blocked = sigismember(&cur, the_sig);
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int install(int sig, int flags, const sigset_t *mask)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = flags;
	if (mask)
		sa.sa_mask = *mask;
	else
		sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL);
}

/* The disposition as sigaction() reports it, in one comparable line. */
static void print_disposition(const char *what, int sig)
{
	struct sigaction old;
	if (sigaction(sig, NULL, &old) != 0) {
		printf("%s: sigaction failed: %s\n", what, strerror(errno));
		return;
	}
	const char *h = old.sa_handler == SIG_DFL ? "DFL" :
			old.sa_handler == SIG_IGN ? "IGN" :
			(old.sa_flags & SA_SIGINFO) ? "action" : "handler";
	printf("%s: %s flags=%#x mask=", what, h, (unsigned)old.sa_flags);
	for (int s = 1; s < 32; s++)
		if (sigismember(&old.sa_mask, s))
			printf("%d,", s);
	printf("\n");
}

static int do_read(int restart)
{
	int p[2];
	if (pipe(p) != 0 || install(the_sig, restart ? SA_RESTART : 0, NULL) != 0)
		return 2;
	pid_t parent = getpid();
	pid_t child = fork();
	if (child == 0) {
		/* The signal first, while the parent blocks; the data well after. */
		sleep_ms(200);
		kill(parent, the_sig);
		sleep_ms(1000);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		_exit(0);
	}
	char c;
	ssize_t n = read(p[0], &c, 1);
	int err = n < 0 ? errno : 0;
	if (probe)
		fprintf(stderr, "probe=%d\n", (int)probe_seen);
	printf("read=%zd errno=%s handled=%d\n", n, err == EINTR ? "EINTR" : err ? strerror(err) : "0",
	       (int)handled);
	waitpid(child, NULL, 0);
	return 0;
}

static int do_mask(int nodefer)
{
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, other_sig);
	if (install(the_sig, nodefer ? SA_NODEFER : 0, &m) != 0)
		return 2;
	raise(the_sig);
	printf("handled=%d in handler: other blocked=%d self blocked=%d\n", (int)handled,
	       (int)other_blocked, (int)self_blocked);
	print_disposition("after", the_sig);
	return 0;
}

static int do_resethand(void)
{
	if (install(the_sig, SA_RESETHAND, NULL) != 0)
		return 2;
	print_disposition("installed", the_sig);
	raise(the_sig);
	printf("handled=%d self blocked=%d\n", (int)handled, (int)self_blocked);
	print_disposition("after one delivery", the_sig);
	fflush(stdout);
	raise(the_sig);     /* at its default now: a terminating signal ends us */
	printf("survived a second delivery, handled=%d\n", (int)handled);
	return 0;
}

/* The rest of the signal() family; sigset and sigignore are obsolescent. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int do_family(void)
{
	if (sysv_signal(the_sig, on_sig) == SIG_ERR)
		return 2;
	print_disposition("sysv_signal", the_sig);
	raise(the_sig);
	printf("handled=%d self blocked=%d\n", (int)handled, (int)self_blocked);
	print_disposition("sysv_signal, after one delivery", the_sig);
	if (signal(the_sig, on_sig) == SIG_ERR || siginterrupt(the_sig, 1) != 0)
		return 2;
	print_disposition("siginterrupt 1", the_sig);
	if (signal(the_sig, on_sig) == SIG_ERR)
		return 2;
	print_disposition("signal() after siginterrupt 1", the_sig);
	if (siginterrupt(the_sig, 0) != 0)
		return 2;
	print_disposition("siginterrupt 0", the_sig);
	sighandler_t prev = sigset(the_sig, on_sig);
	printf("sigset: previous is %s\n", prev == on_sig ? "on_sig" : prev == SIG_DFL ? "DFL" : "other");
	print_disposition("sigset", the_sig);
	prev = sigset(the_sig, SIG_HOLD);
	printf("sigset(SIG_HOLD): previous is %s\n", prev == on_sig ? "on_sig" : "other");
	prev = sigset(the_sig, SIG_DFL);
	printf("sigset(SIG_DFL): previous is %s\n", prev == SIG_HOLD ? "SIG_HOLD" : "other");
	print_disposition("sigset(SIG_DFL)", the_sig);
	if (sigignore(the_sig) != 0)
		return 2;
	print_disposition("sigignore", the_sig);
	return 0;
}
#pragma GCC diagnostic pop

static int do_flags(void)
{
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, other_sig);
	if (install(the_sig, 0, NULL) != 0)
		return 2;
	print_disposition("plain", the_sig);
	if (install(the_sig, SA_RESTART | SA_ONSTACK, &m) != 0)
		return 2;
	print_disposition("restart|onstack, masked", the_sig);
	if (signal(the_sig, on_sig) == SIG_ERR)
		return 2;
	print_disposition("signal()", the_sig);
	if (signal(the_sig, SIG_DFL) == SIG_ERR)
		return 2;
	print_disposition("signal(SIG_DFL)", the_sig);
	return 0;
}

static int signum(const char *s)
{
	static const struct { const char *name; int num; } names[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
		{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM }, { "CHLD", SIGCHLD },
		{ "CONT", SIGCONT }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },
		{ "URG", SIGURG }, { "WINCH", SIGWINCH }, { "PROF", SIGPROF },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name))
			return names[i].num;
	return atoi(s);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	the_sig = signum(argv[2]);
	other_sig = the_sig == SIGWINCH ? SIGURG : SIGWINCH;
	probe = getenv("SEM_PROBE");
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *mode = argv[1];
	if (!strcmp(mode, "read"))
		return do_read(argc > 3 && !strcmp(argv[3], "restart"));
	if (!strcmp(mode, "mask"))
		return do_mask(argc > 3 && !strcmp(argv[3], "nodefer"));
	if (!strcmp(mode, "resethand"))
		return do_resethand();
	if (!strcmp(mode, "flags"))
		return do_flags();
	if (!strcmp(mode, "family"))
		return do_family();
	if (!strcmp(mode, "reap")) {
		if (signal(SIGCHLD, SIG_IGN) == SIG_ERR)
			return 2;
		pid_t c = fork();
		if (c == 0)
			_exit(0);
		sleep_ms(200);
		pid_t w = waitpid(c, NULL, 0);
		printf("waitpid=%s\n", w == c ? "the child" : errno == ECHILD ? "ECHILD" : strerror(errno));
		return 0;
	}
	if (!strcmp(mode, "report")) {
		print_disposition("started with", the_sig);
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		if (sigaction(the_sig, &dfl, NULL) != 0)
			return 2;
		print_disposition("then set to SIG_DFL", the_sig);
		return 0;
	}
	if (!strcmp(mode, "ign-raise")) {
		if (signal(the_sig, SIG_IGN) == SIG_ERR)
			return 2;
		raise(the_sig);
		printf("still running after an ignored signal\n");
		if (probe)
			fprintf(stderr, "probe=%d\n", access(probe, F_OK) == 0);
		return 0;
	}
	if (!strcmp(mode, "ign-exec")) {
		if (signal(the_sig, SIG_IGN) == SIG_ERR)
			return 2;
		print_disposition("before exec", the_sig);
		char *args[] = { argv[0], "report", argv[2], NULL };
		execv("/proc/self/exe", args);
		perror("execv");
		return 3;
	}
	return 2;
}
