/* SPDX-License-Identifier: MIT */
/*
 * Call sites: which code allocates the pooled buffers and does the large
 * I/O.  With POOLSHIM_BACKTRACE=N, calls are sampled by bytes (one capture
 * per POOLSHIM_BACKTRACE_SAMPLE bytes on average, per thread and kind), each
 * capturing up to N frames with libunwind; the stacks are aggregated in a
 * fixed table (estimated calls, bytes, time) and symbolized only when the
 * report is written.
 */
#ifndef PS_CALLSITE_H
#define PS_CALLSITE_H

#include <stdbool.h>
#include <stdint.h>

#include "format/config.h"
#include "format/stats.h"

struct ps_buf;

enum ps_site_kind { PS_SITE_ALLOC, PS_SITE_IO };

/* A function of a library opened on first need (see callsite.c), or NULL. */
void *ps_late_sym(const char *lib, const char *name);

/* Set up the table (only when POOLSHIM_BACKTRACE > 0).  Call once at start. */
void ps_callsite_init(const struct ps_config *cfg);

extern bool ps_callsite_on;

/* Record the caller's stack for one sampled call.  Never unwinds re-entrantly. */
void ps_callsite_capture(enum ps_site_kind kind, enum ps_call call, uint64_t bytes,
			 uint64_t nsec);

static inline void ps_callsite_record(enum ps_site_kind kind, enum ps_call call, uint64_t bytes,
				      uint64_t nsec)
{
	if (ps_unlikely(ps_callsite_on))
		ps_callsite_capture(kind, call, bytes, nsec);
}

/*
 * Write the top sites by bytes and by count; symbolize = false (inside a
 * signal handler) prints raw addresses.
 */
void ps_callsite_render(struct ps_buf *b, bool json, bool symbolize);
/* The same section through a report's emitter (a member of its object). */
struct ps_emit;
void ps_callsite_emit(struct ps_emit *e, bool symbolize);

/*
 * Hold (on) or release captures on the calling thread, nesting as the
 * re-entry guard does.  For tests/tsan/stress.c: its short-lived threads
 * must never unwind (libunwind's per-thread cache and TSan clash at
 * thread exit), whatever the byte sample draws.
 */
void ps_callsite_hold(bool on);

/*
 * Move the table into `to`, PS_SITES_LEN bytes of zeros (sites.h): the
 * region of the live record that the record's maker mapped for it.  New
 * captures go there at once; what was counted before follows.  Whether it
 * moved (false: no table, the region is not used).
 */
bool ps_callsite_move(void *to);
/*
 * In a fork child (one thread): a table in the parent's record is copied
 * to private memory, so the child never counts into its parent's record.
 */
void ps_callsite_after_fork_child(void);

/* Number of captures recorded, and of captures dropped (table full). */
uint64_t ps_callsite_captures(void);
uint64_t ps_callsite_dropped(void);

#endif
