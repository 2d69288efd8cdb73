// SPDX-License-Identifier: MIT
/* One SRunner over every unit suite of the core. */
#include <stdlib.h>

#include "suites.h"

int main(void)
{
	SRunner *sr = srunner_create(suite_config());

	srunner_add_suite(sr, suite_fdinfo());
	srunner_add_suite(sr, suite_fmt());
	srunner_add_suite(sr, suite_pool());
	srunner_add_suite(sr, suite_blocks());
	srunner_add_suite(sr, suite_tcache());
	srunner_add_suite(sr, suite_cgroup());
	srunner_add_suite(sr, suite_report());
	srunner_add_suite(sr, suite_route());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
