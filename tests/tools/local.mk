# SPDX-License-Identifier: MIT
# (included from Makefile.am)
# `poolshim report`: merging JSON reports, plots, errors.  The tool is
# scripts/poolshim-report.py; the test runs it from the source tree.
TESTS += tests/tools/report_merge.sh
EXTRA_DIST += tests/tools/report_merge.sh scripts/poolshim-report.py

# The `poolshim` command's warnings (setuid, static) and LD_PRELOAD order.
TESTS += tests/tools/poolshim_run.sh
EXTRA_DIST += tests/tools/poolshim_run.sh

# `poolshim stat` links the format layer only: no jemalloc, liburing, libunwind.
TESTS += tests/tools/stat_deps.sh
EXTRA_DIST += tests/tools/stat_deps.sh

# `poolshim stat` on live files whose header lies (crafted in /dev/shm).
TESTS += tests/tools/stat_lying.sh
EXTRA_DIST += tests/tools/stat_lying.sh

# `poolshim stat --prometheus` (promtool) and --textfile (atomic rename).
TESTS += tests/tools/stat_prom.sh
EXTRA_DIST += tests/tools/stat_prom.sh

# POOLSHIM_LIVE_DIR / stat --live-dir; --json -i timestamps and late pick-up.
TESTS += tests/tools/stat_live_dir.sh
TESTS += tests/tools/stat_fork.sh
TESTS += tests/tools/stat_nginx.sh
EXTRA_DIST += tests/tools/stat_nginx.sh
EXTRA_DIST += tests/tools/stat_fork.sh
EXTRA_DIST += tests/tools/stat_live_dir.sh

# The `poolshim` command: build-tree library, LD_PRELOAD once, --print-env,
# --dry-run, --version, POOLSHIM_LIBRARY kept from the program.
TESTS += tests/tools/poolshim_wrapper.sh
EXTRA_DIST += tests/tools/poolshim_wrapper.sh
