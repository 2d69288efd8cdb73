/* SPDX-License-Identifier: MIT */
/*
 * The start-up state every door reads, and the one call a door makes up
 * into start-up (init.c): ps_enabled().  The first call into any
 * interposer may come before our constructor (from the dynamic loader,
 * from another library's constructor, from inside dlsym), so start-up is
 * lazy, runs once, and decides on/off before anything is allocated.  The
 * doors include this header, never init.c's neighbours' headers to learn
 * whether the shim is on.
 */
#ifndef PS_START_H
#define PS_START_H

#include <stdbool.h>

#include "format/compiler.h"

enum ps_state {
	PS_STATE_NEW,
	PS_STATE_STARTING,
	PS_STATE_ON,
	PS_STATE_OFF,     /* POOLSHIM=off: every call goes straight to libc */
};

extern PS_HIDDEN int ps_state;
/* Our pid as of start-up or the last fork (a vfork child has another). */
extern int ps_pid;

/* Slow path of ps_enabled(): start up (init.c), or wait for the thread that is. */
bool ps_init_slow(void);

/* Whether the shim is on; initialises on first use.  Never blocks for long. */
static inline bool ps_enabled(void)
{
	int s = __atomic_load_n(&ps_state, __ATOMIC_ACQUIRE);
	if (ps_likely(s == PS_STATE_ON))
		return true;
	if (s == PS_STATE_OFF)
		return false;
	return ps_init_slow();
}

#endif
