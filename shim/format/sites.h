/* SPDX-License-Identifier: MIT */
/*
 * The call-site table as data, and its renderer (format layer): the table
 * the runtime fills (callsite.c) is one region of this layout, in anonymous
 * memory until the process has a live record and in the record after that
 * (live.h: sites_off, sites_len), so a reader renders the call sites of a
 * process that is gone.  The region holds a small head, the modules the
 * stacks' frames fall in (path, load bias, executable range, GNU build id:
 * what naming a frame offline needs) and the hash table of stacks.  Both
 * the process's own report and the tools' renderings go through
 * ps_sites_emit(), so they read the same.
 */
#ifndef PS_SITES_H
#define PS_SITES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PS_SITES_MAGIC "PSSITES1"
#define PS_SITES_SLOTS 16384           /* power of two */
#define PS_SITES_DEPTH 32              /* the most frames a stack keeps */
#define PS_SITES_MODULES 128
#define PS_SITES_PATH 256
/* Estimated calls are kept in fixed point: 1/p to a 1024th. */
#define PS_SITES_WEIGHT_ONE 1024

struct ps_site {
	uint64_t hash;              /* 0 = empty */
	int32_t ready;              /* frames filled in */
	uint16_t kind, call;        /* enum ps_site_kind, enum ps_call */
	uint32_t depth;
	uint32_t pad;
	uint64_t frames[PS_SITES_DEPTH];
	/* Estimates: calls in 1/PS_SITES_WEIGHT_ONE units, bytes, nanoseconds. */
	uint64_t count, bytes, nsec;
};

struct ps_site_module {
	uint64_t lo, hi, bias;      /* executable range; load bias (dlpi_addr) */
	char path[PS_SITES_PATH];
	char build_id[2 * 40 + 1];  /* hex, "" when the object has none */
	char pad[7];
};

struct ps_sites_head {
	char magic[8];
	uint32_t slots, depth_max, site_size, module_size, max_modules;
	uint32_t nmodules;          /* published entries (append only) */
	uint32_t modules_busy;      /* a thread is appending (the others skip) */
	uint32_t pad;
	uint64_t captures, dropped; /* captures recorded; dropped (table full) */
};

#define PS_SITES_HEAD_ROOM 4096
#define PS_SITES_MODULES_OFF PS_SITES_HEAD_ROOM
#define PS_SITES_TABLE_OFF \
	((PS_SITES_MODULES_OFF + PS_SITES_MODULES * sizeof(struct ps_site_module) + 4095) & ~(size_t)4095)
#define PS_SITES_LEN \
	((PS_SITES_TABLE_OFF + PS_SITES_SLOTS * sizeof(struct ps_site) + 4095) & ~(size_t)4095)

static inline struct ps_sites_head *ps_sites_head(void *region)
{
	return (struct ps_sites_head *)region;
}
static inline struct ps_site_module *ps_sites_modules(void *region)
{
	return (struct ps_site_module *)((char *)region + PS_SITES_MODULES_OFF);
}
static inline struct ps_site *ps_sites_table(void *region)
{
	return (struct ps_site *)((char *)region + PS_SITES_TABLE_OFF);
}

/* Write the identity of an empty region (all zeros but its head). */
void ps_sites_format(void *region);

/*
 * Whether a region (a copy, read from a record) can be rendered: its head
 * matches this layout, its modules' strings end in their room and every
 * filled slot's depth, kind and call are in range.  NULL, or why not.
 * Modules past nmodules and slots not ready are never read.
 */
const char *ps_sites_check(void *region);

struct ps_emit;

/* What to render, and how frames are named. */
struct ps_sites_view {
	void *region;
	uint64_t sample;            /* POOLSHIM_BACKTRACE_SAMPLE */
	unsigned top;               /* POOLSHIM_BACKTRACE_TOP */
	bool symbolize;             /* false: raw addresses only (a signal handler) */
	/*
	 * How names are found: in the live process (its own memory, libdw's
	 * view of /proc/self), or offline from the region's modules, each
	 * object read at its path and used only when its build id matches.
	 */
	bool offline;
	const char *debuginfo_path; /* POOLSHIM_DEBUGINFO_PATH, or NULL: the default */
};

/* The call-site section of a report (a member of its object). */
void ps_sites_emit(struct ps_emit *e, const struct ps_sites_view *v);

#endif
