// SPDX-License-Identifier: MIT
/*
 * The one signal the shim takes, and only when asked: POOLSHIM_DUMP_SIGNAL
 * writes a report (a snapshot) when that signal arrives.  No other signal
 * is touched: SIGTERM, SIGINT and SIGHUP keep the kernel's default action,
 * and /proc/PID/status shows the program's own SigCgt/SigIgn/SigBlk.  How
 * a process ended is read from its live record afterwards (end.c, live.c,
 * `poolshim collect`), not caught as it dies.  Also here: the report of an
 * image that exec replaces.
 *
 * The dump signal's handler writes the report right there: the report path
 * uses only raw system calls, no locks that the interrupted code could hold
 * and no allocation.  The program keeps its own disposition for that
 * signal, and the kernel keeps its semantics: what the kernel gets is the
 * program's own flags and mask with only SA_SIGINFO added and our handler
 * in place of its own (so SA_RESTART, sa_mask, SA_NODEFER, SA_ONSTACK and
 * SA_RESETHAND act as they would); SIG_IGN is installed as SIG_IGN (no
 * dump while ignored, and the kernel keeps it across exec).  Ours calls
 * the program's handler after dumping; where the disposition is the
 * default and the signal is not USR1/USR2, the process is finished as at
 * exit (end.c) and the signal raised again at its default, so the process
 * dies from it as it would have.  Only signals whose default ends the program are
 * accepted (config.c): a handler on CHLD, WINCH or a stop signal would
 * change what the program does.
 *
 * A vfork child shares our memory but not our signal table: a disposition
 * it sets goes straight to the kernel (its table), and is never recorded
 * here, where the parent would read it.  A handler of ours that runs in
 * such a child (or in a raw clone child) writes nothing and removes
 * nothing: the counters and the live file are the parent's.
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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/callsite.h"
#include "format/compiler.h"
#include "format/config.h"
#include "doors/dump.h"
#include "doors/end.h"
#include "doors/start.h"
#include "core/live.h"
#include "doors/real.h"
#include "core/report_out.h"
#include "format/sys.h"

static int dump_sig;
/* Bit sig - 1: our handler stands in for the program's default of sig. */
static uint64_t managed;
/* The program's disposition of each managed signal, as sigaction() would report it. */
static struct sigaction user_act[NSIG];
/* siginterrupt(sig, 1): signal() then installs without SA_RESTART. */
static bool user_intr[NSIG];
/* Flag bits the C library adds on its way to the kernel (SA_RESTORER). */
static int libc_flags;
static bool libc_flags_known;
static void learn_libc_flags(void);
/* A signal that came while manage() had ours in place and not yet the program's: */
static int installing;                /* the signal manage() is taking over, or 0 */
static int came_while_installing;     /* it came meanwhile */
/* A dump is being written (SA_NODEFER nesting, or another thread). */
static int dumping;

static bool is_managed(int sig)
{
	return sig > 0 && sig < NSIG && (managed >> (sig - 1) & 1);
}

/* A vfork child (or a raw clone child): our memory is not its own. */
static bool borrowed_memory(void)
{
	return (int)PS_SYSCALL(SYS_getpid) != ps_pid;
}

/*
 * The end's report runs on a stack of its own: the signal may be taken by
 * a thread whose stack is nearly full or small (16 KiB threads overflowed
 * while writing it).  Mapped when first needed (mmap is a system call,
 * safe in a handler), with a guard page below; the first thread to end
 * takes it, any other (its report is skipped: one per process) stays on
 * its own stack.  x86-64 only, as the rest of the shim (rdtsc).
 */
#define END_STACK (256u << 10)
static int end_stack_taken;

static void run_on_stack(void (*fn)(void), void *top)
{
	__asm__ volatile("mov %%rsp, %%rbx\n\t"
			 "mov %0, %%rsp\n\t"
			 "call *%1\n\t"
			 "mov %%rbx, %%rsp"
			 :
			 : "r"(top), "r"(fn)
			 : "rbx", "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
			   "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			   "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			   "memory", "cc");
}

/* The dump signal that is ending the program (for end_by_signal, which takes no argument). */
static int ending_sig;

static void end_by_signal(void)
{
	ps_end(PS_END_SIGNAL, ending_sig, true, PS_REPORT_IN_SIGNAL);
}

static void end_on_own_stack(void)
{
	if (__atomic_exchange_n(&end_stack_taken, 1, __ATOMIC_ACQ_REL)) {
		end_by_signal();
		return;
	}
	long p = PS_SYSCALL(SYS_mmap, NULL, END_STACK + PS_PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p < 0 && p > -4096) {
		end_by_signal();
		return;
	}
	PS_SYSCALL(SYS_mprotect, p, PS_PAGE, PROT_NONE);
	/* 16-byte aligned: the call pushes the return address as the ABI expects. */
	run_on_stack(end_by_signal, (void *)((uintptr_t)p + PS_PAGE + END_STACK));
	PS_SYSCALL(SYS_munmap, p, END_STACK + PS_PAGE);
}

/*
 * The program left sig at its default.  USR1 and USR2 are sent to ask for
 * a dump, so they are absorbed.  Any other (TERM, INT, HUP, QUIT, ALRM,
 * PIPE) is meant to end the program: do what the kernel would have done,
 * with the report written first (ps_end: once, and only in a process
 * whose counters are its own), so the exit status is the signal's.
 */
static void default_action(int sig)
{
	if (sig == SIGUSR1 || sig == SIGUSR2)
		return;
	ending_sig = sig;
	end_on_own_stack();
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
 * Put the kernel's side of the program's disposition ua for sig in place.
 * Its default gets our handler with SA_RESTART: the dump (or the absorbed
 * USR1/USR2) must not cut short a system call in a program that never
 * asked for a handler.  SIG_IGN, and any handler of the program on a
 * signal other than the dump signal, go to the kernel as they are; except
 * a one-shot handler (SA_RESETHAND, sysv_signal, strict ISO C's signal),
 * which is wrapped as the dump signal's are, so that when the kernel
 * resets it to the default ours comes back for the next delivery.
 * 0 or -errno.
 */
static int install(int sig, const struct sigaction *ua)
{
	struct sigaction k;

	if (ua->sa_handler == SIG_IGN ||
	    (sig != dump_sig && ua->sa_handler != SIG_DFL && !(ua->sa_flags & SA_RESETHAND)))
		return REAL(sigaction)(sig, ua, NULL) == 0 ? 0 : -errno;
	memset(&k, 0, sizeof(k));
	k.sa_sigaction = dump_handler;
	if (ua->sa_handler == SIG_DFL) {
		k.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&k.sa_mask);
	} else {
		k.sa_flags = ua->sa_flags | SA_SIGINFO;
		k.sa_mask = ua->sa_mask;
	}
	return REAL(sigaction)(sig, &k, NULL) == 0 ? 0 : -errno;
}

/*
 * The program's disposition of sig now: our record while our handler is
 * in place, else the kernel's (a handler or SIG_IGN of the program's, or
 * one set behind our back, as glibc's system() does).  0 or -errno.
 */
static int current(int sig, struct sigaction *out)
{
	if (REAL(sigaction)(sig, NULL, out) != 0)
		return -errno;
	if (out->sa_flags & SA_SIGINFO && out->sa_sigaction == dump_handler)
		*out = user_act[sig];
	return 0;
}

/*
 * Make act the program's disposition of sig; the previous one into *old.
 * What is recorded is what the kernel would report back: its own record
 * where it holds the program's flags and mask, else the flags with the C
 * library's additions and a mask without KILL/STOP (the kernel drops
 * those).  In a vfork child the kernel gets act as it is, and nothing is
 * recorded: our record is the parent's.
 */
static int set_user(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction prev, view = *act;

	if (borrowed_memory()) {
		if (REAL(sigaction)(sig, act, &prev) != 0)
			return -errno;
		if (prev.sa_flags & SA_SIGINFO && prev.sa_sigaction == dump_handler)
			prev = user_act[sig];
		if (old)
			*old = prev;
		return 0;
	}
	int r = current(sig, &prev);
	if (r == 0)
		r = install(sig, act);
	if (r < 0)
		return r;
	if (act->sa_handler != SIG_DFL && REAL(sigaction)(sig, NULL, &view) == 0) {
		libc_flags |= view.sa_flags & ~(act->sa_flags | SA_SIGINFO);
		view.sa_handler = act->sa_handler;
		if (!(act->sa_flags & SA_SIGINFO))
			view.sa_flags &= ~SA_SIGINFO;
	} else {
		learn_libc_flags();
		view = *act;
		view.sa_flags |= libc_flags;
		sigdelset(&view.sa_mask, SIGKILL);
		sigdelset(&view.sa_mask, SIGSTOP);
	}
	user_act[sig] = view;
	if (old)
		*old = prev;
	return 0;
}

static void dump_handler(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	struct sigaction ua = user_act[sig];

	if (ps_unlikely(!is_managed(sig)) &&
	    __atomic_load_n(&installing, __ATOMIC_ACQUIRE) == sig) {
		/* manage() has not yet seen what the program had: it sends sig again. */
		__atomic_store_n(&came_while_installing, 1, __ATOMIC_RELEASE);
		return;
	}

	if (ua.sa_handler != SIG_DFL && ua.sa_handler != SIG_IGN &&
	    (ua.sa_flags & SA_RESETHAND) && !borrowed_memory()) {
		/*
		 * The kernel has just reset the signal to its default, as it
		 * would the program's handler: record that, and put ours back
		 * for the default (dump, then absorb or end).  Before the
		 * program's handler runs, so a handler that re-arms wins.
		 */
		user_act[sig].sa_handler = SIG_DFL;
		struct sigaction dfl = user_act[sig];
		install(sig, &dfl);
	}
	/*
	 * The dump signal dumps, unless it is about to end the program (the
	 * end's report is written then).  No unwinding and no dladdr (it
	 * takes the loader's lock) in here.
	 */
	bool ends = ua.sa_handler == SIG_DFL && sig != SIGUSR1 && sig != SIGUSR2;
	if (sig == dump_sig && !ends && !borrowed_memory() &&
	    !__atomic_exchange_n(&dumping, 1, __ATOMIC_ACQUIRE)) {
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

/*
 * Put sig back exactly as the kernel had it (SIG_IGN or a handler set
 * before us): through libc, the C library's flags would be added to a
 * disposition exec left without them.
 */
static void restore_exact(int sig, const struct sigaction *old)
{
	/* The kernel's struct sigaction where it has sa_restorer (not in libc's headers). */
#if defined(__x86_64__) || defined(__aarch64__)
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} k = { (void *)old->sa_handler, (unsigned long)old->sa_flags, (void *)old->sa_restorer, 0 };
	memcpy(&k.mask, &old->sa_mask, sizeof(k.mask));
	PS_SYSCALL(SYS_rt_sigaction, sig, &k, NULL, sizeof(k.mask));
#else
	REAL(sigaction)(sig, old, NULL);
#endif
}

/*
 * Take sig over: record the program's disposition, and stand in where it
 * is the default.  One system call in the usual case: ours goes in and
 * the kernel hands back what was there (after exec, the default or
 * SIG_IGN); only what was not the default is put back or wrapped.
 */
static void manage(int sig)
{
	struct sigaction k, old;

	if (is_managed(sig))
		return;
	memset(&k, 0, sizeof(k));
	k.sa_sigaction = dump_handler;
	k.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&k.sa_mask);
	__atomic_store_n(&came_while_installing, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&installing, sig, __ATOMIC_RELEASE);
	if (REAL(sigaction)(sig, &k, &old) != 0) {
		__atomic_store_n(&installing, 0, __ATOMIC_RELEASE);
		return;
	}
	user_act[sig] = old;
	/*
	 * Ignored from the start (nohup, trap ''): put back as the kernel had
	 * it, no dump and no report while ignored, but still ours to take
	 * when the program sets the default (set_user).  A handler already
	 * there (a library's constructor set it) is wrapped like one set later.
	 */
	bool keep = true;
	if (old.sa_handler == SIG_IGN)
		restore_exact(sig, &old);
	else if (old.sa_handler != SIG_DFL && install(sig, &old) < 0)
		keep = false;
	if (keep)
		managed |= (uint64_t)1 << (sig - 1);
	else
		restore_exact(sig, &old);
	__atomic_store_n(&installing, 0, __ATOMIC_RELEASE);
	/* Delivered in between: now it meets what the program had (ignored, it is dropped). */
	if (__atomic_exchange_n(&came_while_installing, 0, __ATOMIC_ACQ_REL) &&
	    old.sa_handler != SIG_IGN)
	{
		long pid = PS_SYSCALL(SYS_getpid), tid = PS_SYSCALL(SYS_gettid);
		PS_SYSCALL(SYS_tgkill, pid, tid, sig);
	}
}

/*
 * What the C library adds to a disposition on its way to the kernel
 * (SA_RESTORER), learnt from one of ours the first time it is needed: a
 * program that never sets a managed signal back to its default never asks.
 */
static void learn_libc_flags(void)
{
	struct sigaction k;

	if (libc_flags_known)
		return;
	for (int sig = 1; sig < NSIG; sig++) {
		if (is_managed(sig) && REAL(sigaction)(sig, NULL, &k) == 0 &&
		    k.sa_flags & SA_SIGINFO && k.sa_sigaction == dump_handler) {
			libc_flags = k.sa_flags & ~(SA_SIGINFO | SA_RESTART);
			libc_flags_known = true;
			break;
		}
	}
}

void ps_dump_init(const struct ps_config *cfg)
{
	if (cfg->dump_signal) {
		dump_sig = cfg->dump_signal;
		manage(dump_sig);
		if (!is_managed(dump_sig))
			dump_sig = 0;
	}
}

PS_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (!is_managed(sig))
		return REAL(sigaction)(sig, act, old);
	int r;
	if (!act) {
		struct sigaction cur;
		r = current(sig, &cur);
		if (r == 0 && old)
			*old = cur;
	} else {
		r = set_user(sig, act, old);
	}
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

/* For a managed signal: the handler-setting calls of the signal() family, as glibc builds them. */
static sighandler_t set_handler(int sig, sighandler_t handler, int flags, bool self_masked)
{
	struct sigaction act, old;

	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (self_masked)
		sigaddset(&act.sa_mask, sig);
	int r = set_user(sig, &act, &old);
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
	if (is_managed(sig))
		return bad_handler(handler) ? SIG_ERR :
		       set_handler(sig, handler, user_intr[sig] ? 0 : SA_RESTART, true);
	return REAL(signal)(sig, handler);
}

/* Exported by glibc, no longer declared. */
PS_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler);
PS_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	if (is_managed(sig))
		return signal(sig, handler);
	return REAL(bsd_signal)(sig, handler);
}

/* System V: one delivery, not blocked in its handler, no restart (strict ISO C's signal()). */
PS_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	if (is_managed(sig))
		return bad_handler(handler) ? SIG_ERR :
		       set_handler(sig, handler, SA_RESETHAND | SA_NODEFER, false);
	return REAL(sysv_signal)(sig, handler);
}

PS_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	if (is_managed(sig))
		return sysv_signal(sig, handler);
	return REAL(__sysv_signal)(sig, handler);
}

/* glibc's sigset(): flags 0; SIG_HOLD blocks; else it unblocks; SIG_HOLD back if it was blocked. */
PS_EXPORT sighandler_t sigset(int sig, sighandler_t disp)
{
	if (!is_managed(sig))
		return REAL(sigset)(sig, disp);
	sigset_t set, was;
	sighandler_t prev;
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (disp == SIG_HOLD) {
		struct sigaction cur;
		int r = current(sig, &cur);
		if (r < 0) {
			errno = -r;
			return SIG_ERR;
		}
		if (sigprocmask(SIG_BLOCK, &set, &was) < 0)
			return SIG_ERR;
		prev = cur.sa_handler;
	} else {
		if (bad_handler(disp) || (prev = set_handler(sig, disp, 0, false)) == SIG_ERR)
			return SIG_ERR;
		if (sigprocmask(SIG_UNBLOCK, &set, &was) < 0)
			return SIG_ERR;
	}
	return sigismember(&was, sig) ? SIG_HOLD : prev;
}

PS_EXPORT int sigignore(int sig)
{
	if (is_managed(sig))
		return set_handler(sig, SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
	return REAL(sigignore)(sig);
}

PS_EXPORT int siginterrupt(int sig, int flag)
{
	if (is_managed(sig)) {
		struct sigaction act;
		int r = current(sig, &act);
		if (r == 0) {
			if (flag)
				act.sa_flags &= ~SA_RESTART;
			else
				act.sa_flags |= SA_RESTART;
			r = set_user(sig, &act, NULL);
		}
		if (r < 0) {
			errno = -r;
			return -1;
		}
		if (!borrowed_memory())
			user_intr[sig] = flag != 0;
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
 * The report of an image about to be replaced, unless we are a vfork child,
 * a fork child that did next to nothing before its exec (a shell's, which
 * would add a report per command; ps_report_due), or the exec cannot
 * succeed (a PATH search that tries each directory).
 * Only a snapshot: if exec fails the process goes on, and the report at
 * exit is the complete one.  The live file is removed before the exec
 * (the new image makes its own once it works) and made again after a
 * failure (after_exec).
 */
static void before_exec(const char *path, bool search)
{
	if (__atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) != PS_STATE_ON)
		return;
	int saved = errno;
	if (!ps_report_due()) {
		errno = saved;
		return;
	}
	if (!path || !(search ? cannot_execvp(path) : cannot_exec(path))) {
		/*
		 * Under the wrapper every report goes through the wrapper, at
		 * the end: the image that execs is not reported on its own (its
		 * record goes; the new image, same pid, makes its own).
		 */
		if (!ps_cfg.run[0])
			ps_report_emit(&ps_cfg, 0);
		ps_live_before_exec();
	}
	errno = saved;
}

/* The exec returned: it failed, and the process goes on with a live file again. */
static int after_exec(int r)
{
	int saved = errno;
	if (__atomic_load_n(&ps_state, __ATOMIC_ACQUIRE) == PS_STATE_ON)
		ps_live_after_failed_exec();
	errno = saved;
	return r;
}

PS_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec(path, false);
	return after_exec(REAL(execve)(path, argv, envp));
}

PS_EXPORT int execv(const char *path, char *const argv[])
{
	before_exec(path, false);
	return after_exec(REAL(execv)(path, argv));
}

PS_EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec(file, true);
	return after_exec(REAL(execvp)(file, argv));
}

PS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec(file, true);
	return after_exec(REAL(execvpe)(file, argv, envp));
}

PS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec(NULL, false);
	return after_exec(REAL(fexecve)(fd, argv, envp));
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
