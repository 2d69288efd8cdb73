/* SPDX-License-Identifier: MIT */
/*
 * CPU seconds of the whole process so far (user + system of every thread,
 * getrusage), and its minor faults into *minflt when minflt is not NULL:
 * the benchmarks normalise by CPU so that waiting on a loaded machine
 * does not count.
 */
#ifndef PS_BENCH_CPUTIME_H
#define PS_BENCH_CPUTIME_H

#include <stddef.h>
#include <sys/resource.h>

static inline double bench_cpu_seconds(long *minflt)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	if (minflt)
		*minflt = ru.ru_minflt;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

#endif
