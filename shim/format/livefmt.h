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
#ifndef PS_LIVEFMT_H
#define PS_LIVEFMT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "format/config.h"
#include "format/poolinfo.h"
#include "format/stats.h"

#define PS_LIVE_MAGIC "PSLIVE01"
#define PS_LIVE_VERSION 4
#define PS_LIVE_BLOCKS 128
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
 * Where live files are: PS_LIVE_DIR unless POOLSHIM_LIVE_DIR (the shim) or
 * --live-dir (stat) moved them, e.g. to a directory a container shares
 * with its host.  0, or -errno for a directory that cannot hold them.
 */
int ps_live_set_dir(const char *dir);
const char *ps_live_dir(void);
#define PS_LIVE_DIR_MAX 160

/* The path of the file of PID in pid namespace NS into out[cap]. */
void ps_live_path(char *out, unsigned long cap, int pid, uint64_t ns);
/* The hidden name a file is made under before it is renamed into place. */
void ps_live_path_new(char *out, unsigned long cap, int pid, uint64_t ns);
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
