#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What the shim costs a short process (scripts/bench startup).

  scripts/bench startup [--repeat N] [--shim-lib PATH] [--baseline-lib PATH]
                        [--json FILE]

Short processes are where a system-wide deployment pays the shim's
start-up: shell scripts, health checks, configuration tests.  Each command
(/bin/true, `ls /`, `haproxy -c` on a small configuration when haproxy is
installed) runs under: no preload; an empty preloaded library (the cost
of preloading anything, built here with cc); the shim by default (its
report on stderr, which goes to /dev/null with the command's); the shim with nothing reading the counters (POOLSHIM_STATS=off,
POOLSHIM_LIVE=off); the shim outside POOLSHIM_PROGRAMS; and, with
--baseline-lib, an older shim by default.  Runs are paired in rounds (every
configuration once per round, in a new seeded order each round), --repeat
rounds (20) after one that is not counted.  The table shows the median wall time [min-max],
the ratio to no preload against issue 26's target (within 5%: <= 1.05),
the peak RSS (one run under GNU time, when /usr/bin/time is there) and
the system calls after exec (one strace run per configuration).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# The environment a configuration's child gets: footprint.py's, beside this file.
from footprint import child_env, round_order  # noqa: E402  (bench/ is sys.path[0])

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PS_TOP_BUILDDIR", TOP)
TARGET = 1.05

HAPROXY_CFG = """global
    maxconn 100
defaults
    mode http
    timeout client 1s
    timeout server 1s
    timeout connect 1s
frontend f
    bind 127.0.0.1:18999
    default_backend b
backend b
    server s1 127.0.0.1:8080
"""


def run(argv, env):
    """Wall seconds of one run; its output is dropped."""
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=child_env(env), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"bench startup: {' '.join(argv)} failed under {env}")
    return wall


def peak_rss(argv, env, tmp):
    """Peak RSS in KiB, through GNU time's fork (a child of this Python
    process would carry Python's own peak across its exec), or None."""
    if not os.access("/usr/bin/time", os.X_OK):
        return None
    out = os.path.join(tmp, "rss")
    r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out] + argv, env=child_env(env),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with open(out) as f:
            return int(f.read().split()[-1]) if r.returncode == 0 else None
    except (OSError, ValueError, IndexError):
        return None


def syscalls(argv, env, tmp):
    """System calls after the exec of argv[0] (strace), or None without strace."""
    if not shutil.which("strace"):
        return None
    out = os.path.join(tmp, "trace")
    subprocess.run(["strace", "-o", out] + argv, env=child_env(env),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen, n = False, 0
    with open(out) as f:
        for line in f:
            if line.startswith(f'execve("{argv[0]}"'):
                seen = True
            elif seen and not line.startswith("+++") and "exited with" not in line:
                n += 1
    return n


def empty_library(tmp):
    src = os.path.join(tmp, "empty.c")
    lib = os.path.join(tmp, "libempty.so")
    with open(src, "w") as f:
        f.write("int bench_empty_preload;\n")
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wl,-z,now", "-o", lib, src])
    return lib if r.returncode == 0 else None


def main():
    ap = argparse.ArgumentParser(prog="scripts/bench startup")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--shim-lib", default=os.environ.get("POOLSHIM_LIB") or
                    os.path.join(BUILD, ".libs", "libpoolshim.so"))
    ap.add_argument("--baseline-lib", default=os.environ.get("POOLSHIM_BASELINE_LIB"))
    ap.add_argument("--json")
    a = ap.parse_args()
    shim = os.path.abspath(a.shim_lib)
    if not os.path.exists(shim):
        raise SystemExit(f"bench startup: no {shim}: build first (make), or give --shim-lib")
    tmp = tempfile.mkdtemp(prefix="ps-startup-")
    try:
        configs = [("none", {})]
        empty = empty_library(tmp)
        if empty:
            configs.append(("empty preload", {"LD_PRELOAD": empty}))
        else:
            print("# no C compiler: the empty-preload row is left out")
        configs += [
            ("shim", {"LD_PRELOAD": shim}),
            ("shim quiet", {"LD_PRELOAD": shim, "POOLSHIM_STATS": "off", "POOLSHIM_LIVE": "off"}),
            ("shim out of scope", {"LD_PRELOAD": shim, "POOLSHIM_PROGRAMS": "no-such-program"}),
        ]
        if a.baseline_lib:
            configs.append(("baseline", {"LD_PRELOAD": os.path.abspath(a.baseline_lib)}))
        commands = [("/bin/true", ["/bin/true"]), ("ls /", [shutil.which("ls") or "/bin/ls", "/"])]
        haproxy = shutil.which("haproxy")
        if haproxy:
            cfg = os.path.join(tmp, "haproxy.cfg")
            with open(cfg, "w") as f:
                f.write(HAPROXY_CFG)
            commands.append(("haproxy -c", [haproxy, "-q", "-c", "-f", cfg]))
        else:
            print("# haproxy not installed: its rows are left out")
        load = os.getloadavg()[0]
        print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs, load {load:.2f}; "
              f"{a.repeat} paired rounds after one warm-up; wall time per run")
        results = []
        for cname, argv in commands:
            walls = {c: [] for c, _ in configs}
            for rnd in range(a.repeat + 1):
                for c, env in round_order(configs, rnd):
                    w = run(argv, env)
                    if rnd:
                        walls[c].append(w)
            base = statistics.median(walls["none"])
            print(f"\n{cname}")
            print(f"  {'config':<18} {'median ms':>10} {'[min-max]':>16} {'ratio':>6} "
                  f"{'target':>7} {'RSS KiB':>8} {'syscalls':>8}")
            for c, env in configs:
                med = statistics.median(walls[c])
                ratio = med / base
                n = syscalls(argv, env, tmp)
                kib = peak_rss(argv, env, tmp)
                ok = "" if c == "none" else ("ok" if ratio <= TARGET else "MISS")
                print(f"  {c:<18} {med * 1e3:>10.2f} "
                      f"{'[%.2f-%.2f]' % (min(walls[c]) * 1e3, max(walls[c]) * 1e3):>16} "
                      f"{ratio:>6.3f} {ok:>7} {'-' if kib is None else kib:>8} "
                      f"{'-' if n is None else n:>8}")
                results.append({"command": cname, "config": c, "median_s": med,
                                "min_s": min(walls[c]), "max_s": max(walls[c]),
                                "ratio": ratio, "rss_kib": kib,
                                "syscalls": n})
        print(f"\nload at the end {os.getloadavg()[0]:.2f}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"bench": "startup", "load": load, "results": results}, f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
