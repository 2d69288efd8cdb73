// SPDX-License-Identifier: MIT
/* The name tables of names.h, generated from its lists. */
#include <stddef.h>

#include "format/names.h"

#define PS_NAME(id, name) name,

static const char *const call_names[] = { PS_CALLS(PS_NAME) };
static const char *const kind_names[] = { PS_FDKINDS(PS_NAME) };
static const char *const event_names[] = { PS_ALLOC_EVENTS(PS_NAME, PS_NAME) };
static const char *const uring_fb_names[] = { PS_URING_FALLBACKS(PS_NAME) };
static const char *const uring_state_names[] = { PS_URING_STATES(PS_NAME) };
static const char *const backing_names[] = { PS_BACKINGS(PS_NAME) };
const char *const ps_hugepage_names[] = { PS_HUGEPAGE_MODES(PS_NAME) NULL };
const char *const ps_pool_allocator_names[] = { PS_POOL_ALLOCATORS(PS_NAME) NULL };
const char *const ps_pool_tails_names[] = { PS_POOL_TAILS(PS_NAME) NULL };

#define PS_LOOKUP(table, count, v) ((unsigned)(v) < (unsigned)(count) ? (table)[v] : "?")

const char *ps_call_name(enum ps_call call)
{
	return PS_LOOKUP(call_names, PS_CALL__COUNT, call);
}

const char *ps_fdkind_name(enum ps_fdkind kind)
{
	return PS_LOOKUP(kind_names, PS_FD__COUNT, kind);
}

const char *ps_event_name(unsigned e)
{
	return PS_LOOKUP(event_names, PS_EV__COUNT, e);
}

const char *ps_uring_fb_name(unsigned r)
{
	return PS_LOOKUP(uring_fb_names, PS_UFB__COUNT, r);
}

const char *ps_uring_state_name(unsigned s)
{
	return PS_LOOKUP(uring_state_names, PS_URING_STATE__COUNT, s);
}

const char *ps_hugepage_name(unsigned m)
{
	return PS_LOOKUP(ps_hugepage_names, PS_HUGE__COUNT, m);
}

const char *ps_backing_name(enum ps_backing b)
{
	return PS_LOOKUP(backing_names, PS_BACK__COUNT, b);
}

const char *ps_pool_allocator_name(unsigned a)
{
	return PS_LOOKUP(ps_pool_allocator_names, PS_POOL_ALLOC__COUNT, a);
}
