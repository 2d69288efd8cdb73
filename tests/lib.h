/* SPDX-License-Identifier: MIT */
/* Helpers for the preload tests (pst_*). */
#ifndef PST_LIB_H
#define PST_LIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PST_SKIP 77

/* Whether libpoolshim.so is loaded into this process. */
bool pst_shim_loaded(void);
/* Whether p lies in the shim's pool (via the exported poolshim_is_pooled). */
bool pst_pooled(const void *p);
/* Fill and check a buffer with a pattern derived from seed. */
void pst_fill(void *p, size_t n, uint64_t seed);
bool pst_check(const void *p, size_t n, uint64_t seed);
/* xorshift64* */
uint64_t pst_rand(uint64_t *state);
/*
 * How much work a sized test does: PST_SCALE (default 1; e.g. 10 for a
 * soak), and n scaled by it, at least 1.  Tests are sized by work so that
 * they pass on a busy machine; their timeouts only catch hangs and are
 * multiplied by the same factor.
 */
double pst_scale(void);
long pst_scaled(long n);
/* Read a whole file into buf (NUL-terminated); bytes read or -1. */
long pst_slurp(const char *path, char *buf, size_t cap);

#endif
