// SPDX-License-Identifier: MIT
/*
 * For trim_start.sh: what malloc_trim(0) returns as the program's first
 * act (1: glibc's heap had something to give back, 0: nothing).  Under
 * the shim it must be what it is without it: the shim allocates nothing
 * from the program's heap at start.
 */
#include <malloc.h>
#include <stdio.h>

int main(void)
{
	printf("%d\n", malloc_trim(0));
	return 0;
}
