/* SPDX-License-Identifier: MIT */
/*
 * POOLSHIM_* configuration: one table of options, pure parsers that unit
 * tests call directly, a loader that reads the environment once, and a
 * printer for verbose mode.  Bad values and unknown names produce one line
 * on stderr each and the default is kept.
 */
#ifndef PS_CONFIG_H
#define PS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/names.h"

struct ps_buf;

enum ps_stats_format {
	PS_FORMAT_TEXT,
	PS_FORMAT_JSON,
};

enum ps_uring_mode {
	PS_URING_AUTO,     /* each device's route chosen by measurement (route.c) */
	PS_URING_OFF,      /* the plain calls only */
	PS_URING_ON,       /* the ring for every eligible call */
};

/*
 * PS_TEST_HOOKS: defined only for the test build of the library
 * (tests/preload/libpoolshim-test.la), never for libpoolshim.so.  It adds
 * the fault injection below and the pool's PS_TEST_POOL_DELAY_US, which
 * the tests of rare kernel behaviour and fork races use; the shipped
 * library neither reads nor names them.
 */

/* POOLSHIM_URING_TEST (test build only): faults the io_uring tests force. */
enum ps_uring_test {
	PS_URING_TEST_NONE,
	PS_URING_TEST_KEEPFD,     /* keep ring descriptors, as before Linux 6.3 */
	PS_URING_TEST_SHORT,      /* the kernel takes one SQE of each wave at first */
	PS_URING_TEST_STUCK,      /* ... and none after that */
	PS_URING_TEST_RING_DEAR,  /* the ring route burns 1 ms of CPU and sleeps 10 ms per call */
	PS_URING_TEST_PLAIN_DEAR, /* the plain route does */
	PS_URING_TEST_DEAR_SWAP,  /* the ring does for the first 300 routed calls, then plain */
};

#define PS_PATH_MAX 512
/* Where live records are made unless POOLSHIM_LIVE_DIR says (format/livefmt.h). */
#define PS_LIVE_DIR "/dev/shm"
#define PS_ID_MAX 64

struct ps_config {
	bool enabled;                  /* POOLSHIM */
	bool pool;                     /* POOLSHIM_POOL: off counts every call and pools nothing */
	uint64_t pool_min;             /* POOLSHIM_POOL_MIN */
	uint64_t pool_size;            /* POOLSHIM_POOL_SIZE */
	uint64_t pool_retain;          /* POOLSHIM_POOL_RETAIN: free pool bytes kept */
	uint64_t pool_decay_ms;        /* POOLSHIM_POOL_DECAY_MS: 0 = no time limit */
	uint64_t pool_cache;           /* POOLSHIM_POOL_CACHE: freed bytes a thread keeps, 0 = off */
	uint64_t pool_cache_pace_us;   /* POOLSHIM_POOL_CACHE_PACE_US: slower frees bypass it, 0 = never */
	enum ps_pool_tails pool_tails; /* POOLSHIM_POOL_TAILS */
	uint64_t pool_tail_keep;       /* POOLSHIM_POOL_TAIL_KEEP: a trimmed block's first bytes kept */
	uint64_t pool_arenas;          /* POOLSHIM_POOL_ARENAS: page placement arenas, 0 = per CPU */
	enum ps_pool_allocator pool_allocator;  /* POOLSHIM_POOL_ALLOCATOR */
	enum ps_hugepages hugepages;   /* POOLSHIM_HUGEPAGES */
	uint64_t hugepage_max;         /* POOLSHIM_HUGEPAGE_MAX: larger slabs get THP no more */
	bool prefault;                 /* POOLSHIM_PREFAULT */
	bool count_small;              /* POOLSHIM_COUNT_SMALL: count calls below POOLSHIM_POOL_MIN/16 */
	char stats[PS_PATH_MAX];       /* POOLSHIM_STATS: "stderr", "off" or a path */
	char debuginfo_path[PS_PATH_MAX]; /* POOLSHIM_DEBUGINFO_PATH: elfutils debug-info search path */
	enum ps_stats_format stats_format;   /* POOLSHIM_STATS_FORMAT */
	bool stats_format_set;         /* given explicitly (else implied by the path) */
	bool verbose;                  /* POOLSHIM_VERBOSE */
	enum ps_uring_mode uring;      /* POOLSHIM_URING */
	uint64_t uring_min;            /* POOLSHIM_URING_MIN */
	uint64_t uring_chunk;          /* POOLSHIM_URING_CHUNK */
	bool uring_chunk_set;          /* given explicitly (else the device's size) */
	uint64_t uring_depth;          /* POOLSHIM_URING_DEPTH */
#ifdef PS_TEST_HOOKS
	enum ps_uring_test uring_test; /* POOLSHIM_URING_TEST */
#endif
	bool timing;                   /* POOLSHIM_TIMING */
	uint64_t timing_sample;        /* POOLSHIM_TIMING_SAMPLE */
	bool live;                     /* POOLSHIM_LIVE */
	char live_dir[PS_PATH_MAX];    /* POOLSHIM_LIVE_DIR: where the live file goes */
	uint64_t record_ttl;           /* POOLSHIM_RECORD_TTL: seconds, 0 = ended records are kept */
	uint64_t backtrace;            /* POOLSHIM_BACKTRACE: frames, 0 = off */
	uint64_t backtrace_sample;     /* POOLSHIM_BACKTRACE_SAMPLE: mean bytes between captures */
	uint64_t backtrace_top;        /* POOLSHIM_BACKTRACE_TOP */
	int dump_signal;               /* POOLSHIM_DUMP_SIGNAL, 0 = none */
	char programs[PS_PATH_MAX];    /* POOLSHIM_PROGRAMS, "" = every program */
	char run[PS_ID_MAX];           /* POOLSHIM_RUN: the wrapper's mark, "" = none */
};

/* The built-in defaults. */
void ps_config_defaults(struct ps_config *cfg);

/*
 * Fill cfg from an environment lookup function (secure_getenv in the shim,
 * a table in tests).  envp, when not NULL, is scanned for unknown POOLSHIM_*
 * names.  Problems are reported with ps_log() and the default kept.
 * Returns the number of problems found.
 */
int ps_config_load(struct ps_config *cfg, const char *(*get)(const char *name),
		   char *const *envp);

/* Write the effective configuration, one "NAME=value" per line. */
void ps_config_print(const struct ps_config *cfg, struct ps_buf *b);

/*
 * Option i of the table (0, 1, ... until false): its name in *name and its
 * effective value written to value, as ps_config_print() writes it.
 */
bool ps_config_option(const struct ps_config *cfg, size_t i, const char **name, struct ps_buf *value);

/*
 * Pure parsers: 0 on success, -EINVAL for a malformed value, -ERANGE when it
 * overflows or lies outside [min, max].
 */
/*
 * The decimal digits at s into *out (0 when there are none).  Returns a
 * pointer past the last digit, or NULL when the number is above max.
 * The one digit loop of the shim: options, /proc and /sys files.
 */
const char *ps_parse_digits(const char *s, uint64_t max, uint64_t *out);

int ps_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int ps_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int ps_parse_bool(const char *s, bool *out);
/* An identifier (POOLSHIM_RUN): 1 to PS_ID_MAX - 1 of [A-Za-z0-9._-]. */
int ps_parse_id(const char *s);
/* A signal by name (USR2, SIGUSR2), by number (1..64), or off/none/0 for none. */
int ps_parse_signal(const char *s, int *out);

/*
 * POOLSHIM_PROGRAMS: whether name (the report's program field) is in list,
 * names separated by ',' with blanks around them ignored.  1 listed, 0 not,
 * -EINVAL when the list is malformed (an empty name, a path, a pattern or
 * other separator, a name over 63 bytes): then *why says how, and the
 * caller leaves every program alone rather than guess.  *mentioned says
 * whether this process should tell its user: always for a malformed list
 * (every process is left alone, so every one says why).  Pure.
 */
int ps_programs_match(const char *list, const char *name, bool *mentioned, const char **why);

/* The process-wide configuration, valid once the shim is initialised. */
extern struct ps_config ps_cfg;

#endif
