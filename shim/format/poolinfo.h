/* SPDX-License-Identifier: MIT */
/*
 * What a report and a live record say of the pool: its configuration as
 * found (hugepages asked and used, the cgroup's limit), what it took from
 * the system and what it gave back.  Filled by the runtime (core/pool.c,
 * ps_pool_get_info), read by the renderer and copied into the record; a
 * plain struct, so the format layer needs nothing of the runtime's.
 */
#ifndef PS_POOLINFO_H
#define PS_POOLINFO_H

#include <stdint.h>

#include "format/names.h"

struct ps_pool_info {
	enum ps_hugepages requested;
	enum ps_backing first_mode;      /* backing of the first slab */
	const char *hugetlb_reason;      /* why hugetlb was not used, or NULL */
	const char *thp_reason;          /* why THP was not used, or NULL */
	uint64_t slabs;                  /* times memory was taken (a slab made or grown) */
	uint64_t backed;                 /* bytes taken from the system */
	uint64_t backed_by[PS_BACK__COUNT];
	uint64_t small_backed;           /* of backed_by[4K]: the first unit's small region */
	uint64_t failures[PS_FAIL__COUNT];
	uint64_t reserve;                /* bytes of address space reserved */
	uint64_t cap;                    /* resident bytes: POOLSHIM_POOL_SIZE, lowered to fit the cgroup */
	uint64_t cgroup_limit;           /* the memory cgroup's limit found, 0 = none */
	int cgroup_version;              /* 1 or 2 when a limit was found, else 0 */
	uint64_t retain;                 /* free bytes kept (POOLSHIM_POOL_RETAIN, cgroup) */
	uint64_t decay_ms;               /* POOLSHIM_POOL_DECAY_MS */
	uint64_t purged;                 /* bytes given back to the kernel */
	uint64_t purges;                 /* times the pool arena gave memory back */
	uint64_t forks;                  /* fork()s this process made (its atfork handlers ran) */
};

#endif
