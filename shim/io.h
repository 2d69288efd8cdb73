/* SPDX-License-Identifier: MIT */
/* Set-up of the I/O interposers (io.c): resolve the real libc functions. */
#ifndef PS_IO_H
#define PS_IO_H

#include "config.h"

/* Resolve the real functions and read the I/O options.  Call once at start. */
void ps_io_init(const struct ps_config *cfg);

#endif
