/* SPDX-License-Identifier: MIT */
/*
 * A field of /proc/self/status in KiB (VmRSS, VmHWM, ...), or -1: for the
 * footprint test programs, which link nothing of the tests' library so that
 * what they measure is their own.
 */
#ifndef PST_PROC_STATUS_H
#define PST_PROC_STATUS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline long status_kib(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

#endif
