#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Paired A/B runs of radosgw with and without a preload, for settling
small differences (issue 16's ">= 0.98x") that scripts/demo's short,
unpaired windows cannot resolve.

  bench/rgw_ab.py [--pairs N] [--seconds S] [--setups put-16m,put-1m,...]
                  [--config NAME=VAR=VALUE,...] [--out FILE]

scripts/rgw must be up (scripts/rgw up).  Every round restarts radosgw
under each configuration in turn, the order reversed every other round
(ABBA), primes it with a few unmeasured operations, then runs each setup
for S seconds with demo/loadgen --verify (plain: it is the instrument).
For each run it records MiB/s and, per operation, the CPU (utime +
stime from /proc, over loadgen's whole run) of radosgw, of the OSD and
of the whole machine (everything not idle or waiting for I/O: loadgen,
the proxy and the kernel's softirq work included).  On a machine whose
cores are all busy, MiB/s follows the machine's CPU per operation, so
that column says where a change in throughput came from.  The table
gives, per setup and configuration, the median and range of MiB/s, the
medians of CPU per operation, and two ratios to "none", of MiB/s and of
radosgw's CPU per operation: each the geometric mean of the per-round
ratios with a 90% bootstrap interval.  A MiB/s ratio whose interval lies
above 0.98 is a measured "no regression"; one whose interval straddles
it is not resolved by this many pairs.  An A/A run (--no-shim --config
none2=X=1) shows what this many pairs can resolve on the machine at
hand.

Configurations: "none" (always), "shim" (LD_PRELOAD of the build's
libpoolshim.so), and any given with --config NAME=VAR=VALUE,...; a
LD_PRELOAD among the variables names the library radosgw runs under (as
scripts/rgw's RGW_SHIM_LIB), the others are put in its environment.
Setups: put-16m, put-1m, get-16m, get-1m (radosgw directly) and
proxy-put-16m, proxy-get-16m (demo/s3proxy --backend-auth in front of
radosgw, under the same configuration as radosgw).  Not part of make
check: a run of 6 pairs of three setups takes about 10 minutes.
"""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PS_TOP_BUILDDIR") or TOP
RGW = os.path.join(TOP, "scripts", "rgw")
LOADGEN = os.path.join(BUILD, "demo", "loadgen")
S3PROXY = os.path.join(BUILD, "demo", "s3proxy")
SHIM = os.path.join(BUILD, ".libs", "libpoolshim.so")
PROXY_KEY, PROXY_SECRET = "PSRGWAB", "rgw-ab-secret"

SETUPS = {
    "put-16m": ("put", "16MiB", False),
    "put-1m": ("put", "1MiB", False),
    "get-16m": ("get", "16MiB", False),
    "get-1m": ("get", "1MiB", False),
    "proxy-put-16m": ("put", "16MiB", True),
    "proxy-get-16m": ("get", "16MiB", True),
}


def fail(msg):
    print(f"rgw_ab: {msg}", file=sys.stderr)
    sys.exit(1)


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("POOLSHIM") and k not in ("LD_PRELOAD", "MALLOC_CONF")}
    env.update(extra)
    return env


def parse_config(text):
    name, _, rest = text.partition("=")
    if not name or not rest or name == "none":
        raise argparse.ArgumentTypeError(f"--config wants NAME=VAR=VALUE[,VAR=VALUE], not {text!r}")
    env = {}
    for kv in rest.split(","):
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise argparse.ArgumentTypeError(f"--config {name}: {kv!r} is not VAR=VALUE")
        env[k] = v
    return name, env


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])     # utime + stime


def busy_ticks():
    """Ticks the whole machine spent not idle (idle and iowait left out)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def daemon_pid(rgwdir, daemon):
    with open(os.path.join(rgwdir, "pids")) as f:
        for line in f:
            name, pid = line.split()
            if name == daemon:
                return int(pid)
    fail(f"no {daemon} in {rgwdir}/pids")


def restart(rgwdir, env, shim_osd):
    """radosgw under env (none: {}); the endpoint and keys."""
    extra = dict(env)
    argv = [RGW, "restart", "--dir", rgwdir] + (["--shim-osd"] if shim_osd else [])
    if "LD_PRELOAD" in extra:
        argv.append("--shim")
        extra["RGW_SHIM_LIB"] = extra.pop("LD_PRELOAD")
        extra.setdefault("POOLSHIM_STATS", "off")
    r = subprocess.run(argv, env=clean_env(extra), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        fail(f"scripts/rgw restart failed ({r.returncode}): {r.stderr[-800:]}")
    m = re.search(r"^export (.*)$", r.stdout, re.M)
    if not m:
        fail("scripts/rgw printed no export line")
    return dict(kv.split("=", 1) for kv in m.group(1).split())


def loadgen(endpoint, ak, sk, argv, timeout):
    r = subprocess.run([LOADGEN, "--endpoint", endpoint, "--access-key", ak, "--secret-key", sk,
                        "--bucket", "rgwab", "--seed", "7", "--concurrency", "4", "--verify"] + argv,
                       env=clean_env({}), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode:
        fail(f"loadgen {' '.join(argv)} failed ({r.returncode}): {(r.stdout + r.stderr)[-800:]}")


class FrontProxy:
    """demo/s3proxy --backend-auth in front of radosgw, under env."""

    def __init__(self, tmp, env, s3):
        creds = os.path.join(tmp, "creds")
        with open(creds, "w") as f:
            f.write(f"{PROXY_KEY} {PROXY_SECRET}\n")
        self.out = os.path.join(tmp, "proxy.out")
        penv = dict(env)
        if "LD_PRELOAD" in penv:
            penv.setdefault("POOLSHIM_STATS", "off")
        self.p = subprocess.Popen([S3PROXY, "--port", "0", "--credentials", creds, "--backend",
                                   s3["S3_ENDPOINT"], "--backend-auth",
                                   f"{s3['AWS_ACCESS_KEY_ID']}:{s3['AWS_SECRET_ACCESS_KEY']}:us-east-1"],
                                  env=clean_env(penv), stdin=subprocess.DEVNULL,
                                  stdout=open(self.out, "w"), stderr=subprocess.STDOUT)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            with open(self.out) as f:
                m = re.search(r"^listening on .*:(\d+)$", f.read(), re.M)
            if m:
                self.endpoint = f"http://127.0.0.1:{m.group(1)}"
                return
            if self.p.poll() is not None:
                fail(f"s3proxy exited ({self.p.returncode}); see {self.out}")
            time.sleep(0.05)
        fail("s3proxy did not start listening")

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)


def run_setup(tmp, s3, env, setup, seconds, tag):
    op, size, proxied = SETUPS[setup]
    endpoint, ak, sk = s3["S3_ENDPOINT"], s3["AWS_ACCESS_KEY_ID"], s3["AWS_SECRET_ACCESS_KEY"]
    px = None
    if proxied:
        px = FrontProxy(tmp, env, s3)
        endpoint, ak, sk = px.endpoint, PROXY_KEY, PROXY_SECRET
    pid = daemon_pid(s3["RGW_DIR"], "radosgw")
    osd = daemon_pid(s3["RGW_DIR"], "ceph-osd")
    out = os.path.join(tmp, "lg.json")
    extra = ["--objects", "8"] if op == "get" else []
    try:
        # GETs read objects the priming PUT (same prefix) left.
        loadgen(endpoint, ak, sk, ["--prefix", f"{setup}/", "--op", "put", "--size", size,
                                   "--ops", "8"] + extra, 300)
        t0, o0, m0 = cpu_ticks(pid), cpu_ticks(osd), busy_ticks()
        loadgen(endpoint, ak, sk, ["--prefix", f"{setup}/", "--op", op, "--size", size,
                                   "--duration", f"{seconds}s", "--warmup", "0s",
                                   "--json", out] + extra, seconds + 300)
        t1, o1, m1 = cpu_ticks(pid), cpu_ticks(osd), busy_ticks()
    finally:
        if px:
            px.stop()
    with open(out) as f:
        tot = json.load(f)["ops"]["total"]
    hz = os.sysconf("SC_CLK_TCK")
    ops = tot["count"]
    def per_op(ticks):
        return ticks / hz * 1e3 / ops if ops else float("nan")
    cpu_ms, osd_ms, all_ms = per_op(t1 - t0), per_op(o1 - o0), per_op(m1 - m0)
    print(f"  {tag:<22} {setup:<14} {tot['mib_per_s']:8.1f} MiB/s  {ops:5d} ops  "
          f"CPU ms/op: radosgw {cpu_ms:6.2f} osd {osd_ms:6.2f} machine {all_ms:6.2f}", flush=True)
    return {"mib_s": tot["mib_per_s"], "ops": ops, "cpu_ms_per_op": cpu_ms,
            "osd_cpu_ms_per_op": osd_ms, "machine_cpu_ms_per_op": all_ms}


def median(xs):
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2 if n else float("nan")


def geo_mean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def boot_ci(ratios, n=4000, seed=1):
    rnd = random.Random(seed)
    k = len(ratios)
    means = sorted(geo_mean([ratios[rnd.randrange(k)] for _ in range(k)]) for _ in range(n))
    return means[int(0.05 * n)], means[int(0.95 * n) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--setups", default="put-16m,put-1m,proxy-put-16m")
    ap.add_argument("--config", type=parse_config, action="append", default=[])
    ap.add_argument("--no-shim", action="store_true", help="leave out configuration shim")
    ap.add_argument("--shim-osd", action="store_true",
                    help="run the OSD under the shim in every configuration (held constant: "
                         "its receive buffers then stop faulting, which steadies its CPU)")
    ap.add_argument("--dir", default=os.environ.get("RGW_DIR") or f"/tmp/poolshim-rgw-{os.getuid()}")
    ap.add_argument("--out", help="write every run and the summary as JSON here")
    a = ap.parse_args()
    setups = a.setups.split(",")
    for s in setups:
        if s not in SETUPS:
            ap.error(f"unknown setup {s}; known: {', '.join(SETUPS)}")
    if a.pairs < 2 or a.seconds < 1:
        ap.error("--pairs at least 2, --seconds at least 1")
    configs = [("none", {})] + ([] if a.no_shim else [("shim", {"LD_PRELOAD": SHIM})]) + a.config
    for p in (LOADGEN, S3PROXY) + ((SHIM,) if not a.no_shim else ()):
        if not os.path.exists(p):
            fail(f"{p} is not built (scripts/bootstrap)")

    runs = []
    with tempfile.TemporaryDirectory(prefix="rgw-ab.") as tmp:
        for rnd in range(a.pairs):
            order = configs if rnd % 2 == 0 else configs[::-1]
            print(f"round {rnd + 1}/{a.pairs}", flush=True)
            for name, env in order:
                s3 = restart(a.dir, env, a.shim_osd)
                for setup in setups:
                    r = run_setup(tmp, s3, env, setup, a.seconds, name)
                    runs.append(dict(r, round=rnd, config=name, setup=setup))
        restart(a.dir, {}, False)

    summary = []
    print(f"\n{'setup':<14} {'config':<12} {'MiB/s median [min-max]':>26} "
          f"{'CPU ms/op: rgw':>15} {'osd':>7} {'machine':>8} {'vs none (90% CI)':>22} "
          f"{'rgw CPU/op vs none':>22}")
    for setup in setups:
        base = {r["round"]: r for r in runs if r["setup"] == setup and r["config"] == "none"}
        for name, _ in configs:
            mine = [r for r in runs if r["setup"] == setup and r["config"] == name]
            mib = [r["mib_s"] for r in mine]
            cpu = [r["cpu_ms_per_op"] for r in mine]
            osd = [r["osd_cpu_ms_per_op"] for r in mine]
            mach = [r["machine_cpu_ms_per_op"] for r in mine]
            row = {"setup": setup, "config": name, "mib_s_median": median(mib),
                   "mib_s_min": min(mib), "mib_s_max": max(mib), "cpu_ms_per_op_median": median(cpu),
                   "osd_cpu_ms_per_op_median": median(osd),
                   "machine_cpu_ms_per_op_median": median(mach)}
            rel = cpu_rel = ""
            if name != "none":
                ratios = [r["mib_s"] / base[r["round"]]["mib_s"] for r in mine
                          if base[r["round"]]["mib_s"] > 0 and r["mib_s"] > 0]
                g = geo_mean(ratios)
                lo, hi = boot_ci(ratios)
                row.update(ratio=g, ratio_lo=lo, ratio_hi=hi)
                rel = f"{g:.3f}x [{lo:.3f}-{hi:.3f}]"
                # radosgw's own CPU per operation, paired the same way
                cr = [r["cpu_ms_per_op"] / base[r["round"]]["cpu_ms_per_op"] for r in mine
                      if base[r["round"]]["cpu_ms_per_op"] > 0 and r["cpu_ms_per_op"] > 0]
                if cr:
                    g, (lo, hi) = geo_mean(cr), boot_ci(cr)
                    row.update(cpu_ratio=g, cpu_ratio_lo=lo, cpu_ratio_hi=hi)
                    cpu_rel = f"{g:.3f}x [{lo:.3f}-{hi:.3f}]"
            summary.append(row)
            print(f"{setup:<14} {name:<12} {median(mib):9.1f} [{min(mib):6.1f}-{max(mib):6.1f}] "
                  f"{median(cpu):15.2f} {median(osd):7.2f} {median(mach):8.2f} {rel:>22} "
                  f"{cpu_rel:>22}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"pairs": a.pairs, "seconds": a.seconds, "runs": runs, "summary": summary,
                       "configs": {n: e for n, e in configs}}, f, indent=1)


if __name__ == "__main__":
    main()
