# SPDX-License-Identifier: MIT
"""From runs to rows: the median [min-max] of each scenario under each
configuration over the repeats, ratios against no preload, and the
issues' targets, each with what was measured."""
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


def targets(rows, real_rows):
    """issue 6's expected results, each with what was measured."""
    def get(rs, scen, cfg):
        return next((r for r in rs if r["scenario"] == scen and r["config"] == cfg), None)

    out = []

    def ratio(rs, scen, want, label, against=("none",)):
        shim = get(rs, scen, "shim")
        others = [get(rs, scen, c) for c in against]
        others = [o for o in others if o and o["mib_s"]]
        if not shim or not others:
            return
        best = max(others, key=lambda o: o["mib_s"])
        x = shim["mib_s"] / best["mib_s"]
        out.append(f"{'met   ' if x >= want else 'MISSED'} {label}: {x:.2f}x "
                   f"({shim['mib_s']:.0f} vs {best['config']} {best['mib_s']:.0f} MiB/s; target {want}x)")

    ratio(rows, "get-16m", 2.0, "GET 16 MiB, shim vs no preload")
    ratio(rows, "get-16m", 1.2, "GET 16 MiB, shim vs the best allocator alternative",
          ("jemalloc", "tcmalloc", "mimalloc", "glibc-hugetlb"))
    ratio(rows, "put-16m", 1.5, "PUT 16 MiB, shim vs no preload")
    ratio(real_rows, "nginx-directio", 2.0, "nginx directio files, shim vs no preload")
    for label, rs in (("demo", rows), ("real", real_rows)):
        over = [r for r in rs if r.get("p99_x_none") and r["p99_x_none"] > 1.10]
        worse = [r for r in over if r["config"].startswith("shim")]
        if any(r["config"].startswith("shim") for r in rs):
            out.append(("met   " if not worse else "MISSED") + f" {label}: the shim's p99 within "
                       "1.10x no preload" + ("" if not worse else ": " + ", ".join(
                           f"{r['scenario']}/{r['config']} {r['p99_x_none']:.2f}x" for r in worse)))
        others = [r for r in over if not r["config"].startswith("shim")]
        if others:
            out.append(f"(info) {label}: p99 over 1.10x no preload under " + ", ".join(
                f"{r['scenario']}/{r['config']} {r['p99_x_none']:.2f}x" for r in others))
    for scen in ("nginx-proxy", "haproxy"):
        for cfg, what in (("shim", "everywhere"), ("shim-proxy", "in the proxy only")):
            shim, none = get(real_rows, scen, cfg), get(real_rows, scen, "none")
            if shim and none and none["mib_s"]:
                x = shim["mib_s"] / none["mib_s"]
                out.append(f"{'met   ' if x >= 0.98 else 'MISSED'} {scen}, shim {what}: no regression "
                           f"(>= 0.98x): {x:.2f}x")
    return out


def rgw_targets(rows):
    """issue 16's target: radosgw (and s3proxy in front of it) under the
    shim no slower than without (>= 0.98x), per setup."""
    def get(scen, cfg):
        return next((r for r in rows if r["scenario"] == scen and r["config"] == cfg), None)

    out = []
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        none = get(scen, "none")
        if not none or not none["mib_s"]:
            continue
        who = "s3proxy and radosgw" if scen.startswith("rgw-proxy-") else "radosgw"
        for cfg in ("shim", "shim-osd", "baseline"):
            r = get(scen, cfg)
            if not r:
                continue
            x = r["mib_s"] / none["mib_s"]
            what = f"{scen}, {who} under the shim" + {"shim": "", "shim-osd": " (and the OSD)",
                                                      "baseline": " (baseline shim)"}[cfg]
            mark = "(info)" if cfg == "baseline" else ("met   " if x >= 0.98 else "MISSED")
            out.append(f"{mark} {what}: no regression (>= 0.98x): {x:.3f}x "
                       f"({r['mib_s']:.0f} [{r['mib_s_min']:.0f}-{r['mib_s_max']:.0f}] vs none "
                       f"{none['mib_s']:.0f} [{none['mib_s_min']:.0f}-{none['mib_s_max']:.0f}] MiB/s)")
    return out


SMALL_TARGET = 0.98


def small_targets(rows):
    """issue 11's target: no regression on small requests (requests/s >= 0.98x
    no preload), with the baseline shim's figures beside it when it ran."""
    def get(scen, cfg):
        return next((r for r in rows if r["scenario"] == scen and r["config"] == cfg), None)

    out = []
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        none, shim, base = get(scen, "none"), get(scen, "shim"), get(scen, "baseline")
        if not none or not none["ops_s"]:
            continue
        if shim:
            x = shim["ops_s"] / none["ops_s"]
            p99 = f"; p99 {shim['p99_x_none']:.2f}x" if shim["p99_x_none"] else ""
            out.append(f"{'met   ' if x >= SMALL_TARGET else 'MISSED'} {scen}, shim: no regression "
                       f"(>= {SMALL_TARGET}x): {x:.3f}x ({shim['ops_s']:.0f} vs none "
                       f"{none['ops_s']:.0f} req/s{p99})")
        if base:
            x = base["ops_s"] / none["ops_s"]
            vs = f"; shim vs baseline {shim['ops_s'] / base['ops_s']:.3f}x" if shim and base["ops_s"] else ""
            out.append(f"(info) {scen}, baseline shim: {x:.3f}x ({base['ops_s']:.0f} req/s){vs}")
    shims = [r for r in rows if r["config"] == "shim"]
    if shims:
        worse = [r for r in shims if r.get("p99_x_none") and r["p99_x_none"] > 1.10]
        out.append(("met   " if not worse else "MISSED") + " small: the shim's p99 within 1.10x no "
                   "preload" + ("" if not worse else ": " + ", ".join(
                       f"{r['scenario']} {r['p99_x_none']:.2f}x" for r in worse)))
    return out
