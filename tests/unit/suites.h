/* SPDX-License-Identifier: MIT */
/* The unit test suites, one per area of the core; main.c runs them all. */
#ifndef PST_SUITES_H
#define PST_SUITES_H

#include <check.h>
#include <stdint.h>

#include "format/names.h"

/* Forget the pool and set it up afresh: size bytes, pages of mode (test_pool.c). */
void pst_pool_forget(void);
void pst_pool_setup(enum ps_hugepages mode, uint64_t size);

Suite *suite_blocks(void);
Suite *suite_cgroup(void);
Suite *suite_config(void);
Suite *suite_fdinfo(void);
Suite *suite_fmt(void);
Suite *suite_pool(void);
Suite *suite_report(void);
Suite *suite_route(void);
Suite *suite_tcache(void);

#endif
