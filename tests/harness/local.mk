# SPDX-License-Identifier: MIT
# (included from Makefile.am)  The demo harness: scripts/demo --quick once;
# scripts/bench small, briefly.
TESTS += tests/harness/demo_quick.sh tests/harness/bench_small.sh
EXTRA_DIST += tests/harness/demo_quick.sh tests/harness/bench_small.sh scripts/demo scripts/harness.py scripts/hugepages scripts/bootstrap
