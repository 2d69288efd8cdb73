# SPDX-License-Identifier: MIT
"""From runs to rows: the median [min-max] of each scenario under each
configuration over the repeats, and ratios of the medians against no
preload (the tables; the verdicts pair runs by round: targets.py)."""
import statistics


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs, scenarios, configs):
    """A row per scenario and configuration that ran: medians and spreads
    over the repeats, per-process figures summed by group (proxy; nodes =
    node1 and node2), and ratios against no preload."""
    rows = []
    for scen in scenarios:
        for cfg in configs:
            rs = [r for r in runs if r["scenario"] == scen and r["config"] == cfg]
            if not rs:
                continue
            mib = [r["mib_s"] for r in rs]
            row = {"scenario": scen, "config": cfg, "runs": len(rs),
                   "mib_s": med(mib), "mib_s_min": min(mib), "mib_s_max": max(mib),
                   "ops_s": med(r["ops_s"] for r in rs),
                   "ops_s_min": min(r["ops_s"] for r in rs), "ops_s_max": max(r["ops_s"] for r in rs),
                   "p50_ms": med(r["p50_ms"] for r in rs), "p99_ms": med(r["p99_ms"] for r in rs),
                   "p99_ms_min": min((r["p99_ms"] for r in rs if r["p99_ms"] is not None), default=None),
                   "p99_ms_max": max((r["p99_ms"] for r in rs if r["p99_ms"] is not None), default=None),
                   "data_errors": sum(r["mismatches"] for r in rs),
                   "failed_ops": sum(sum(r["errors"].values()) if isinstance(r["errors"], dict)
                                     else r["errors"] for r in rs)}
            for grp, names in (("proxy", ["proxy"]), ("nodes", ["node1", "node2"])):
                present = [n for n in names if n in rs[0]["procs"]]
                if not present:
                    continue
                for key in ("faults_per_op", "cpu_s_per_gib", "cpu_us_per_op", "syscalls_per_op"):
                    vals = []
                    for r in rs:
                        v = [r["procs"][n].get(key) for n in present]
                        vals.append(None if any(x is None for x in v) else sum(v))
                    row[f"{grp}_{key}"] = med(vals)
            rows.append(row)
    base = {r["scenario"]: r for r in rows if r["config"] == "none"}
    for r in rows:
        b = base.get(r["scenario"])
        r["x_none"] = r["mib_s"] / b["mib_s"] if b and b["mib_s"] else None
        r["p99_x_none"] = r["p99_ms"] / b["p99_ms"] if b and b["p99_ms"] and r["p99_ms"] else None
    return rows
