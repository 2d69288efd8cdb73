/* SPDX-License-Identifier: MIT */
/*
 * Optional public API of libpoolshim.so.  Programs never need it; tests and
 * curious programs look the functions up with dlsym(RTLD_DEFAULT, ...) so
 * they run with or without the shim.
 */
#ifndef POOLSHIM_H
#define POOLSHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if p points into the pool (a pooled, hugepage-backed buffer), else 0. */
int poolshim_is_pooled(const void *p);

/* The library's version string, e.g. "0.1.0". */
const char *poolshim_version(void);

/*
 * Write the report now to fd (text or, with json != 0, JSON).  0 or -errno.
 * Not async-signal-safe.
 */
int poolshim_report_fd(int fd, int json);

#ifdef __cplusplus
}
#endif

#endif
