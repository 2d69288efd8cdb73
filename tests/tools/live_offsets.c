// SPDX-License-Identifier: MIT
/*
 * Prints where each field of the live record's header is (NAME OFFSET
 * SIZE, one a line), for the tests that craft damaged records from a
 * real one: they patch fields by these numbers rather than by offsets
 * copied by hand, which would go stale when the header changes.
 */
#include <stddef.h>
#include <stdio.h>

#include "live.h"

#define F(name) printf("%s %zu %zu\n", #name, offsetof(struct ps_live_header, name), \
		       sizeof(((struct ps_live_header *)0)->name))

int main(void)
{
	F(magic); F(version); F(max_blocks); F(block_size); F(block_stride); F(nblocks);
	F(pid); F(starttime); F(program); F(pidns); F(flags); F(end); F(exit_status);
	F(report); F(stats_format); F(start_time); F(usage_time); F(blob_off); F(blob_len);
	F(stats); F(run); F(report_error); F(heap_owner); F(shim_version); F(host);
	F(kernel); F(config);
	printf("header %d\n", PS_LIVE_HEADER);
	return 0;
}
