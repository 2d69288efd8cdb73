# SPDX-License-Identifier: MIT
# (included from Makefile.am)  Each group adds its tests to
# pst_tools_scripts, which make check runs and the tarball carries.

# `poolshim report`: merging JSON reports, plots, errors.  The tool is
# scripts/poolshim-report.py; the test runs it from the source tree.
pst_tools_scripts = tests/tools/report_merge.sh
# --json OUT never overwrites an input report.
pst_tools_scripts += tests/tools/report_json_out.sh
# --diff compares whole runs (directories of reports), says what else differed.
pst_tools_scripts += tests/tools/report_diff_runs.sh
# The same on Debian's nginx, workers as nobody, pool off against on (skips without nginx or root).
pst_tools_scripts += tests/tools/report_diff_nginx.sh
TESTS += $(pst_tools_scripts)
EXTRA_DIST += $(pst_tools_scripts) scripts/poolshim-report.py

# The `poolshim` command's warnings (setuid, static) and LD_PRELOAD order.
pst_tools_scripts += tests/tools/poolshim_run.sh

# `poolshim stat` links the format layer only: no jemalloc, liburing, libunwind.
pst_tools_scripts += tests/tools/stat_deps.sh

# The shim's folders are its layers: no upward include or use, no circle.
pst_tools_scripts += tests/tools/layers.sh
EXTRA_DIST += tests/tools/layers.py

# `poolshim stat` on live files whose header lies (crafted in /dev/shm).
pst_tools_scripts += tests/tools/stat_lying.sh

# `poolshim stat --prometheus` (promtool) and --textfile (atomic rename).
pst_tools_scripts += tests/tools/stat_prom.sh

# POOLSHIM_LIVE_DIR / stat --live-dir; --json -i timestamps and late pick-up.
pst_tools_scripts += tests/tools/stat_half_made.sh tests/tools/stat_live_dir.sh tests/tools/stat_fork.sh tests/tools/stat_nginx.sh

# The `poolshim` command: build-tree library, LD_PRELOAD once, --print-env,
# --dry-run, --version, POOLSHIM_LIBRARY kept from the program.
pst_tools_scripts += tests/tools/poolshim_wrapper.sh

# Issue 30, the tools do what they say: the command runs nothing but the
# program under the shim (--dry-run), static-pie is static, `poolshim
# systemd` judges values with the shim's parser; stat -i shows changes
# only; failures said in one line; report --json thresholds per process;
# scripts/stack --shim preloads the servers, not nohup; a report that
# cannot be written, with no stderr left, is said in the system log.
pst_tools_scripts += tests/tools/wrapper_only_program.sh tests/tools/stat_interval.sh \
	tests/tools/quiet_failures.sh tests/tools/stack_shim.sh tests/tools/report_syslog.sh

# Issue 37, the merged-report workflow: advice kept per process, threads per
# process, stat --json snapshots, --diff's process figures and estimates,
# --folded with nothing to fold, unknown versions, links.
pst_tools_scripts += tests/tools/report_workflow.sh
# --plot: labels of equal bars, call-site labels, latency only from enough
# timed calls, no blank panel for a program that only allocates.
pst_tools_scripts += tests/tools/report_plots.sh
# What the pool saved, merged: summed in --json too, said when the pool was
# off everywhere, and drawn by --plot.
pst_tools_scripts += tests/tools/report_saved.sh

# `poolshim stat`: the Prometheus text format said as such, -c without -i
# refused, an unwritable --textfile DIR refused at start (as root too),
# the live view's pool retain and decay from the record.
pst_tools_scripts += tests/tools/stat_cli.sh

# man/*: no troff warning at 78 columns.
pst_tools_scripts += tests/tools/man_warnings.sh

# docs/grafana/poolshim.json asks only for metrics and labels that
# `poolshim stat --prometheus` prints (and parses, with promtool).
pst_tools_scripts += tests/tools/grafana_dashboard.sh

# Issue 34, `poolshim collect`: reports of processes that ended without
# writing their own (SIGKILL), at the path POOLSHIM_STATS names, by run;
# a fork child with no work removed without one; a report the process
# kept in its record delivered; damaged records refused one by one;
# records of another user's processes never written where that user
# could not write (as root).  live_offsets prints the header's layout for
# the tests that craft damaged records.
check_PROGRAMS += tests/tools/live_offsets tests/tools/collect_api
tests_tools_live_offsets_SOURCES = tests/tools/live_offsets.c
# collect_api: the C API the `poolshim` wrapper calls (a known end), and
# report paths opened without following links, by openat2 and without it.
tests_tools_collect_api_SOURCES = tests/tools/collect_api.c
tests_tools_collect_api_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tools
tests_tools_collect_api_LDADD = libpstools.la -lm
if SANITIZERS
# libpstools carries ASan and UBSan in that build (tools/local.mk).
tests_tools_collect_api_LDFLAGS = $(SANITIZER_CFLAGS)
endif
pst_tools_scripts += tests/tools/collect_killed.sh tests/tools/collect_kept.sh \
	tests/tools/collect_damaged.sh tests/tools/collect_hostile.sh tests/tools/collect_halfmade.sh tests/tools/collect_api.sh \
	tests/tools/collect_sites.sh

# Issue 34, the wrapper sees its program end: exit codes and signals passed
# on, signals forwarded once, the program's signal state as without the
# wrapper, reports of killed programs and workers on the wrapper's stderr,
# a daemon's record left for `poolshim collect`; nginx and haproxy as the
# README runs them.
check_PROGRAMS += tests/tools/run_helper
pst_tools_scripts += tests/tools/wrapper_end.sh tests/tools/wrapper_nginx.sh tests/tools/wrapper_haproxy.sh

# Issue 45, records are untrusted input (root runs collect and stat):
# what reaches a terminal is made safe (S4).
# Another user's call sites are named in a child become that user, never blocking (S1).
pst_tools_scripts += tests/tools/sec_debuginfo.sh
pst_tools_scripts += tests/tools/sec_terminal.sh
# A record costs its reader what the shim writes at most (S2).
pst_tools_scripts += tests/tools/sec_sparse.sh
# stat holds a bounded amount per record (S3).
pst_tools_scripts += tests/tools/sec_memory.sh
# collect --run prints "stderr" reports only of the run's user or root.
pst_tools_scripts += tests/tools/sec_stderr_owner.sh
# A FIFO report path whose reader never reads costs collect 500 ms in all.
pst_tools_scripts += tests/tools/sec_fifo.sh
# Record names no other user can take first.
pst_tools_scripts += tests/tools/sec_names.sh
# The reader fuzz: a short run here, ten times longer in the sanitizer
# build, whose tools are built with ASan and UBSan (docs/deploy.md).
pst_tools_scripts += tests/tools/fuzz_quick.sh
EXTRA_DIST += tests/tools/sec_craft.py tests/tools/fuzz_records.py
# Issue 45, the wrapper is a plain exec to its caller: SIGCHLD ignored,
# STOP/CONT to the program, a signal sent to each process of the job or to
# its group, PR_SET_PDEATHSIG, core dumps, job control, each compared with
# the program run without the wrapper.
pst_tools_scripts += tests/tools/wrapper_plain.sh
EXTRA_DIST += tests/tools/wrapper_plain.py
# Issue 45, pid namespaces and daemons: reports of `poolshim unshare -fp`
# as the library alone prints them, a killed process's in an ended
# namespace by the wrapper and by collect, a daemon's when it ends, and
# the program as PID 1 (orphans, death by SIGSEGV) as without the wrapper.
pst_tools_scripts += tests/tools/wrapper_ns.sh
# Issue 45, records do not pile up: 100 processes that keep their reports
# in their records, under the wrapper, leave at most a few at once.
pst_tools_scripts += tests/tools/wrapper_records.sh
