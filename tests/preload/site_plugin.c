// SPDX-License-Identifier: MIT
/*
 * A library callsite_helper opens with dlopen after its record exists
 * (CALLSITE_PLUGIN), for tests/tools/collect_sites.sh: its pooled
 * allocations are call sites in an object the record's module list did not
 * have when it was made, so naming them after a SIGKILL needs the list
 * brought up to date.
 */
#include <stdlib.h>
#include <string.h>

void *plugin_buffers(int i);

__attribute__((noinline, visibility("default"))) void *plugin_buffers(int i)
{
	void *p = malloc(2 << 20);
	if (p)
		memset(p, i, 4096);
	return p;
}
