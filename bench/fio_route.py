#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Where does the ring win?  (issue 36)  fio under the shim with
POOLSHIM_URING=on (every eligible call on io_uring) against
POOLSHIM_URING=off (the plain call), paired per round, for each case:
random reads and writes, block sizes, psync (pread/pwrite) and pvsync
(preadv/pwritev), one job or several threads at once.  Prints, per case,
the median over the rounds of on's MiB/s and CPU per GiB over off's in the
same round, and the router's (default) choice from its report.

  bench/fio_route.py [--file PATH] [--repeat N] [--seconds S] [--cases ...]

The file (default /var/tmp/poolshim-fio.dat, 2 GiB) is the one
`scripts/bench fio` lays out; writes rewrite its blocks in place.  Not in
make check: a measurement, and noisy on a shared machine (the load
average is printed at the start and the end).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIM = os.path.join(os.environ.get("PS_TOP_BUILDDIR", TOP), ".libs", "libpoolshim.so")
CASES = ["randread,128k,psync,1", "randread,1m,psync,1", "randread,16m,psync,1",
         "randread,1m,psync,4", "randread,1m,pvsync,1",
         "randwrite,128k,psync,1", "randwrite,1m,psync,1", "randwrite,1m,psync,4"]


def run(args, case, mode, tmp):
    rw, bs, engine, jobs = case.split(",")
    rdir = tempfile.mkdtemp(dir=tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("POOLSHIM_")}
    env.update(LD_PRELOAD=args.shim, POOLSHIM_STATS=os.path.join(rdir, "r-%p.json"))
    if mode != "auto":
        env["POOLSHIM_URING"] = mode
    cmd = ["fio", "--name=j", f"--filename={args.file}", "--size=2G", f"--bs={bs}", f"--rw={rw}",
           "--direct=1", f"--ioengine={engine}", f"--numjobs={jobs}", "--thread",
           "--group_reporting", "--norandommap", "--randrepeat=0", f"--runtime={args.seconds}",
           "--time_based", "--output-format=json"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"fio {case} {mode}: {r.stderr.strip()[-300:]}")
    j = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    d = j["read"] if rw.endswith("read") else j["write"]
    rt = j["job_runtime"] / 1000.0 / int(jobs)
    cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * rt * int(jobs)
    routes = []
    for f in glob.glob(os.path.join(rdir, "r-*.json")):
        for dv in json.load(open(f))["uring"].get("devices", []):
            routes.append((dv["op"], dv["route_chosen"] or dv["route"], dv["route_calls"]))
    subprocess.run(["rm", "-rf", rdir])
    return {"mibs": d["io_bytes"] / (1 << 20) / rt, "cpu": cpu / (d["io_bytes"] / (1 << 30)),
            "routes": routes}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", default="/var/tmp/poolshim-fio.dat")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--cases", default=";".join(CASES), help="rw,bs,engine,jobs;...")
    ap.add_argument("--shim", default=SHIM)
    args = ap.parse_args()
    cases = [c for c in args.cases.split(";") if c]
    tmp = tempfile.mkdtemp(prefix="psroute.")
    load0 = os.getloadavg()[0]
    res = {}
    for rep in range(args.repeat):
        for c in cases:
            for mode in (("on", "off", "auto") if rep % 2 == 0 else ("auto", "off", "on")):
                res.setdefault((c, mode), []).append(run(args, c, mode, tmp))
    subprocess.run(["rm", "-rf", tmp])
    print(f"fio under the shim, {args.repeat} rounds of {args.seconds:g} s, {args.file}; "
          f"{os.cpu_count()} CPUs; load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"{'case (rw,bs,engine,jobs)':<28}{'off MiB/s':>10}{'on x off':>9}{'cpu x off':>10}"
          f"{'auto x off':>11}{'auto cpu':>9}  router's choice (op route calls)")
    for c in cases:
        off, on, auto = res[(c, "off")], res[(c, "on")], res[(c, "auto")]

        def ratio(a, key):
            return statistics.median(x[key] / y[key] for x, y in zip(a, off) if y[key])
        ch = auto[-1]["routes"]
        print(f"{c:<28}{statistics.median(x['mibs'] for x in off):>10.0f}{ratio(on, 'mibs'):>8.3f}x"
              f"{ratio(on, 'cpu'):>9.3f}x{ratio(auto, 'mibs'):>10.3f}x{ratio(auto, 'cpu'):>8.3f}x  "
              + "; ".join(f"{op} {rt} {calls['plain']}/{calls['ring']}" for op, rt, calls in ch))


if __name__ == "__main__":
    main()
