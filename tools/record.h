/* SPDX-License-Identifier: MIT */
/*
 * Reading a live record (shim/format/live.h) as untrusted input, for the tools
 * that render it: `poolshim stat`, `poolshim collect` and the `poolshim`
 * wrapper.  Anyone can put a file in the live directory, and a record is
 * written by the process it describes, which may be hostile to whoever
 * reads it (root collecting other users' records), so nothing in one is
 * believed before it is checked: the file is read with pread into private
 * memory (never mapped: a file cut short under a mapping faults), every
 * size, count, offset, enumeration and string of the header is checked
 * against the file's real size and the field's room, and the effective
 * configuration is parsed again by the shim's own parser.  A record that
 * fails any check is refused whole, with one line saying why.
 *
 * Links the format layer (libpsfmt.la) only: no jemalloc, liburing or
 * libunwind in the tools.
 */
#ifndef PS_RECORD_H
#define PS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/config.h"
#include "format/livefmt.h"
#include "format/report.h"
#include "format/sites.h"
#include "format/stats.h"

/* Larger than any record the shim writes (at most 128 blocks and a kept report). */
#define PS_RECORD_MAX_FILE (256u << 20)
/* More blocks than any writer has: a header naming more lies. */
#define PS_RECORD_MAX_BLOCKS 4096
/* The most a kept report (blob_len) may be. */
#define PS_RECORD_MAX_BLOB (64u << 20)

struct ps_record {
	int pid;
	uint64_t ns;
	char path[PS_LIVE_DIR_MAX + 64];
	int fd;                       /* open read-only, or -1 */
	size_t size;                  /* of the file, when opened */
	uid_t owner;                  /* the file's owner */
	gid_t group;                  /* ...and group */
	dev_t dev;
	ino_t ino;
	struct ps_live_header *hdr;   /* the latest snapshot, PS_LIVE_HEADER bytes */
	char *blocks;                 /* its blocks, nblocks * block_stride bytes */
	uint32_t nblocks;
	bool dead;                    /* the process is gone (judged in our pid namespace) */
	bool foreign_ns;              /* another pid namespace: not judged */
	bool cfg_known;               /* the record held its configuration */
	struct ps_config cfg;         /* ...parsed again here (defaults when not known) */
	/*
	 * The call-site table (POOLSHIM_BACKTRACE), read and checked with the
	 * rest, or NULL: none, or refused (sites_why says why; the rest of
	 * the record is still used).
	 */
	void *sites;
	const char *sites_why;
	struct ps_sites_view sites_view;
};

/*
 * Open the record of pid in pid namespace ns in the live directory:
 * without following a link, without blocking on a FIFO; a regular file of
 * a plausible size.  0, or -1 with *why saying what is wrong (r->fd < 0
 * when the open itself failed, errno then set).  r is ready for
 * ps_record_close() either way.
 */
int ps_record_open(struct ps_record *r, int pid, uint64_t ns, const char **why);

/*
 * Read the record afresh into r's snapshot and check it whole.  NULL, or
 * why it cannot be used ("cut short", "header lies: ...").
 */
const char *ps_record_read(struct ps_record *r);

/*
 * Whether the process is gone: only for a record of our pid namespace
 * (my_ns, ps_live_pidns()), by kill(pid, 0) and the start time the record
 * names (a pid used again).  Sets r->dead and r->foreign_ns.
 */
void ps_record_judge(struct ps_record *r, uint64_t my_ns);

/* The sum of the record's blocks into out (tmp: room for one block). */
void ps_record_totals(const struct ps_record *r, struct ps_tstats *out, struct ps_tstats *tmp);

/*
 * Fill d from the record, the totals being counters: everything the
 * header holds (pool, io_uring, page faults and CPU time, run metadata,
 * the configuration).  Strings point into r.
 */
void ps_record_data(const struct ps_record *r, struct ps_report_data *d,
		    const struct ps_tstats *counters);

/*
 * Render with the file-system permissions of the record's owner (on) or
 * our own again (off): the call sites are named from the objects the
 * process had mapped, read at the paths its record names, and root reads
 * them only as that user could.  Nothing is ever written by such a path.
 */
void ps_record_as_owner(const struct ps_record *r, bool on);

/*
 * The report the process rendered and kept in its record (report
 * PS_REC_KEPT), read into *out (malloc'd, *len bytes).  0 or -errno.
 */
int ps_record_blob(const struct ps_record *r, char **out, size_t *len);

/*
 * Remove the record, if the file at its path is still the one read.  0 or
 * -errno (-ESTALE: another file is there now).
 */
int ps_record_remove(const struct ps_record *r);

void ps_record_close(struct ps_record *r);

/*
 * Parse the record's "NAME=value\n" configuration text into cfg with the
 * shim's parser, saying nothing.  0, or -EINVAL for text the shim would
 * not have written (a line that is not NAME=value, a control character, a
 * name twice, a value the parser refuses).  Names the parser does not know
 * (an option of another build) are ignored.  Pure but for ps_log_fd,
 * which it sets and restores.
 */
int ps_record_config(const char *text, struct ps_config *cfg);

/* A record's name in the live directory: poolshim-PID-NS.stats. */
struct ps_record_id {
	int pid;
	uint64_t ns;
};

/*
 * The records in the live directory (visible names only: a hidden one is
 * still being made) into *ids (malloc'd, free it even on failure).  Their
 * count, or -errno when the directory cannot be read.
 */
int ps_record_scan(struct ps_record_id **ids);

#endif
