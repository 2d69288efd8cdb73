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
 * program).  glibc runs the main thread's thread_local destructors first
 * in exit() (also on a return from main), so one registered here on the
 * main thread marks the moment; the shim keeps no descriptor before it.
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

#include "compiler.h"
#include "config.h"
#include "init.h"
#include "live.h"
#include "real.h"
#include "report_out.h"

extern int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso);
extern void *__dso_handle;

static void exit_begins(void *unused)
{
	(void)unused;
	ps_report_exit_begins();
}

/* Constructors run on the main thread.  The registration allocates: after start. */
__attribute__((constructor)) static void leave_ctor(void)
{
	if (ps_enabled() && strcmp(ps_cfg.stats, "off") != 0)
		__cxa_thread_atexit_impl(exit_begins, NULL, &__dso_handle);
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
