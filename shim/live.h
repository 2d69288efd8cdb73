/* SPDX-License-Identifier: MIT */
/*
 * Live counters in shared memory.  Each process under the shim keeps its
 * per-thread counter blocks in a file, /dev/shm/poolshim-PID-NS.stats
 * (mode 0600; NS is the inode of the process's pid namespace, 0 when /proc
 * is not there, so processes with the same pid in two namespaces sharing
 * /dev/shm keep apart), so `poolshim stat` can read a running process, or
 * one killed with SIGKILL, without its help.  The file holds a header
 * (identity and gauges) followed by up to PS_LIVE_BLOCKS counter blocks;
 * threads beyond that, or whose block /dev/shm had no room for, count in
 * anonymous memory and appear only in the exit report (the header counts
 * them in `unpublished`).
 */
#ifndef PS_LIVE_H
#define PS_LIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "pool.h"
#include "stats.h"

#define PS_LIVE_MAGIC "PSLIVE01"
#define PS_LIVE_VERSION 2
#define PS_LIVE_BLOCKS 128
#define PS_LIVE_DIR "/dev/shm"
#define PS_LIVE_HEADER 8192          /* bytes before the first block */
#define PS_LIVE_REASON 112

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
	/*
	 * Appended by issue 36, within the version-2 header (older writers
	 * leave it zero: no slots): the O_DIRECT router's table (route.c).
	 */
	struct ps_route_table routes;
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
 * Around a change of the effective uid to euid ((uid_t)-1: unchanged):
 * before, the file is handed to euid, so that the process can still
 * remove it from the sticky directory (or, if it may not, removed now);
 * after, changed says whether the call succeeded (if not, the file goes
 * back).  Keep errno.
 */
void ps_live_before_uid(uid_t euid);
void ps_live_after_uid(bool changed);

/*
 * Around chroot(root): if the new root does not reach the file, before
 * returns a directory descriptor (O_PATH, for the one call; else -1)
 * through which after removes it when changed (the chroot succeeded)
 * and closes it.  The exit report is not affected.  Keep errno.
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
