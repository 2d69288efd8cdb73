/* SPDX-License-Identifier: MIT */
/* Reports on demand (POOLSHIM_DUMP_SIGNAL) and before exec (dump.c). */
#ifndef PS_DUMP_H
#define PS_DUMP_H

#include "format/config.h"

/* Install the dump signal's handler, keeping the program's disposition.  */
void ps_dump_init(const struct ps_config *cfg);

#endif
