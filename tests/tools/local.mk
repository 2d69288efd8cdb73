# SPDX-License-Identifier: MIT
# (included from Makefile.am)
# `poolshim report`: merging JSON reports, plots, errors.  The tool is
# scripts/poolshim-report.py; the test runs it from the source tree.
TESTS += tests/tools/report_merge.sh
EXTRA_DIST += tests/tools/report_merge.sh scripts/poolshim-report.py
