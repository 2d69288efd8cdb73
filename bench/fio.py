#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""fio as the neutral judge (issue 29): unmodified synchronous reads under
the shim against fio's own hand-tuned engines.

  scripts/bench fio [--repeat N] [--seconds S] [--bs 1M,16M] [--quick]
                    [--config NAME,...] [--chunk 128K,256K,...] [--file PATH]
                    [--hugepages N] [--shim-lib PATH] [--json FILE] [--keep-reports DIR]

fio --rw=randread --direct=1 on one file (default /var/tmp/poolshim-fio.dat,
2 GiB, written once and reused), one job, --runtime S --time_based, under
each configuration:

  psync-none, psync-shim, psync-hugetlb      fio --ioengine=psync (its job a
                                             fork child), no shim / the shim
                                             by default / the shim with
                                             POOLSHIM_HUGEPAGES=hugetlb
  psync-shim-off, psync-shim-on              the shim with POOLSHIM_URING=off
                                             (the plain route) / on (the ring
                                             for every pread); the default is
                                             the router (issue 36)
  thread-none, thread-shim, thread-hugetlb   the same with --thread
  psync-shmhuge                              psync on fio's own hugetlb
                                             buffer (--mem=shmhuge)
  uring-qd1, uring-qd8                       --ioengine=io_uring --fixedbufs
                                             --registerfiles --mem=shmhuge,
                                             --iodepth 1 and 8
  chunk-SIZE (with --chunk)                  psync-shim with
                                             POOLSHIM_URING_CHUNK=SIZE

Rounds are interleaved (every configuration at every block size, then the
next round, which starts one configuration further on) after one short
warm-up run; the table shows the median MiB/s
[min-max], CPU seconds per GiB read (fio's usr+sys of the job), and the
ratios against uring-qd1 and psync-shmhuge at the same block size (the
median of each round's ratio: the disk drifts over minutes); for the
shim, from its JSON reports (POOLSHIM_STATS, one per process): the pool's
backing, SQEs per io_uring_enter, chunks (SQEs) per pread and the share
of preads the router sent to the ring.  Then the targets of issue 29:
psync under the shim >= 1.0x uring-qd1 and >= 0.95x psync-shmhuge; and of
issue 36: psync-shim (the router) >= 0.98x psync-shim-off's MiB/s, <= 1.03x
its CPU per GiB, and >= 0.97x uring-qd1's MiB/s.

Hugetlb pages: as root it raises /proc/sys/vm/nr_hugepages to --hugepages
(default 512) when fewer are free, says so, and puts the old count back at
the end, also on an error or SIGINT/SIGTERM.  Exit status 77 (with one
line saying why) when fio is missing, the file's directory takes no
O_DIRECT, or no hugetlb pages can be had; 0 done; 1 a run failed.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PS_TOP_BUILDDIR", TOP)
SHIM = os.path.abspath(os.environ.get("POOLSHIM_LIB") or os.path.join(BUILD, ".libs", "libpoolshim.so"))
NR = "/proc/sys/vm/nr_hugepages"
SKIP = 77
FILE_SIZE = 2 << 30
TARGET_URING = 1.0
TARGET_SHMHUGE = 0.95
# issue 36: the router against the plain route and fio's io_uring QD1
TARGET_ROUTE_MIBS = 0.98
TARGET_ROUTE_CPU = 1.03
TARGET_ROUTE_QD1 = 0.97


def skip(why):
    print(f"bench fio: skipped: {why}", flush=True)
    sys.exit(SKIP)


def parse_size(v):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    v = v.strip().upper().rstrip("B").rstrip("I")
    if v and v[-1] in units:
        return int(float(v[:-1]) * units[v[-1]])
    return int(v)


def size_name(n):
    for u, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n % s == 0:
            return f"{n // s}{u}"
    return str(n)


def configs(args):
    """(name, fio arguments, environment, whether the shim is preloaded)."""
    shim = {"LD_PRELOAD": args.shim_lib}
    huge = dict(shim, POOLSHIM_HUGEPAGES="hugetlb")
    uring = ["--ioengine=io_uring", "--fixedbufs", "--registerfiles", "--mem=shmhuge"]
    all_ = [
        ("psync-none", ["--ioengine=psync"], {}, False),
        ("psync-shim", ["--ioengine=psync"], shim, True),
        ("psync-hugetlb", ["--ioengine=psync"], huge, True),
        ("psync-shim-off", ["--ioengine=psync"], dict(shim, POOLSHIM_URING="off"), True),
        ("psync-shim-on", ["--ioengine=psync"], dict(shim, POOLSHIM_URING="on"), True),
        ("thread-none", ["--ioengine=psync", "--thread"], {}, False),
        ("thread-shim", ["--ioengine=psync", "--thread"], shim, True),
        ("thread-hugetlb", ["--ioengine=psync", "--thread"], huge, True),
        ("psync-shmhuge", ["--ioengine=psync", "--mem=shmhuge"], {}, False),
        ("uring-qd1", uring + ["--iodepth=1"], {}, False),
        ("uring-qd8", uring + ["--iodepth=8"], {}, False),
    ]
    for c in args.chunk:
        all_.append((f"chunk-{size_name(c)}", ["--ioengine=psync"],
                     dict(shim, POOLSHIM_URING_CHUNK=size_name(c)), True))
    if args.config:
        known = [c[0] for c in all_]
        bad = [n for n in args.config if n not in known]
        if bad:
            sys.exit(f"bench fio: unknown configuration {', '.join(bad)}; known: {', '.join(known)}")
        # The ratios need their references.
        want = set(args.config) | {"uring-qd1", "psync-shmhuge"}
        if want & {"psync-shim", "psync-shim-on"}:
            want.add("psync-shim-off")
        all_ = [c for c in all_ if c[0] in want]
    return all_


def child_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("POOLSHIM_")}
    env.update(extra)
    return env


class Hugepages:
    """Enough free 2 MiB hugetlb pages for the runs, the old count put back
    however the bench ends."""

    def __init__(self, want):
        self.want = want
        self.old = None

    @staticmethod
    def free():
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("HugePages_Free:"):
                    return int(line.split()[1])
        return 0

    def reserve(self):
        have = self.free()
        if have >= self.want:
            print(f"hugepages: {have} x 2 MiB hugetlb pages free already; nr_hugepages unchanged")
            return
        try:
            with open(NR) as f:
                self.old = int(f.read())
            with open(NR, "w") as f:
                f.write(str(self.old + self.want - have))
        except OSError as e:
            self.old = None
            skip(f"cannot reserve hugetlb pages ({NR}: {e.strerror}; run as root, "
                 f"or reserve {self.want} by hand)")
        got = self.free()
        print(f"hugepages: reserved {got} x 2 MiB hugetlb pages free (nr_hugepages was {self.old}; "
              f"put back at the end, or by hand: echo {self.old} > {NR})", flush=True)
        if got < 64:
            self.restore()
            skip(f"only {got} hugetlb pages free after asking for {self.want} "
                 "(memory too fragmented?)")

    def restore(self):
        if self.old is None:
            return
        try:
            with open(NR, "w") as f:
                f.write(str(self.old))
            print(f"hugepages: nr_hugepages back to {self.old}", flush=True)
        except OSError as e:
            print(f"hugepages: could not put nr_hugepages back to {self.old}: {e.strerror}; "
                  f"echo {self.old} > {NR}", file=sys.stderr)
        self.old = None


def lay_out(path):
    """The file, written once (O_DIRECT, so not left in the page cache)."""
    if os.path.exists(path) and os.path.getsize(path) == FILE_SIZE:
        return
    print(f"bench fio: writing {path} ({FILE_SIZE >> 30} GiB, once)", flush=True)
    r = subprocess.run(["fio", "--name=layout", f"--filename={path}", f"--size={FILE_SIZE}",
                        "--rw=write", "--bs=16M", "--direct=1", "--ioengine=psync",
                        "--output-format=terse"], capture_output=True, text=True)
    if r.returncode:
        skip(f"fio could not write {path} with O_DIRECT: {r.stderr.strip()[-300:]}")


def shim_reports(d):
    """Sum of the shim's JSON reports in d: calls, SQEs, enters, backing."""
    out = {"preads": 0, "sqes": 0, "enters": 0, "split": 0, "modes": set(), "hugetlb": 0, "thp": 0,
           "4k": 0, "rings": 0, "route_plain": 0, "route_ring": 0}
    for f in glob.glob(os.path.join(d, "r-*.json")):
        try:
            with open(f) as fh:
                r = json.load(fh)
        except (OSError, ValueError):
            continue
        u = r.get("uring", {})
        preads = sum(c["calls"] for c in r.get("calls", []) if c["call"] == "pread")
        out["preads"] += preads
        out["sqes"] += u.get("sqes", 0)
        out["enters"] += u.get("enters", 0)
        out["split"] += u.get("split_calls", 0)
        out["rings"] += u.get("rings", 0)
        for dv in u.get("devices", []):
            out["route_plain"] += dv["route_calls"]["plain"]
            out["route_ring"] += dv["route_calls"]["ring"]
        if preads:
            p = r.get("pool", {})
            out["modes"].add(p.get("mode", "?"))
            for k in ("hugetlb", "thp", "4k"):
                out[k] += p.get("backed_by", {}).get(k, 0)
    return out


def run_fio(args, cfg, bs, seconds, tmp, keep=None):
    name, fargs, env, shimmed = cfg
    rdir = tempfile.mkdtemp(dir=tmp)
    e = child_env(env)
    if shimmed:
        e["POOLSHIM_STATS"] = os.path.join(rdir, "r-%p.json")
        e["POOLSHIM_STATS_FORMAT"] = "json"
    cmd = ["fio", "--name=j", f"--filename={args.file}", f"--size={FILE_SIZE}", f"--bs={bs}",
           "--rw=randread", "--direct=1", "--norandommap", "--randrepeat=0",
           f"--runtime={seconds}", "--time_based", "--output-format=json"] + fargs
    r = subprocess.run(cmd, env=e, capture_output=True, text=True)
    if r.returncode:
        shutil.rmtree(rdir, ignore_errors=True)
        why = (r.stderr.strip() or r.stdout.strip())[-400:]
        if "shmhuge" in " ".join(fargs) or env.get("POOLSHIM_HUGEPAGES") == "hugetlb":
            why += (f" (free hugetlb pages now: {Hugepages.free()}; another process may have "
                    f"changed {NR} meanwhile)")
        raise RuntimeError(f"fio under {name} (bs {bs}) failed, exit {r.returncode}: {why}")
    j = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    rt = j["job_runtime"] / 1000.0
    nbytes = j["read"]["io_bytes"]
    mibs = nbytes / (1 << 20) / rt if rt else 0.0
    cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * rt
    rec = {"mibs": mibs, "cpu_per_gib": cpu / (nbytes / (1 << 30)) if nbytes else 0.0,
           "load": os.getloadavg()[0]}
    if shimmed:
        rec["shim"] = shim_reports(rdir)
        if keep:
            dst = os.path.join(keep, f"{name}-{size_name(bs)}")
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(rdir, dst)
    shutil.rmtree(rdir, ignore_errors=True)
    return rec


def shim_cell(recs):
    s = [r["shim"] for r in recs if "shim" in r]
    if not s:
        return ""
    last = s[-1]
    back = "hugetlb" if last["hugetlb"] else "thp" if last["thp"] else "4k" if last["4k"] else "-"
    spe = statistics.median(x["sqes"] / x["enters"] for x in s) if all(x["enters"] for x in s) else 0
    cpc = statistics.median(x["sqes"] / x["preads"] for x in s) if all(x["preads"] for x in s) else 0
    routed = [x["route_ring"] / (x["route_ring"] + x["route_plain"]) for x in s
              if x["route_ring"] + x["route_plain"]]
    ring = f"{100 * statistics.median(routed):.1f}%" if routed else "-"
    return f"{back:>8}{spe:>9.2f}{cpc:>9.2f}{ring:>7}"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="scripts/bench fio", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, help="interleaved rounds (default 5; --quick 3)")
    ap.add_argument("--seconds", type=float, help="seconds per fio run (default 3; --quick 2)")
    ap.add_argument("--bs", default="1M,16M", help="block sizes (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="3 rounds of 2 s")
    ap.add_argument("--config", type=lambda v: [n for n in v.split(",") if n], action="extend",
                    help="only these configurations (uring-qd1 and psync-shmhuge always run)")
    ap.add_argument("--chunk", type=lambda v: [parse_size(n) for n in v.split(",") if n],
                    default=[], help="add chunk-SIZE rows: the shim with POOLSHIM_URING_CHUNK=SIZE")
    ap.add_argument("--file", default="/var/tmp/poolshim-fio.dat",
                    help="the 2 GiB file, on a disk that takes O_DIRECT (default %(default)s)")
    ap.add_argument("--hugepages", type=int, default=512,
                    help="free 2 MiB hugetlb pages to have (default %(default)s)")
    ap.add_argument("--shim-lib", default=SHIM, help="the shim (default %(default)s)")
    ap.add_argument("--json", help="also write the results as JSON")
    ap.add_argument("--keep-reports", help="copy the last round's shim reports into this directory")
    args = ap.parse_args(argv)
    args.repeat = args.repeat or (3 if args.quick else 5)
    seconds = args.seconds or (2 if args.quick else 3)
    if args.repeat < 1 or seconds <= 0:
        ap.error("--repeat and --seconds must be positive")
    sizes = [parse_size(b) for b in args.bs.split(",") if b]
    args.shim_lib = os.path.abspath(args.shim_lib)
    if not shutil.which("fio"):
        skip("fio not installed (Debian package fio)")
    if not os.path.exists(args.shim_lib):
        sys.exit(f"bench fio: {args.shim_lib} not built; run scripts/bootstrap first")
    cfgs = configs(args)
    lay_out(args.file)

    huge = Hugepages(args.hugepages)

    def on_signal(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    tmp = tempfile.mkdtemp(prefix="psfio.")
    if args.keep_reports:
        os.makedirs(args.keep_reports, exist_ok=True)
    results = {}
    load0 = os.getloadavg()
    t0 = time.monotonic()
    try:
        huge.reserve()
        # Warm-up, not counted: the first run after a pause meets a cold disk cache
        # in the host and a sleeping CPU.
        run_fio(args, cfgs[0], sizes[0], 1, tmp)
        total = args.repeat * len(sizes) * len(cfgs)
        done = 0
        for rep in range(args.repeat):
            # Each round starts one configuration further on: a run that leaves the
            # disk or memory in some state taxes a different neighbour every round.
            order = cfgs[rep % len(cfgs):] + cfgs[:rep % len(cfgs)]
            for bs in sizes:
                for cfg in order:
                    done += 1
                    left = (total - done + 1) * (seconds + 0.6)
                    print(f"\r[{done}/{total}] {cfg[0]} bs {size_name(bs)} round {rep + 1} "
                          f"(~{left:.0f}s left)   ", end="", file=sys.stderr, flush=True)
                    keep = args.keep_reports if rep == args.repeat - 1 else None
                    results.setdefault((cfg[0], bs), []).append(
                        run_fio(args, cfg, bs, seconds, tmp, keep))
        print(file=sys.stderr)
    except KeyboardInterrupt as e:
        print(f"\nbench fio: interrupted ({str(e) or 'SIGINT'})", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"\nbench fio: {e}", file=sys.stderr)
        return 1
    finally:
        huge.restore()
        shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    return report(args, cfgs, sizes, seconds, results, load0, load1, time.monotonic() - t0)


def report(args, cfgs, sizes, seconds, results, load0, load1, took):
    print(f"fio --rw=randread --direct=1 on {args.file} ({FILE_SIZE >> 30} GiB), one job, "
          f"{seconds:g} s per run, {args.repeat} interleaved rounds, median [min-max]; "
          f"{took:.0f} s in all")
    print(f"machine: {os.cpu_count()} CPUs, Linux {os.uname().release}; load average "
          f"{load0[0]:.2f} at the start, {load1[0]:.2f} at the end")
    print(f"shim: {args.shim_lib}")
    rows = []
    for bs in sizes:
        med = {n: statistics.median(r["mibs"] for r in results[(n, bs)])
               for n, _, _, _ in cfgs if (n, bs) in results}

        def paired(n, ref):
            """Median over the rounds of n's MiB/s over ref's in the same round:
            the disk drifts over minutes, a round's runs are seconds apart."""
            a, b = results.get((n, bs), []), results.get((ref, bs), [])
            v = [x["mibs"] / y["mibs"] for x, y in zip(a, b) if y["mibs"]]
            return statistics.median(v) if v else 0

        def paired_cpu(n, ref):
            a, b = results.get((n, bs), []), results.get((ref, bs), [])
            v = [x["cpu_per_gib"] / y["cpu_per_gib"] for x, y in zip(a, b) if y["cpu_per_gib"]]
            return statistics.median(v) if v else 0
        print(f"\nbs {size_name(bs):<14}{'MiB/s':>22}{'CPU s/GiB':>11}{'x qd1':>8}"
              f"{'x shmhuge':>10}{'x off':>7}{'cpu x off':>10}{'backing':>8}{'SQE/ent':>9}"
              f"{'SQE/call':>9}{'ring':>7}")
        for n, _, _, _ in cfgs:
            recs = results[(n, bs)]
            v = [r["mibs"] for r in recs]
            cpu = statistics.median(r["cpu_per_gib"] for r in recs)
            cell = f"{med[n]:.0f} [{min(v):.0f}-{max(v):.0f}]"
            xu, xh = paired(n, "uring-qd1"), paired(n, "psync-shmhuge")
            xo, co = paired(n, "psync-shim-off"), paired_cpu(n, "psync-shim-off")
            print(f"{n:<17}{cell:>22}{cpu:>11.4f}{xu:>7.2f}x{xh:>9.2f}x{xo:>6.2f}x{co:>9.2f}x"
                  f"{shim_cell(recs)}")
            row = {"config": n, "bs": bs, "mibs": med[n], "mibs_runs": v, "cpu_per_gib": cpu,
                   "cpu_runs": [r["cpu_per_gib"] for r in recs],
                   "x_uring_qd1": xu or None, "x_psync_shmhuge": xh or None,
                   "x_shim_off": xo or None, "cpu_x_shim_off": co or None}
            s = [r["shim"] for r in recs if "shim" in r]
            if s:
                row["shim"] = [dict(x, modes=sorted(x["modes"])) for x in s]
            rows.append(row)
    print("\n(x qd1, x shmhuge: the median over the rounds of MiB/s over uring-qd1's or "
          "psync-shmhuge's in the same round; x off, cpu x off: the same against psync-shim-off "
          "(POOLSHIM_URING=off), of MiB/s and of CPU s/GiB; CPU s/GiB: fio's usr+sys of the job "
          "per GiB read; backing, SQE/ent (SQEs per io_uring_enter), SQE/call (SQEs per pread), "
          "ring (share of eligible preads the router sent to the ring): from the shim's reports)")
    print("\ntargets of issue 29 (psync under the shim, by default and with POOLSHIM_HUGEPAGES=hugetlb):")
    targets = []
    for bs in sizes:
        med = {r["config"]: r for r in rows if r["bs"] == bs}
        for n in ("psync-shim", "thread-shim", "psync-hugetlb", "thread-hugetlb"):
            if n not in med:
                continue
            for ref, want in (("x_uring_qd1", TARGET_URING), ("x_psync_shmhuge", TARGET_SHMHUGE)):
                x = med[n][ref]
                if x is None:
                    continue
                ok = x >= want
                targets.append({"config": n, "bs": bs, "against": ref[2:], "ratio": x,
                                "target": want, "met": ok})
                print(f"  bs {size_name(bs):<4} {n:<15} {x:5.2f}x {ref[2:]:<14} "
                      f"target >= {want:.2f}x  {'met' if ok else 'MISSED'}")
    print("\ntargets of issue 36 (psync-shim, the router, against the plain route and fio's QD1):")
    for bs in sizes:
        med = {r["config"]: r for r in rows if r["bs"] == bs}
        if "psync-shim" not in med:
            continue
        r = med["psync-shim"]
        for what, x, want, ok in (
                ("MiB/s x psync-shim-off", r["x_shim_off"], TARGET_ROUTE_MIBS, lambda x, w: x >= w),
                ("CPU/GiB x psync-shim-off", r["cpu_x_shim_off"], TARGET_ROUTE_CPU, lambda x, w: x <= w),
                ("MiB/s x uring-qd1", r["x_uring_qd1"], TARGET_ROUTE_QD1, lambda x, w: x >= w)):
            if x is None:
                continue
            met = ok(x, want)
            targets.append({"config": "psync-shim", "bs": bs, "against": what, "ratio": x,
                            "target": want, "met": met})
            print(f"  bs {size_name(bs):<4} {what:<26} {x:5.3f}x  target "
                  f"{'>=' if want < 1 else '<='} {want:.2f}x  {'met' if met else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "fio", "file": args.file, "seconds": seconds, "repeat": args.repeat,
                       "load_start": load0, "load_end": load1, "rows": rows, "targets": targets},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
