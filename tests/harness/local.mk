# SPDX-License-Identifier: MIT
# (included from Makefile.am)  The demo harness: scripts/demo --quick once;
# scripts/bench small, briefly; the verdict logic on recorded numbers; the
# decision rule and the rounds added, on synthetic rounds; scripts/bench
# threads, footprint real and shapes, briefly; the proxies side by side, one
# short round.
pst_harness_scripts = tests/harness/demo_quick.sh tests/harness/bench_small.sh \
	tests/harness/verdict.sh tests/harness/rounds.sh tests/harness/bench_allocators.sh \
	tests/harness/side_by_side.sh
TESTS += $(pst_harness_scripts)
EXTRA_DIST += $(pst_harness_scripts) scripts/demo scripts/harness.py scripts/hugepages scripts/bootstrap
# scripts/harness.py's modules.
EXTRA_DIST += scripts/harness/__init__.py scripts/harness/cli.py scripts/harness/hostcost.py scripts/harness/loadgen.py \
	scripts/harness/machine.py scripts/harness/main.py scripts/harness/messages.py \
	scripts/harness/output.py scripts/harness/plot.py scripts/harness/procs.py \
	scripts/harness/real.py scripts/harness/rgw.py scripts/harness/rounds.py scripts/harness/sampler.py \
	scripts/harness/scenarios.py scripts/harness/settings.py scripts/harness/stack.py \
	scripts/harness/summary.py scripts/harness/symbolize.py scripts/harness/tables.py \
	scripts/harness/targets.py scripts/harness/verdict.py
