/* SPDX-License-Identifier: MIT */
/*
 * The router: which route, the plain call or io_uring, an eligible O_DIRECT
 * call takes, chosen per device and direction by measuring both.  A slot
 * (device, reads or writes) starts by alternating its calls between the
 * two routes, timing each with the thread's CPU clock and the TSC, until
 * each route has PS_ROUTE_SAMPLES samples; ps_route_decide() then gives
 * the calls to the route that costs less CPU per byte where the two move
 * bytes equally fast (within the noise measured), else to the faster one.
 * Measured again after PS_ROUTE_REMEASURE_CALLS calls, or after
 * PS_ROUTE_REMEASURE_NS once PS_ROUTE_REMEASURE_MIN calls were made, so a
 * device whose costs change is followed.  POOLSHIM_URING=on sends every
 * eligible call to the ring unmeasured; =off routes nothing (io_uring is
 * never used).  The table (struct ps_route_table, stats.h) is published
 * into the live file; the calls and bytes by route are per-thread counts.
 */
#ifndef PS_ROUTE_H
#define PS_ROUTE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "format/config.h"
#include "format/stats.h"

#define PS_ROUTE_SAMPLES 32
#define PS_ROUTE_REMEASURE_CALLS 4096
#define PS_ROUTE_REMEASURE_MIN 512
#define PS_ROUTE_REMEASURE_NS (60ull * 1000000000ull)
/*
 * A difference in speed (wall time per byte) below PS_ROUTE_SPEED_PCT
 * percent is taken as none whatever the spread says, and one within
 * three standard errors too; a difference in CPU per byte below
 * PS_ROUTE_NOISE_PCT is none.
 */
#define PS_ROUTE_SPEED_PCT 5
#define PS_ROUTE_NOISE_PCT 3

/* The process's table; ps_routes_mirror is its copy in the live file (or NULL). */
extern struct ps_route_table *ps_routes;
extern struct ps_route_table *ps_routes_mirror;

/* Read the configuration.  Call once at start. */
void ps_route_init(const struct ps_config *cfg);

/*
 * The route the measurements w[] call for: pure, for the unit tests.
 * The faster where the speeds differ beyond the noise; where they do not
 * and the noise is narrow (within PS_ROUTE_SPEED_PCT), the ring if it is
 * cheaper in CPU per byte beyond PS_ROUTE_NOISE_PCT; else plain.
 */
enum ps_route ps_route_decide(const struct ps_route_window w[PS_ROUTE__COUNT]);

/*
 * One routed call, from ps_route_begin() to ps_route_end(): its slot, the
 * route taken and, when it is sampled, the clocks at its start.
 */
struct ps_route_call {
	int slot;                /* -1: no slot (the table is full, or fstat failed) */
	enum ps_route route;
	bool sample;
	uint64_t cpu0, tick0;
	dev_t dev;               /* the file's device (its block device for a node) */
	bool dev_known;          /* fstat answered: dev is right */
	bool fresh;              /* this call asked fstat (first use, or a recheck) */
};

/*
 * Choose the route of an eligible call of fd (write for writes): fills
 * *rc and returns its route.  The device is cached per thread and fd
 * (see route.c for why that is safe); the first call on an fd asks fstat,
 * and says so in rc->fresh: the caller then checks the descriptor the way
 * the ring route does (its kind may have been learnt from flags alone).
 */
enum ps_route ps_route_begin(struct ps_route_call *rc, int fd, bool write);

/*
 * The call ended with result r (bytes, or -1): count it under its route,
 * and, when sampled and successful, add its clocks to the measurement.
 * A call the ring did not take after all (PS_NOT_TAKEN) is moved to the
 * plain route first with ps_route_fall_back().
 */
void ps_route_end(struct ps_route_call *rc, long r);
void ps_route_fall_back(struct ps_route_call *rc);

#ifdef PS_TEST_HOOKS
/* The test build's dear route: burn CPU when rc's route is the dear one. */
void ps_route_test_delay(const struct ps_route_call *rc);
#endif

#endif
