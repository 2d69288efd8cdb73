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
 * With "calloc", cost_callocs does the same with calloc(1, size) + free:
 * calloc is the door a program's zeroed small objects take.  With
 * "family" (tests/preload/alloc_sampled.sh, no callgrind) it makes N small
 * allocations with each of calloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc, freeing each, one call
 * after the other.
 *
 *   alloc_cost N [calloc|family]
 * Exit 1 when an allocation fails.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

__attribute__((noinline)) static long cost_callocs(long n)
{
	long i;
	for (i = 0; i < n; i++) {
		void *volatile p = calloc(1, next_size());
		if (!p)
			break;
		free(p);
	}
	return i;
}

/*
 * n small allocations by each of the other malloc-family calls, one call
 * after the other (a sample stands for the calls since the last, of
 * whatever kind: calls of one kind in a row keep the test's estimates
 * tight).
 */
static long family(long n)
{
	for (int k = 0; k < 7; k++)
		for (long i = 0; i < n; i++) {
			size_t sz = next_size();
			void *p = NULL;
			switch (k) {
			case 0: p = calloc(2, sz / 2); break;
			case 1: p = reallocarray(NULL, 4, sz / 4); break;
			case 2: if (posix_memalign(&p, 64, sz)) p = NULL; break;
			case 3: p = aligned_alloc(64, sz); break;
			case 4: p = memalign(32, sz); break;
			case 5: p = valloc(sz); break;
			case 6: p = pvalloc(sz); break;
			}
			if (!p)
				return 0;
			free(p);
		}
	return n;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	const char *mode = argc > 2 ? argv[2] : "";
	long (*loop)(long) = !strcmp(mode, "calloc") ? cost_callocs
			     : !strcmp(mode, "family") ? family : cost_pairs;

	if (loop(1000) != 1000)
		return 1;
	if (loop(n) != n) {
		fprintf(stderr, "alloc_cost: malloc failed\n");
		return 1;
	}
	return 0;
}
