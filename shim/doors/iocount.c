// SPDX-License-Identifier: MIT
/* The out-of-line half of counting pass-through I/O calls (iocount.h). */
#include "doors/iocount.h"

#include <errno.h>

#include "core/alloc.h"
#include "core/callsite.h"
#include "doors/start.h"
#include "core/live.h"

bool ps_io_timing;
/* Call sites are captured (POOLSHIM_BACKTRACE): every call takes the slow path. */
static bool sites_wanted;
static uint32_t sample_period;
static uint64_t site_min;

void ps_iocount_init(const struct ps_config *cfg)
{
	ps_io_timing = cfg->timing;
	sites_wanted = cfg->backtrace != 0;
	sample_period = (uint32_t)cfg->timing_sample;
	site_min = cfg->uring_min;
}

/* Whether this thread has been through ps_io_gate_slow() once (sampling's start). */
static __thread bool gate_started;
/* The countdown to the next timed call while call sites are captured. */
static __thread uint32_t site_left;
/* This thread's xorshift state for the sampling jitter; never 0 once seeded. */
static __thread uint32_t sample_rng;

/*
 * Calls until the next timed one: on average POOLSHIM_TIMING_SAMPLE, drawn
 * from [period/2, period*3/2).  A fixed period would time the same call of
 * a loop every time: a server that alternates recv and send, with an even
 * period, would never have a recv timed.
 */
static uint32_t next_sample(void)
{
	uint32_t x = sample_rng, p = sample_period;

	if (p < 2)
		return 1;
	if (ps_unlikely(x == 0))
		x = (uint32_t)ps_ticks() | 1;
	sample_rng = x = ps_xorshift32(x);
	return p / 2 + (x & (p - 1));
}

/*
 * The gate is set again: to the next sampling gap (next_sample()), to 0
 * with timing off (the next visit is 2^32 calls away), to 1 while the
 * shim is off or the thread has no counter block (PS_IO_SLOW), or while
 * call sites are captured (ps_io_end() looks at each call).  A thread's
 * first visit claims its block and times its 16th call, so that a
 * short-lived thread has a sample too.
 */
__attribute__((noinline)) uint64_t ps_io_gate_slow(void)
{
	if (!ps_enabled()) {
		ps_io_gate = 1;
		return PS_IO_OFF;
	}
	if (ps_unlikely(ps_stats_tls == NULL)) {
		/* Claiming may run the thread-exit hook's set-up: keep errno. */
		int saved = errno;
		struct ps_tstats *t = ps_stats_claim();
		errno = saved;
		if (!t) {
			ps_io_gate = 1;
			return PS_IO_SLOW;
		}
	}
	if (ps_unlikely(ps_live_tick_wanted()))
		ps_live_tick();
	ps_live_usage_tick();
	ps_alloc_decay_poll();
	if (ps_unlikely(sites_wanted)) {
		/* Every call comes here; the sampling countdown is site_left. */
		ps_io_gate = 1;
		if (!gate_started) {
			gate_started = true;
			site_left = 16;
		}
		if (--site_left != 0 || !ps_io_timing)
			return PS_IO_SLOW;
		site_left = next_sample();
		return ps_ticks();
	}
	if (!gate_started) {
		gate_started = true;
		ps_io_gate = 15;
		return 0;
	}
	/*
	 * Untimed, a process without its live file still comes back to make
	 * it, and one whose pool decays in time comes back to look at the
	 * clock (ps_alloc_decay_poll).
	 */
	ps_io_gate = ps_io_timing ? next_sample()
		   : ps_alloc_decay_on() ? PS_IO_POLL_CALLS
		   : ps_live_tick_wanted() ? 4096 : 0;
	return ps_io_timing ? ps_ticks() : 0;
}

__thread uint32_t ps_io_quiet_gate = 1;

__attribute__((noinline)) void ps_io_quiet_slow(void)
{
	/* With the shim off, never again (2^32 calls away). */
	if (!ps_enabled() || !ps_alloc_decay_on()) {
		ps_io_quiet_gate = 0;
		return;
	}
	ps_io_quiet_gate = PS_IO_POLL_CALLS;
	ps_alloc_decay_poll();
}

/*
 * The kind a failed call counts under; EBADF is not worth a probe.
 * ESPIPE on what open's path and flags said was a file (a FIFO opened by
 * path, perhaps with O_DIRECT set by F_SETFL) says the guess was wrong:
 * look once, so this call and the ones after count under the real kind
 * whether or not the io_uring check (which probes too) ever ran.
 */
static enum ps_fdkind failed_kind(int fd, int err)
{
	if (err == ESPIPE) {
		uint8_t v = ps_fd_entry(fd);
		enum ps_fdkind k = (enum ps_fdkind)(v & PS_FD_KIND_MASK);
		if ((k == PS_FD_FILE || k == PS_FD_DIRECT) && !(v & PS_FD_CHECKED))
			return ps_fd_kind_slow(fd);
	}
	if (err != EBADF)
		return ps_fd_kind(fd);
	enum ps_fdkind k = ps_fd_peek(fd);
	return k != PS_FD_NONE ? k : PS_FD_OTHER;
}

/*
 * Nothing here sets errno (the probe and the thread's first claim restore
 * it themselves), so errno is read only when the call failed.  Out of
 * line, returning result: the fast path calls it last, as a tail call,
 * and keeps no register for the result.
 */
__attribute__((noinline)) long ps_io_end(enum ps_call call, int fd, uint64_t request,
					 long result, long done, uint64_t t0)
{
	int err = 0;
	enum ps_fdkind kind;
	uint64_t ns = 0;

	if (ps_likely(result >= 0)) {
		kind = ps_fd_kind(fd);
	} else {
		err = errno;
		kind = failed_kind(fd, err);
	}
	/* A timed call shorter than a nanosecond still counts as timed. */
	if (t0 != 0 && t0 != PS_IO_SLOW) {
		ns = ps_ticks_to_ns(ps_ticks() - t0);
		ns = ns ? ns : 1;
	}
	ps_stats_io_slow(call, kind, request, result < 0 ? result : done, err, ns);
	if (ps_unlikely(ps_callsite_on) && request >= site_min) {
		int saved = errno;
		ps_callsite_capture(PS_SITE_IO, call, result > 0 ? (uint64_t)done : 0, ns);
		errno = saved;
	}
	return result;
}

/* One call in POOLSHIM_TIMING_SAMPLE comes here: its cost is shared by all of them. */
__attribute__((noinline)) long ps_io_timed(enum ps_call call, int fd, uint64_t request,
					   long result, long done, uint64_t t0)
{
	uint8_t e = ps_fd_entry(fd);
	if (result < 0 || e == 0 || t0 == 0 || t0 == PS_IO_SLOW || sites_wanted)
		return ps_io_end(call, fd, request, result, done, t0);
	uint64_t ns = ps_ticks_to_ns(ps_ticks() - t0);
	ns = ns ? ns : 1;   /* shorter than a nanosecond still counts as timed */
	struct ps_counter *c = &ps_stats_tls->c[call][e & PS_FD_KIND_MASK];
	PS_ADD(c->bytes, (uint64_t)done);
	PS_ADD(c->size_hist[ps_log2(request)], 1);
	PS_ADD(c->timed, 1);
	PS_ADD(c->nsec, ns);
	ps_hist_add(c->lat_hist, PS_LAT_BUCKETS, ns);
	return result;
}
