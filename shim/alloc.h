/* SPDX-License-Identifier: MIT */
/*
 * The allocator behind the malloc-family interposers: jemalloc's ordinary
 * arenas below POOLSHIM_POOL_MIN, and at or above it a dedicated arena whose
 * extent hooks take memory from the pool's slabs and which never purges.
 * Every function follows the libc contract of its namesake (NULL + ENOMEM
 * on failure, errno untouched on success) and records its statistics.
 */
#ifndef PS_ALLOC_H
#define PS_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/*
 * Set up the pool from cfg and initialise jemalloc; the pool arena itself is
 * made by the first pooled request.  Call once; before it returns (or when
 * it fails) every allocation goes to the ordinary arenas.  0 or -errno.
 */
int ps_alloc_init(const struct ps_config *cfg);

/* Whether the pool can serve: set up, and its arena not failed. */
bool ps_alloc_pool_ready(void);

/* In a fork child (async-signal-safe): undo an arena half made by a thread. */
void ps_alloc_after_fork_child(void);

void *ps_malloc(size_t size);
void *ps_calloc(size_t n, size_t size);
void *ps_realloc(void *p, size_t size);
void *ps_reallocarray(void *p, size_t n, size_t size);
/* Returns 0 or an errno value, like posix_memalign(3); errno untouched. */
int ps_posix_memalign(void **out, size_t align, size_t size);
void *ps_aligned_alloc(size_t align, size_t size);
void *ps_memalign(size_t align, size_t size);
void *ps_valloc(size_t size);
void *ps_pvalloc(size_t size);
void ps_free(void *p);
size_t ps_usable_size(const void *p);

#endif
