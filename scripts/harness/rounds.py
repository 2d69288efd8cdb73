# SPDX-License-Identifier: MIT
"""Rounds added after the plan (issue 46): while a headline row
(targets.HEADLINE) is undecided, another paired round of its scenario, the
two configurations each undecided row compares and nothing else, back to
back in an order rotated per round (side by side in one run for the proxy
setups, scenarios.SIDE_BY_SIDE), within the time budget and up to
--max-rounds rounds per scenario.  The scenario with the fewest rounds goes
first (two rounds bring a 3-round row to the 5 that make a range), so that
a tight budget is spread over every undecided row rather than spent on
one.  No I/O of its own: the runner, the clock and the messages are passed
in, so that tests/harness/rounds.sh drives it on synthetic rounds."""
import time

from . import targets
from .scenarios import SMALL_NAMES, durations, side_group

# Seconds a run takes beside its measured and warm-up seconds (start, stop,
# the servers' reports): the estimate before a scenario has run once.
RUN_OVERHEAD = 1.5


def headline_entries(result, sel, titles):
    """The verdict entries of the large tables (headline and detail), from
    the runs so far; no host costs, no summaries."""
    big_demo = [s for s in sel.scenarios if s not in SMALL_NAMES]
    big_real = [s for s in sel.real_setups if s not in SMALL_NAMES]
    return (targets.big(result["runs"], [], None, titles, big_demo)
            + targets.big(result["real_runs"], [], None, titles, big_real, real=True))


def rounds_of(result, scen):
    """How many rounds scen has had (its highest round number)."""
    return max((r["repeat"] for k in ("runs", "real_runs") for r in result[k]
                if r["scenario"] == scen), default=0)


def run_cost(args, result, scen, cfg):
    """The seconds one more run of scen under cfg should take: the mean of
    its runs so far (wall_s), else the planned seconds and the overhead."""
    walls = [r["wall_s"] for k in ("runs", "real_runs") for r in result[k]
             if r["scenario"] == scen and r["config"] == cfg and "wall_s" in r]
    if walls:
        return sum(walls) / len(walls)
    return sum(durations(args, scen)) + RUN_OVERHEAD


def wanted(result, sel, titles, max_rounds):
    """[(scenario, configurations, rounds so far, the undecided rows' lines)]
    for every scenario with an undecided headline row and fewer than
    max_rounds rounds; fewest rounds first, then in the plan's order."""
    by = {}
    for e in targets.undecided_headline(headline_entries(result, sel, titles)):
        by.setdefault(e["scenario"], []).append(e)
    order = sel.scenarios + sel.real_setups
    out = []
    for scen in order:
        if scen not in by or rounds_of(result, scen) >= max_rounds:
            continue
        pairs = {c for e in by[scen] for c in e["pair"]}
        cfgs = [c for c in sel.plan_configs[scen] if c in pairs]
        out.append((scen, cfgs, rounds_of(result, scen), [e["line"] for e in by[scen]]))
    out.sort(key=lambda t: t[2])
    return out


def add_rounds(args, sel, result, titles, deadline, run, clock=time.monotonic, say=lambda m: None):
    """Paired rounds added until every headline row is decided or at par,
    the next round would end past deadline (a clock() time), or every
    undecided scenario has max_rounds rounds.  run(kind, cfg, scen, rep)
    runs one and adds its record (with wall_s) to result.  A dict: rounds
    added, per scenario, seconds spent, why it stopped ("decided",
    "budget", "max rounds"), and the undecided headline rows left."""
    t0 = clock()
    added, per = 0, {}
    while True:
        todo = wanted(result, sel, titles, args.max_rounds)
        if not todo:
            left = targets.undecided_headline(headline_entries(result, sel, titles))
            why = "max rounds" if left else "decided"
            break
        fits = [t for t in todo
                if clock() + sum(run_cost(args, result, t[0], c) for c in t[1]) <= deadline]
        if not fits:
            why = "budget"
            break
        scen, cfgs, n, lines = fits[0]
        if not added:
            say(f"demo: adding paired rounds where a headline row is undecided, until "
                f"{max(0.0, deadline - clock()):.0f} s from now (--budget)")
        kind = "demo" if scen in sel.scenarios else "real"
        turn = cfgs[n % len(cfgs):] + cfgs[:n % len(cfgs)]
        group = side_group(scen, turn) if kind == "real" else []
        if group:
            run("side", tuple(group), scen, n)
        for cfg in turn:
            if cfg not in group:
                run(kind, cfg, scen, n)
        added += 1
        per[scen] = per.get(scen, 0) + 1
    left = [e["line"] for e in targets.undecided_headline(headline_entries(result, sel, titles))]
    return {"added": added, "per_scenario": per, "seconds": round(clock() - t0, 1), "stop": why,
            "undecided": left}
