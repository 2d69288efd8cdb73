// SPDX-License-Identifier: MIT
/*
 * proxybuf: a proxy-like program for scripts/bench footprint real.  Per
 * request it mallocs a buffer sized for the largest body it may carry
 * (1-16 MiB, log-uniform from a fixed seed), receives a body that fills
 * only part of it (16 KiB-1 MiB, and never more than the buffer), checksums
 * the body as a proxy would hash or forward it, and frees the buffer when
 * the request completes; 8 requests are in flight, the oldest completing as
 * a new one starts.  What an allocator makes resident beyond the bytes
 * written is the footprint the table measures.
 *
 *   proxybuf [REQUESTS]          (default 3000)
 *
 * Prints `proxybuf requests=N bytes=B fnv=H`, the same under any allocator.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define INFLIGHT 8

static inline uint32_t rnd(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* Log-uniform over [lo, hi). */
static size_t draw(uint32_t *s, double lo, double hi)
{
	double u = rnd(s) / 4294967296.0;
	return (size_t)(lo * exp2(u * log2(hi / lo)));
}

int main(int argc, char **argv)
{
	long requests = argc > 1 ? atol(argv[1]) : 3000;
	unsigned char *slot[INFLIGHT] = { 0 };
	uint64_t fnv = 1469598103934665603ull, bytes = 0;
	uint32_t s = 4444;

	for (long r = 0; r < requests; r++) {
		int k = (int)(r % INFLIGHT);
		free(slot[k]);
		size_t cap = draw(&s, 1 << 20, 16 << 20);
		size_t body = draw(&s, 16 << 10, 1 << 20);
		if (body > cap)
			body = cap;
		unsigned char *p = malloc(cap);
		if (!p) {
			fprintf(stderr, "proxybuf: malloc(%zu) failed\n", cap);
			return 1;
		}
		/* The body arrives: bytes from the request's own sequence. */
		uint32_t b = (uint32_t)r * 2654435761u + 1;
		for (size_t i = 0; i < body; i += 4) {
			uint32_t v = rnd(&b);
			for (size_t j = 0; j < 4 && i + j < body; j++)
				p[i + j] = (unsigned char)(v >> (8 * j));
		}
		/* ... and is forwarded: hash it (every 64th byte is enough to read it all). */
		for (size_t i = 0; i < body; i += 64) {
			fnv ^= p[i];
			fnv *= 1099511628211ull;
		}
		bytes += body;
		slot[k] = p;
	}
	for (int k = 0; k < INFLIGHT; k++)
		free(slot[k]);
	printf("proxybuf requests=%ld bytes=%llu fnv=%016llx\n", requests,
	       (unsigned long long)bytes, (unsigned long long)fnv);
	return 0;
}
