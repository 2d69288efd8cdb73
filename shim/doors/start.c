/* SPDX-License-Identifier: MIT */
/*
 * The start-up state (start.h): written by init.c as the shim starts, forks
 * and goes quiet, read by every door.  Defined apart from init.c so that a
 * door reading it depends on nothing but this file; starting up is the one
 * call a door makes into init.c (ps_init_slow).
 */
#include "doors/start.h"

int ps_state = PS_STATE_NEW;
int ps_pid;
