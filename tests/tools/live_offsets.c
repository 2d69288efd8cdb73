// SPDX-License-Identifier: MIT
/*
 * Prints where each field of the live record's header is (NAME OFFSET
 * SIZE, one a line), for the tests that craft damaged records from a
 * real one: they patch fields by these numbers rather than by offsets
 * copied by hand, which would go stale when the header changes.
 */
#include <stddef.h>
#include <stdio.h>

#include "format/livefmt.h"
#include "format/sites.h"

#define F(name) printf("%s %zu %zu\n", #name, offsetof(struct ps_live_header, name), \
		       sizeof(((struct ps_live_header *)0)->name))

int main(void)
{
	F(magic); F(version); F(max_blocks); F(block_size); F(block_stride); F(nblocks);
	F(pid); F(starttime); F(program); F(pidns); F(flags); F(end); F(exit_status);
	F(report); F(stats_format); F(start_time); F(usage_time); F(blob_off); F(blob_len);
	F(stats); F(run); F(report_error); F(heap_owner); F(shim_version); F(host);
	F(kernel); F(config); F(sites_off); F(sites_len);
	printf("header %d\n", PS_LIVE_HEADER);
	/* The call-site region (sites.h): where its table is, a slot's size and fields. */
	printf("sites_table %zu\n", (size_t)PS_SITES_TABLE_OFF);
	printf("sites_slots %d\n", PS_SITES_SLOTS);
	printf("site_size %zu\n", sizeof(struct ps_site));
	printf("site_ready %zu\n", offsetof(struct ps_site, ready));
	printf("site_depth %zu\n", offsetof(struct ps_site, depth));
	printf("sites_modules %zu\n", (size_t)PS_SITES_MODULES_OFF);
	printf("module_path %zu\n", offsetof(struct ps_site_module, path));
	return 0;
}
