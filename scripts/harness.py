#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The demo harness behind scripts/demo: the S3 stack under each allocator
configuration, measured side by side.

  scripts/demo [--quick] [--scenario S,...] [--small | --no-small] [--config C,...]
               [--repeat N] [--budget MIN] [--max-rounds N]
               [--par-band F] [--coverage F]
               [--seconds S] [--small-seconds S] [--concurrency N]
               [--shim-lib PATH] [--baseline-lib PATH] [--out DIR] [--port P]
               [--real | --no-real] [--rgw] [--shim-osd] [--alloc | --no-alloc]

For every repeat, scenario and configuration (interleaved: repeat 1 of every
scenario, each under every configuration back to back in an order rotated
each round, then repeat 2, ...) it starts two storaged nodes and an
s3proxy on loopback ports under that configuration, runs loadgen (also under
it) with --verify, samples /proc/PID/stat of the servers (page faults, CPU)
and, for the shim, its live counters (tools/poolshim-stat), then stops
everything.  Rates are taken over loadgen's measured window only.

First it measures and prints this host's costs (bench/hostcost: a 4 KiB
page fault, a 2 MiB THP fault, a system call, memcpy, MD5, the disk's
O_DIRECT MiB/s): what the pool can save here, and what it cannot.

Verdicts (issues 39, 46) pair the shim's run with the other configuration's
run of the same round; the range of those ratios is the pair of order
statistics that covers their median with --coverage (default 90%: [min-max]
from 5 rounds, narrower from 8).  met: the whole range at or past the
target; MISSED: all short of it; at par: neither, and the whole range
within --par-band (default 5%) of 1x; otherwise undecided (fewer than 5
rounds are always undecided).
Targets: every large scenario >= 1.0x no preload and >= the best allocator
peer, p99 <= 1.10x no preload; nginx directio >= 1.0x Debian's sendfile
without the shim; small requests, radosgw and the shim in a server alone
>= 0.98x.  Headline rows, counted in the last line: GET and PUT 16 MiB
against no preload and the best peer, nginx proxying and haproxy with the
shim in the server only, nginx directio against sendfile; every other
verdict is a detail row, printed apart.  Each large scenario also gets the
gain its removed faults explain at this host's fault price, and the limit
it runs into (copies, MD5, the disk) with its figure.  After the planned
repeats, while a headline row is undecided, paired rounds of the two
configurations it compares are added, the scenario with the fewest rounds
first, until --budget minutes from the start (default 13.5, --quick 0), at
most --max-rounds (15) per scenario.

Prints a table (median [min-max] over the repeats), writes results.json and
PNG plots (gnuplot) into the results directory, and prints the shim's text
report for the proxy of one run.  --real runs nginx (as a proxy with large
proxy buffers, and serving files with directio), haproxy and wrk, when
installed, and then the radosgw setups.  The default run ends with
scripts/bench alloc's allocator table.

radosgw (issue 16; --real, alone with --rgw, never in the default run):
scripts/rgw brings up a one-node Ceph cluster once (installing the Ceph
packages as root; skipped with one line when they cannot be had), radosgw
restarts under none and the shim for every repeat, and loadgen --verify
(plain) does GET and PUT of 1 and 16 MiB against it, and GET and PUT of
16 MiB through s3proxy --backend-auth in front of it; CPU per GiB and
faults of radosgw and the OSD, the target "no regression: >= 0.98x", and
the shim's report for radosgw with its call sites (from a separate,
unmeasured radosgw).  --shim-osd adds configuration shim-osd (the OSD
under the shim too).  The cluster goes down at the end, however it ends.

fio (issue 29; --real): scripts/bench fio --quick, fio --direct=1 randread
of 1 and 16 MiB with psync (processes and --thread) under no preload, the
shim and the shim on hugetlb pages, against fio's psync on a hugetlb
buffer and its io_uring engine with fixedbufs+hugetlb at QD1 and QD8;
MiB/s, CPU per GiB, ratios and issue 29's targets.  Skipped with one line
without fio.

Small requests (issue 11, do no harm; part of the default run, alone with
--small): GET and PUT 4 KiB on the demo stack, nginx serving a 1 KiB file
and haproxy in front of it (wrk, not shimmed), under no preload, the shim
and the baseline shim only, in shorter runs (--small-seconds); requests/s
and p99, with the target "no regression: >= 0.98x".  --quick includes GET
4 KiB.  --scenario takes any scenario or real setup name.

The shim is the build's .libs/libpoolshim.so, or --shim-lib / POOLSHIM_LIB;
--baseline-lib / POOLSHIM_BASELINE_LIB adds configuration "baseline", a
second libpoolshim.so (say, the previous build) run beside it everywhere the
shim runs (not as shim-nouring or shim-proxy).
POOLSHIM_* variables in the environment (but POOLSHIM_STATS*, POOLSHIM_LIB
and POOLSHIM_BASELINE_LIB) apply to the shim configurations, baseline
included.
Exit status: 0 done, 1 a run failed (a process died, loadgen failed or found
data errors), 2 usage or a missing dependency.
"""
# The harness itself is the package scripts/harness/, a module per concern:
#   settings   paths, the shim and baseline libraries, the configurations
#   scenarios  what can run, under which configurations, the plan of runs
#   cli        the flags, their checks, what one invocation selects
#   procs      started processes (always stopped), ports, a run's scratch dir
#   sampler    /proc and poolshim-stat samples over the measured window
#   loadgen    loadgen as the instrument, and one run's record from it
#   stack      a run of the demo stack (two storaged, s3proxy)
#   real       nginx, haproxy and wrk (--real)
#   rgw        radosgw on a one-node Ceph cluster, and its shim report
#   symbolize  naming a live process's frames (eu-addr2line)
#   hostcost   the host's costs (bench/hostcost), the expected gain, the limits
#   summary    runs into rows (medians and spreads)
#   verdict    paired ratios, their range, met / MISSED / at par / undecided (pure)
#   rounds     rounds added where a headline row is undecided, within the budget
#   targets    the targets, judged by verdict
#   tables     the printed and Markdown tables
#   plot       the gnuplot charts
#   output     after the runs: tables, targets, plots, results files, reports
#   main       start to end
#   messages   Fail, say, the progress line; machine: the machine's name
import os
import sys

# No bytecode next to the sources (the harness runs from the source tree).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness.main import main  # noqa: E402
from harness.procs import Proc  # noqa: E402

if __name__ == "__main__":
    try:
        sys.exit(main(__doc__))
    finally:
        Proc.stop_all()
