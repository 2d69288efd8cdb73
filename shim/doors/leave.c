// SPDX-License-Identifier: MIT
/*
 * The doors through which a process leaves what it started as: daemon(3),
 * a change of user (the setuid family), chroot(2).  The shim must leave no
 * file behind any of them (issue 25), and the process that made the live
 * file must still write its report and remove the file:
 *
 * - daemon(3): glibc's parent ends with its internal _exit, which no
 *   interposer sees (no report, the file left in /dev/shm).  daemon is
 *   written here as glibc writes it (misc/daemon.c: fork, the parent
 *   _exits, setsid, chdir "/", /dev/null checked to be the null device on
 *   0, 1 and 2), through the public functions, so the parent's _exit is
 *   ours and ends the way _exit does under the shim.
 * - the setuid family: /dev/shm is sticky, so only the file's owner can
 *   remove it; the file is handed to the new effective user just before
 *   the change (live.c).
 * - chroot(2): when the new root does not reach the live directory, the
 *   record stays where it is and keeps counting through its mapping; the
 *   process no longer touches it by path, and `poolshim collect` renders
 *   its report once it has ended (its own path may now be out of reach too).
 *
 * And the start of exit: the report to stderr needs fd 2 after the atexit
 * handlers, which may close it (gnulib's close_stdout, in every coreutils
 * program).  __cxa_atexit (atexit's and C++'s registration) is wrapped so
 * that a handler of ours runs before the program's and marks the moment;
 * the shim keeps no descriptor before it.
 *
 * Raw system calls bypass these doors, as they bypass every other.
 */
#include <errno.h>
#include <fcntl.h>
#include <paths.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "format/compiler.h"
#include "format/config.h"
#include "doors/start.h"
#include "core/live.h"
#include "doors/real.h"
#include "core/report_out.h"

extern void *__dso_handle;

static void exit_begins(void *unused)
{
	(void)unused;
	ps_report_exit_begins();
}

/*
 * Exit handlers run in the reverse order of their registration, so one of
 * ours registered right after each of the program's runs before it: before
 * gnulib's close_stdout closes fd 2, however the program exits (a return
 * from main calls libc's own exit, which no door sees).  Nothing is done
 * at start: no allocation, no system call (a thread-exit registration made
 * at start set up glibc's heap in programs that never allocate, and left
 * malloc_trim(0) something to trim).  glibc holds the first 32 handlers in
 * static memory; past a few of the program's, ours are not added any more
 * (C++ programs register one per static object), and a later handler that
 * closes fd 2 leaves the report to the record (end.c).
 */
#define EXIT_HOOKS_MAX 8
static int exit_hooks;

PS_EXPORT int __cxa_atexit(void (*fn)(void *), void *arg, void *d);
PS_EXPORT int __cxa_atexit(void (*fn)(void *), void *arg, void *d)
{
	int r = REAL(__cxa_atexit)(fn, arg, d);
	if (r == 0 && d != &__dso_handle && ps_enabled() && strcmp(ps_cfg.stats, "off") != 0 &&
	    __atomic_add_fetch(&exit_hooks, 1, __ATOMIC_RELAXED) <= EXIT_HOOKS_MAX)
		REAL(__cxa_atexit)(exit_begins, NULL, &__dso_handle);
	return r;
}

PS_EXPORT int daemon(int nochdir, int noclose)
{
	if (!ps_enabled())
		return REAL(daemon)(nochdir, noclose);
	switch (fork()) {
	case -1:
		return -1;
	case 0:
		break;
	default:
		_exit(0);
	}
	if (setsid() == -1)
		return -1;
	if (!nochdir)
		(void)chdir("/");
	if (!noclose) {
		struct stat st;
		int fd = open(_PATH_DEVNULL, O_RDWR, 0);
		if (fd == -1)
			return -1;
		if (fstat(fd, &st) != 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		/* glibc's check: a /dev/null that is not the null device is refused. */
		if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
			close(fd);
			errno = ENODEV;
			return -1;
		}
		(void)dup2(fd, STDIN_FILENO);
		(void)dup2(fd, STDOUT_FILENO);
		(void)dup2(fd, STDERR_FILENO);
		if (fd > 2)
			(void)close(fd);
	}
	return 0;
}

/* Run call with the live file handed to euid first, and back if it fails. */
#define PS_UID_DOOR(name, params, args, euid)                                     \
	PS_EXPORT int name params                                                 \
	{                                                                         \
		if (!ps_enabled())                                                \
			return REAL(name) args;                                   \
		ps_live_before_uid(euid);                                         \
		int rc = REAL(name) args;                                         \
		ps_live_after_uid(rc == 0);                                       \
		return rc;                                                        \
	}

PS_UID_DOOR(setuid, (uid_t u), (u), u)
PS_UID_DOOR(seteuid, (uid_t e), (e), e)
PS_UID_DOOR(setreuid, (uid_t r, uid_t e), (r, e), e)
PS_UID_DOOR(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s), e)

PS_EXPORT int chroot(const char *root)
{
	if (!ps_enabled())
		return REAL(chroot)(root);
	int dir = ps_live_before_chroot(root);
	int r = REAL(chroot)(root);
	ps_live_after_chroot(dir, r == 0);
	return r;
}
