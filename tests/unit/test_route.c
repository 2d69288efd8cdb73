// SPDX-License-Identifier: MIT
/*
 * The router's decision (ps_route_decide) on measurements made up here:
 * the same speed and the ring dearer in CPU (this VM's case, issue 29),
 * the ring cheaper, the ring faster beyond the noise, a difference hidden
 * in a wide spread, a difference under PS_ROUTE_NOISE_PCT, a CPU saving
 * the speed's noise leaves unsettled, and no samples.
 */
#include "core/route.h"
#include "suites.h"

/* n samples of 1 MiB each: wall_per_mib ns (+- spread, alternately), cpu_per_mib ns of CPU. */
static struct ps_route_window window(uint64_t n, uint64_t wall_per_mib, uint64_t spread,
				     uint64_t cpu_per_mib)
{
	struct ps_route_window w = { 0 };

	for (uint64_t i = 0; i < n; i++) {
		uint64_t x = i % 2 ? wall_per_mib + spread : wall_per_mib - spread;
		w.samples++;
		w.bytes += 1 << 20;
		w.wall_ns += x;
		w.cpu_ns += cpu_per_mib;
		w.wall_per_mib += x;
		w.wall_per_mib_sq += x * x;
	}
	return w;
}

static enum ps_route decide(struct ps_route_window plain, struct ps_route_window ring)
{
	struct ps_route_window w[PS_ROUTE__COUNT];
	w[PS_ROUTE_PLAIN] = plain;
	w[PS_ROUTE_RING] = ring;
	return ps_route_decide(w);
}

START_TEST(test_same_speed_ring_dearer)
{
	/* issue 29 at 1 MiB: 0.0254 against 0.0292 CPU s/GiB, the same MiB/s */
	ck_assert_int_eq(decide(window(32, 250000, 5000, 24800), window(32, 250500, 5000, 28500)),
			 PS_ROUTE_PLAIN);
}
END_TEST

START_TEST(test_same_speed_ring_cheaper)
{
	ck_assert_int_eq(decide(window(32, 250000, 5000, 28500), window(32, 249000, 5000, 24800)),
			 PS_ROUTE_RING);
	/* cheaper by less than the noise share: the plain call stays */
	ck_assert_int_eq(decide(window(32, 250000, 5000, 25000), window(32, 250000, 5000, 24500)),
			 PS_ROUTE_PLAIN);
}
END_TEST

START_TEST(test_faster_beyond_noise)
{
	/* the ring 20% faster though dearer in CPU: throughput wins */
	ck_assert_int_eq(decide(window(32, 250000, 5000, 24800), window(32, 200000, 5000, 30000)),
			 PS_ROUTE_RING);
	ck_assert_int_eq(decide(window(32, 200000, 5000, 30000), window(32, 250000, 5000, 24800)),
			 PS_ROUTE_PLAIN);
}
END_TEST

START_TEST(test_difference_within_spread)
{
	/* 10% faster, but each sample is +-100%: no speed difference; CPU decides (plain cheaper) */
	ck_assert_int_eq(decide(window(32, 250000, 250000, 24800), window(32, 225000, 225000, 28500)),
			 PS_ROUTE_PLAIN);
	/* 4% faster with no spread at all: under PS_ROUTE_SPEED_PCT */
	ck_assert_int_eq(decide(window(32, 250000, 0, 24800), window(32, 240000, 0, 28500)),
			 PS_ROUTE_PLAIN);
}
END_TEST

START_TEST(test_wide_noise_keeps_plain)
{
	/* the ring 10% cheaper in CPU and as fast, but each sample +-60%: not known to be as fast */
	ck_assert_int_eq(decide(window(32, 250000, 150000, 28500), window(32, 250000, 150000, 25000)),
			 PS_ROUTE_PLAIN);
	/* the same with the spread of a quiet machine: the ring */
	ck_assert_int_eq(decide(window(32, 250000, 5000, 28500), window(32, 250000, 5000, 25000)),
			 PS_ROUTE_RING);
}
END_TEST

START_TEST(test_no_samples)
{
	struct ps_route_window none = { 0 };
	ck_assert_int_eq(decide(none, window(32, 100, 0, 1)), PS_ROUTE_PLAIN);
	ck_assert_int_eq(decide(window(32, 100, 0, 1), none), PS_ROUTE_PLAIN);
}
END_TEST

Suite *suite_route(void)
{
	Suite *s = suite_create("route");
	TCase *tc = tcase_create("decide");

	tcase_add_test(tc, test_same_speed_ring_dearer);
	tcase_add_test(tc, test_same_speed_ring_cheaper);
	tcase_add_test(tc, test_faster_beyond_noise);
	tcase_add_test(tc, test_difference_within_spread);
	tcase_add_test(tc, test_wide_noise_keeps_plain);
	tcase_add_test(tc, test_no_samples);
	suite_add_tcase(s, tc);
	return s;
}
