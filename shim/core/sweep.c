// SPDX-License-Identifier: MIT
/*
 * Records of ended processes do not pile up with the library alone (issue
 * 45).  A process killed by a signal never removes its record, and with no
 * wrapper and no systemd unit nobody else does: tmpfs is memory, and each
 * run of a test suite that stops its servers with SIGINT left hundreds.
 *
 * So a process that makes its own record (live.c's make_file, which is
 * already off the start-up path: a process makes one only once it has done
 * real work or lived a second, so once per process image) also looks for
 * records of its own user whose process is gone, and removes those that
 * have not changed (the file) nor counted (its usage time) for
 * POOLSHIM_RECORD_TTL.  Not under a run
 * (POOLSHIM_RUN): the wrapper's helper or the unit's ExecStopPost= is its
 * collector.  No rate shared between processes: a mark file in the live
 * directory would be one more thing there, and another user could hold its
 * name; a look costs a directory read and one fstatat per record name,
 * and the open of /proc/PID/stat only for this user's records old enough
 * to go.  No thread, no child, no signal, no work at start;
 * raw system calls only (make_file may run inside malloc or a signal
 * handler), with small buffers on the stack, and nothing that blocks: every
 * open is O_NONBLOCK | O_NOFOLLOW, and the scan stops after SWEEP_ENTRIES
 * directory entries or SWEEP_OPENS records opened (those left wait for the
 * next look).
 *
 * The report of a removed record is not rendered here.  That would take the
 * record reader (tools/record.c: stdio, malloc, symbolisation) into every
 * process, inside malloc, on files that are untrusted input; and a
 * "stderr" report of a killed process has nowhere to go (its stderr is
 * gone, this process's is not its own).  What is lost is said instead, in
 * one line to the system log per look (how many, the first pids), as
 * report_out.c says a report with no stderr to go to; records whose
 * report was delivered or not wanted (POOLSHIM_STATS=off) go silently.
 * Whoever wants those reports has the wrapper, the systemd drop-in, or
 * `poolshim collect` within the TTL (or POOLSHIM_RECORD_TTL=0, which keeps
 * records as before).  Records of a run (POOLSHIM_RUN: the wrapper's or a
 * unit's) are left to that run's collector.
 *
 * Records are untrusted input.  Only these are touched: in a directory
 * owned by root or this euid and either writable by no one else or sticky
 * (where nobody else may rename or remove this user's files); a visible
 * record's name of this pid namespace (not 0: unknown), not this process's,
 * judged only where /proc/self is this process (a /proc of this namespace);
 * a regular file, not a link (O_NOFOLLOW, lstat-like fstatat), with one
 * link, owned by this euid, at least a header long; a header with the
 * magic whose pid and pid namespace are the name's, whose run is empty and
 * whose start time is set; and /proc saying the pid is gone or is another
 * process now (a zombie is not gone yet).  The name is looked at again
 * just before unlinkat: still the same file.
 */
#include "core/live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "format/config.h"
#include "format/fmt.h"
#include "format/livefmt.h"
#include "format/sys.h"
#include "core/report_out.h"

/* Directory entries one look reads, and records it opens, at most: a bound on its cost. */
#define SWEEP_ENTRIES 4096
#define SWEEP_OPENS 256

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int64_t real_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

/* Whether files of this euid in the directory may be removed by name safely. */
static bool dir_safe(int dfd, uid_t me)
{
	struct stat st;

	if (PS_SYSCALL(SYS_fstat, dfd, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	if (st.st_uid != me && st.st_uid != 0)
		return false;
	return !(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX);
}

static bool read_at(int fd, void *out, size_t len, size_t off)
{
	return PS_SYSCALL(SYS_pread64, fd, out, len, (long)off) == (long)len;
}

/* Whether the record called name (pid in namespace ns) is one to remove now. */
static bool ended_and_old(int dfd, const char *name, int pid, uint64_t ns, uid_t me,
			  int64_t now, int64_t ttl, struct stat *was, bool *lost, int *opens)
{
	struct stat st;

	if (PS_SYSCALL(SYS_newfstatat, dfd, name, was, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(was->st_mode) || was->st_uid != me || was->st_nlink != 1 ||
	    was->st_size < PS_LIVE_HEADER)
		return false;
	/* Not changed for the TTL: made, grown by a thread's block, handed over, renamed (and below: counting). */
	int64_t changed = was->st_mtime > was->st_ctime ? was->st_mtime : was->st_ctime;
	if (now - changed < ttl || *opens >= SWEEP_OPENS)
		return false;
	++*opens;
	long fd = ps_sys_openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC |
				O_NOCTTY, 0);
	if (fd < 0)
		return false;
	/* Three reads: the identity at the start, the namespace and report state, the run's first byte. */
	enum {
		A_END = offsetof(struct ps_live_header, starttime) + 8,
		B_AT = offsetof(struct ps_live_header, pidns),
		B_END = offsetof(struct ps_live_header, usage_time) + 8,
	};
	_Static_assert(A_END <= 64 && B_END - B_AT <= 96, "the fields read are not together");
	char a[A_END], b[B_END - B_AT], run0 = 1;
	int32_t hpid, report;
	uint64_t start, hns;
	int64_t used;
	bool ok = PS_SYSCALL(SYS_fstat, fd, &st) == 0 && st.st_dev == was->st_dev &&
		  st.st_ino == was->st_ino && read_at((int)fd, a, sizeof(a), 0) &&
		  read_at((int)fd, b, sizeof(b), B_AT) &&
		  read_at((int)fd, &run0, 1, offsetof(struct ps_live_header, run));
	ps_sys_close((int)fd);
	if (!ok)
		return false;
	memcpy(&hpid, a + offsetof(struct ps_live_header, pid), sizeof(hpid));
	memcpy(&start, a + offsetof(struct ps_live_header, starttime), sizeof(start));
	memcpy(&hns, b, sizeof(hns));
	memcpy(&report, b + offsetof(struct ps_live_header, report) - B_AT, sizeof(report));
	memcpy(&used, b + offsetof(struct ps_live_header, usage_time) - B_AT, sizeof(used));
	if (memcmp(a, PS_LIVE_MAGIC, 8) != 0 || hpid != pid || hns != ns || run0 != '\0' ||
	    start == 0)
		return false;
	/*
	 * Counting for the TTL too: the counting slow path stamps usage_time at
	 * most a second apart, so a busy process's record is old only a TTL
	 * after its end, however long ago the file last changed.  A time to
	 * come is no time (it would keep the record for ever).
	 */
	if (used > 0 && used <= now && now - used < ttl)
		return false;
	/* Its report not delivered and wanted: pending (killed) or kept (it could not write it). */
	*lost = report != PS_REC_DELIVERED && report != PS_REC_NONE;
	/* Gone (no /proc/PID), or the pid is another process's now; anything else: not judged. */
	static const int starttime_field[] = { 22 };
	uint64_t cur = 0;
	int r = ps_proc_stat(pid, starttime_field, &cur, 1);
	if (r == -ENOENT || r == -ESRCH)
		return true;
	return r == 0 && cur != start;
}

/* What one look removed without a report, for its line in the system log. */
struct lost {
	int count, opens;
	struct ps_buf pids;
	char text[160];
};

static void consider(int dfd, const char *name, int self, uint64_t my_ns, uid_t me,
		     int64_t now, int64_t ttl, struct lost *lost)
{
	int pid;
	uint64_t ns, tag;
	struct stat was, again;
	bool unsent = false;

	if (ps_live_parse_name(name, &pid, &ns, &tag) != 1 || ns == 0 || ns != my_ns || pid == self)
		return;
	if (!ended_and_old(dfd, name, pid, ns, me, now, ttl, &was, &unsent, &lost->opens))
		return;
	/* Still the file judged, not one put in its place since. */
	if (PS_SYSCALL(SYS_newfstatat, dfd, name, &again, AT_SYMLINK_NOFOLLOW) < 0 ||
	    again.st_dev != was.st_dev || again.st_ino != was.st_ino)
		return;
	if (PS_SYSCALL(SYS_unlinkat, dfd, name, 0) < 0 || !unsent)
		return;
	if (lost->count++ < 12)
		ps_buf_printf(&lost->pids, " %d", pid);
}

/*
 * Whether /proc is this process's pid namespace's: /proc/self names our own
 * pid.  A /proc of another namespace (the parent's, after unshare -p
 * without a /proc of its own, or mounted into a container) numbers
 * processes otherwise, and would call ours gone.
 */
static bool proc_is_ours(int self)
{
	char link[24];
	long n = PS_SYSCALL(SYS_readlinkat, AT_FDCWD, "/proc/self", link, sizeof(link) - 1);
	uint64_t v = 0;

	if (n <= 0)
		return false;
	for (long i = 0; i < n; i++) {
		if (link[i] < '0' || link[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(link[i] - '0');
	}
	return v == (uint64_t)self;
}

void ps_live_sweep(int self, uint64_t my_ns)
{
	int64_t ttl = (int64_t)ps_cfg.record_ttl;

	/* A run (the wrapper's, a unit's) has its collector: its processes pay nothing. */
	if (ttl <= 0 || my_ns == 0 || ps_cfg.run[0] || !proc_is_ours(self))
		return;
	int saved_errno = errno;
	uid_t me = (uid_t)PS_SYSCALL(SYS_geteuid);
	long dfd = ps_sys_openat(AT_FDCWD, ps_live_dir(), O_RDONLY | O_DIRECTORY | O_NONBLOCK |
				 O_CLOEXEC, 0);
	if (dfd < 0) {
		errno = saved_errno;
		return;
	}
	int64_t now = real_now();
	struct lost lost = { 0 };
	ps_buf_init(&lost.pids, lost.text, sizeof(lost.text), -1);
	if (dir_safe((int)dfd, me)) {
		_Alignas(8) char buf[1024];
		long n;
		int seen = 0;
		while (seen < SWEEP_ENTRIES &&
		       (n = PS_SYSCALL(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
			for (long at = 0; at < n && seen < SWEEP_ENTRIES; seen++) {
				struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + at);
				at += d->d_reclen;
				if (d->d_type == DT_REG || d->d_type == DT_UNKNOWN)
					consider((int)dfd, d->d_name, self, my_ns, me, now, ttl,
						 &lost);
			}
		}
	}
	ps_sys_close((int)dfd);
	/* One line for the lot: the reports are gone, and the log says whose. */
	if (lost.count)
		ps_report_syslog("removed the live records of %d ended processes of uid %u, "
				 "unchanged for POOLSHIM_RECORD_TTL=%llu s, their reports not "
				 "delivered (pids%s%s); `poolshim collect` renders such records "
				 "within the interval", lost.count, (unsigned)me,
				 (unsigned long long)ttl, ps_buf_str(&lost.pids),
				 lost.count > 12 ? " ..." : "");
	errno = saved_errno;
}
