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

Headline rows (issue 46) are the comparisons the README's "Should I
deploy it?" rests on, HEADLINE below: the demo stack's GET and PUT 16 MiB
against no preload and the best peer, nginx proxying with the shim in nginx
only and nginx directio under the shim, each against the better of the
settings without the shim run beside it (the same settings, and nginx's
default proxy buffers or Debian's sendfile), and haproxy with the shim in
haproxy only.  Rounds are added where one of
them is undecided (rounds.py), and the summary line counts them; every
other verdict is a detail row, printed apart and not counted.

Each entry is a dict: scenario, kind (verdict or info), the verdict when
there is one, headline (bool), pair (the two configurations it compares,
for verdicts) and its printed line."""
import statistics

from .hostcost import expected_gain, limit
from .scenarios import NO_SHIM_ALTERNATIVES
from .verdict import STATES, describe, paired, verdict, wants_more

PEERS = ("jemalloc", "tcmalloc", "mimalloc", "glibc-hugetlb")
BIG_TARGET = 1.0
NO_HARM = 0.98
P99_LIMIT = 1.10
# (scenario, configuration, against): "peer" stands for the best peer,
# "best" for the better of the setup's settings without the shim (none and
# its scenarios.NO_SHIM_ALTERNATIVES).
HEADLINE = {("get-16m", "shim", "none"), ("get-16m", "shim", "peer"),
            ("put-16m", "shim", "none"), ("put-16m", "shim", "peer"),
            ("nginx-proxy", "shim-proxy", "best"), ("nginx-directio", "shim", "best"),
            ("haproxy", "shim-proxy", "none")}
HEADLINE_SCENARIOS = sorted({s for s, _, _ in HEADLINE})


def of(runs, scen, cfg):
    return [r for r in runs if r["scenario"] == scen and r["config"] == cfg]


def row_of(rows, scen, cfg):
    return next((r for r in rows if r["scenario"] == scen and r["config"] == cfg), None)


def best_peer(runs, scen, key="mib_s", among=PEERS):
    """The peer allocator (or configuration of among) with the highest
    median in scen, over the rounds every one of them ran (rounds added
    later for one do not change the choice), or None."""
    by = {c: rs for c in among if (rs := of(runs, scen, c))}
    if not by:
        return None
    common = set.intersection(*({r["repeat"] for r in rs} for rs in by.values()))
    meds = {c: statistics.median(r[key] for r in rs if r["repeat"] in common) for c, rs in by.items()}
    return max(meds, key=meds.get)


def judge(runs, scen, cfg, against, target, key="mib_s", higher=True):
    return verdict(paired(of(runs, scen, cfg), of(runs, scen, against), key), target, higher)


def entry(scen, v, label, pair=None, headline=False):
    """A verdict's entry; pair: (configuration, against), headline: one
    of HEADLINE (the caller says so, key "mib_s" only)."""
    return {"scenario": scen, "kind": "verdict", "verdict": v, "line": describe(v, label),
            "pair": list(pair) if pair else None, "headline": headline}


def info(scen, text):
    return {"scenario": scen, "kind": "info", "verdict": None, "line": text, "headline": False}


def peer_entries(runs, scen, title):
    """The shim against no preload and against the best peer."""
    out = [entry(scen, judge(runs, scen, "shim", "none", BIG_TARGET), f"{title}: shim vs no preload",
                 ("shim", "none"), (scen, "shim", "none") in HEADLINE)]
    peer = best_peer(runs, scen)
    if peer:
        out.append(entry(scen, judge(runs, scen, "shim", peer, BIG_TARGET),
                         f"{title}: shim vs {peer} (best peer)", ("shim", peer),
                         (scen, "shim", "peer") in HEADLINE))
    return out


def best_no_shim(runs, scen):
    """The better of scen's settings without the shim that ran (none, and
    sendfile or proxy-defaults), by median over their common rounds; the
    number of them."""
    among = ("none", NO_SHIM_ALTERNATIVES[scen]) if scen in NO_SHIM_ALTERNATIVES else ("none",)
    return best_peer(runs, scen, among=among), sum(1 for c in among if of(runs, scen, c))


def real_entry(runs, scen, cfg, against, target, label):
    """A real setup's row; a headline row when HEADLINE names it, or names
    "best" and against is the better setting without the shim (the label
    then says so)."""
    best, n = best_no_shim(runs, scen)
    headline = (scen, cfg, against) in HEADLINE
    if (scen, cfg, "best") in HEADLINE and against == best:
        headline = True
        if n > 1:
            label += f", the better of {n} settings without the shim here"
    return entry(scen, judge(runs, scen, cfg, against, target), label, (cfg, against), headline)


def p99_entry(runs, scen, cfg, title):
    v = judge(runs, scen, cfg, "none", P99_LIMIT, key="p99_ms", higher=False)
    who = "shim" if cfg == "shim" else f"{cfg}"
    return entry(scen, v, f"{title}: {who}'s p99 vs no preload", (cfg, "none"))


def big(runs, rows, host, titles, scenarios, real=False):
    """The entries of the large scenarios of one table (the demo stack's, or
    the real programs' when real)."""
    out = []
    for scen in scenarios:
        title = titles.get(scen, scen)
        if not of(runs, scen, "shim") or not of(runs, scen, "none"):
            continue
        if real:
            out.append(real_entry(runs, scen, "shim", "none", BIG_TARGET,
                                  f"{title}: shim everywhere vs no preload"))
            if of(runs, scen, "sendfile"):
                # Against what a user runs instead: Debian's sendfile on, no shim.
                out.append(real_entry(runs, scen, "shim", "sendfile", BIG_TARGET,
                                      f"{title}: shim vs sendfile on without the shim (Debian's default)"))
            if of(runs, scen, "shim-proxy"):
                out.append(real_entry(runs, scen, "shim-proxy", "none", NO_HARM,
                                      f"{title}: shim in the server only vs no preload (no harm)"))
                if of(runs, scen, "proxy-defaults"):
                    # Against what a user runs instead: proxy_pass with nginx's
                    # default proxy buffers, no shim.
                    out.append(real_entry(runs, scen, "shim-proxy", "proxy-defaults", NO_HARM,
                                          f"{title}: shim in the server only vs nginx's default "
                                          f"proxy buffers without the shim (no harm)"))
        else:
            out += peer_entries(runs, scen, title)
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
                out.append(entry(scen, judge(runs, scen, cfg, "none", NO_HARM, key="ops_s"),
                                 f"{title}: {who} vs no preload, requests/s (no harm)", (cfg, "none")))
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
                out.append(entry(scen, judge(runs, scen, cfg, "none", NO_HARM),
                                 f"{title}: {who} under the shim{what} vs no preload (no harm)",
                                 (cfg, "none")))
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


def split(entries):
    """(headline entries, detail entries): a scenario's info lines go with
    its detail rows."""
    return [e for e in entries if e["headline"]], [e for e in entries if not e["headline"]]


def counts(entries):
    """{state: how many} of the verdict entries given."""
    states = [e["verdict"]["state"] for e in entries if e["verdict"]]
    return {s: states.count(s) for s in STATES}


def count_line(entries):
    c = counts(entries)
    return ", ".join(f"{c[s]} {s}" for s in STATES)


def undecided_headline(entries):
    """The headline entries that another round could decide."""
    return [e for e in entries if e["headline"] and e["verdict"] and wants_more(e["verdict"])]
