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
#include <stdio.h>
#include <sys/types.h>

#include "format/config.h"
#include "format/fmt.h"
#include "format/livefmt.h"
#include "format/report.h"
#include "format/sites.h"
#include "format/stats.h"

/* The blocks a writer has (live.c's PS_LIVE_BLOCKS): a header naming more lies. */
#define PS_RECORD_MAX_BLOCKS PS_LIVE_BLOCKS
/* The most a kept report (blob_len) may be. */
#define PS_RECORD_MAX_BLOB (64u << 20)
/*
 * The largest record the shim writes: the header, every block's room, the
 * call-site table and a kept report (ps_record_max_file()).  A file may
 * have holes only where counter blocks were never reserved (a block the
 * directory had no room for, the room between the last block and the
 * call-site table): a file with more bytes unstored than that is refused.
 */
uint64_t ps_record_max_file(void);

struct ps_record {
	int pid;
	uint64_t ns;
	uint64_t tag;                 /* of its name (ps_record_id) */
	char path[PS_LIVE_DIR_MAX + 64];
	int fd;                       /* open read-only, or -1 */
	size_t size;                  /* of the file, when opened */
	uid_t owner;                  /* the file's owner */
	gid_t group;                  /* ...and group */
	dev_t dev;
	ino_t ino;
	struct ps_live_header *hdr;   /* the latest snapshot, PS_LIVE_HEADER bytes */
	uint32_t nblocks;             /* blocks in the file now (read by ps_record_totals) */
	bool dead;                    /* the process is gone (judged in our pid namespace) */
	bool foreign_ns;              /* another pid namespace: not judged */
	bool cfg_known;               /* the record held its configuration */
	struct ps_config cfg;         /* ...parsed again here (defaults when not known) */
	/*
	 * The call-site table (POOLSHIM_BACKTRACE), read and checked by
	 * ps_record_sites(), or NULL: none, not read yet, or refused
	 * (sites_why says why; the rest of the record is still used).
	 */
	void *sites;
	const char *sites_why;
	struct ps_sites_view sites_view;
};

/*
 * A record's name in the live directory (livefmt.c): poolshim-PID-NS.stats,
 * or, where another user's file held that name when the process made its
 * record, poolshim-PID-NS.TAG.stats with an unpredictable TAG (tag 0: the
 * plain name).
 */
struct ps_record_id {
	int pid;
	uint64_t ns;
	uint64_t tag;
};

/*
 * Open the record id names in the live directory: without following a
 * link, without blocking on a FIFO; a regular file of a plausible size.
 * 0, or -1 with *why saying what is wrong (r->fd < 0 when the open itself
 * failed, errno then set).  r is ready for ps_record_close() either way.
 */
int ps_record_open(struct ps_record *r, const struct ps_record_id *id, const char **why);

/*
 * Read the record's header afresh into r's snapshot and check it whole,
 * with the file's size and how much of it is stored.  No block is read
 * here: a reader filters on the header (the run, the owner, whether the
 * process is gone) first.  NULL, or why it cannot be used ("cut short",
 * "header lies: ...", "sparse: ...").
 */
const char *ps_record_read(struct ps_record *r);

/*
 * Read and check the call-site table of the header last read (sets
 * r->sites or r->sites_why).  Only a reader that renders call sites needs
 * it: PS_SITES_LEN bytes while it is held.
 */
void ps_record_sites(struct ps_record *r);

/*
 * Whether the process is gone: only for a record of our pid namespace
 * (my_ns, ps_live_pidns()), by kill(pid, 0) and the start time the record
 * names (a pid used again).  Sets r->dead and r->foreign_ns.
 */
void ps_record_judge(struct ps_record *r, uint64_t my_ns);

/*
 * The sum of the record's blocks into out, read one at a time into tmp
 * (room for one block): a record costs its reader one block of memory,
 * whatever it holds.  NULL, or why the blocks could not be read.
 */
const char *ps_record_totals(const struct ps_record *r, struct ps_tstats *out,
			     struct ps_tstats *tmp);

/*
 * Fill d from the record, the totals being counters: everything the
 * header holds (pool, io_uring, page faults and CPU time, run metadata,
 * the configuration).  Strings point into r.
 */
void ps_record_data(const struct ps_record *r, struct ps_report_data *d,
		    const struct ps_tstats *counters);

/*
 * Render r's report with render(b, arg) into *out (malloc'd, NUL-ended,
 * *len bytes, at most cap).  Naming call sites reads objects and debug
 * files at paths the record names, with libdw: that is done in a child
 * process which, when we are root and the record is another user's, has
 * dropped to that user first (ps_record_become), and which is killed
 * after PS_RECORD_RENDER_S seconds; a report without call sites is
 * rendered here.  When the child fails, the report is rendered here with
 * the call sites' addresses unnamed (*note then says why).  0 or -errno.
 */
#define PS_RECORD_RENDER_S 10
int ps_record_render(struct ps_record *r, void (*render)(struct ps_buf *b, void *arg), void *arg,
		     size_t cap, char **out, size_t *len, const char **note);

/*
 * Become user uid for good, in a child: every supplementary group
 * dropped, the user's primary group from the password database (65534
 * when the user has none: never a group a record names), then the uid,
 * real, effective and saved.  0, or -errno (checked afterwards, not only
 * by the calls' results).
 */
int ps_record_become(uid_t uid);

/*
 * A child with a pipe to read from it: stdio flushed first, so that the
 * child repeats nothing; both ends close-on-exec.  The child's pid (0 in
 * the child) with p[0] the reader's end and p[1] the child's, each side
 * to close the other's; or -errno, with nothing left open.
 */
pid_t ps_record_fork_piped(int p[2]);

/*
 * Text from a record, or from files a record names, made safe for a
 * terminal or a log: printable ASCII and well-formed UTF-8 are kept;
 * C0 controls (newline and tab too unless keep_lines), DEL, the C1 controls
 * (0x80-0x9f, and their UTF-8 forms such as "\xc2\x9b", CSI), and every
 * byte of a malformed or overlong UTF-8 sequence become '?'.  The one
 * sanitizer of stat and collect.
 *
 * ps_term_clean: s[len] into out[cap] (always ended, cut to fit); out.
 * ps_term_put: p[len] to f, lines kept; 0 or -EIO.
 */
const char *ps_term_clean(char *out, size_t cap, const char *s, size_t len, bool keep_lines);
int ps_term_put(FILE *f, const char *p, size_t len);

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

/*
 * The records in the live directory (visible names only: a hidden one is
 * still being made) into *ids (malloc'd, free it even on failure).  Their
 * count, or -errno when the directory cannot be read.
 */
int ps_record_scan(struct ps_record_id **ids);

/*
 * The record of pid in pid namespace ns, into *id: of the names it may
 * have (plain, or tagged where another user's file held the plain one),
 * the one owned by the process's user while it runs (the owner of
 * /proc/PID), else the plain name, else any.  0, or -ENOENT.
 */
int ps_record_find(int pid, uint64_t ns, struct ps_record_id *id);

#endif
