/* SPDX-License-Identifier: MIT */
/*
 * The live record: what the process publishes, and the truth its report is
 * rendered from.  Each process under the shim keeps its per-thread counter
 * blocks in a file, /dev/shm/poolshim-PID-NS.stats (mode 0600; NS is the
 * inode of the process's pid namespace, 0 when /proc is not there, so
 * processes with the same pid in two namespaces sharing /dev/shm keep
 * apart), so `poolshim stat` can read a running process and `poolshim
 * collect` (or the `poolshim` wrapper) can render the report of one that
 * ended without writing it: killed with SIGKILL or by the OOM killer,
 * chrooted, its stderr pointed elsewhere, its report path unwritable.  The
 * file holds a header (identity, gauges, the effective configuration,
 * where the report goes, how the process ended) followed by up to
 * PS_LIVE_BLOCKS counter blocks, with POOLSHIM_BACKTRACE the call-site
 * table after the blocks' room (sites_off, sites_len; sites.h), and, once
 * the process has rendered its own report but could not deliver it, that
 * report (blob_off, blob_len).
 * Threads beyond the blocks, or whose block /dev/shm had no room for,
 * count in anonymous memory and appear only in a report the process
 * renders itself (the header counts them in `unpublished`).
 *
 * Readers trust nothing in it: see tools/ (every size, count, offset,
 * enumeration and string is checked before use).
 */
#ifndef PS_LIVE_H
#define PS_LIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "format/config.h"
#include "core/pool.h"
#include "format/stats.h"

#define PS_LIVE_MAGIC "PSLIVE01"
#define PS_LIVE_VERSION 4
#define PS_LIVE_BLOCKS 128
#define PS_LIVE_DIR "/dev/shm"
#define PS_LIVE_HEADER 8192          /* bytes before the first block */
#define PS_LIVE_REASON 112
#define PS_LIVE_STATS (PS_PATH_MAX + 64)   /* POOLSHIM_STATS expanded for the process */
#define PS_LIVE_CONFIG 3328                /* the effective configuration, NAME=value lines */

/* How the process ended, as far as it could tell (header field `end`). */
enum ps_live_end {
	PS_END_RUNNING = 0,          /* still running, or killed (SIGKILL, the OOM killer, a crash) */
	PS_END_EXIT = 1,             /* exit(), a return from main, _exit(): status when known */
	PS_END_SIGNAL = 2,           /* the dump signal at its default ended it (status: the signal) */
	PS_END__COUNT
};

/* Where the report stands (header field `report`). */
enum ps_live_report {
	PS_REC_PENDING = 0,          /* not rendered yet: a reader renders it from the counters */
	PS_REC_DELIVERED = 1,        /* the process wrote it where POOLSHIM_STATS says */
	PS_REC_KEPT = 2,             /* rendered by the process, kept in the file for a reader to deliver */
	PS_REC_NONE = 3,             /* no report wanted (POOLSHIM_STATS=off), or no work worth one */
	PS_REC__COUNT
};

/* Header `flags`. */
#define PS_REC_STATUS_KNOWN 1u      /* exit_status holds the status the process exited with */
#define PS_REC_CHILD 2u             /* a fork child of the process that started the shim */

struct ps_live_header {
	char magic[8];
	uint32_t version;
	uint32_t max_blocks;
	uint64_t block_size;         /* sizeof(struct ps_tstats), for readers to check */
	uint64_t block_stride;       /* distance between blocks */
	uint32_t nblocks;            /* blocks handed out so far */
	int32_t pid;
	uint64_t starttime;          /* /proc/PID/stat field 22: tells pid reuse apart */
	char program[64];
	int32_t exited;              /* the process wrote its exit report */
	/* gauges, republished when they change */
	struct ps_gauges gauges;
	uint64_t pool_min;
	struct {
		int32_t requested;
		int32_t first_mode;
		uint64_t slabs, backed, cap, reserve;
		uint64_t backed_by[PS_BACK__COUNT];
		uint64_t failures[PS_FAIL__COUNT];
		char hugetlb_reason[PS_LIVE_REASON];
		char thp_reason[PS_LIVE_REASON];
	} pool;
	int32_t pool_ready;
	int32_t uring_state;
	uint64_t uring_rings;
	char uring_reason[PS_LIVE_REASON];
	/* version 2 */
	uint64_t pidns;              /* inode of the pid namespace, as in the file name */
	uint32_t unpublished;        /* threads counting outside the file (full, or no room) */
	uint32_t threads_peak;       /* the most threads counting at once (0: older writer) */
	/* version 3: what a report rendered without the process needs */
	uint32_t flags;              /* PS_REC_* */
	int32_t end;                 /* enum ps_live_end */
	int32_t exit_status;         /* exit status, or the signal for PS_END_SIGNAL */
	int32_t report;              /* enum ps_live_report */
	int32_t stats_format;        /* enum ps_stats_format of the report */
	uint32_t pad0;
	int64_t start_time;          /* seconds since the epoch, or -1 */
	/* Page faults and CPU time, as of usage_time (realtime seconds): at exit, else at most a second old. */
	uint64_t minflt, majflt, utime_us, stime_us;
	int64_t usage_time;
	/* A report the process rendered and could not deliver (PS_REC_KEPT): bytes in the file. */
	uint64_t blob_off, blob_len;
	char stats[PS_LIVE_STATS];   /* where the report goes: "stderr", "off" or a path, expanded */
	char run[PS_ID_MAX];          /* POOLSHIM_RUN at start ("" without the wrapper) */
	char report_error[PS_LIVE_REASON];   /* why the process could not deliver its report */
	char heap_owner[PS_LIVE_REASON];     /* malloc's file when not ours, else "" */
	char shim_version[32];
	char host[65], kernel[65];
	char config[PS_LIVE_CONFIG]; /* the effective configuration, "NAME=value\n" each */
	/*
	 * Appended by issue 36, within the version-3 header (older writers
	 * leave it zero: no slots): the O_DIRECT router's table (route.c).
	 */
	struct ps_route_table routes;
	/*
	 * Version 4: the call-site table (sites.h's region), after the
	 * blocks' room, at sites_off (0: none; only with POOLSHIM_BACKTRACE).
	 */
	uint64_t sites_off, sites_len;
	/*
	 * Appended within version 4 (older writers leave it zero: not known):
	 * the pool's free blocks under the page-exact placement, copied by
	 * blocks.c after each change once the pool is set up (its mirror).
	 */
	struct {
		uint64_t known;          /* 1: the fields below are set */
		uint64_t blocks, bytes, zero_bytes, largest;
	} free;
};

/*
 * Set up the live view: the file itself is made later (ps_live_tick,
 * ps_live_pool_changed).  0, or -errno when POOLSHIM_LIVE_DIR is unusable.
 */
int ps_live_init(const struct ps_config *cfg);
/* The pool changed (a slab was added): make the file if due, then publish. */
void ps_live_pool_changed(void);
/* Copy the pool and io_uring state into the header (after they change). */
void ps_live_publish(void);
/*
 * In a fork child: move the counters over the parent's file into private
 * memory, and arm ps_live_file_due.
 */
void ps_live_after_fork_child(void);

/*
 * Nonzero in a process that has no file of its own yet: the one that
 * started the shim, and a fork child.  It publishes one when it is still
 * counting PS_LIVE_FILE_DELAY_NS after start or fork (ps_live_tick(),
 * called from the I/O path's slow branch), or, the process that started
 * the shim, at its first pool slab.  A server's long-lived workers show in
 * `poolshim stat`; short processes, and the many children that _exit()
 * soon after fork, make no file.
 */
extern int ps_live_file_due;
#define PS_LIVE_FILE_DELAY_NS 1000000000ull
/* Files made, ever, and the count a thread has seen: its block moves in when they differ. */
extern uint32_t ps_live_gen;
extern __thread uint32_t ps_live_gen_seen;
static inline bool ps_live_tick_wanted(void)
{
	return __atomic_load_n(&ps_live_file_due, __ATOMIC_RELAXED) ||
	       ps_live_gen_seen != __atomic_load_n(&ps_live_gen, __ATOMIC_RELAXED);
}
void ps_live_tick(void);
/* A thread ends: its counts move into the file if they are not there yet. */
void ps_live_thread_exit(void);
/* Around an exec: the file goes before it, and a new one comes after a failure. */
void ps_live_before_exec(void);
void ps_live_after_failed_exec(void);
/* At exit: remove the file. */
void ps_live_remove(void);

/*
 * The end (end.c).  Whether this process has a record of its own now;
 * make it now (a process about to end that had none yet); its path into
 * out[cap] (0, or -ENOENT without one).
 */
bool ps_live_exists(void);
void ps_live_make_now(void);
int ps_live_where(char *out, size_t cap);
/*
 * Page faults and CPU time into the header: at the end, and from the
 * counting slow path at most every PS_LIVE_USAGE_NS (ps_live_usage_tick),
 * so a record left by a killed process is at most that old.
 */
#define PS_LIVE_USAGE_NS 1000000000ull
void ps_live_usage(void);
void ps_live_usage_tick(void);
/* How the process ended (enum ps_live_end), with its status when known. */
void ps_live_end(int end, int status, bool status_known);
/* The process wrote its report itself. */
void ps_live_delivered(void);
/*
 * Render the report (format: enum ps_stats_format; how: report_out.h's
 * flags) into the record for a reader to deliver, with why the process
 * did not (NULL: the wrapper delivers).  0 or -errno.  Async-signal-safe.
 */
int ps_live_keep_report(int format, unsigned how, const char *why);

/*
 * Around a change of the effective uid to euid ((uid_t)-1: unchanged):
 * before, the file is handed to euid, so that the process can still
 * remove it from the sticky directory (or, if it may not, removed now);
 * after, changed says whether the call succeeded (if not, the file goes
 * back).  Keep errno.
 */
void ps_live_before_uid(uid_t euid);
void ps_live_after_uid(bool changed);

/*
 * Around chroot(root): before says whether the new root leaves the file
 * out of reach by its path (1) or not (-1); after, told whether the
 * chroot succeeded, stops every use of the path (the record itself stays,
 * mapped, and is rendered by `poolshim collect` after the process ends).
 * Keep errno.
 */
int ps_live_before_chroot(const char *root);
void ps_live_after_chroot(int dir, bool changed);

/*
 * Where live files are: PS_LIVE_DIR unless POOLSHIM_LIVE_DIR (the shim) or
 * --live-dir (stat) moved them, e.g. to a directory a container shares
 * with its host.  0, or -errno for a directory that cannot hold them.
 */
int ps_live_set_dir(const char *dir);
const char *ps_live_dir(void);
#define PS_LIVE_DIR_MAX 160

/*
 * Record names.  A process makes its file under a hidden name with an
 * unpredictable TAG (16 hex digits: getrandom), .poolshim-PID-NS.TAG.stats.new,
 * with O_EXCL, so no other user can take that name first, and renames it
 * to the plain name poolshim-PID-NS.stats; where the plain name is held
 * by a file the process may not replace (another user's, in the sticky
 * /dev/shm: one put there to deny it a record), to poolshim-PID-NS.TAG.stats
 * instead.  Readers find both (ps_live_parse_name; tools/record.c's
 * ps_record_find, ps_record_scan).
 *
 * The path of the file of PID in pid namespace NS into out[cap]: the
 * plain name, or with tag (non-zero) the tagged one.
 */
void ps_live_path(char *out, unsigned long cap, int pid, uint64_t ns);
void ps_live_path_tagged(char *out, unsigned long cap, int pid, uint64_t ns, uint64_t tag);
/* The hidden name a file is made under before it is renamed into place. */
void ps_live_path_new(char *out, unsigned long cap, int pid, uint64_t ns, uint64_t tag);
/*
 * Which record a directory entry's name is: 1 a visible record (*tag 0
 * for the plain name), 2 a hidden one being made (or left half made),
 * 0 not a record's name.
 */
int ps_live_parse_name(const char *name, int *pid, uint64_t *ns, uint64_t *tag);
/* The start time of pid from /proc, of this process when pid is 0 (0 when unknown). */
uint64_t ps_live_starttime(int pid);
/* The inode of this process's pid namespace (0 when /proc is not mounted). */
uint64_t ps_live_pidns(void);

/*
 * Numeric fields of /proc/PID/stat (of this process when pid is 0), as
 * proc(5) numbers them (10 minflt, 12 majflt, 14 utime, 15 stime, 22
 * starttime): out[i] gets field fields[i].  0, or -errno.
 */
int ps_proc_stat(int pid, const int *fields, uint64_t *out, int n);

#endif
