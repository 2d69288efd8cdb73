# SPDX-License-Identifier: MIT
"""scripts/demo from start to end: the command line, the plan of runs, the
runs (stopping whatever they started, however they end), the output, the
fio table (--real) and the allocator table."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import cli, hostcost, output, rounds, settings
from .machine import lib_line, machine
from .messages import Fail, progress, say
from .procs import Proc
from .real import run_real, run_side
from .rgw import RgwCluster, rgw_report, run_rgw
from .scenarios import (SMALL_NAMES, durations, make_plan, seconds_per_run, text_report_run,
                        titles)
from .stack import run_demo


def on_signal(sig, frame):
    raise KeyboardInterrupt(f"signal {sig}")


def new_result(args, sel, libs):
    """results.json before the runs: the machine, the date and the settings."""
    return {"harness": "poolshim demo", "version": 2, "machine": machine(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "settings": {"repeat": args.repeat, "seconds": args.seconds, "warmup": args.warmup,
                         "small_seconds": args.small_seconds,
                         "budget_min": args.budget, "max_rounds": args.max_rounds,
                         "par_band": args.par_band, "coverage": args.coverage,
                         "small_warmup": args.small_warmup,
                         "concurrency": args.concurrency, "scenarios": sel.scenarios,
                         "real_setups": sel.real_setups, "rgw_setups": sel.rgw_setups,
                         "scenario_configs": sel.plan_configs,
                         "configs": sel.configs, "shim_env": settings.USER_SHIM_ENV, "libraries": libs,
                         "hugepages": open("/proc/sys/vm/nr_hugepages").read().strip()},
            "runs": [], "summary": [], "real_runs": [], "real_summary": [], "small_summary": [],
            "rgw_runs": [], "rgw_summary": []}


def run_one(args, cluster, run, text_run, result, workdir, outdir):
    """One run of the plan, its record added to result (none when it is
    skipped: radosgw without its packages)."""
    kind, cfg, scen, rep = run
    if kind == "rgw" and cluster.state is None:
        cluster.up()
    if kind == "rgw" and cluster.state == "skipped":
        progress.finished(0)
        return
    under = "+".join(cfg) + " side by side" if kind == "side" else cfg
    progress.show(f"{kind} {scen} under {under}, " + (f"repeat {rep + 1}/{args.repeat}" if rep < args.repeat
                                                      else f"added round {rep + 1}"))
    t0 = time.monotonic()
    load = os.getloadavg()[0]
    if kind == "side":
        recs = run_side(args, cfg, scen, rep, workdir, outdir)
        progress.finished(time.monotonic() - t0)
        for rec in recs:
            rec["load"] = load
            # the round's wall time shared out, so that rounds.py's estimate
            # of a round (the sum over its configurations) holds
            rec["wall_s"] = round((time.monotonic() - t0) / len(recs), 2)
            check_run(args, scen, rec)
        result["real_runs"] += recs
        return
    if kind == "demo":
        rec = run_demo(args, cfg, scen, rep, run == text_run, workdir, outdir)
        result["runs"].append(rec)
    elif kind == "rgw":
        rec = run_rgw(args, cluster, cfg, scen, rep, workdir, outdir)
        result["rgw_runs"].append(rec)
    else:
        rec = run_real(args, cfg, scen, rep, workdir, outdir)
        result["real_runs"].append(rec)
    progress.finished(time.monotonic() - t0)
    rec["load"] = load
    rec["wall_s"] = round(time.monotonic() - t0, 2)
    check_run(args, scen, rec)


def check_run(args, scen, rec):
    """Says what went wrong in a run: no operation, data errors."""
    cfg = rec["config"]
    if not rec["ops_s"]:
        say(f"demo: {scen} under {cfg}: no operation completed in the measured "
            f"{durations(args, scen)[0]:g} s; use a longer --seconds or --small-seconds")
    if rec["mismatches"] or rec["errors"]:
        say(f"demo: {scen} under {cfg}: data errors {rec['mismatches']}, "
            f"failed operations {rec['errors']}")


def more_rounds(args, sel, cluster, result, workdir, outdir, deadline):
    """Rounds added where a headline row is undecided (rounds.py), until
    deadline; their record in result["rounds"]."""
    def run(kind, cfg, scen, rep):
        progress.total += 1
        run_one(args, cluster, (kind, cfg, scen, rep), None, result, workdir, outdir)

    if args.budget <= 0:
        return
    r = rounds.add_rounds(args, sel, result, titles(), deadline, run, say=say)
    result["rounds"] = r
    if r["added"]:
        say(f"demo: {r['added']} round(s) added in {r['seconds']:.0f} s")


def run_plan(args, sel, plan, text_run, result, workdir, outdir, deadline):
    """Every run of the plan, then radosgw's report; whatever was started is
    stopped and the cluster taken down however it ends, and workdir removed
    (kept with --keep, or for the logs after a Fail).  (What failed or None,
    the path of radosgw's report or None.)"""
    failed = None
    keep_logs = False
    cluster = RgwCluster(workdir)
    rgw_txt = None
    try:
        progress.plan(len(plan), seconds_per_run(args, plan))
        est = len(plan) * seconds_per_run(args, plan) / 60
        say(f"demo: {len(plan)} runs, about {est:.0f} min; "
            + (f"then rounds where a headline row is undecided, until {args.budget:g} min from the "
               f"start (--budget); " if args.budget > 0 else "")
            + f"results in {outdir}")
        for run in plan:
            run_one(args, cluster, run, text_run, result, workdir, outdir)
        more_rounds(args, sel, cluster, result, workdir, outdir, deadline)
        if cluster.state == "up" and any(r["config"] == "shim" for r in result["rgw_runs"]):
            progress.clear()
            say("demo: radosgw's report: a shimmed radosgw with POOLSHIM_BACKTRACE=8 (not measured)")
            rgw_txt = rgw_report(args, cluster, outdir)
    except Fail as e:
        failed = str(e)
        keep_logs = True
    except KeyboardInterrupt as e:
        failed = f"interrupted ({e or 'SIGINT'}); every process it started is stopped"
    finally:
        Proc.stop_all()
        try:
            cluster.down()
        except Fail as e:
            say(f"demo: {e}")
        progress.clear()
        if args.keep or keep_logs:
            say(f"demo: logs and data kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return failed, rgw_txt


def report(args, sel, result, libs, text_run, rgw_txt, failed, outdir):
    """The tables, targets, plots, result files and reports."""
    names = titles()
    parts = output.Parts(sel)
    hdr, small_hdr = output.headers(args, result["machine"], libs, settings.BASELINE)
    output.summarize_and_print(args, result, sel, parts, names, hdr, small_hdr)
    output.print_targets(result, sel, parts, names)
    made = output.draw_plots(result, sel, parts, names, outdir)
    output.write_results(result, names, hdr, small_hdr, outdir)
    txt = None if failed else output.print_reports(text_run, rgw_txt, names, outdir)
    output.print_files(outdir, made, txt, rgw_txt)


def alloc_table(outdir):
    """scripts/bench alloc's table, briefly; its exit status."""
    print("\n== Allocator micro-benchmark (scripts/bench alloc) ==", flush=True)
    r = subprocess.run([sys.executable, os.path.join(settings.TOP, "scripts", "bench"), "alloc",
                        "--seconds", "0.5", "--repeat", "3", "--threads", "1",
                        "--shim-lib", settings.SHIM, "--json", os.path.join(outdir, "alloc.json")])
    return r.returncode


def fio_table(outdir):
    """scripts/bench fio's table, briefly (issue 29: unmodified psync under the
    shim against fio's io_uring engine with fixedbufs+hugetlb); its exit
    status, 0 also when it skipped (no fio, no hugetlb pages)."""
    print("\n== fio: psync under the shim against fio's own engines (scripts/bench fio --quick) ==",
          flush=True)
    r = subprocess.run([sys.executable, os.path.join(settings.TOP, "scripts", "bench"), "fio",
                        "--quick", "--shim-lib", settings.SHIM,
                        "--json", os.path.join(outdir, "fio.json")])
    return 0 if r.returncode == 77 else r.returncode


def main(description):
    """scripts/demo; description: its --help text.  The exit status."""
    t_begin = time.monotonic()
    args = cli.parse_args(description)
    sel = cli.select(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.abspath(args.out or os.path.join(settings.TOP, "results", f"demo-{stamp}"))
    os.makedirs(outdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="psdemo.", dir=os.environ.get("TMPDIR", "/tmp"))
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    libs = {"shim": lib_line(settings.SHIM)}
    if settings.BASELINE:
        libs["baseline"] = lib_line(settings.BASELINE)
    result = new_result(args, sel, libs)
    if sel.scenarios or sel.real_setups:
        print("== This host's costs (bench/hostcost; what the pool saves, and what it cannot) ==",
              flush=True)
        result["host"] = hostcost.measure(workdir)
        print("\n".join(hostcost.lines(result["host"])) + "\n", flush=True)
    t_start = time.monotonic()
    plan = make_plan(args.repeat, sel.configs, sel)
    text_run = text_report_run(args.repeat, sel.configs, sel.scenarios)
    failed, rgw_txt = run_plan(args, sel, plan, text_run, result, workdir, outdir,
                               t_begin + 60 * args.budget)

    report(args, sel, result, libs, text_run, rgw_txt, failed, outdir)
    print(f"demo: {time.monotonic() - t_start:.0f} s", file=sys.stderr)
    sys.stdout.flush()
    if failed:
        print(f"demo: FAILED: {failed}", file=sys.stderr)
        return 1
    bad = [r for r in result["runs"] + result["real_runs"] + result["rgw_runs"]
           if r["mismatches"] or r["errors"]]
    if bad:
        print(f"demo: FAILED: {len(bad)} run(s) had data errors or failed operations "
              f"(see {outdir}/results.json)", file=sys.stderr)
        return 1
    if args.real and not args.no_real and fio_table(outdir):
        return 1
    if sel.alloc_part and alloc_table(outdir):
        return 1
    return 0
