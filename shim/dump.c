// SPDX-License-Identifier: MIT
/*
 * When the report is written besides exit: on POOLSHIM_DUMP_SIGNAL, and
 * just before exec replaces the image.
 *
 * The dump signal's handler writes the report right there: the report path
 * uses only raw system calls, no locks that the interrupted code could hold
 * and no allocation.  The program keeps its own handler for that signal:
 * sigaction() and signal() are wrapped so the program sees and sets its
 * own disposition, and ours calls it after dumping; where that disposition
 * is the default and the signal is not USR1/USR2, the program then ends by
 * the signal as it would have without us (POOLSHIM_DUMP_SIGNAL=TERM: a
 * report from a server stopped with SIGTERM).
 *
 * glibc's exec functions call its internal execve, so each is wrapped.  A
 * vfork child (same memory, different pid) must not write a report: the
 * counters are its parent's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "callsite.h"
#include "compiler.h"
#include "config.h"
#include "dump.h"
#include "init.h"
#include "live.h"
#include "report.h"
#include "sys.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction;
static int dump_sig;
static struct sigaction user_act;    /* the program's disposition for dump_sig */

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
	real_sigaction(sig, &dfl, NULL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	long pid = PS_SYSCALL(SYS_getpid);
	long tid = PS_SYSCALL(SYS_gettid);
	PS_SYSCALL(SYS_tgkill, pid, tid, sig);
}

static void dump_handler(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	/* No unwinding and no dladdr (it takes the loader's lock) in here. */
	ps_in_signal++;
	ps_report_emit(&ps_cfg);
	ps_in_signal--;
	errno = saved;
	struct sigaction ua = user_act;
	if (ua.sa_flags & SA_SIGINFO) {
		if (ua.sa_sigaction)
			ua.sa_sigaction(sig, si, uc);
	} else if (ua.sa_handler == SIG_DFL) {
		default_action(sig);
	} else if (ua.sa_handler != SIG_IGN) {
		ua.sa_handler(sig);
	}
	errno = saved;
}

static sigaction_fn get_real_sigaction(void)
{
	if (!real_sigaction)
		real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	return real_sigaction;
}

void ps_dump_init(const struct ps_config *cfg)
{
	struct sigaction sa, old;

	if (!cfg->dump_signal || !get_real_sigaction())
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = dump_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (real_sigaction(cfg->dump_signal, &sa, &old) == 0) {
		user_act = old;
		dump_sig = cfg->dump_signal;
	}
}

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!get_real_sigaction()) {
		errno = ENOSYS;
		return -1;
	}
	if (sig == 0 || sig != dump_sig)
		return real_sigaction(sig, act, old);
	if (old)
		*old = user_act;
	if (act)
		user_act = *act;
	return 0;
}

PS_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	static sighandler_t (*real_signal)(int, sighandler_t);

	if (sig != 0 && sig == dump_sig) {
		sighandler_t prev = (user_act.sa_flags & SA_SIGINFO) ? SIG_DFL : user_act.sa_handler;
		memset(&user_act, 0, sizeof(user_act));
		user_act.sa_handler = handler;
		user_act.sa_flags = SA_RESTART;   /* glibc's signal() has BSD semantics */
		return prev;
	}
	if (!real_signal)
		real_signal = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
	if (!real_signal) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return real_signal(sig, handler);
}

/* The report of an image about to be replaced, unless we are a vfork child. */
static void before_exec(void)
{
	if (__atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) != PS_STATE_ON)
		return;
	if ((int)PS_SYSCALL(SYS_getpid) != ps_pid)
		return;
	int saved = errno;
	ps_report_emit(&ps_cfg);
	ps_live_remove();
	errno = saved;
}

#define REAL_EXEC(name, type)                                                      \
	static type real_##name;                                                    \
	if (!real_##name)                                                           \
		real_##name = (type)dlsym(RTLD_NEXT, #name);                        \
	if (!real_##name) {                                                         \
		errno = ENOSYS;                                                     \
		return -1;                                                          \
	}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);

PS_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	REAL_EXEC(execve, execve_fn)
	before_exec();
	return real_execve(path, argv, envp);
}

PS_EXPORT int execv(const char *path, char *const argv[])
{
	REAL_EXEC(execv, execv_fn)
	before_exec();
	return real_execv(path, argv);
}

PS_EXPORT int execvp(const char *file, char *const argv[])
{
	REAL_EXEC(execvp, execv_fn)
	before_exec();
	return real_execvp(file, argv);
}

PS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	REAL_EXEC(execvpe, execve_fn)
	before_exec();
	return real_execvpe(file, argv, envp);
}

PS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	typedef int (*fexecve_fn)(int, char *const[], char *const[]);
	REAL_EXEC(fexecve, fexecve_fn)
	before_exec();
	return real_fexecve(fd, argv, envp);
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
