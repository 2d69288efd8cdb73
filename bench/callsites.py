#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Exit time of a program with many distinct call sites (issue 13).

  bench/callsites.py [--sites N] [--repeat R] [--depth D] [--shim PATH]

Generates a C program of N functions (default 10000), each calling malloc
once with its own size (1 MiB + i * 64 bytes, so no two are folded into
one), builds it with -g -O1 and no -rdynamic, and runs it with no shim, with
the shim, and with the shim capturing every call's stack
(POOLSHIM_BACKTRACE=D, POOLSHIM_BACKTRACE_SAMPLE=1) so every function is a
distinct call site.  main() prints CLOCK_MONOTONIC when it returns; the
time from there to the parent's waitpid() is the exit time: the shim's
report, naming the reported sites (libdwfl) and writing it, and the
kernel's teardown.  The naming's fixed cost is separate debug info: with
POOLSHIM_DEBUGINFO_PATH pointing nowhere, and with depth 1 (no libc
frames), it is shown apart.  Then `poolshim report` is timed on a report of the
stripped program made without debug info, naming its frames offline from a
build-id tree (eu-addr2line), and with --no-symbolize.

Medians of R runs (default 5) with [min-max], in milliseconds.  Timing
only: nothing here is a pass/fail target.
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

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.environ.get("PS_TOP_BUILDDIR") or os.path.dirname(HERE)
REPORT = os.path.join(os.path.dirname(HERE), "scripts", "poolshim-report.py")


def source(n):
    out = ["#include <stdio.h>", "#include <stdlib.h>", "#include <time.h>",
           "#define KEEP(p) __asm__ volatile(\"\" : : \"r\"(p) : \"memory\")"]
    for i in range(n):
        out.append(f"__attribute__((noinline)) void *site_{i}(void)"
                   f" {{ void *p = malloc((1u << 20) + {i * 64}u); KEEP(p); return p; }}")
    out.append("static void *(*const fns[])(void) = {")
    out.extend(f"\tsite_{i}," for i in range(n))
    out.append("};")
    out.append("""int main(void)
{
	struct timespec ts;
	for (unsigned i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		char *p = fns[i]();
		if (!p)
			return 1;
		p[0] = 1;
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("%lld\\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	return fflush(stdout) != 0;
}""")
    return "\n".join(out) + "\n"


def run(prog, env, stderr_path):
    """(total ms, exit ms) of one run."""
    t0 = time.monotonic_ns()
    with open(stderr_path, "w") as err:
        res = subprocess.run([prog], env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    t1 = time.monotonic_ns()
    if res.returncode != 0:
        sys.exit(f"{prog} failed ({res.returncode}): see {stderr_path}")
    end = int(res.stdout.split()[-1])
    return (t1 - t0) / 1e6, (t1 - end) / 1e6


def timed(cmd):
    t0 = time.monotonic_ns()
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    return (time.monotonic_ns() - t0) / 1e6


def cell(xs):
    return f"{statistics.median(xs):8.1f} [{min(xs):.1f}-{max(xs):.1f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sites", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--shim", default=os.environ.get("POOLSHIM_LIB") or
                    os.path.join(TOP, ".libs", "libpoolshim.so"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    if not os.path.isfile(a.shim):
        sys.exit(f"{a.shim}: not built")
    tmp = tempfile.mkdtemp(prefix="pst-callsites.")
    try:
        c = os.path.join(tmp, "sites.c")
        prog = os.path.join(tmp, "sites")
        with open(c, "w") as f:
            f.write(source(a.sites))
        t0 = time.monotonic()
        subprocess.run([os.environ.get("CC", "cc"), "-g", "-O1", "-fno-omit-frame-pointer",
                        "-fno-optimize-sibling-calls", "-o", prog, c], check=True)
        print(f"{a.sites} sites: generated and built in {time.monotonic() - t0:.1f} s "
              f"({os.path.getsize(prog) // 1024} KiB)")
        base = {k: v for k, v in os.environ.items() if not k.startswith("POOLSHIM")}
        base.pop("LD_PRELOAD", None)
        shim = dict(base, LD_PRELOAD=a.shim)
        bt = dict(shim, POOLSHIM_BACKTRACE=str(a.depth), POOLSHIM_BACKTRACE_SAMPLE="1")
        configs = [
            ("no shim", base, None),
            ("shim, text report", shim, None),
            ("shim, JSON report", dict(shim, POOLSHIM_STATS=os.path.join(tmp, "plain.json")), None),
            ("backtraces, text report (top 10)", bt, None),
            ("backtraces, JSON report (top 10)", dict(bt, POOLSHIM_STATS=os.path.join(tmp, "bt.json")), None),
            ("backtraces, JSON report (top 64)", dict(bt, POOLSHIM_BACKTRACE_TOP="64",
                                                      POOLSHIM_STATS=os.path.join(tmp, "bt64.json")), None),
            # what the separate debug info (libc6-dbg's, here) costs at exit
            ("  same, no separate debug info", dict(bt, POOLSHIM_BACKTRACE_TOP="64",
                                                    POOLSHIM_DEBUGINFO_PATH=os.path.join(tmp, "nowhere"),
                                                    POOLSHIM_STATS=os.path.join(tmp, "nodbg.json")), None),
            ("  same, depth 1 (program frames only)", dict(bt, POOLSHIM_BACKTRACE_TOP="64",
                                                           POOLSHIM_BACKTRACE="1",
                                                           POOLSHIM_STATS=os.path.join(tmp, "d1.json")), None),
        ]
        res = {name: ([], []) for name, _, _ in configs}
        run(prog, base, os.path.join(tmp, "warm.err"))
        for _ in range(a.repeat):  # interleaved rounds
            for name, env, _ in configs:
                tot, ex = run(prog, env, os.path.join(tmp, "run.err"))
                res[name][0].append(tot)
                res[name][1].append(ex)
        print(f"{'configuration':<36} {'run (ms)':>24} {'exit (ms)':>24}")
        for name, _, _ in configs:
            print(f"{name:<36} {cell(res[name][0]):>24} {cell(res[name][1]):>24}")
        # the text report says how many sites were kept
        run(prog, bt, os.path.join(tmp, "bt.err"))
        with open(os.path.join(tmp, "bt.err")) as f:
            line = next((ln.strip() for ln in f if ln.startswith("call sites by count")), "?")
        with open(os.path.join(tmp, "bt64.json")) as f:
            nrep = len(json.load(f)["callsites"])
        print(f"capture table: {line}; the top-64 JSON report lists {nrep} sites")

        # Offline: the stripped program, no debug info at run time.
        rid = subprocess.run(["readelf", "-n", prog], capture_output=True, text=True).stdout
        bid = next(ln.split()[-1] for ln in rid.splitlines() if "Build ID" in ln)
        dbg = os.path.join(tmp, "debug", ".build-id", bid[:2], bid[2:] + ".debug")
        os.makedirs(os.path.dirname(dbg))
        subprocess.run(["objcopy", "--only-keep-debug", prog, dbg], check=True)
        subprocess.run(["objcopy", "--strip-all", prog], check=True)
        rep = os.path.join(tmp, "stripped.json")
        run(prog, dict(bt, POOLSHIM_BACKTRACE_TOP="64", POOLSHIM_STATS=rep,
                       POOLSHIM_DEBUGINFO_PATH=os.path.join(tmp, "nowhere")),
            os.path.join(tmp, "stripped.err"))
        py = [sys.executable, REPORT]
        off = [timed(py + ["--no-symbolize", "--folded", rep]) for _ in range(a.repeat)]
        on = [timed(py + ["--debug-dir", os.path.join(tmp, "debug"), "--folded", rep])
              for _ in range(a.repeat)]
        with open(rep) as f:
            frames = sum(len(s["frames"]) for s in json.load(f)["callsites"])
        print(f"poolshim report --folded, {nrep} sites, {frames} frames:")
        print(f"  {'--no-symbolize':<34} {cell(off):>24} ms")
        print(f"  {'named offline (--debug-dir)':<34} {cell(on):>24} ms")
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
