// SPDX-License-Identifier: MIT
/*
 * The router (route.h): per device and direction, which route eligible
 * O_DIRECT calls take, chosen by measuring both.
 *
 * What a measurement costs: while a slot measures, each call reads the
 * thread's CPU clock twice (clock_gettime(CLOCK_THREAD_CPUTIME_ID): a
 * system call, ~0.3 us here, against the 100 us and more of an eligible
 * call) and the TSC twice; half its calls take the dearer route.  A
 * measurement is 2 x PS_ROUTE_SAMPLES calls every PS_ROUTE_REMEASURE_CALLS,
 * so the dearer route gets under 1% of the calls, and a decided slot's
 * calls pay two atomic additions and no clock.
 *
 * The device of a descriptor is kept per thread in a small table keyed by
 * the descriptor number and asked again of fstat every PS_ROUTE_RECHECK
 * uses: a number closed and reused for a file on another device behind
 * our back is noticed within that many calls.  Until then its calls are
 * routed and counted as the old device's, and split in its chunks, which
 * changes what the measurement says, never what a call returns (either
 * route is the same I/O).
 *
 * Slots are claimed with a compare-and-swap of their key, in order, and
 * never given back; the process-wide state is a few atomics per slot, so
 * nothing here locks or allocates and a call from a signal handler is
 * safe.  Footprint: the table (a few KiB, static) and 128 bytes of TLS.
 */
#include "core/route.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "format/compiler.h"
#include "format/sys.h"

#define PS_ROUTE_RECHECK 256
#define PS_ROUTE_CACHE 8            /* descriptors per thread, direct-mapped */
/* A sample's wall time per MiB is capped for the spread: its square must not overflow. */
#define PS_ROUTE_PER_MIB_MAX ((uint64_t)1 << 31)

static struct ps_route_table table;
struct ps_route_table *ps_routes = &table;
struct ps_route_table *ps_routes_mirror;

/* What the router keeps of a slot besides the published table: never shown. */
struct slot_run {
	uint64_t seq;                /* calls while measuring: odd to the ring */
	uint64_t round_start;        /* seq when the measurement under way began */
	uint64_t since;              /* calls since the last decision */
	uint64_t decided_tick;
	uint32_t deciding;           /* one thread writes a decision */
	int32_t last;                /* the last decision's route, -1 none */
	struct ps_route_window win[PS_ROUTE__COUNT];   /* the measurement under way */
};

static struct slot_run run[PS_ROUTE_SLOTS];
static enum ps_uring_mode mode;
static uint64_t remeasure_calls = PS_ROUTE_REMEASURE_CALLS;

struct fd_dev {
	int fd_plus1;                /* 0: empty */
	uint32_t uses;
	dev_t dev;
	bool ok;                     /* fstat answered */
};
static __thread struct fd_dev fd_devs[PS_ROUTE_CACHE];

#ifdef PS_TEST_HOOKS
static enum ps_uring_test test_mode;
static uint64_t test_calls;          /* routed calls, for dear_swap */
#endif

void ps_route_init(const struct ps_config *cfg)
{
	mode = cfg->uring;
	table.mode = (uint32_t)mode;
	for (int i = 0; i < PS_ROUTE_SLOTS; i++)
		run[i].last = -1;
#ifdef PS_TEST_HOOKS
	test_mode = cfg->uring_test;
	/* A test sees a change followed within a few hundred calls. */
	if (test_mode >= PS_URING_TEST_RING_DEAR)
		remeasure_calls = 2 * PS_ROUTE_SAMPLES;
#endif
}

enum ps_route ps_route_decide(const struct ps_route_window w[PS_ROUTE__COUNT])
{
	const struct ps_route_window *p = &w[PS_ROUTE_PLAIN], *r = &w[PS_ROUTE_RING];

	if (!p->samples || !r->samples || !p->bytes || !r->bytes)
		return PS_ROUTE_PLAIN;
	/* Mean and variance of each route's wall time per MiB, over its samples. */
	double np = (double)p->samples, nr = (double)r->samples;
	double mp = (double)p->wall_per_mib / np, mr = (double)r->wall_per_mib / nr;
	double vp = (double)p->wall_per_mib_sq / np - mp * mp;
	double vr = (double)r->wall_per_mib_sq / nr - mr * mr;
	if (vp < 0)
		vp = 0;
	if (vr < 0)
		vr = 0;
	/*
	 * The difference of the means counts when it is beyond three times
	 * its standard error and beyond PS_ROUTE_SPEED_PCT of the plain
	 * call's mean: compared squared, so no sqrt (the shim links no libm).
	 */
	double diff = mp - mr;       /* > 0: the ring is faster */
	double se2 = vp / np + vr / nr;
	double least = mp * PS_ROUTE_SPEED_PCT / 100.0;
	if (diff * diff > 9 * se2 && diff * diff > least * least)
		return diff > 0 ? PS_ROUTE_RING : PS_ROUTE_PLAIN;
	/*
	 * No difference the noise cannot explain.  If the noise itself is
	 * wide (a loaded machine: preemption puts milliseconds into some
	 * samples), the speeds are not known to be equal, and the CPU
	 * figures cannot settle it either: the thread's CPU clock misses the
	 * kernel's work done elsewhere (O_DIRECT write completions in a
	 * workqueue, io-wq), which favours the ring.  Measured here under a
	 * load of 20, that chose the ring for writes it ran at 0.6x the
	 * plain call's speed.  So the plain call, measured again later.
	 */
	if (9 * se2 > least * least)
		return PS_ROUTE_PLAIN;
	/* As fast, and known to be: the one that costs less CPU per byte, the plain call when close. */
	double cp = (double)p->cpu_ns / (double)p->bytes, cr = (double)r->cpu_ns / (double)r->bytes;
	return cr * 100.0 < cp * (100.0 - PS_ROUTE_NOISE_PCT) ? PS_ROUTE_RING : PS_ROUTE_PLAIN;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (PS_SYSCALL(SYS_clock_gettime, CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* fd's device, from this thread's table or fstat (*fresh).  false when fstat fails. */
static bool fd_device(int fd, dev_t *dev, bool *fresh)
{
	struct fd_dev *e = &fd_devs[(unsigned)fd % PS_ROUTE_CACHE];

	*fresh = false;
	if (e->fd_plus1 == fd + 1 && ++e->uses < PS_ROUTE_RECHECK) {
		*dev = e->dev;
		return e->ok;
	}
	*fresh = true;
	struct stat st;
	e->fd_plus1 = fd + 1;
	e->uses = 0;
	e->ok = PS_SYSCALL(SYS_fstat, fd, &st) == 0;
	e->dev = !e->ok ? 0 : S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	*dev = e->dev;
	return e->ok;
}

static void publish(int i)
{
	struct ps_route_table *m = __atomic_load_n(&ps_routes_mirror, __ATOMIC_ACQUIRE);
	if (!m)
		return;
	/* A reader may see a slot half copied; the next change corrects it. */
	memcpy(&m->slot[i], &table.slot[i], sizeof(m->slot[i]));
	__atomic_store_n(&m->nslots, __atomic_load_n(&table.nslots, __ATOMIC_RELAXED),
			 __ATOMIC_RELEASE);
	m->mode = table.mode;
}

/* The slot of (dev, write), claimed on first use; -1 when the table is full. */
static int slot_of(dev_t dev, bool write)
{
	uint64_t key = ((uint64_t)dev + 1) << 1 | (write ? 1 : 0);

	for (int i = 0; i < PS_ROUTE_SLOTS; i++) {
		uint64_t k = __atomic_load_n(&table.slot[i].key, __ATOMIC_ACQUIRE);
		if (k == key)
			return i;
		if (k)
			continue;
		if (__atomic_compare_exchange_n(&table.slot[i].key, &k, key, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&table.slot[i].state,
					 mode == PS_URING_ON ? PS_ROUTE_STATE_FORCED
							     : PS_ROUTE_STATE_MEASURING,
					 __ATOMIC_RELAXED);
			run[i].decided_tick = ps_ticks();
			uint32_t n = __atomic_load_n(&table.nslots, __ATOMIC_RELAXED);
			while (n < (uint32_t)i + 1 &&
			       !__atomic_compare_exchange_n(&table.nslots, &n, (uint32_t)i + 1, true,
							    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
				;
			publish(i);
			return i;
		}
		if (k == key)
			return i;
	}
	return -1;
}

/* A decided slot: count the call, and start measuring again when it is time. */
static void maybe_remeasure(int i, uint32_t state)
{
	struct slot_run *s = &run[i];
	uint64_t since = __atomic_add_fetch(&s->since, 1, __ATOMIC_RELAXED);

	if (since < PS_ROUTE_REMEASURE_MIN && since < remeasure_calls)
		return;
	if (since < remeasure_calls) {
		/* The clock only every 64 calls. */
		if (since & 63)
			return;
		uint64_t t0 = __atomic_load_n(&s->decided_tick, __ATOMIC_RELAXED);
		if (ps_ticks_to_ns(ps_ticks() - t0) < PS_ROUTE_REMEASURE_NS)
			return;
	}
	if (__atomic_compare_exchange_n(&table.slot[i].state, &state, PS_ROUTE_STATE_MEASURING,
					false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		__atomic_store_n(&s->round_start, __atomic_load_n(&s->seq, __ATOMIC_RELAXED),
				 __ATOMIC_RELAXED);
}

static void decide(int i);

static enum ps_route pick(struct ps_route_call *rc, int i)
{
	uint32_t state = __atomic_load_n(&table.slot[i].state, __ATOMIC_RELAXED);

	switch (state) {
	case PS_ROUTE_STATE_FORCED:
		return PS_ROUTE_RING;
	case PS_ROUTE_STATE_PLAIN:
	case PS_ROUTE_STATE_RING:
		maybe_remeasure(i, state);
		return state == PS_ROUTE_STATE_RING ? PS_ROUTE_RING : PS_ROUTE_PLAIN;
	default: {
		uint64_t n = __atomic_fetch_add(&run[i].seq, 1, __ATOMIC_RELAXED);
		/*
		 * A route whose calls give no sample (errors, reads at the end
		 * of the file, writes the ring may not take) would keep the slot
		 * measuring for ever: after 16 rounds' worth of calls, decide on
		 * what there is (plain, for a route without samples).
		 */
		if (ps_unlikely(n - __atomic_load_n(&run[i].round_start, __ATOMIC_RELAXED) >
				16 * 2 * PS_ROUTE_SAMPLES))
			decide(i);
		rc->sample = true;
		return n & 1 ? PS_ROUTE_RING : PS_ROUTE_PLAIN;
	}
	}
}

enum ps_route ps_route_begin(struct ps_route_call *rc, int fd, bool write)
{
	rc->slot = -1;
	rc->sample = false;
	rc->route = mode == PS_URING_ON ? PS_ROUTE_RING : PS_ROUTE_PLAIN;
	rc->dev_known = fd_device(fd, &rc->dev, &rc->fresh);
	if (!rc->dev_known)
		return rc->route;
	rc->slot = slot_of(rc->dev, write);
	if (rc->slot < 0)
		return rc->route;
	rc->route = pick(rc, rc->slot);
#ifdef PS_TEST_HOOKS
	__atomic_add_fetch(&test_calls, 1, __ATOMIC_RELAXED);
#endif
	if (rc->sample) {
		rc->cpu0 = thread_cpu_ns();
		rc->tick0 = ps_ticks();
	}
	return rc->route;
}

void ps_route_fall_back(struct ps_route_call *rc)
{
	rc->route = PS_ROUTE_PLAIN;
	/* The failed attempt's cost would be the plain call's: no sample. */
	rc->sample = false;
}

static void add(uint64_t *to, uint64_t v)
{
	__atomic_add_fetch(to, v, __ATOMIC_RELAXED);
}

/* Both routes measured: the thread that gets here first decides. */
static void decide(int i)
{
	struct slot_run *s = &run[i];
	struct ps_route_slot *slot = &table.slot[i];
	uint32_t no = 0;

	if (!__atomic_compare_exchange_n(&s->deciding, &no, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&slot->state, __ATOMIC_RELAXED) != PS_ROUTE_STATE_MEASURING) {
		__atomic_store_n(&s->deciding, 0, __ATOMIC_RELEASE);
		return;
	}
	struct ps_route_window w[PS_ROUTE__COUNT];
	for (int r = 0; r < PS_ROUTE__COUNT; r++) {
		uint64_t *from = &s->win[r].samples, *to = &w[r].samples;
		/* The window's fields, read and emptied one by one: a stray sample is harmless. */
		for (size_t f = 0; f < sizeof(w[r]) / sizeof(uint64_t); f++)
			to[f] = __atomic_exchange_n(&from[f], 0, __ATOMIC_RELAXED);
	}
	enum ps_route got = ps_route_decide(w);
	memcpy(slot->chose, w, sizeof(w));
	slot->decisions++;
	if (s->last >= 0 && s->last != (int32_t)got)
		slot->changes++;
	s->last = (int32_t)got;
	slot->chosen = (uint32_t)got + 1;
	__atomic_store_n(&s->since, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->round_start, __atomic_load_n(&s->seq, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
	__atomic_store_n(&s->decided_tick, ps_ticks(), __ATOMIC_RELAXED);
	__atomic_store_n(&slot->state, got == PS_ROUTE_RING ? PS_ROUTE_STATE_RING : PS_ROUTE_STATE_PLAIN,
			 __ATOMIC_RELEASE);
	publish(i);
	__atomic_store_n(&s->deciding, 0, __ATOMIC_RELEASE);
}

#ifdef PS_TEST_HOOKS
void ps_route_test_delay(const struct ps_route_call *rc)
{
	enum ps_route dear;

	switch (test_mode) {
	case PS_URING_TEST_RING_DEAR:
		dear = PS_ROUTE_RING;
		break;
	case PS_URING_TEST_PLAIN_DEAR:
		dear = PS_ROUTE_PLAIN;
		break;
	case PS_URING_TEST_DEAR_SWAP:
		dear = __atomic_load_n(&test_calls, __ATOMIC_RELAXED) <= 300 ? PS_ROUTE_RING
									       : PS_ROUTE_PLAIN;
		break;
	default:
		return;
	}
	if (rc->route != dear)
		return;
	/*
	 * 1 ms of CPU time (not wall time: the dear route must cost CPU on a
	 * busy machine too), then 10 ms asleep, so that it is slower beyond
	 * the scheduling noise of a loaded machine as well.
	 */
	uint64_t until = thread_cpu_ns() + 1000000;
	while (thread_cpu_ns() < until)
		;
	struct timespec nap = { 0, 10000000 };
	PS_SYSCALL(SYS_nanosleep, &nap, NULL);
}
#endif

void ps_route_end(struct ps_route_call *rc, long r)
{
	if (rc->slot < 0)
		return;
#ifdef PS_TEST_HOOKS
	ps_route_test_delay(rc);
#endif
	struct ps_tstats *t = ps_stats_mine();
	if (ps_likely(t != NULL)) {
		PS_ADD(t->uring.route_calls[rc->slot][rc->route], 1);
		if (r > 0)
			PS_ADD(t->uring.route_bytes[rc->slot][rc->route], (uint64_t)r);
	}
	if (!rc->sample || r <= 0)
		return;
	uint64_t now = thread_cpu_ns();
	if (!rc->cpu0 || now < rc->cpu0)
		return;         /* the clock failed: no sample */
	uint64_t cpu = now - rc->cpu0;
	uint64_t wall = ps_ticks_to_ns(ps_ticks() - rc->tick0);
	uint64_t per_mib = (uint64_t)((double)wall * (double)(1 << 20) / (double)r);
	if (per_mib > PS_ROUTE_PER_MIB_MAX)
		per_mib = PS_ROUTE_PER_MIB_MAX;
	struct slot_run *s = &run[rc->slot];
	struct ps_route_window *w = &s->win[rc->route];
	add(&w->bytes, (uint64_t)r);
	add(&w->cpu_ns, cpu);
	add(&w->wall_ns, wall);
	add(&w->wall_per_mib, per_mib);
	add(&w->wall_per_mib_sq, per_mib * per_mib);
	add(&w->samples, 1);
	if (__atomic_load_n(&s->win[PS_ROUTE_PLAIN].samples, __ATOMIC_RELAXED) >= PS_ROUTE_SAMPLES &&
	    __atomic_load_n(&s->win[PS_ROUTE_RING].samples, __ATOMIC_RELAXED) >= PS_ROUTE_SAMPLES)
		decide(rc->slot);
}
