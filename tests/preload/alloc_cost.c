// SPDX-License-Identifier: MIT
/*
 * Loops of small malloc + free for tests/preload/alloc_cost.sh, which
 * runs this under valgrind's callgrind with collection on only inside
 * cost_pairs and a dump after it: the dump holds the user instructions of
 * exactly N pairs, and the difference with and without the shim is what
 * the malloc and free doors cost.  The sizes are 16-240 bytes in a fixed
 * pseudo-random order, as issue 26 measured them.  warm() runs the first
 * calls (start-up, the thread's first counter block, the exactly counted
 * first mallocs) outside the collected function.
 *
 *   alloc_cost N
 * Exit 1 when an allocation fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t rng = 12345;

static size_t next_size(void)
{
	rng = rng * 1103515245u + 12345u;
	return 16 + ((rng >> 16) % 15) * 16;
}

/* noinline: callgrind's --toggle-collect needs the function to exist. */
__attribute__((noinline)) static long cost_pairs(long n)
{
	long i;
	for (i = 0; i < n; i++) {
		void *volatile p = malloc(next_size());
		if (!p)
			break;
		free(p);
	}
	return i;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;

	if (cost_pairs(1000) != 1000)
		return 1;
	if (cost_pairs(n) != n) {
		fprintf(stderr, "alloc_cost: malloc failed\n");
		return 1;
	}
	return 0;
}
