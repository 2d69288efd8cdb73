# SPDX-License-Identifier: MIT
"""After the runs: the summaries and their tables, the targets, the plots,
results.json and results.md, and the shim's reports printed."""
import json
import os
import sys

from .plot import plots
from .scenarios import (REAL_CONFIGS, RGW_CONFIGS, SIDE_BY_SIDE, SIDE_CONFIGS, SMALL_CONFIGS,
                        SMALL_NAMES, side_bursts)
from . import targets, verdict
from .summary import summarize
from .tables import markdown, print_small_table, print_table, small_markdown

# The two radosgw tables: title, which rows, the per-process columns' labels
# and what they stand for.
RGW_TABLES = (
    ("Ceph RGW: radosgw on a one-node cluster, loadgen --verify",
     lambda s: not s.startswith("rgw-proxy-"), ("rgw", "osd"),
     "rgw = radosgw; osd = the ceph-osd behind it"),
    ("s3proxy --backend-auth in front of radosgw, loadgen --verify",
     lambda s: s.startswith("rgw-proxy-"), ("s3prx", "rgw"),
     "s3prx = s3proxy (under the configuration too); rgw = radosgw"))


def headers(args, machine, libs, baseline):
    """The header above the large tables, and the small-request table's."""
    hdr = (f"machine: {machine}\n{args.repeat} interleaved repeat(s) of "
           f"{args.seconds:g} s measured (+{args.warmup:g} s warm-up), {args.concurrency} connections; "
           f"median [min-max]; per-op faults, CPU per GiB moved and I/O calls (shim only) over the "
           f"measured window; nodes = both storage nodes together"
           + ("".join(f"\n{k}: {v}" for k, v in libs.items()) if baseline else ""))
    wrk_s = max(1, round(args.small_seconds))
    small_hdr = (f"machine: {machine}\n{args.repeat} interleaved repeat(s); loadgen: "
                 f"{args.small_seconds:g} s measured (+{args.small_warmup:g} s warm-up), wrk: {wrk_s} s "
                 f"(+1 s warm-up); {args.concurrency} connections; median [min-max]; x none = "
                 f"requests/s against no preload; CPU and I/O calls per request over the measured "
                 f"window (I/O calls: shim only; for wrk setups from the exit reports, warm-up "
                 f"included): proxy = s3proxy, nginx, or haproxy; nodes = both storaged, or the "
                 f"nginx behind haproxy; loadgen runs under the configuration, wrk never"
                 + "".join(f"\n{k}: {v}" for k, v in libs.items()))
    return hdr, small_hdr


class Parts:
    """The scenarios of each table: the demo stack's and the real programs'
    large ones, and every small one."""

    def __init__(self, sel):
        self.big_real = [s for s in sel.real_setups if s not in SMALL_NAMES]
        self.big_demo = [s for s in sel.scenarios if s not in SMALL_NAMES]
        self.small_all = [s for s in sel.scenarios + sel.real_setups if s in SMALL_NAMES]


def real_header(args, hdr):
    """The real programs' table says what its columns are, wrk's whole
    seconds, and how the proxies' configurations ran side by side."""
    side = ", ".join(SIDE_CONFIGS)
    return (hdr.replace("nodes = both storage nodes together", "proxy = the server "
                        "(nginx master+workers, haproxy); nodes = the storaged behind it")
            .replace(f"(+{args.warmup:g} s warm-up)", "(+1 s warm-up)")
            .replace(f"of {args.seconds:g} s measured", f"of {max(1, round(args.seconds))} s measured")
            + f"\n{', '.join(SIDE_BY_SIDE)}: {side} ran side by side in each round, behind one "
            f"storaged: {side_bursts(args)} wrk bursts of 1 s each, alternating in mirrored order "
            f"(+1 s warm-up each); their nodes figures are the shared storaged's per request of all")


def rgw_header(hdr, rgw_configs):
    return (hdr.replace("nodes = both storage nodes together", "@GROUPS@")
            + "\nCeph 16 on loopback (scripts/rgw: one mon, mgr and BlueStore OSD, pool "
            "size 1); loadgen runs plain, the configuration applies to radosgw"
            + (" and, for shim-osd, the OSD" if "shim-osd" in rgw_configs else ""))


def print_rgw_tables(result, titles, hdr, rgw_configs):
    for what, sel, labels, groups in RGW_TABLES:
        rows = [r for r in result["rgw_summary"] if sel(r["scenario"])]
        if rows:
            print(f"\n== {what} ==")
            print_table(rows, titles, rgw_header(hdr, rgw_configs).replace("@GROUPS@", groups), labels)


def summarize_and_print(args, result, sel, parts, titles, hdr, small_hdr):
    """Each part's summary into result, and its table printed."""
    if result["runs"] and parts.big_demo:
        result["summary"] = summarize(result["runs"], parts.big_demo, sel.configs)
        print("\n== The demo S3 stack: s3proxy + 2 storaged, loadgen --verify ==")
        print_table(result["summary"], titles, hdr)
    if result["real_runs"] and parts.big_real:
        result["real_summary"] = summarize(result["real_runs"], parts.big_real, REAL_CONFIGS)
        print("\n== Real programs: nginx, haproxy, driven by wrk (GET 16 MiB) ==")
        print_table(result["real_summary"], titles, real_header(args, hdr))
    if parts.small_all and (result["runs"] or result["real_runs"]):
        result["small_summary"] = summarize(result["runs"] + result["real_runs"], parts.small_all,
                                            SMALL_CONFIGS)
        print("\n== Small requests (do no harm): the demo stack, nginx, haproxy ==")
        print_small_table(result["small_summary"], titles, small_hdr)
    if result["rgw_runs"]:
        result["rgw_summary"] = summarize(result["rgw_runs"], sel.rgw_setups, RGW_CONFIGS)
        print_rgw_tables(result, titles, hdr, sel.rgw_configs)


def rule_lines(settings):
    """The decision rule and the budget, as this run applied them."""
    n = verdict.min_rounds(settings["coverage"])
    budget = settings.get("budget_min", 0)
    return [
        "The rule: each ratio pairs the shim's run with the other configuration's run of the same "
        "round.",
        f"Range: the order statistics that cover the median ratio {settings['coverage']:.0%} of the "
        f"time ([min-max] from {n} rounds;",
        f"narrower from 8; --coverage).  met: the whole range at or past the target; MISSED: all "
        f"short of it;",
        f"at par: neither, and the whole range within {settings['par_band']:.0%} of 1x "
        f"(--par-band); otherwise undecided.",
        (f"Rounds are added where a headline row is undecided, up to {budget:g} min from the start "
         f"(--budget) and {settings['max_rounds']} rounds (--max-rounds)." if budget else
         "No rounds are added (--budget 0)."),
    ]


def rounds_line(r, budget):
    """What the added rounds did, in one line."""
    if r is None:
        return None
    why = {"decided": "every headline row decided or at par",
           "budget": f"the next round would end past the budget ({budget:g} min)",
           "max rounds": "the undecided rows' scenarios reached --max-rounds"}[r["stop"]]
    per = ", ".join(f"{s} {n}" for s, n in r["per_scenario"].items())
    return (f"Rounds added: {r['added']}" + (f" ({per})" if per else "") + f" in {r['seconds']:.0f} s; "
            f"stopped: {why}")


def print_targets(result, sel, parts, titles):
    """The verdicts (targets.py): paired per round, each with its range,
    the headline rows first and counted, the detail rows apart; for each
    large scenario what this host's fault price explains and the limit it
    runs into."""
    host = result.get("host")
    entries = (targets.big(result["runs"], result["summary"], host, titles, parts.big_demo)
               + targets.big(result["real_runs"], result["real_summary"], host, titles,
                             parts.big_real, real=True)
               + targets.small(result["runs"] + result["real_runs"], host, titles, parts.small_all)
               + targets.rgw(result["rgw_runs"], titles, sel.rgw_setups))
    result["verdicts"] = entries
    result["targets"] = [e["line"] for e in entries]
    if not entries:
        return
    head, detail = targets.split(entries)
    print("\n== Verdicts: the shim over the other configuration, paired within each round ==")
    print("\n".join(rule_lines(result["settings"])))
    loads = [r["load"] for k in ("runs", "real_runs", "rgw_runs") for r in result[k] if "load" in r]
    if loads:
        busy = max(loads) > 2 * (os.cpu_count() or 1)
        print(f"Load average at the start of each run: {min(loads):.1f} to {max(loads):.1f} on "
              f"{os.cpu_count()} CPUs" + (": the machine was shared and oversubscribed, read every "
                                          "ratio as indicative" if busy else ""))
    added = rounds_line(result.get("rounds"), result["settings"].get("budget_min", 0))
    if added and head:
        print(added)
    if head:
        print("\n-- Headline: what the README's \"Should I deploy it?\" rests on --")
        print("\n".join(targets.lines(head)))
    if detail:
        print("\n-- Detail (not counted" + (", no rounds added for them" if head else "") + ") --")
        print("\n".join(targets.lines(detail)))
    result["headline_counts"] = targets.counts(head)
    print(f"\nheadline: {targets.count_line(head)}" if head else
          f"\n(no headline row in this selection) detail: {targets.count_line(detail)}")


def draw_plots(result, sel, parts, titles, outdir):
    """Every part's plots; the PNGs drawn."""
    made = []
    if result["summary"]:
        made += plots(result["summary"], parts.big_demo, sel.configs, titles, outdir, "")
    if result["real_summary"]:
        made += plots(result["real_summary"], parts.big_real, REAL_CONFIGS, titles, outdir, "real-")
    if result["small_summary"]:
        made += plots(result["small_summary"], parts.small_all, SMALL_CONFIGS, titles, outdir, "small-")
    if result["rgw_summary"]:
        made += plots(result["rgw_summary"], sel.rgw_setups, RGW_CONFIGS, titles, outdir, "rgw-")
    return made


def write_results(result, titles, hdr, small_hdr, outdir):
    """results.json (everything) and results.md (the tables and targets)."""
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write(f"machine: {result['machine']}\n")
        if result["summary"] or result["real_summary"]:
            f.write(f"\n{hdr.splitlines()[1]}\n")
        if result["summary"]:
            f.write(markdown(result["summary"], titles))
        if result["real_summary"]:
            f.write(markdown(result["real_summary"], titles))
        if result["small_summary"]:
            f.write(f"\nSmall requests (do no harm): {small_hdr.splitlines()[1]}\n"
                    + small_markdown(result["small_summary"], titles))
        if result["rgw_summary"]:
            f.write("\nCeph RGW (rgw = radosgw, osd = ceph-osd; s3proxy rows: proxy = s3proxy, "
                    "nodes = radosgw):\n"
                    + markdown([r for r in result["rgw_summary"]
                                if not r["scenario"].startswith("rgw-proxy-")], titles, ("rgw", "osd"))
                    + markdown([r for r in result["rgw_summary"]
                                if r["scenario"].startswith("rgw-proxy-")], titles))
        head, detail = targets.split(result.get("verdicts", []))
        if head:
            f.write("\nHeadline verdicts (" + targets.count_line(head) + "):\n\n"
                    + "".join(f"- {e['line']}\n" for e in head))
        if detail:
            f.write("\nDetail:\n\n" + "".join(f"- {e['line']}\n" for e in detail))


def print_reports(text_run, rgw_txt, titles, outdir):
    """The shim's text report for the proxy of text_run, and radosgw's;
    the path of the proxy's, or None."""
    txt = None
    if text_run:
        d = os.path.join(outdir, "reports", f"{text_run[2]}.shim.{text_run[3] + 1}")
        p = os.path.join(d, "s3proxy-report.txt")
        if os.path.exists(p):
            txt = p
            print(f"\n== poolshim's report for the proxy ({titles[text_run[2]]}, shim, "
                  f"repeat {text_run[3] + 1}) ==")
            with open(p) as f:
                sys.stdout.write(f.read())
    if rgw_txt:
        print("\n== poolshim's report for radosgw (GET and PUT of 1 and 16 MiB, "
              "POOLSHIM_BACKTRACE=8, not measured) ==")
        with open(rgw_txt) as f:
            sys.stdout.write(f.read())
    return txt


def print_files(outdir, made, txt, rgw_txt):
    print(f"\nresults: {outdir}/results.json" + "".join(f"\nplot:    {m}" for m in made)
          + (f"\nreport:  {txt}" if txt else "") + (f"\nreport:  {rgw_txt}" if rgw_txt else ""))
