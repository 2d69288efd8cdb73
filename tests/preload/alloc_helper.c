// SPDX-License-Identifier: MIT
/*
 * A small program for the shell tests: allocates --count buffers of --size
 * bytes, keeping --live of them alive at once, fills and verifies each, and
 * prints "helper ok allocations=N pooled=K" (K counted through
 * poolshim_is_pooled when the shim is loaded).  Exit 1 on any corruption.
 * --thp-off-after N turns THP off for the process (prctl
 * PR_SET_THP_DISABLE, as Ceph's daemons do) after N allocations.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib.h"

int main(int argc, char **argv)
{
	size_t size = 1 << 20;
	int count = 32, live = 1, thp_off_after = -1;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--size"))
			size = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--count"))
			count = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--live"))
			live = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--thp-off-after"))
			thp_off_after = atoi(argv[i + 1]);
		else {
			fprintf(stderr, "alloc_helper: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (live < 1 || live > 4096 || count < 0) {
		fprintf(stderr, "alloc_helper: bad --live/--count\n");
		return 2;
	}
	void **slots = calloc((size_t)live, sizeof(void *));
	int pooled = 0;
	for (int i = 0; i < count; i++) {
		int k = i % live;
		if (i == thp_off_after && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) {
			perror("prctl(PR_SET_THP_DISABLE)");
			return 1;
		}
		if (slots[k]) {
			if (!pst_check(slots[k], size, (uint64_t)(i - live)))
				return 1;
			free(slots[k]);
		}
		slots[k] = malloc(size);
		if (!slots[k]) {
			perror("malloc");
			return 1;
		}
		pooled += pst_pooled(slots[k]);
		pst_fill(slots[k], size, (uint64_t)i);
	}
	for (int k = 0; k < live; k++)
		free(slots[k]);
	free(slots);
	printf("helper ok allocations=%d pooled=%d\n", count, pooled);
	return 0;
}
