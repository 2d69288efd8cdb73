# SPDX-License-Identifier: MIT
"""loadgen as the harness's instrument: its command line for one measured
run, running it, reading its results, and one run's record (measure) from
those results and the samples taken meanwhile."""
import json
import os
import subprocess
import time

from . import settings
from .messages import Fail
from .procs import clean_env, die_with_parent


def loadgen_cmd(args, tmp, endpoint, ak, sk, bucket, run_id, seconds, warmup, timeout, lgargs):
    """loadgen's command line for one measured run (--verify, results in tmp/loadgen.json)."""
    lg = [settings.LOADGEN, "--endpoint", endpoint, "--access-key", ak, "--secret-key", sk,
          "--bucket", bucket, "--prefix", f"{run_id}/",
          "--concurrency", str(args.concurrency), "--duration", f"{seconds}s",
          "--warmup", f"{warmup}s", "--verify", "--seed", "42", "--timeout", timeout,
          "--json", f"{tmp}/loadgen.json"] + lgargs
    if "put" not in lgargs:
        lg += ["--objects", str(2 * args.concurrency)]
    return lg


def run_loadgen(lg, env, tmp, limit):
    """Run loadgen (output to tmp/loadgen.out); its exit status or "timeout", and when it ended."""
    try:
        r = subprocess.run(lg, env=clean_env(env), stdin=subprocess.DEVNULL,
                           stdout=open(f"{tmp}/loadgen.out", "w"), stderr=subprocess.STDOUT,
                           timeout=limit, preexec_fn=die_with_parent)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    return rc, time.monotonic()


def loadgen_results(tmp, run_id, rc):
    """loadgen's JSON results, or Fail with the tail of its output."""
    try:
        with open(f"{tmp}/loadgen.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        with open(f"{tmp}/loadgen.out", errors="replace") as f:
            out = f.read()[-1500:]
        raise Fail(f"loadgen failed in {run_id} (exit {rc}) and wrote no results:\n{out}")


def measure(args, cfg, scen, rep, lgj, rc, sampler, t_end, shim, reports, clean, pids):
    """One run's record: loadgen's totals, and per process (pids: {group:
    pid}) faults, CPU and, under the shim, I/O calls per operation over
    loadgen's measured window, which ended at t_end."""
    tot = lgj["ops"]["total"]
    seconds = lgj["seconds"]
    ops_s = tot["ops_per_s"]
    mib_s = tot["mib_per_s"]
    t_a = t_end - seconds
    rates, window = sampler.rates(t_a, t_end)
    run = {"scenario": scen, "config": cfg, "repeat": rep + 1, "loadgen_exit": rc,
           "mib_s": mib_s, "ops_s": ops_s, "ops": tot["count"],
           "p50_ms": tot["latency_ms"]["p50"], "p99_ms": tot["latency_ms"]["p99"],
           "errors": lgj.get("errors", {}), "mismatches": lgj.get("mismatches", 0),
           "verified_bytes": lgj.get("verified_bytes", 0), "clean_exit": clean,
           "window_s": round(window, 3), "procs": {}}
    gib_s = mib_s / 1024.0
    for name, (flt_s, cpu_s) in rates.items():
        d = {"faults_per_op": flt_s / ops_s if ops_s else None,
             "cpu_s_per_gib": cpu_s / gib_s if gib_s else None,
             "cpu_us_per_op": cpu_s / ops_s * 1e6 if ops_s else None,
             "cpu_util": cpu_s}
        if shim:
            sc = sampler.syscall_rate(pids[name], t_a, t_end)
            d["syscalls_per_op"] = sc / ops_s if sc is not None and ops_s else None
        run["procs"][name] = d
    if shim:
        run["reports"] = sorted(os.path.join(reports, f) for f in os.listdir(reports))
    return run
