/* SPDX-License-Identifier: MIT */
/*
 * Start-up and lifecycle of the preloaded library.  The first call into
 * any interposer may come before our constructor (from the dynamic loader,
 * from another library's constructor, from inside dlsym), so initialisation
 * is lazy, runs once, and decides on/off before anything is allocated.
 */
#ifndef PS_INIT_H
#define PS_INIT_H

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

/*
 * Whether this process writes a report where it ends or execs without
 * exit(): the process that started the shim, or a fork child that did
 * work of its own (so a shell's fork child that only sets up an exec adds
 * no report); never a vfork or raw clone child.  Async-signal-safe.
 */
bool ps_report_due(void);

/* Slow path of ps_enabled(): initialise, or wait for the thread that is. */
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
