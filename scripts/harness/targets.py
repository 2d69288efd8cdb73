# SPDX-License-Identifier: MIT
"""The targets, judged on ratios paired within each round (verdict.py),
so that they mean the same on any host (issue 39):

- every large scenario: the shim at least 1.0x no preload, and at least
  the best allocator a user would try instead (the peer with the highest
  median: jemalloc, tcmalloc, mimalloc or glibc's hugetlb tunable); its
  p99 at most 1.10x no preload's;
- next to each, the gain this host's fault price explains and the limit
  the scenario runs into (hostcost.py);
- small requests (issue 11) and radosgw (issue 16): no regression,
  at least 0.98x no preload; the shim only in nginx or haproxy
  (shim-proxy) likewise, since the server alone has little to gain.

Each entry is a dict: scenario, kind (verdict or info), the verdict when
there is one, and its printed line."""
import statistics

from .hostcost import expected_gain, limit
from .verdict import describe, paired, verdict, wants_more

PEERS = ("jemalloc", "tcmalloc", "mimalloc", "glibc-hugetlb")
BIG_TARGET = 1.0
NO_HARM = 0.98
P99_LIMIT = 1.10


def of(runs, scen, cfg):
    return [r for r in runs if r["scenario"] == scen and r["config"] == cfg]


def row_of(rows, scen, cfg):
    return next((r for r in rows if r["scenario"] == scen and r["config"] == cfg), None)


def best_peer(runs, scen, key="mib_s"):
    """The peer allocator with the highest median in scen, over the rounds
    every peer ran (rounds added later for one peer do not change the
    choice), or None."""
    by = {c: rs for c in PEERS if (rs := of(runs, scen, c))}
    if not by:
        return None
    common = set.intersection(*({r["repeat"] for r in rs} for rs in by.values()))
    meds = {c: statistics.median(r[key] for r in rs if r["repeat"] in common) for c, rs in by.items()}
    return max(meds, key=meds.get)


def judge(runs, scen, cfg, against, target, key="mib_s", higher=True, strict=False):
    return verdict(paired(of(runs, scen, cfg), of(runs, scen, against), key), target, higher, strict)


def entry(scen, v, label):
    return {"scenario": scen, "kind": "verdict", "verdict": v, "line": describe(v, label)}


def info(scen, text):
    return {"scenario": scen, "kind": "info", "verdict": None, "line": text}


def peer_verdicts(runs, scen):
    """(label, verdict) of the shim against no preload and the best peer:
    the comparisons more rounds are run for."""
    out = [("shim vs no preload", judge(runs, scen, "shim", "none", BIG_TARGET))]
    peer = best_peer(runs, scen)
    if peer:
        out.append((f"shim vs {peer} (best peer)", judge(runs, scen, "shim", peer, BIG_TARGET)))
    return out


def undecided(runs, scenarios):
    """The scenarios where another round could decide a comparison of
    peer_verdicts, with the configurations that round needs, those whose
    rounds all fell on one side of the target first (two more rounds
    decide them), then the rest, each group in the order given."""
    first, rest = [], []
    for scen in scenarios:
        if not of(runs, scen, "shim") or not of(runs, scen, "none"):
            continue
        vs = [v for _, v in peer_verdicts(runs, scen) if wants_more(v)]
        if vs:
            peer = best_peer(runs, scen)
            one_side = any("in all" in v["reason"] for v in vs)
            (first if one_side else rest).append((scen, ["none"] + ([peer] if peer else []) + ["shim"]))
    return first + rest


def p99_entry(runs, scen, cfg, title):
    v = judge(runs, scen, cfg, "none", P99_LIMIT, key="p99_ms", higher=False, strict=True)
    who = "shim" if cfg == "shim" else f"{cfg}"
    return entry(scen, v, f"{title}: {who}'s p99 vs no preload")


def big(runs, rows, host, titles, scenarios, real=False):
    """The entries of the large scenarios of one table (the demo stack's, or
    the real programs' when real)."""
    out = []
    for scen in scenarios:
        title = titles.get(scen, scen)
        if not of(runs, scen, "shim") or not of(runs, scen, "none"):
            continue
        if real:
            out.append(entry(scen, judge(runs, scen, "shim", "none", BIG_TARGET),
                             f"{title}: shim everywhere vs no preload"))
            if of(runs, scen, "sendfile"):
                # Against what a user runs instead: Debian's sendfile on, no shim.
                out.append(entry(scen, judge(runs, scen, "shim", "sendfile", BIG_TARGET),
                                 f"{title}: shim vs sendfile on without the shim (Debian's default)"))
            if of(runs, scen, "shim-proxy"):
                out.append(entry(scen, judge(runs, scen, "shim-proxy", "none", NO_HARM, strict=True),
                                 f"{title}: shim in the server only vs no preload (no harm)"))
        else:
            out += [entry(scen, v, f"{title}: {label}") for label, v in peer_verdicts(runs, scen)]
        out.append(p99_entry(runs, scen, "shim", title))
        if host:
            x, why = expected_gain(row_of(rows, scen, "none"), row_of(rows, scen, "shim"), host)
            out.append(info(scen, f"(expected) {title}: {why}"))
            out.append(info(scen, f"(limit)    {title}: {limit(scen, host)}"))
        if of(runs, scen, "baseline"):
            v = judge(runs, scen, "shim", "baseline", 1.0)
            out.append(info(scen, f"(info)     {title}: shim vs baseline shim {v['med']:.2f}x "
                                  f"[{v['lo']:.2f}-{v['hi']:.2f}]" if v["med"] else
                            f"(info)     {title}: shim vs baseline shim: not paired"))
    return out


def small(runs, host, titles, scenarios):
    """Small requests: no regression (requests/s, paired), the p99."""
    out = []
    for scen in scenarios:
        title = titles.get(scen, scen)
        if not of(runs, scen, "none"):
            continue
        for cfg in ("shim", "baseline"):
            if of(runs, scen, cfg):
                who = "shim" if cfg == "shim" else "baseline shim"
                out.append(entry(scen, judge(runs, scen, cfg, "none", NO_HARM, key="ops_s", strict=True),
                                 f"{title}: {who} vs no preload, requests/s (no harm)"))
        if of(runs, scen, "shim"):
            out.append(p99_entry(runs, scen, "shim", title))
    if host and out:
        out.append(info("small", f"(limit)    small requests: {limit('', host, small=True)}"))
    return out


def rgw(runs, titles, scenarios):
    """radosgw (issue 16): no regression under the shim, paired."""
    out = []
    for scen in scenarios:
        title = titles.get(scen, scen)
        who = "s3proxy and radosgw" if scen.startswith("rgw-proxy-") else "radosgw"
        for cfg, what in (("shim", ""), ("shim-osd", " (and the OSD)"), ("baseline", " (baseline shim)")):
            if of(runs, scen, cfg) and of(runs, scen, "none"):
                out.append(entry(scen, judge(runs, scen, cfg, "none", NO_HARM, strict=True),
                                 f"{title}: {who} under the shim{what} vs no preload (no harm)"))
    return out


def lines(entries):
    """The printed lines, a blank line between scenarios."""
    out, last = [], None
    for e in entries:
        if last is not None and e["scenario"] != last:
            out.append("")
        out.append(e["line"])
        last = e["scenario"]
    return out
