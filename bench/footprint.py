#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Memory footprint next to throughput (scripts/bench footprint).

  scripts/bench footprint [--seconds S] [--repeat N] [--shim-lib PATH]
                          [--baseline-lib PATH] [--json FILE]

For glibc, preloaded jemalloc, tcmalloc and mimalloc (Debian's
libjemalloc.so.2, libtcmalloc_minimal.so.4, libmimalloc.so.2), the shim
(POOLSHIM_STATS=off) and, with --baseline-lib, a second shim:

- big: tests/preload/footprint big 16 32 (16 buffers of 32 MiB written,
  all freed, then malloc_trim(0)): peak RSS (VmHWM), RSS after the frees
  and after the trim, and its wall time;
- allocbench (malloc a log-uniform 64 KiB-16 MiB buffer, fill, scan, free;
  1 thread): GB/s, page faults per operation and peak RSS (the child's
  ru_maxrss);
- churn: tests/preload/footprint churn 40 N (40 live buffers of 1-24 MiB,
  one replaced at random N times, --churn-rounds): peak RSS;
- large: tests/preload/footprint large 20 N (the shape of mimalloc-bench's
  malloc-large: 20 slots, a new 5-25 MiB buffer written before the slot's
  old one is freed, --large-rounds): peak RSS;
- one buffer: tests/preload/alloc_aslimit first and vmpeak: RSS after one
  64 KiB buffer, VmPeak with one 16 MiB buffer (KiB);
- fit: tests/preload/alloc_aslimit count under `ulimit -v 300000`: how many
  16 MiB buffers are written before malloc fails (the address space an
  allocator keeps for itself).

Runs are interleaved; each number is the median of --repeat runs (3).

  scripts/bench footprint real ...     real programs: bench/realprogs.py
  scripts/bench footprint shapes ...   aligned loops, decay when idle: bench/realprogs.py
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PS_TOP_BUILDDIR", TOP)
LIBDIR = "/usr/lib/x86_64-linux-gnu"
HARNESS_ENV = ("POOLSHIM_LIB", "POOLSHIM_BASELINE_LIB")


def configs(shim, baseline):
    c = [("glibc", {}),
         ("jemalloc", {"LD_PRELOAD": f"{LIBDIR}/libjemalloc.so.2"}),
         ("tcmalloc", {"LD_PRELOAD": f"{LIBDIR}/libtcmalloc_minimal.so.4"}),
         ("mimalloc", {"LD_PRELOAD": f"{LIBDIR}/libmimalloc.so.2"}),
         ("poolshim", {"LD_PRELOAD": shim, "POOLSHIM_STATS": "off"}),
         # The same library with its blocks placed by jemalloc's size classes.
         ("shim-je", {"LD_PRELOAD": os.path.join(os.path.dirname(shim), "libpoolshim-jemalloc.so"),
                      "POOLSHIM_STATS": "off",
                      "POOLSHIM_POOL_ALLOCATOR": "jemalloc"})]
    if baseline:
        c.append(("baseline", {"LD_PRELOAD": baseline, "POOLSHIM_STATS": "off"}))
        # The baseline's jemalloc placement, when its build is beside it.
        je = os.path.join(os.path.dirname(baseline), "libpoolshim-jemalloc.so")
        if os.path.exists(je):
            c.append(("baseline-je", {"LD_PRELOAD": je, "POOLSHIM_STATS": "off",
                                      "POOLSHIM_POOL_ALLOCATOR": "jemalloc"}))
    return c


def round_order(items, rep):
    """items in a new order for round rep, the same for every run with the
    same rep.  A run pays for the kernel state the run before it left (the
    shim's proxy run after glibc's: 0.72-0.78 CPU s against 0.47-0.57 after
    another shim run), so no configuration may always follow the same one."""
    order = list(items)
    random.Random(rep).shuffle(order)
    return order


def child_env(env):
    full = {k: v for k, v in os.environ.items()
            if k != "LD_PRELOAD" and k not in HARNESS_ENV and not k.startswith("POOLSHIM")}
    full.update(env)
    return full


def machine_line():
    """The machine, in one line, for every table's header."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    except OSError:
        pass
    return f"{os.uname().nodename} {os.uname().release}, {os.cpu_count()} CPUs ({cpu})"


# A child's ru_maxrss counts the image it was forked from: a child of this
# Python process starts at Python's peak RSS (14 MB and more).  GNU time,
# small, forks the program from its own image and reports the child's own.
GNU_TIME = "/usr/bin/time"


def run_timed(argv, env, stdin=None, stdout=subprocess.PIPE):
    """Start argv through GNU time; finish() gives (exit code, max RSS KiB, CPU s)."""
    if not os.access(GNU_TIME, os.X_OK):
        sys.exit(f"bench: {GNU_TIME} not installed (Debian package time)")
    rep = tempfile.NamedTemporaryFile(prefix="poolshim-time.", mode="w+")
    p = subprocess.Popen([GNU_TIME, "-q", "-o", rep.name, "-f", "%x %M %U %S"] + argv,
                         env=child_env(env), stdin=stdin, stdout=stdout)

    def finish():
        p.wait()
        rep.seek(0)
        fields = rep.read().split()
        rep.close()
        code, rss, user, sys_s = int(fields[0]), int(fields[1]), float(fields[2]), float(fields[3])
        return code, rss, user + sys_s
    return p, finish


def run(argv, env):
    """stdout, wall seconds and peak RSS (KiB) of one child."""
    t0 = time.monotonic()
    p, finish = run_timed(argv, env)
    out = p.stdout.read().decode()
    code, rss, _ = finish()
    if code != 0:
        raise RuntimeError(f"{argv[0]} exited {code}")
    return out, time.monotonic() - t0, rss


def main():
    if sys.argv[1:2] in (["real"], ["shapes"]):  # bench/realprogs.py
        sys.dont_write_bytecode = True  # no bench/__pycache__ in the source tree
        import realprogs
        sys.exit(realprogs.main(sys.argv[1], sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=2.0, help="allocbench seconds per run")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shim-lib", default=os.environ.get("POOLSHIM_LIB") or
                    os.path.join(BUILD, ".libs", "libpoolshim.so"))
    ap.add_argument("--baseline-lib", default=os.environ.get("POOLSHIM_BASELINE_LIB"))
    ap.add_argument("--churn-rounds", type=int, default=600)
    ap.add_argument("--large-rounds", type=int, default=2000,
                    help="rounds of the malloc-large shape (2000, as mimalloc-bench)")
    ap.add_argument("--json")
    args = ap.parse_args()
    big = os.path.join(BUILD, "tests", "preload", "footprint")
    one = os.path.join(BUILD, "tests", "preload", "alloc_aslimit")
    bench = os.path.join(BUILD, "bench", "allocbench")
    for prog in (big, one):
        if not os.path.exists(prog):
            subprocess.run(["make", "-s", "-C", BUILD, os.path.relpath(prog, BUILD)], check=True)
    for f in (bench, args.shim_lib):
        if not os.path.exists(f):
            sys.exit(f"bench footprint: {f} not built; run scripts/bootstrap first")
    cfgs = [(n, e) for n, e in configs(os.path.abspath(args.shim_lib),
                                       args.baseline_lib and os.path.abspath(args.baseline_lib))
            if not e.get("LD_PRELOAD") or os.path.exists(e["LD_PRELOAD"])]
    res = {n: {"peak": [], "free": [], "trim": [], "big_s": [], "gbps": [], "faults": [],
               "bench_peak": [], "churn_peak": [], "large_peak": [], "one_rss": [], "one_vmpeak": [], "fit": []}
           for n, _ in cfgs}
    for rep in range(args.repeat):
        for name, env in round_order(cfgs, rep):
            print(f"\r[{rep + 1}/{args.repeat}] {name}        ", end="", file=sys.stderr, flush=True)
            out, wall, _ = run([big, "big", "16", "32"], env)
            m = re.search(r"peak=(\d+) free=(\d+) trim=(\d+)", out)
            r = res[name]
            r["peak"].append(int(m.group(1)) / 1024)
            r["free"].append(int(m.group(2)) / 1024)
            r["trim"].append(int(m.group(3)) / 1024)
            r["big_s"].append(wall)
            out, _, maxrss = run([bench, "--threads", "1", "--seconds", str(args.seconds),
                                  "--label", name], env)
            m = re.search(r"GB/s=([\d.]+) faults/op=([\d.]+)", out)
            r["gbps"].append(float(m.group(1)))
            r["faults"].append(float(m.group(2)))
            r["bench_peak"].append(maxrss / 1024)
            out, _, _ = run([big, "churn", "40", str(args.churn_rounds)], env)
            r["churn_peak"].append(int(re.search(r"peak=(\d+)", out).group(1)) / 1024)
            out, _, _ = run([big, "large", "20", str(args.large_rounds)], env)
            r["large_peak"].append(int(re.search(r"peak=(\d+)", out).group(1)) / 1024)
            out, _, _ = run([one, "first"], env)
            r["one_rss"].append(int(out.split()[-1]))
            out, _, _ = run([one, "vmpeak"], env)
            r["one_vmpeak"].append(int(out.split()[-1]))
            out, _, _ = run(["sh", "-c", 'ulimit -v 300000; exec "$0" count', one], env)
            r["fit"].append(int(out.split()[-1]))
    print(file=sys.stderr)
    med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in res.items()}
    print("footprint: 16 x 32 MiB written, freed, malloc_trim(0) (RSS MiB; time s); "
          f"allocbench 64K-16M, 1 thread, {args.seconds:g}s; median of {args.repeat}")
    print(f"machine: {os.uname().nodename} {os.uname().release}, {os.cpu_count()} CPUs")
    print(f"churn: 40 live buffers of 1-24 MiB, {args.churn_rounds} replaced (peak RSS MiB); "
          "one buffer: RSS after one 64 KiB buffer, VmPeak with one 16 MiB (KiB); "
          "fit: 16 MiB buffers under ulimit -v 300000")
    print(f"large: mimalloc-bench's malloc-large shape, 20 slots of 5-25 MiB, {args.large_rounds} "
          "replaced, the new buffer before the old is freed (peak RSS MiB)")
    print(f"\n{'config':<11}{'peak':>8}{'freed':>8}{'trim':>8}{'time':>7}"
          f"{'bench GB/s':>12}{'faults/op':>11}{'bench peak':>12}{'churn peak':>12}{'large peak':>12}"
          f"{'64K RSS':>9}{'16M VmPeak':>12}{'fit':>5}")
    for name, _ in cfgs:
        r = med[name]
        print(f"{name:<11}{r['peak']:8.0f}{r['free']:8.0f}{r['trim']:8.0f}{r['big_s']:7.2f}"
              f"{r['gbps']:12.2f}{r['faults']:11.1f}{r['bench_peak']:12.0f}"
              f"{r['churn_peak']:12.0f}{r['large_peak']:12.0f}{r['one_rss']:9.0f}{r['one_vmpeak']:12.0f}{r['fit']:5.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "footprint", "runs": res, "median": med}, f, indent=1)


if __name__ == "__main__":
    main()
