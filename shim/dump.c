// SPDX-License-Identifier: MIT
/*
 * When the report is written besides exit: on POOLSHIM_DUMP_SIGNAL, and
 * just before exec replaces the image.
 *
 * The dump signal's handler writes the report right there: the report path
 * uses only raw system calls, no locks that the interrupted code could hold
 * and no allocation.  The program keeps its own disposition for that
 * signal, and the kernel keeps its semantics: sigaction() and the signal()
 * family are wrapped, and what the kernel gets is the program's own flags
 * and mask with only SA_SIGINFO added and our handler in place of its own
 * (so SA_RESTART, sa_mask, SA_NODEFER, SA_ONSTACK and SA_RESETHAND act as
 * they would); SIG_IGN is installed as SIG_IGN (no dump while ignored, and
 * the kernel keeps it across exec).  Ours calls the program's handler after
 * dumping; where the disposition is the default and the signal is not
 * USR1/USR2, the program then ends by the signal as it would have without
 * us (POOLSHIM_DUMP_SIGNAL=TERM: a report from a server stopped with
 * SIGTERM).  Only signals whose default ends the program are accepted
 * (config.c): a handler on CHLD, WINCH or a stop signal would change what
 * the program does.
 *
 * glibc's exec functions call its internal execve, so each is wrapped.  A
 * vfork child (same memory, different pid) must not write a report: the
 * counters are its parent's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "callsite.h"
#include "compiler.h"
#include "config.h"
#include "dump.h"
#include "init.h"
#include "live.h"
#include "real.h"
#include "report_out.h"
#include "sys.h"

static int dump_sig;
/* The program's disposition for dump_sig, as sigaction() would report it. */
static struct sigaction user_act;
/* Flag bits the C library adds on its way to the kernel (SA_RESTORER). */
static int libc_flags;
/* siginterrupt(dump_sig, 1): signal() then installs without SA_RESTART. */
static bool dump_intr;
/* A dump is being written (SA_NODEFER nesting, or another thread). */
static int dumping;

/*
 * The program left sig at its default.  USR1 and USR2 are sent to ask for
 * a dump, so they are absorbed.  Any other (TERM, INT, HUP, QUIT, ALRM,
 * PIPE) is meant to end the program: do what the kernel would have done,
 * with the report written first, so the exit status is the signal's.
 */
static void default_action(int sig)
{
	if (sig == SIGUSR1 || sig == SIGUSR2)
		return;
	ps_live_remove();
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	REAL(sigaction)(sig, &dfl, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	long pid = PS_SYSCALL(SYS_getpid);
	long tid = PS_SYSCALL(SYS_gettid);
	PS_SYSCALL(SYS_tgkill, pid, tid, sig);
}

static void dump_handler(int sig, siginfo_t *si, void *uc);

/*
 * Put the kernel's side of the program's disposition ua in place.  Its
 * default gets our handler with SA_RESTART: the dump (or the absorbed
 * USR1/USR2) must not cut short a system call in a program that never
 * asked for a handler.  0 or -errno.
 */
static int install(const struct sigaction *ua)
{
	struct sigaction k;

	if (ua->sa_handler == SIG_IGN)
		return REAL(sigaction)(dump_sig, ua, NULL) == 0 ? 0 : -errno;
	memset(&k, 0, sizeof(k));
	k.sa_sigaction = dump_handler;
	if (ua->sa_handler == SIG_DFL) {
		k.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&k.sa_mask);
	} else {
		k.sa_flags = ua->sa_flags | SA_SIGINFO;
		k.sa_mask = ua->sa_mask;
	}
	return REAL(sigaction)(dump_sig, &k, NULL) == 0 ? 0 : -errno;
}

/*
 * Make act the program's disposition; the previous one into *old.  What is
 * recorded is what the kernel would report back: its own record where it
 * holds the program's flags and mask, else the flags with the C library's
 * additions and a mask without KILL/STOP (the kernel drops those).
 */
static int set_user(const struct sigaction *act, struct sigaction *old)
{
	struct sigaction prev = user_act, view = *act;

	int r = install(act);
	if (r < 0)
		return r;
	if (act->sa_handler != SIG_DFL && REAL(sigaction)(dump_sig, NULL, &view) == 0) {
		libc_flags |= view.sa_flags & ~(act->sa_flags | SA_SIGINFO);
		view.sa_handler = act->sa_handler;
		if (!(act->sa_flags & SA_SIGINFO))
			view.sa_flags &= ~SA_SIGINFO;
	} else {
		view = *act;
		view.sa_flags |= libc_flags;
		sigdelset(&view.sa_mask, SIGKILL);
		sigdelset(&view.sa_mask, SIGSTOP);
	}
	user_act = view;
	if (old)
		*old = prev;
	return 0;
}

static void dump_handler(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	struct sigaction ua = user_act;

	if (ua.sa_handler != SIG_DFL && ua.sa_handler != SIG_IGN && (ua.sa_flags & SA_RESETHAND)) {
		/*
		 * The kernel has just reset the signal to its default, as it
		 * would the program's handler: record that, and put ours back
		 * for the default (dump, then absorb or end).  Before the
		 * program's handler runs, so a handler that re-arms wins.
		 */
		user_act.sa_handler = SIG_DFL;
		struct sigaction dfl = user_act;
		install(&dfl);
	}
	/* No unwinding and no dladdr (it takes the loader's lock) in here. */
	if (!__atomic_exchange_n(&dumping, 1, __ATOMIC_ACQUIRE)) {
		ps_report_emit(&ps_cfg, PS_REPORT_IN_SIGNAL);
		__atomic_store_n(&dumping, 0, __ATOMIC_RELEASE);
	}
	errno = saved;
	if (ua.sa_handler == SIG_DFL)
		default_action(sig);
	else if (ua.sa_handler == SIG_IGN)
		;   /* set to SIG_IGN while this delivery was on its way */
	else if (ua.sa_flags & SA_SIGINFO)
		ua.sa_sigaction(sig, si, uc);
	else
		ua.sa_handler(sig);
	errno = saved;
}

void ps_dump_init(const struct ps_config *cfg)
{
	struct sigaction old, k;

	if (!cfg->dump_signal || REAL(sigaction)(cfg->dump_signal, NULL, &old) != 0)
		return;
	user_act = old;
	dump_sig = cfg->dump_signal;
	/* Ignored from the start (nohup, trap ''), it is set again as it is: no dump while ignored. */
	if (install(&old) < 0) {
		dump_sig = 0;
		return;
	}
	if (REAL(sigaction)(dump_sig, NULL, &k) == 0)
		libc_flags = k.sa_flags & ~(old.sa_flags | SA_SIGINFO | SA_RESTART);
}

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (sig == 0 || sig != dump_sig)
		return REAL(sigaction)(sig, act, old);
	if (!act) {
		if (old)
			*old = user_act;
		return 0;
	}
	int r = set_user(act, old);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

/* glibc exports this name too. */
PS_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
PS_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sigaction(sig, act, old);
}

/* For dump_sig: the handler-setting calls of the signal() family, as glibc builds them. */
static sighandler_t set_handler(sighandler_t handler, int flags, bool self_masked)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (self_masked)
		sigaddset(&act.sa_mask, dump_sig);
	int r = set_user(&act, &old);
	if (r < 0) {
		errno = -r;
		return SIG_ERR;
	}
	return old.sa_handler;
}

static bool bad_handler(sighandler_t handler)
{
	if (handler != SIG_ERR)
		return false;
	errno = EINVAL;
	return true;
}

/* glibc's signal() has BSD semantics: restart, and the signal blocked in its handler. */
PS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	if (sig != 0 && sig == dump_sig)
		return bad_handler(handler) ? SIG_ERR : set_handler(handler, dump_intr ? 0 : SA_RESTART, true);
	return REAL(signal)(sig, handler);
}

/* Exported by glibc, no longer declared. */
PS_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler);
PS_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	if (sig != 0 && sig == dump_sig)
		return signal(sig, handler);
	return REAL(bsd_signal)(sig, handler);
}

/* System V: one delivery, not blocked in its handler, no restart (strict ISO C's signal()). */
PS_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	if (sig != 0 && sig == dump_sig)
		return bad_handler(handler) ? SIG_ERR : set_handler(handler, SA_RESETHAND | SA_NODEFER, false);
	return REAL(sysv_signal)(sig, handler);
}

PS_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	if (sig != 0 && sig == dump_sig)
		return sysv_signal(sig, handler);
	return REAL(__sysv_signal)(sig, handler);
}

/* glibc's sigset(): flags 0; SIG_HOLD blocks; else it unblocks; SIG_HOLD back if it was blocked. */
PS_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	if (sig == 0 || sig != dump_sig) {
		return REAL(sigset)(sig, disp);
	}
	sigset_t set, was;
	sighandler_t prev;
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (disp == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &set, &was) < 0)
			return SIG_ERR;
		prev = user_act.sa_handler;
	} else {
		if (bad_handler(disp) || (prev = set_handler(disp, 0, false)) == SIG_ERR)
			return SIG_ERR;
		if (sigprocmask(SIG_UNBLOCK, &set, &was) < 0)
			return SIG_ERR;
	}
	return sigismember(&was, sig) ? SIG_HOLD : prev;
}

PS_EXPORT int sigignore(int sig)
{
	if (sig != 0 && sig == dump_sig)
		return set_handler(SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
	return REAL(sigignore)(sig);
}

PS_EXPORT int siginterrupt(int sig, int flag)
{
	if (sig != 0 && sig == dump_sig) {
		struct sigaction act = user_act;
		if (flag)
			act.sa_flags &= ~SA_RESTART;
		else
			act.sa_flags |= SA_RESTART;
		int r = set_user(&act, NULL);
		if (r < 0) {
			errno = -r;
			return -1;
		}
		dump_intr = flag != 0;
		return 0;
	}
	return REAL(siginterrupt)(sig, flag);
}

/*
 * Whether an exec of path is sure to fail: missing, a directory or other
 * non-file, or no execute bit for anyone (checked with the effective ids,
 * as exec is).  Only certain failures count; anything else may succeed.
 */
static bool cannot_exec(const char *path)
{
	struct stat st;

	if (!*path)
		return true;
	long r = PS_SYSCALL(SYS_newfstatat, AT_FDCWD, path, &st, 0);
	if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -ENAMETOOLONG)
		return true;
	return r == 0 && (!S_ISREG(st.st_mode) || !(st.st_mode & 0111));
}

/*
 * Whether execvp(file) is sure to fail: each candidate along PATH (glibc's
 * default when unset; an empty entry is the current directory) cannot be
 * executed.  A name too long for the buffer counts as one that may work.
 */
static bool cannot_execvp(const char *file)
{
	char buf[4096];

	if (!*file || strchr(file, '/'))
		return cannot_exec(file);
	const char *p = getenv("PATH");
	if (!p)
		p = "/bin:/usr/bin";
	size_t flen = strlen(file);
	for (;;) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);
		if (dlen + 1 + flen + 1 > sizeof(buf))
			return false;
		memcpy(buf, p, dlen);
		if (dlen)
			buf[dlen++] = '/';
		memcpy(buf + dlen, file, flen + 1);
		if (!cannot_exec(buf))
			return false;
		if (!*end)
			return true;
		p = end + 1;
	}
}

/*
 * The report of an image about to be replaced, unless we are a vfork child
 * or the exec cannot succeed (a PATH search that tries each directory).
 * Only a snapshot: if exec fails the process goes on, so its live file
 * stays and the report at exit is the complete one.  On success a new
 * image under the shim takes the file over (same pid).
 */
static void before_exec(const char *path, bool search)
{
	if (__atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) != PS_STATE_ON)
		return;
	if ((int)PS_SYSCALL(SYS_getpid) != ps_pid)
		return;
	int saved = errno;
	if (!path || !(search ? cannot_execvp(path) : cannot_exec(path)))
		ps_report_emit(&ps_cfg, 0);
	errno = saved;
}

PS_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec(path, false);
	return REAL(execve)(path, argv, envp);
}

PS_EXPORT int execv(const char *path, char *const argv[])
{
	before_exec(path, false);
	return REAL(execv)(path, argv);
}

PS_EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec(file, true);
	return REAL(execvp)(file, argv);
}

PS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec(file, true);
	return REAL(execvpe)(file, argv, envp);
}

PS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec(NULL, false);
	return REAL(fexecve)(fd, argv, envp);
}

/* execl and friends: gather the variadic arguments into an array on the stack. */
#define GATHER_ARGS(arg0, ap, argv, extra)                                         \
	size_t argc_ = 0;                                                           \
	const char *a_ = arg0;                                                      \
	va_start(ap, arg0);                                                         \
	while (a_ != NULL) {                                                        \
		argc_++;                                                            \
		a_ = va_arg(ap, const char *);                                      \
	}                                                                           \
	va_end(ap);                                                                 \
	const char *argv[argc_ + 1];                                                \
	va_start(ap, arg0);                                                         \
	a_ = arg0;                                                                  \
	for (size_t i_ = 0; i_ < argc_; i_++) {                                     \
		argv[i_] = a_;                                                      \
		a_ = va_arg(ap, const char *);                                      \
	}                                                                           \
	argv[argc_] = NULL;                                                         \
	extra;                                                                      \
	va_end(ap)

PS_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	GATHER_ARGS(arg, ap, argv, (void)0);
	return execv(path, (char *const *)argv);
}

PS_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	GATHER_ARGS(arg, ap, argv, (void)0);
	return execvp(file, (char *const *)argv);
}

PS_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char *const *envp;
	GATHER_ARGS(arg, ap, argv, envp = va_arg(ap, char *const *));
	return execve(path, (char *const *)argv, envp);
}
