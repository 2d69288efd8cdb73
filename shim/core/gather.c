// SPDX-License-Identifier: MIT
/*
 * Gathering the report: the program's name and start time kept at
 * start-up, the scratch block for the merged counters, and
 * ps_report_gather(), which reads the counters, the pool, the allocator's
 * heap owner, io_uring, getrusage() and uname() into a struct
 * ps_report_data for report.c to render.  Part of the runtime.
 */
#include "core/report_out.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include "core/alloc.h"
#include "core/pool.h"
#include "core/tcache.h"
#include "core/blocks.h"
#include "core/callsite.h"
#include "format/names.h"
#include "format/fmt.h"
#include "format/sys.h"
#include "core/route.h"
#include "core/uring.h"

static int64_t start_time = -1;
int ps_report_pid;

void ps_report_keep_name(void)
{
	struct timespec now;

	/* libc's clock_gettime: the vDSO, no system call at start-up. */
	if (clock_gettime(CLOCK_REALTIME, &now) == 0)
		start_time = now.tv_sec;
	/* Copied now: some servers (nginx) rewrite argv, and with it this name. */
	if (!ps_program[0])
		ps_program_clean(ps_program, sizeof(ps_program), program_invocation_short_name);
}

int64_t ps_report_start_time(void)
{
	return start_time;
}

void ps_report_ident(int *pid, const char **program)
{
	/* At the end the pid has just been asked (end.c): not again. */
	*pid = ps_report_pid ? ps_report_pid : (int)PS_SYSCALL(SYS_getpid);
	if (!ps_program[0])
		ps_report_keep_name();
	*program = ps_program;
}

/* Untouched, so it costs no memory, until the first report fills it. */
static struct ps_tstats reserved_scratch;
static int reserved_taken;
static bool reserved_used;      /* written once: no longer all zeros */

struct ps_tstats *ps_report_scratch_get(void)
{
	if (!__atomic_exchange_n(&reserved_taken, 1, __ATOMIC_ACQUIRE))
		return &reserved_scratch;
	int saved_errno = errno;
	struct ps_tstats *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	errno = saved_errno;
	return s == MAP_FAILED ? NULL : s;
}

/*
 * The merged counters into a scratch block.  A fresh one (the reserved
 * block's first use, or a new mapping) is all zeros already: zeroing its
 * 171 KiB again would fault in every page of it, most of the cost of a
 * short process's report on this VM.
 */
void ps_report_scratch_fill(struct ps_tstats *scratch, struct ps_rows *rows)
{
	if (scratch != &reserved_scratch) {
		ps_stats_merge_zeroed(scratch, rows);
	} else if (!reserved_used) {
		reserved_used = true;
		ps_stats_merge_zeroed(scratch, rows);
	} else {
		ps_stats_merge(scratch, rows);
	}
}

void ps_report_scratch_put(struct ps_tstats *scratch)
{
	if (scratch == &reserved_scratch) {
		__atomic_store_n(&reserved_taken, 0, __ATOMIC_RELEASE);
		return;
	}
	int saved_errno = errno;
	munmap(scratch, sizeof(*scratch));
	errno = saved_errno;
}

/*
 * HugePages_Free of /proc/meminfo, in pages, or 0 when it cannot be read:
 * read here, at report time, for the hugetlb advice (never on a hot path).
 */
static uint64_t hugetlb_free(void)
{
	static const char key[] = "HugePages_Free:";
	char buf[4096];
	long fd = ps_sys_openat(AT_FDCWD, "/proc/meminfo", O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	long n = ps_sys_read((int)fd, buf, sizeof(buf) - 1);
	ps_sys_close((int)fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *at = strstr(buf, key);
	if (!at)
		return 0;
	at += sizeof(key) - 1;
	while (*at == ' ')
		at++;
	uint64_t v = 0;
	while (*at >= '0' && *at <= '9')
		v = v * 10 + (uint64_t)(*at++ - '0');
	return v;
}

void ps_report_gather(struct ps_report_data *d, struct ps_tstats *scratch, bool symbolize)
{
	struct rusage ru;

	memset(d, 0, sizeof(*d));
	ps_report_ident(&d->pid, &d->program);
	ps_report_scratch_fill(scratch, &d->rows);
	d->rows_known = true;
	d->totals = scratch;
	d->pool_ready = ps_alloc_pool_ready();
	d->pool_off = !ps_cfg.pool;
	d->allocator = ps_pool_allocator_name(ps_cfg.pool_allocator);
	if (__atomic_load_n(&ps_heap, __ATOMIC_ACQUIRE) == PS_HEAP_OTHER)
		d->heap_owner = ps_heap_owner ? ps_heap_owner : "?";
	ps_pool_get_info(&d->pool);
	ps_alloc_counts_sync();
	d->pool_in_use = PS_LOAD(ps_gauges->pool_in_use);
	d->pool_peak = PS_LOAD(ps_gauges->pool_peak);
	d->cached_known = true;
	d->cached_bytes = ps_tcache_cached_bytes();
	struct ps_blocks_info bi;
	if (ps_alloc_blocks_info(&bi)) {
		d->free_known = true;
		d->free_blocks = bi.free;
		d->free_bytes = bi.free_bytes;
		d->free_zero_bytes = bi.free_zero_bytes;
		d->free_largest = bi.largest_free;
		d->arenas_used = bi.arenas_used;
		d->arenas_max = bi.arenas_max;
	}
	d->pool_min = ps_cfg.pool_min;
	d->small_uncounted_below = ps_alloc_small_uncounted_below();
	if (PS_SYSCALL(SYS_getrusage, RUSAGE_SELF, &ru) == 0) {
		d->minflt = (uint64_t)ru.ru_minflt;
		d->majflt = (uint64_t)ru.ru_majflt;
		d->utime_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 + (uint64_t)ru.ru_utime.tv_usec;
		d->stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
	}
	d->threads = ps_stats_threads_peak();
	d->uring_state = ps_uring_state();
	d->uring_reason = ps_uring_reason();
	d->uring_rings = ps_uring_rings();
	d->routes = ps_routes;
	d->version = PACKAGE_VERSION;
	struct utsname un;
	if (PS_SYSCALL(SYS_uname, &un) == 0) {
		memcpy(d->host, un.nodename, sizeof(d->host) - 1);
		memcpy(d->kernel, un.release, sizeof(d->kernel) - 1);
	}
	d->start_time = start_time;
	d->cfg = &ps_cfg;
	d->callsites = ps_callsite_emit;
	d->symbolize = symbolize;
	/* Only where the hugetlb advice could apply: most reports read no extra file. */
	if (scratch->uring.sqes && !d->pool.backed_by[PS_BACK_HUGETLB] && !d->pool.forks)
		d->hugetlb_free = hugetlb_free();
}
