// SPDX-License-Identifier: MIT
/*
 * Writing the report: where it may go (fd 2 only while it is the stderr
 * seen at start, never through a descriptor of ours, a file opened without
 * following links, a FIFO with a bounded wait), SIGPIPE held off meanwhile, and the one path that
 * gathers, renders and flushes a report (ps_report_write), shared by the
 * exit and dump reports and poolshim_report_fd().  Nothing here allocates
 * through the shim: the counters go to the scratch block, the text through
 * a stack ps_buf flushed with raw write(2), files are opened with raw
 * openat(2).  Part of the runtime.
 */
#include "core/report_out.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "format/fmt.h"
#include "format/sys.h"

/*
 * What fd 2 was when the shim started.  A program may close its stderr and
 * open something that then gets number 2 (its data file, a socket); the
 * report written there would end up in the program's data.  So fd 2 is
 * written only while it still is the open file it was at start.
 *
 * No copy of it is kept while the program runs: a descriptor the program
 * does not know about would hold its stderr open (a pipe's reader,
 * `out=$(prog 2>&1)` of a daemon, would wait for the daemon's end).  When
 * the program has closed or replaced its stderr (daemon(3) points it at
 * /dev/null), the report for stderr is not written: the program said where
 * its messages go, and POOLSHIM_STATS=PATH is the way to get a report from
 * it (poolshim(7)).  Only once exit has begun (ps_report_exit_begins) is
 * a copy taken, for the atexit handlers that close stderr (gnulib's
 * close_stdout, in every coreutils program): it lives as long as the
 * process's last moments.
 */
enum err_state { ERR_UNSEEN, ERR_NONE, ERR_SEEN };
static struct {
	enum err_state state;
	int copy;                 /* taken at exit (close-on-exec, >= 600), or -1 */
	dev_t dev, rdev;
	ino_t ino;
	mode_t type;
} err0 = { .state = ERR_UNSEEN, .copy = -1 };

void ps_report_keep_stderr(void)
{
	struct stat st;

	if (err0.state != ERR_UNSEEN)
		return;
	if (PS_SYSCALL(SYS_fstat, 2, &st) < 0) {
		/* Whatever gets number 2 later is the program's, never our stderr. */
		err0.state = ERR_NONE;
		return;
	}
	err0.dev = st.st_dev;
	err0.ino = st.st_ino;
	err0.rdev = st.st_rdev;
	err0.type = st.st_mode & S_IFMT;
	err0.state = ERR_SEEN;
}

/*
 * fd refers to the same file as fd 2 did at start.  (Not how it was
 * opened: the same file opened read-only at number 2 fails our write with
 * EBADF and loses nothing, and one fstat is all a process pays at start
 * and at exit for this.)
 */
static bool like_stderr_at_start(int fd)
{
	struct stat st;

	return PS_SYSCALL(SYS_fstat, fd, &st) == 0 && st.st_dev == err0.dev &&
	       st.st_ino == err0.ino && st.st_rdev == err0.rdev &&
	       (st.st_mode & S_IFMT) == err0.type;
}

/*
 * The copy taken at exit is still ours: an atexit handler may have closed
 * it and put its own file at that number (close-all loops do).  open(2)
 * and dup2(2) give the new descriptor no close-on-exec flag, which ours has.
 */
static bool copy_is_ours(void)
{
	if (err0.copy < 0)
		return false;
	long fdfl = PS_SYSCALL(SYS_fcntl, err0.copy, F_GETFD);
	return fdfl >= 0 && (fdfl & FD_CLOEXEC) && like_stderr_at_start(err0.copy);
}

/*
 * Copied as it is: whether it is still the stderr of the start is asked
 * of the copy when the report is written (copy_is_ours), and only if fd 2
 * is not by then.  A copy of some other file lives only for the exit.
 */
void ps_report_exit_begins(void)
{
	if (err0.state != ERR_SEEN || err0.copy >= 0 || strcmp(ps_cfg.stats, "off") == 0)
		return;
	long fd = PS_SYSCALL(SYS_fcntl, 2, F_DUPFD_CLOEXEC, 600);
	if (fd >= 0)
		err0.copy = (int)fd;
}

/*
 * Where a line or a report for stderr may go: fd 2 while it is the file it
 * was at start; else, once exit has begun, the copy taken then while it
 * still is that file; else nowhere.
 */
static int stderr_fd(void)
{
	switch (err0.state) {
	case ERR_UNSEEN:
		/* Never looked (no report to stderr): fd 2, as any message. */
		return PS_SYSCALL(SYS_fcntl, 2, F_GETFD) >= 0 ? 2 : -1;
	case ERR_NONE:
		return -1;
	case ERR_SEEN:
		break;
	}
	if (like_stderr_at_start(2))
		return 2;
	return copy_is_ours() ? err0.copy : -1;
}

int ps_report_stderr_fd(void)
{
	return stderr_fd();
}

#define SAY_MAX 16

/*
 * The system log, for a line with no stderr to go to: an nginx worker
 * (fd 2 is the error log nginx put there) that cannot write its report
 * would otherwise lose it without a word anywhere.  One datagram to
 * /dev/log (facility daemon, priority warning), the socket closed at once;
 * nothing without a syslog daemon.  Raw system calls: async-signal-safe,
 * and no descriptor the doors would see.
 */
static void to_syslog(const char *line, size_t n)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };
	char msg[PS_PATH_MAX + 168];
	long fd = PS_SYSCALL(SYS_socket, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	if (n > 0 && line[n - 1] == '\n')
		n--;
	if (n > sizeof(msg) - 4)
		n = sizeof(msg) - 4;
	memcpy(msg, "<28>", 4);
	memcpy(msg + 4, line, n);
	PS_SYSCALL(SYS_sendto, fd, msg, n + 4, MSG_DONTWAIT | MSG_NOSIGNAL, &a, sizeof(a));
	ps_sys_close((int)fd);
}

/*
 * SIGPIPE held off while we write: a reader that went away (a FIFO, a
 * stderr pipe) must not end the program with a signal it would not have
 * got.  The kernel sends it to the writing thread, so this thread's mask is
 * enough; one that we raised is taken back before the mask is restored.
 */
#define KSIGSET_SIZE (_NSIG / 8)

struct pipe_guard {
	sigset_t old;
	bool was_pending;
};

static bool sigpipe_pending(void)
{
	sigset_t pend;

	sigemptyset(&pend);
	return PS_SYSCALL(SYS_rt_sigpending, &pend, KSIGSET_SIZE) == 0 && sigismember(&pend, SIGPIPE);
}

static void pipe_guard_on(struct pipe_guard *g)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigemptyset(&g->old);
	PS_SYSCALL(SYS_rt_sigprocmask, SIG_BLOCK, &set, &g->old, KSIGSET_SIZE);
	g->was_pending = sigpipe_pending();
}

static void pipe_guard_off(struct pipe_guard *g)
{
	if (!g->was_pending && sigpipe_pending()) {
		sigset_t set;
		struct timespec now = { 0, 0 };
		siginfo_t si;

		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		PS_SYSCALL(SYS_rt_sigtimedwait, &set, &si, &now, KSIGSET_SIZE);
	}
	PS_SYSCALL(SYS_rt_sigprocmask, SIG_SETMASK, &g->old, NULL, KSIGSET_SIZE);
}

/* One line for the user where stderr_fd() allows it, else to the system log; a few per process at most. */
void ps_report_say(const char *fmt, ...)
{
	static int said;
	char storage[PS_PATH_MAX + 160];
	va_list ap;

	if (__atomic_add_fetch(&said, 1, __ATOMIC_RELAXED) > SAY_MAX)
		return;
	int fd = stderr_fd();
	va_start(ap, fmt);
	size_t n = ps_log_line(storage, sizeof(storage), fmt, ap);
	va_end(ap);
	if (fd >= 0) {
		/* stderr may be the pipe whose reader just went away (the report's EPIPE). */
		struct pipe_guard g;
		pipe_guard_on(&g);
		ps_sys_write_all(fd, storage, n);
		pipe_guard_off(&g);
	} else {
		to_syslog(storage, n);
	}
}

void ps_report_syslog(const char *fmt, ...)
{
	char storage[PS_PATH_MAX + 160];
	va_list ap;

	va_start(ap, fmt);
	size_t n = ps_log_line(storage, sizeof(storage), fmt, ap);
	va_end(ap);
	to_syslog(storage, n);
}

/* The start of an earlier report of this pid (a dump, the image before exec). */
static bool earlier_report(int fd, int pid)
{
	static const char json[] = "{\"schema\":\"poolshim-report\",\"version\":";
	char head[128], want[64];
	struct ps_buf b;
	long n = PS_SYSCALL(SYS_pread64, fd, head, sizeof(head) - 1, 0);

	if (n <= 0)
		return false;
	head[n] = '\0';
	ps_buf_init(&b, want, sizeof(want), -1);
	ps_buf_printf(&b, "==== poolshim report: pid %d (", pid);
	ps_buf_str(&b);
	if (strncmp(head, want, strlen(want)) == 0)
		return true;
	if (strncmp(head, json, sizeof(json) - 1) != 0)
		return false;
	const char *s = head + sizeof(json) - 1;
	while (*s >= '0' && *s <= '9')
		s++;
	ps_buf_init(&b, want, sizeof(want), -1);
	ps_buf_printf(&b, ",\"pid\":%d,", pid);
	ps_buf_str(&b);
	return strncmp(s, want, strlen(want)) == 0;
}

/*
 * Open path for the report: never through a symbolic link, never blocking
 * (a FIFO with no reader fails with ENXIO), never into a file that is not
 * ours alone.  A regular file must be owned by us with no other hard link
 * (truncating a link would clobber the file it points to); a per-process
 * name (%p) must be new, or hold an earlier report of this same pid.  A
 * FIFO owned by us is written, non-blocking (*fifo set).  fd or -errno,
 * with *why saying what was wrong when the errno alone would not.
 */
static int open_report(const char *path, bool per_process, int pid, bool *fifo, const char **why)
{
	const int how = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat st;
	bool fresh = false;
	long fd;
	int r = 0;

	*fifo = false;
	*why = NULL;
	if (per_process) {
		fd = ps_sys_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | how, 0600);
		fresh = fd >= 0;
		/* Read access to look for our own earlier report in it. */
		if (fd == -EEXIST)
			fd = ps_sys_openat(AT_FDCWD, path, O_RDWR | how, 0);
	} else {
		fd = ps_sys_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | how, 0600);
	}
	if (fd < 0) {
		if (fd == -ENXIO)
			*why = "a FIFO with no reader";
		else if (fd == -ELOOP)
			*why = "a symbolic link: a report is never written through one; name the file itself";
		return (int)fd;
	}
	if (PS_SYSCALL(SYS_fstat, fd, &st) < 0) {
		r = -EIO;
	} else if (st.st_uid != (uid_t)PS_SYSCALL(SYS_geteuid)) {
		r = -EPERM;
		*why = "not owned by this user";
	} else if (S_ISFIFO(st.st_mode) && !per_process) {
		*fifo = true;
	} else if (!S_ISREG(st.st_mode)) {
		r = -EPERM;
		*why = per_process ? "not a regular file" : "not a regular file or FIFO";
	} else if (st.st_nlink != 1) {
		r = -EPERM;
		*why = "a file with other hard links";
	} else if (per_process && !fresh && !earlier_report((int)fd, pid)) {
		r = -EEXIST;
		*why = "someone else's file";
	}
	if (r == 0 && !*fifo) {
		/* O_NONBLOCK was for FIFOs; a file may see EAGAIN under a lock. */
		long fl = PS_SYSCALL(SYS_fcntl, fd, F_GETFL);
		if (fl >= 0)
			PS_SYSCALL(SYS_fcntl, fd, F_SETFL, fl & ~O_NONBLOCK);
		if (!fresh)
			PS_SYSCALL(SYS_ftruncate, fd, 0);
	}
	if (r < 0) {
		ps_sys_close((int)fd);
		return r;
	}
	return (int)fd;
}

#define FIFO_REPORT_MAX (8UL << 20)   /* address space only; pages as used */
#define FIFO_WAIT_MS 2000

/*
 * All of p[len] into a non-blocking fd, waiting for room at most
 * FIFO_WAIT_MS in all: a reader that stops reading must not keep the
 * program from exiting.  0 or -errno (-ETIMEDOUT).
 */
static int write_bounded(int fd, const char *p, size_t len)
{
	/* Linux's ppoll(2) leaves the time not waited in left: one budget for all. */
	struct timespec left = { FIFO_WAIT_MS / 1000, (FIFO_WAIT_MS % 1000) * 1000000L };

	while (len > 0) {
		long n = ps_sys_write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == -EINTR)
			continue;
		if (n != -EAGAIN)
			return n < 0 ? (int)n : -EIO;
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		long k = PS_SYSCALL(SYS_ppoll, &pfd, 1, &left, NULL, 0);
		if (k == 0)
			return -ETIMEDOUT;
		if (k < 0 && k != -EINTR)
			return (int)k;
	}
	return 0;
}

/* Render into memory first: the stream to a FIFO must be able to give up. */
static int write_fifo(int fd, const struct ps_report_data *d, enum ps_stats_format format)
{
	struct ps_buf b;
	char *mem = mmap(NULL, FIFO_REPORT_MAX, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (mem == MAP_FAILED)
		return -ENOMEM;
	ps_buf_init(&b, mem, FIFO_REPORT_MAX, -1);
	ps_report_render(&b, d, format);
	int r = b.truncated ? -EFBIG : write_bounded(fd, b.p, b.len);
	munmap(mem, FIFO_REPORT_MAX);
	return r;
}


static const char *err_name(int r)
{
	const char *n = ps_errno_name(-r);
	return n ? n : "error";
}

int ps_report_write(int fd, enum ps_stats_format format, unsigned how)
{
	struct ps_report_data d;
	char storage[4096];
	struct ps_buf b;
	int r;

	int saved_errno = errno;
	struct ps_tstats *scratch = ps_report_scratch_get();
	if (!scratch)
		return -ENOMEM;
	ps_report_gather(&d, scratch, !(how & PS_REPORT_IN_SIGNAL));
	if (how & PS_REPORT_BOUNDED) {
		r = write_fifo(fd, &d, format);
	} else {
		/*
		 * On stderr under the `poolshim` wrapper, rendered into memory
		 * and written with one write() where it fits: the wrapper's
		 * helper writes the reports of the run's other processes on
		 * the same stderr meanwhile, and neither cuts the other's.
		 * Else (and without the wrapper, where nothing else is added)
		 * in pieces as it fills.
		 */
		bool shared = fd == 2 && ps_cfg.run[0];
		char *mem = shared ? mmap(NULL, FIFO_REPORT_MAX, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
		bool whole = false;
		if (mem != MAP_FAILED) {
			ps_buf_init(&b, mem, FIFO_REPORT_MAX, -1);
			ps_report_render(&b, &d, format);
			if (!b.truncated) {
				r = ps_sys_write_all(fd, b.p, b.len);
				whole = true;
			}
			munmap(mem, FIFO_REPORT_MAX);
		}
		if (!whole) {
			ps_buf_init(&b, storage, sizeof(storage), fd);
			ps_report_render(&b, &d, format);
			r = ps_buf_flush(&b);
		}
	}
	ps_report_scratch_put(scratch);
	errno = saved_errno;
	return r;
}

int ps_report_emit(const struct ps_config *cfg, unsigned how)
{
	struct pipe_guard g;
	char path[PS_PATH_MAX + 64];
	bool to_stderr = strcmp(cfg->stats, "stderr") == 0, fifo = false;
	const char *why = NULL, *program;
	int fd = 2, pid, r;

	/*
	 * /dev/null is where people send what they mean to throw away: done,
	 * as with off (opening it would fail the checks below, a device not
	 * ours, and the report would be kept in the live record instead).
	 */
	if (strcmp(cfg->stats, "off") == 0 || strcmp(cfg->stats, "/dev/null") == 0)
		return 0;
	if (to_stderr && (fd = stderr_fd()) < 0)
		return -EBADF;

	int saved_errno = errno;
	if (!to_stderr) {
		ps_report_ident(&pid, &program);
		r = ps_report_path(path, sizeof(path), cfg->stats, pid, program);
		if (r == 0)
			r = fd = open_report(path, ps_report_path_names_pid(cfg->stats), pid, &fifo, &why);
		if (r < 0) {
			ps_report_say("cannot write the report to %s: %s%s%s%s", cfg->stats, err_name(r),
			    why ? " (" : "", why ? why : "", why ? ")" : "");
			errno = saved_errno;
			return r;
		}
	}
	/* Only a pipe or a socket can raise SIGPIPE: a file or a terminal needs no guard. */
	bool guard = to_stderr ? err0.state != ERR_SEEN || err0.type == S_IFIFO ||
				 err0.type == S_IFSOCK : fifo;
	if (guard)
		pipe_guard_on(&g);
	r = ps_report_write(fd, cfg->stats_format, how | (fifo ? PS_REPORT_BOUNDED : 0));
	if (guard)
		pipe_guard_off(&g);
	if (!to_stderr) {
		ps_sys_close(fd);
		if (r < 0)
			ps_report_say("cannot write the report to %s: %s%s", cfg->stats, err_name(r),
			    r == -ETIMEDOUT ? " (the reader stopped reading)" :
			    r == -EPIPE ? " (the reader went away)" : "");
	}
	errno = saved_errno;
	return r;
}
