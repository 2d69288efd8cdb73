#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Large blocks churned by threads (scripts/bench threads, issue 44).

  scripts/bench threads [--threads 1,2,4,8,16] [--touch byte,pages]
                        [--seconds S | --steps N] [--repeat N] [--config NAME,...]
                        [--shim-lib PATH] [--baseline-lib PATH] [--json FILE]

bench/threadchurn: T threads, each keeping 8 live blocks of 64 KiB-4 MiB
(log-uniform, fixed seed) and replacing a random one per step, touching one
byte of each new block (byte) or one byte in every page of it (pages).  Run
under the configurations of `scripts/bench footprint` (bench/footprint.py):
glibc, Debian's jemalloc, tcmalloc and mimalloc preloaded, the shim
(default placement) and the shim with POOLSHIM_POOL_ALLOCATOR=jemalloc
(.libs/libpoolshim-jemalloc.so), and --baseline-lib if given.  One process
per (threads, touch, configuration), interleaved, --repeat rounds (3);
each run lasts --seconds of wall time (0.5) or --steps per thread.

Tables (medians): steps per CPU second of the whole process (user + system,
getrusage, so that waiting for a CPU on a busy machine does not count), with
each shim's ratio to the best of glibc, jemalloc, tcmalloc and mimalloc in
that row (the best by median; each round's run over that peer's run of the
same round, median [min-max] of these ratios: a round's pair shared its load
and host state) against issue 44's target (>= 1.0x at 1 and 2 threads,
>= 0.9x above), judged on the paired median; steps per wall second; peak
RSS (MiB).  The default run takes about
two minutes.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no bench/__pycache__ in the source tree
import footprint  # noqa: E402  (the configurations and the child runner)

PEERS = ("glibc", "jemalloc", "tcmalloc", "mimalloc")


def target(threads):
    return 1.0 if threads <= 2 else 0.9


def main():
    ap = argparse.ArgumentParser(prog="scripts/bench threads", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--touch", default="byte,pages")
    ap.add_argument("--seconds", type=float, default=0.5, help="wall seconds per run (0.5)")
    ap.add_argument("--steps", type=int, help="steps per thread instead of --seconds")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--config", help="only these configurations (NAME,NAME)")
    ap.add_argument("--shim-lib", default=os.environ.get("POOLSHIM_LIB") or
                    os.path.join(footprint.BUILD, ".libs", "libpoolshim.so"))
    ap.add_argument("--baseline-lib", default=os.environ.get("POOLSHIM_BASELINE_LIB"))
    ap.add_argument("--json")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    touches = args.touch.split(",")
    if any(t not in ("byte", "pages") for t in touches) or any(n < 1 for n in threads):
        ap.error("--touch takes byte,pages; --threads positive counts")
    if args.repeat < 1 or args.seconds <= 0:
        ap.error("--repeat and --seconds must be positive")
    exe = os.path.join(footprint.BUILD, "bench", "threadchurn")
    if not os.access(exe, os.X_OK):
        sys.exit(f"bench threads: {exe} not built; run make first")
    if not os.path.exists(args.shim_lib):
        sys.exit(f"bench threads: {args.shim_lib} not built; run scripts/bootstrap first")
    cfgs = footprint.configs(os.path.abspath(args.shim_lib),
                             args.baseline_lib and os.path.abspath(args.baseline_lib))
    if args.config:
        want = args.config.split(",")
        unknown = set(want) - {n for n, _ in cfgs}
        if unknown:
            ap.error(f"unknown configuration {', '.join(sorted(unknown))}; "
                     f"known: {', '.join(n for n, _ in cfgs)}")
        cfgs = [(n, e) for n, e in cfgs if n in want]
    missing = [n for n, e in cfgs if e.get("LD_PRELOAD") and not os.path.exists(e["LD_PRELOAD"])]
    cfgs = [(n, e) for n, e in cfgs if n not in missing]
    shims = [n for n, _ in cfgs if n not in PEERS]
    length = ["--steps", str(args.steps)] if args.steps else ["--seconds", str(args.seconds)]

    res = {}   # (threads, touch, config) -> [{steps_per_cpu_s, steps_per_s, maxrss_kib}]
    total = len(threads) * len(touches) * len(cfgs) * args.repeat
    done, t_start = 0, time.monotonic()
    for rep in range(args.repeat):
        order = footprint.round_order(cfgs, rep)
        for n in threads:
            for touch in touches:
                for name, env in order:
                    done += 1
                    spent = time.monotonic() - t_start
                    left = f" (~{spent / (done - 1) * (total - done + 1):.0f}s left)" if done > 1 else ""
                    print(f"\r[{done}/{total}] {name} threads={n} touch={touch}{left}      ",
                          end="", file=sys.stderr, flush=True)
                    out, _, _ = footprint.run([exe, "--threads", str(n), "--touch", touch,
                                               "--label", name] + length, env)
                    v = dict(re.findall(r"(\S+)=(\S+)", out))
                    res.setdefault((n, touch, name), []).append(
                        {k: float(v[k]) for k in ("steps_per_cpu_s", "steps_per_s", "maxrss_kib",
                                                  "minflt", "steps")})
    print(file=sys.stderr)
    load = os.getloadavg()
    names = [n for n, _ in cfgs]

    def med(n, touch, c, key):
        return statistics.median(r[key] for r in res[(n, touch, c)])

    how = f"{args.steps} steps per thread" if args.steps else f"{args.seconds:g} s per run"
    print(f"threads (issue 44): bench/threadchurn, T threads x 8 live blocks of 64 KiB-4 MiB, "
          f"one replaced per step; {how}; median of {args.repeat} interleaved rounds")
    print(f"machine: {footprint.machine_line()}; load average at the end "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if missing:
        print(f"not installed, left out: {', '.join(missing)}")
    print("\nsteps per CPU second (k); shim / best peer (glibc, jemalloc, tcmalloc, mimalloc), "
          "paired per round with the best peer's run: median [min-max]; "
          "target >= 1.0x at 1-2 threads, >= 0.9x above")
    w = {c: max(10, len(c) + 2) for c in names}
    hdr = f"{'threads, touch':<16}" + "".join(f"{c:>{w[c]}}" for c in names)
    hdr += "".join(f"{s + '/best':>{max(26, len(s) + 7)}}" for s in shims)
    print(hdr)
    rows = []
    for n in threads:
        for touch in touches:
            cpu = {c: med(n, touch, c, "steps_per_cpu_s") for c in names}
            peer = max((c for c in PEERS if c in cpu), key=lambda c: cpu[c], default=None)
            best = cpu[peer] if peer else 0
            line = f"{f'{n}, {touch}':<16}" + "".join(f"{cpu[c] / 1e3:{w[c]}.0f}" for c in names)
            paired = {}
            for s in shims:
                # Each round's run over that round's run of the best peer (by
                # median): the two shared the round's load and host state.
                ratios = [a["steps_per_cpu_s"] / b["steps_per_cpu_s"]
                          for a, b in zip(res[(n, touch, s)], res[(n, touch, peer)])
                          if b["steps_per_cpu_s"] > 0] if peer else []
                paired[s] = ((statistics.median(ratios), min(ratios), max(ratios))
                             if ratios else (0, 0, 0))
                verdict = "met" if paired[s][0] >= target(n) else "MISSED"
                cell = "{:.3f}x [{:.2f}-{:.2f}] {}".format(*paired[s], verdict)
                line += f"{cell:>{max(26, len(s) + 7)}}"
            print(line)
            for c in names:
                rows.append({"threads": n, "touch": touch, "config": c,
                             "steps_per_cpu_s": cpu[c],
                             "steps_per_s": med(n, touch, c, "steps_per_s"),
                             "maxrss_kib": med(n, touch, c, "maxrss_kib"),
                             "minflt_per_step": statistics.median(
                                 r["minflt"] / r["steps"] for r in res[(n, touch, c)]),
                             "runs": res[(n, touch, c)],
                             "best_peer": peer,
                             "ratio_best_peer": cpu[c] / best if best else 0,
                             **({"paired_ratio_best_peer": paired[c][0],
                                 "paired_range": list(paired[c][1:]),
                                 "target_met": paired[c][0] >= target(n)} if c in paired else {})})
    for title, key, div in (("steps per wall second (k)", "steps_per_s", 1e3),
                            ("peak RSS (MiB)", "maxrss_kib", 1024)):
        print(f"\n{title}")
        print(f"{'threads, touch':<16}" + "".join(f"{c:>{w[c]}}" for c in names))
        for n in threads:
            for touch in touches:
                print(f"{f'{n}, {touch}':<16}" +
                      "".join(f"{med(n, touch, c, key) / div:{w[c]}.0f}" for c in names))
    print("\nminor faults per step")
    print(f"{'threads, touch':<16}" + "".join(f"{c:>{w[c]}}" for c in names))
    for n in threads:
        for touch in touches:
            print(f"{f'{n}, {touch}':<16}" + "".join(
                f"{statistics.median(r['minflt'] / r['steps'] for r in res[(n, touch, c)]):{w[c]}.1f}"
                for c in names))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "threads", "machine": footprint.machine_line(), "load": load,
                       "length": how, "repeat": args.repeat, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
