# SPDX-License-Identifier: MIT
# (included from Makefile.am)  The demo harness: scripts/demo --quick once.
TESTS += tests/harness/demo_quick.sh
EXTRA_DIST += tests/harness/demo_quick.sh scripts/demo scripts/harness.py scripts/hugepages scripts/bootstrap
