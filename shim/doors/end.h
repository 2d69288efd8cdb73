/* SPDX-License-Identifier: MIT */
/*
 * The end of a process under the shim (end.c): the live record finished,
 * the report delivered by the process where it still can, else kept in
 * the record for `poolshim collect` or the `poolshim` wrapper.
 */
#ifndef PS_END_H
#define PS_END_H

#include <stdbool.h>

/* The pid of the process whose image started the shim (init.c sets it). */
extern int ps_start_pid;

/*
 * Finish this process: end is an enum ps_live_end, status the exit status
 * (or the signal) when status_known.  how: PS_REPORT_IN_SIGNAL where no
 * frame may be named (_exit, which may run in a signal handler), and
 * PS_END_BY_EXIT from exit() (the destructor), else 0.  Once per process;
 * never in a vfork child; in a fork child at exit(), else only when it did
 * work of its own (ps_report_due).  Async-signal-safe with
 * PS_REPORT_IN_SIGNAL, errno kept.
 */
#define PS_END_BY_EXIT (1u << 16)
void ps_end(int end, int status, bool status_known, unsigned how);

/*
 * Whether this process writes a report where it ends or execs without
 * exit(): the process that started the shim, or a fork child that did
 * work of its own (so a shell's fork child that only sets up an exec adds
 * no report); never a vfork or raw clone child.  Async-signal-safe.
 */
bool ps_report_due(void);

#endif
