// SPDX-License-Identifier: MIT
/* Helpers shared by the preload tests. */
#include "lib.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

double pst_scale(void)
{
	static double scale;   /* read once: the complaint is said once */
	const char *s = getenv("PST_SCALE");
	char *end;

	if (scale > 0)
		return scale;
	scale = 1.0;
	if (s && *s) {
		double v = strtod(s, &end);
		if (*end || !(v > 0) || v > 1000)
			fprintf(stderr, "PST_SCALE='%s' is not a number in (0, 1000]; using 1\n", s);
		else
			scale = v;
	}
	return scale;
}

long pst_scaled(long n)
{
	double v = (double)n * pst_scale();
	return v < 1 ? 1 : (long)v;
}

bool pst_shim_loaded(void)
{
	return dlsym(RTLD_DEFAULT, "poolshim_is_pooled") != NULL;
}

bool pst_pooled(const void *p)
{
	static int (*is_pooled)(const void *);

	if (!is_pooled)
		is_pooled = (int (*)(const void *))dlsym(RTLD_DEFAULT, "poolshim_is_pooled");
	return is_pooled && is_pooled(p);
}

uint64_t pst_rand(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

void pst_fill(void *p, size_t n, uint64_t seed)
{
	unsigned char *c = p;
	uint64_t s = seed | 1;
	for (size_t i = 0; i < n; i++) {
		if ((i & 7) == 0)
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		c[i] = (unsigned char)(s >> ((i & 7) * 8));
	}
}

bool pst_check(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *c = p;
	uint64_t s = seed | 1;
	for (size_t i = 0; i < n; i++) {
		if ((i & 7) == 0)
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		if (c[i] != (unsigned char)(s >> ((i & 7) * 8)))
			return false;
	}
	return true;
}

long pst_slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long total = 0;
	if (fd < 0)
		return -1;
	while ((size_t)total < cap - 1) {
		ssize_t n = read(fd, buf + total, cap - 1 - (size_t)total);
		if (n <= 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = '\0';
	return total;
}
