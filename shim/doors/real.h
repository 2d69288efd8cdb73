/* SPDX-License-Identifier: MIT */
/*
 * The real libc functions behind the interposers: one list, one pointer
 * each (real_NAME), one way to bind them.  ps_real_init() binds them all
 * with dlsym(RTLD_NEXT) at start; REAL(name) is the same pointer for a
 * call that may come before that (another library's constructor doing
 * I/O, a signal handler set up first thing), binding it on the spot.  A
 * function libc lacks (never seen with glibc) is bound to a stub that
 * fails with ENOSYS instead of crashing, so no pointer is ever NULL once
 * bound.
 *
 * The allocator that owns the heap when we do not (heap.c) is bound from
 * its own object with ps_real_bind_from(), the same lookup with a check
 * of where each definition lives.
 */
#ifndef PS_REAL_H
#define PS_REAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "format/compiler.h"

#define PS_REAL_FUNCS(X)                                                                   \
	X(ssize_t, read, (int, void *, size_t))                                             \
	X(ssize_t, write, (int, const void *, size_t))                                      \
	X(ssize_t, pread, (int, void *, size_t, off_t))                                     \
	X(ssize_t, pwrite, (int, const void *, size_t, off_t))                              \
	X(ssize_t, readv, (int, const struct iovec *, int))                                 \
	X(ssize_t, writev, (int, const struct iovec *, int))                                \
	X(ssize_t, preadv, (int, const struct iovec *, int, off_t))                         \
	X(ssize_t, pwritev, (int, const struct iovec *, int, off_t))                        \
	X(ssize_t, preadv2, (int, const struct iovec *, int, off_t, int))                   \
	X(ssize_t, pwritev2, (int, const struct iovec *, int, off_t, int))                  \
	X(ssize_t, recv, (int, void *, size_t, int))                                        \
	X(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *))    \
	X(ssize_t, recvmsg, (int, struct msghdr *, int))                                    \
	X(int, recvmmsg, (int, struct mmsghdr *, unsigned, int, struct timespec *))         \
	X(ssize_t, send, (int, const void *, size_t, int))                                  \
	X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int))                              \
	X(int, sendmmsg, (int, struct mmsghdr *, unsigned, int))                            \
	X(ssize_t, sendfile, (int, int, off_t *, size_t))                                   \
	X(ssize_t, splice, (int, off_t *, int, off_t *, size_t, unsigned))                  \
	X(int, close, (int))                                                                \
	X(int, fclose, (FILE *))                                                            \
	X(int, dup, (int))                                                                  \
	X(int, dup2, (int, int))                                                            \
	X(int, dup3, (int, int, int))                                                       \
	X(int, fcntl, (int, int, ...))                                                      \
	X(int, close_range, (unsigned, unsigned, int))                                      \
	X(int, open, (const char *, int, ...))                                              \
	X(int, openat, (int, const char *, int, ...))                                       \
	X(int, __open_2, (const char *, int))                                               \
	X(int, __open64_2, (const char *, int))                                             \
	X(int, __openat_2, (int, const char *, int))                                        \
	X(int, __openat64_2, (int, const char *, int))                                      \
	X(int, socket, (int, int, int))                                                     \
	X(int, accept, (int, struct sockaddr *, socklen_t *))                               \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int))                         \
	X(int, pipe, (int *))                                                               \
	X(int, pipe2, (int *, int))                                                         \
	X(int, socketpair, (int, int, int, int *))                                          \
	X(int, mprotect, (void *, size_t, int))                                             \
	X(int, pkey_mprotect, (void *, size_t, int, int))                                   \
	X(int, sigaction, (int, const struct sigaction *, struct sigaction *))              \
	X(sighandler_t, signal, (int, sighandler_t))                                        \
	X(sighandler_t, bsd_signal, (int, sighandler_t))                                    \
	X(sighandler_t, sysv_signal, (int, sighandler_t))                                   \
	X(sighandler_t, __sysv_signal, (int, sighandler_t))                                 \
	X(sighandler_t, sigset, (int, sighandler_t))                                        \
	X(int, sigignore, (int))                                                            \
	X(int, siginterrupt, (int, int))                                                    \
	X(int, execve, (const char *, char *const[], char *const[]))                        \
	X(int, execv, (const char *, char *const[]))                                        \
	X(int, execvp, (const char *, char *const[]))                                       \
	X(int, execvpe, (const char *, char *const[], char *const[]))                       \
	X(int, fexecve, (int, char *const[], char *const[]))                                \
	X(pid_t, _Fork, (void))                                                             \
	X(void, exit, (int))                                                                \
	X(int, __cxa_atexit, (void (*)(void *), void *, void *))                            \
	X(void, _exit, (int))                                                               \
	X(void, _Exit, (int))                                                               \
	X(int, daemon, (int, int))                                                          \
	X(int, setuid, (uid_t))                                                             \
	X(int, seteuid, (uid_t))                                                            \
	X(int, setreuid, (uid_t, uid_t))                                                    \
	X(int, setresuid, (uid_t, uid_t, uid_t))                                            \
	X(int, chroot, (const char *))

#define PS_REAL_DECLARE(ret, name, params) extern PS_HIDDEN ret(*real_##name) params;
PS_REAL_FUNCS(PS_REAL_DECLARE)
#undef PS_REAL_DECLARE

/*
 * Bind every function of the list.  Call once at start, when dlsym may
 * allocate (the heap's owner is chosen).  Logs once if any is missing.
 */
void ps_real_init(void);

/* Bind *slot to name (or the ENOSYS stub) now; returns what it bound. */
void *ps_real_bind(void **slot, const char *name);

/*
 * real_NAME, bound first if it is not yet: for interposers that may run
 * before ps_real_init().  Past the gate of the I/O path (the shim is on)
 * every pointer is bound, and real_NAME is called directly.
 */
#define REAL(name)                                                                \
	(ps_likely(real_##name != NULL)                                           \
		 ? real_##name                                                    \
		 : (__typeof__(real_##name))ps_real_bind((void **)&real_##name, #name))

/*
 * The definition of name that handle's lookup finds, provided it lives in
 * the object loaded at owner (the allocator preloaded ahead of us, say);
 * else NULL.
 */
void *ps_real_bind_from(void *handle, const char *name, const void *owner);

/* The load address of the object that defines fn, or NULL. */
const void *ps_real_object_of(const void *fn);

/* Whether fn is defined in libpoolshim.so itself (a lookup found our interposer). */
bool ps_real_is_ours(const void *fn);

#endif
