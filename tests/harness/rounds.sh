#!/bin/sh
# SPDX-License-Identifier: MIT
# The demo decides (issue 46): the decision rule on synthetic paired
# rounds (met, MISSED, at par, undecided; no range under 5 rounds at 90%;
# the band and the coverage as options), and scripts/harness/rounds.py
# adding rounds on synthetic round data: only for undecided headline rows,
# only their two configurations, fewest rounds first, stopping when every
# headline row is decided or at par, at --max-rounds, and before the
# budget's end; the proxies' configurations side by side in one run a
# round; the verdicts printed with headline and detail apart and the
# headline counted.  No process is started: the runner is a model and
# the clock is fake.
set -u
: "${PS_TOP_SRCDIR:?PS_TOP_SRCDIR must be set (make check does it)}"
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
PYTHONDONTWRITEBYTECODE=1 exec $PYTHON - "$PS_TOP_SRCDIR/scripts" <<'PY'
import contextlib, io, sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from harness import targets, verdict as V
from harness.verdict import verdict, describe

fails = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)

# -- The rule on synthetic paired ratios --------------------------------
v = verdict([1.21, 1.35, 1.18, 1.40, 1.27], 1.0)
check(v["state"] == "met" and (v["lo"], v["hi"]) == (1.18, 1.40),
      f"five rounds wholly above the target: met ({describe(v, 'x')})")
v = verdict([0.88, 0.93, 0.91, 0.86, 0.95], 1.0)
check(v["state"] == "MISSED" and describe(v, "x").startswith("MISSED"),
      f"five rounds wholly below: MISSED ({describe(v, 'x')})")
v = verdict([0.98, 1.03, 1.01, 0.97, 1.04], 1.0)
line = describe(v, "haproxy")
check(v["state"] == "at par" and "[0.97-1.04]" in line and "5%" in line,
      f"a range across the target within 5% of 1x: at par, with the range ({line})")
v = verdict([0.98, 1.03, 1.01, 0.93, 1.04], 1.0)
check(v["state"] == "undecided" and "straddles" in v["reason"],
      f"a range across the target reaching past the band: undecided ({describe(v, 'x')})")
v = verdict([1.46, 2.49, 1.88], 1.0)
check(v["state"] == "undecided" and "5 rounds" in v["reason"],
      f"three rounds, however far above, make no 90% range: undecided ({describe(v, 'x')})")
v = verdict([1.46, 2.49, 1.88, 1.7], 1.0)
check(v["state"] == "undecided", "nor do four")
check(verdict([0.97, 1.0, 1.03], 1.0)["state"] == "undecided", "nor is three rounds' at par")
# A no-harm target (0.98) and a p99 limit (at most 1.10x).
check(verdict([0.99, 1.02, 1.0, 1.01, 0.985], 0.98)["state"] == "met", "no harm, wholly past 0.98: met")
check(verdict([0.96, 1.02, 1.0, 1.01, 0.97], 0.98)["state"] == "at par", "no harm, across 0.98 within 5%: at par")
check(verdict([1.2, 1.15, 1.3, 1.12, 1.25], 1.10, higher=False)["state"] == "MISSED",
      "a p99 ratio wholly above its limit: MISSED")
# The options: a wider band makes at par what 5% leaves undecided; a
# higher coverage wants more rounds.
r = [0.98, 1.03, 1.01, 0.93, 1.04]
check(verdict(r, 1.0, band=0.08)["state"] == "at par", "--par-band 0.08 makes [0.93-1.04] at par")
check(V.min_rounds(0.90) == 5 and V.min_rounds(0.95) == 6, "5 rounds at 90%, 6 at 95%")
check(verdict([1.21, 1.35, 1.18, 1.40, 1.27], 1.0, cover=0.95)["state"] == "undecided",
      "at 95% five rounds decide nothing")
# More rounds narrow the range: order statistics from 8 rounds.
xs = [0.96, 1.06, 1.08, 1.09, 1.10, 1.12, 1.13, 1.15, 1.16, 1.30]
check(verdict(xs, 1.0)["state"] == "met" and verdict(xs[:7], 1.0)["state"] == "undecided",
      f"undecided in 7 rounds, met in 10 ({describe(verdict(xs, 1.0), 'x')})")

# -- Rounds added on synthetic round data --------------------------------
from harness import rounds

NOISE = [1.0, 0.97, 1.03, 0.99, 1.02, 0.98, 1.01, 0.985, 1.015, 0.995, 1.005]
SMALL = [1.0, 0.99, 1.01, 0.995, 1.005, 0.992, 1.008]
def model(scen, cfg, rep):
    """MiB/s of one synthetic run (rep from 1)."""
    k = "none tcmalloc shim sendfile".split().index(cfg) if cfg in "none tcmalloc shim sendfile" else 0
    n = NOISE[(3 * rep + k) % len(NOISE)]
    if scen == "get-16m":        # the shim clearly ahead of both
        return {"none": 500, "tcmalloc": 600, "shim": 700}[cfg] * n
    if scen == "put-16m":        # at par with none; against tcmalloc 0.8x or 1.25x by turns
        if cfg == "tcmalloc":
            return 400 if rep % 2 else 625
        return 500 * SMALL[(2 * rep + k) % len(SMALL)]
    if scen == "get-1m":         # detail only: straddles for ever
        return {"none": 500, "tcmalloc": 500, "shim": 500 * (0.8 if rep % 2 else 1.3)}[cfg]
    if scen == "nginx-directio": # the shim behind sendfile
        return {"none": 400, "sendfile": 1000, "shim": 900}[cfg] * n

class Args:
    seconds, warmup, small_seconds, small_warmup = 2.0, 0.5, 1.0, 0.3
    max_rounds = 8
class Sel:
    scenarios = ["get-1m", "get-16m", "put-16m"]
    real_setups = ["nginx-directio"]
    plan_configs = {"get-1m": ["none", "tcmalloc", "shim"], "get-16m": ["none", "tcmalloc", "shim"],
                    "put-16m": ["none", "tcmalloc", "shim"], "nginx-directio": ["none", "sendfile", "shim"]}
TITLES = {"get-1m": "GET 1 MiB", "get-16m": "GET 16 MiB", "put-16m": "PUT 16 MiB",
          "nginx-directio": "nginx directio"}
WALL = 4.0

def planned(repeat):
    res = {"runs": [], "real_runs": [], "rgw_runs": []}
    for rep in range(1, repeat + 1):
        for s in Sel.scenarios + Sel.real_setups:
            for c in Sel.plan_configs[s]:
                res["real_runs" if s in Sel.real_setups else "runs"].append(
                    {"scenario": s, "config": c, "repeat": rep, "mib_s": model(s, c, rep),
                     "p99_ms": 100.0, "wall_s": WALL})
    return res

class Clock:
    t = 1000.0
    def __call__(self):
        return self.t

def drive(res, budget_s, max_rounds=8):
    clock, log = Clock(), []
    def run(kind, cfg, scen, rep):
        log.append((kind, scen, cfg, rep + 1))
        clock.t += WALL
        res["real_runs" if kind == "real" else "runs"].append(
            {"scenario": scen, "config": cfg, "repeat": rep + 1, "mib_s": model(scen, cfg, rep + 1),
             "p99_ms": 100.0, "wall_s": WALL})
    Args.max_rounds = max_rounds
    r = rounds.add_rounds(Args, Sel, res, TITLES, clock() + budget_s, run, clock=clock)
    return r, log, clock

def states(res):
    es = rounds.headline_entries(res, Sel, TITLES)
    return {(e["scenario"], tuple(e["pair"])): e["verdict"]["state"] for e in es
            if e["verdict"] and e["headline"]}, es

res = planned(3)
st, _ = states(res)
check(st and set(st.values()) == {"undecided"}, f"after 3 planned rounds every headline row is undecided ({st})")
hl = {k for k in st}
check(hl == {("get-16m", ("shim", "none")), ("get-16m", ("shim", "tcmalloc")), ("put-16m", ("shim", "none")),
             ("put-16m", ("shim", "tcmalloc")), ("nginx-directio", ("shim", "sendfile"))},
      f"headline rows: GET/PUT 16 MiB against none and the best peer, directio against sendfile ({sorted(hl)})")

# An ample budget: rounds until decided, or at --max-rounds.
r, log, clock = drive(res, 10_000)
st, es = states(res)
print("\n".join(targets.lines(es)))
check(st[("get-16m", ("shim", "none"))] == "met" and st[("get-16m", ("shim", "tcmalloc"))] == "met",
      "GET 16 MiB: met against none and the peer once 5 rounds make a range")
check(st[("put-16m", ("shim", "none"))] == "at par", "PUT 16 MiB against none: at par")
check(st[("nginx-directio", ("shim", "sendfile"))] == "MISSED", "directio against sendfile: MISSED")
check(st[("put-16m", ("shim", "tcmalloc"))] == "undecided" and rounds.rounds_of(res, "put-16m") == 8
      and r["stop"] == "max rounds" and len(r["undecided"]) == 1,
      f"the row that straddles for ever stops at --max-rounds 8 ({r['stop']}, {r['undecided']})")
check(rounds.rounds_of(res, "get-16m") == 5 and rounds.rounds_of(res, "nginx-directio") == 5,
      f"decided rows stop getting rounds at 5 ({r['per_scenario']})")
check(not any(s == "get-1m" for _, s, _, _ in log), "a detail row gets no rounds, undecided as it is")
check({c for _, s, c, _ in log if s == "nginx-directio"} == {"shim", "sendfile"}
      and all(k == "real" for k, s, _, _ in log if s == "nginx-directio"),
      "an added round runs the two configurations the row compares, and no other")
late = [c for _, s, c, rep in log if s == "put-16m" and rep > 5]
check(set(late) == {"shim", "tcmalloc"}, f"once at par against none, PUT 16 MiB's rounds leave none out ({sorted(set(late))})")
firsts = [(rep, [c for _, s2, c, r2 in log if s2 == "get-16m" and r2 == rep][0]) for rep in (4, 5)]
check(firsts[0][1] != firsts[1][1], f"the order within a round rotates ({firsts})")

# A tight budget: 50 s at 4 s a run.  Fewest rounds first, in the plan's
# order: GET 16 MiB (3 runs), PUT 16 MiB (3), directio (2) = 32 s, then
# GET 16 MiB again = 44 s; the next round would end past 50 s.
res = planned(3)
t0 = Clock.t
r, log, clock = drive(res, 50)
check(r["stop"] == "budget" and clock.t - t0 <= 50 and r["per_scenario"] == {"get-16m": 2, "put-16m": 1, "nginx-directio": 1},
      f"a tight budget: every undecided row its round before any its second, none past the budget "
      f"({r['per_scenario']}, {clock.t - t0:g} s, {r['stop']})")
check(r["undecided"] and all(l.startswith("undecided") for l in r["undecided"]),
      f"what the budget left undecided is returned ({len(r['undecided'])} rows)")
res = planned(3)
r, log, clock = drive(res, 0)
check(r["added"] == 0 and not log and r["stop"] == "budget", "--budget 0 adds nothing")
res = planned(5)
r, log, clock = drive(res, 10_000)
st, _ = states(res)
check(r["added"] == 3 and set(st.values()) - {"undecided"} and r["per_scenario"] == {"put-16m": 3},
      f"with 5 planned rounds only the undecided row's scenario gets rounds ({r['per_scenario']})")

# -- The printed verdicts: headline apart, counted; the rule and budget said
from harness import output
class Parts:
    big_demo = ["get-1m", "get-16m", "put-16m"]
    big_real = ["nginx-directio"]
    small_all = []
class Sel2(Sel):
    rgw_setups = []
res = planned(3)
r, _, _ = drive(res, 10_000)
res.update(summary=[], real_summary=[], rounds=r,
           settings={"coverage": 0.9, "par_band": 0.05, "budget_min": 13.5, "max_rounds": 8})
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    output.print_targets(res, Sel2, Parts, TITLES)
text = buf.getvalue()
print(text)
head = text[text.find("-- Headline"):text.find("-- Detail")]
check("-- Headline" in text and "GET 1 MiB" not in head and "GET 1 MiB" in text[text.find("-- Detail"):],
      "headline rows and detail rows are printed apart")
check("headline: 2 met, 1 MISSED, 1 at par, 1 undecided" in text,
      "the last line counts the headline rows only")
check("within 5% of 1x (--par-band)" in text and "90%" in text and "13.5 min" in text
      and "--max-rounds" in text and "Rounds added: " in text and "stopped:" in text,
      "the rule, the budget and what the rounds did are said")

# -- The proxies' configurations side by side ------------------------------
# nginx-proxy and haproxy run the configurations that differ in the proxy
# alone in one run each round (kind "side"), planned and added alike; the
# shim everywhere (storaged under it too) runs apart.
from harness.scenarios import make_plan
class SelP:
    scenarios, rgw_setups = [], []
    real_setups = ["nginx-proxy", "haproxy"]
    plan_configs = {"nginx-proxy": ["none", "proxy-defaults", "shim", "shim-proxy"],
                    "haproxy": ["none", "shim", "shim-proxy"]}
plan = make_plan(3, ["none", "shim"], SelP)
sides = [(c, s) for k, c, s, _ in plan if k == "side"]
check(len(sides) == 6 and {s for _, s in sides} == {"nginx-proxy", "haproxy"}
      and all(set(c) == {"none", "proxy-defaults", "shim-proxy"} for c, s in sides if s == "nginx-proxy")
      and all(set(c) == {"none", "shim-proxy"} for c, s in sides if s == "haproxy")
      and sorted((c, s) for k, c, s, _ in plan if k == "real") == [("shim", "haproxy")] * 3 + [("shim", "nginx-proxy")] * 3
      and len({c for c, s in sides if s == "nginx-proxy"}) > 1,
      f"planned: one side-by-side run a round per proxy, its order rotated, the shim everywhere apart ({plan})")
def proxy_model(scen, cfg, rep):
    if cfg == "shim-proxy":      # 0.97x or 1.03x by turns in the planned rounds, then 1.02x
        return 1000 * (1.02 if rep > 3 else (0.97 if rep % 2 else 1.03))
    return {"none": 1000, "proxy-defaults": 700, "shim": 1500}[cfg]
resp = {"runs": [], "real_runs": [], "rgw_runs": []}
for rep in range(1, 4):
    for s_ in SelP.real_setups:
        for c in SelP.plan_configs[s_]:
            resp["real_runs"].append({"scenario": s_, "config": c, "repeat": rep, "mib_s": proxy_model(s_, c, rep),
                                      "p99_ms": 100.0, "wall_s": WALL})
clock, logp = Clock(), []
def runp(kind, cfg, scen, rep):
    logp.append((kind, scen, cfg, rep + 1))
    for c in (cfg if kind == "side" else (cfg,)):
        clock.t += WALL
        resp["real_runs"].append({"scenario": scen, "config": c, "repeat": rep + 1,
                                  "mib_s": proxy_model(scen, c, rep + 1), "p99_ms": 100.0, "wall_s": WALL})
Args.max_rounds = 8
rp = rounds.add_rounds(Args, SelP, resp, {"nginx-proxy": "nginx proxy", "haproxy": "haproxy"},
                       clock() + 10_000, runp, clock=clock)
check(logp and all(k == "side" and set(c) == {"none", "shim-proxy"} for k, _, c, _ in logp)
      and {s for _, s, _, _ in logp} == {"nginx-proxy", "haproxy"} and rp["stop"] == "decided",
      f"added rounds of the proxies: one side-by-side run of the two configurations compared ({logp[:4]}, {rp['stop']})")
sys.exit(1 if fails else 0)
PY
