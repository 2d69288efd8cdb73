# SPDX-License-Identifier: MIT
"""What the harness can run: the demo stack's scenarios, the real programs'
setups (nginx, haproxy, wrk) and the radosgw setups, under which
configurations each runs, how long, and the interleaved plan of runs.
"""

# name, title, loadgen arguments
SCENARIOS = [
    ("get-1m", "GET 1 MiB", ["--op", "get", "--size", "1MiB"]),
    ("get-16m", "GET 16 MiB", ["--op", "get", "--size", "16MiB"]),
    ("put-1m", "PUT 1 MiB", ["--op", "put", "--size", "1MiB"]),
    ("put-16m", "PUT 16 MiB", ["--op", "put", "--size", "16MiB"]),
    ("mix", "mixed 64 KiB-16 MiB", ["--op", "mix", "--size", "64KiB-16MiB"]),
]
# Small requests (issue 11, do no harm): the shim has nothing to gain on
# them and must cost nothing.  They run under no preload, the shim and the
# baseline shim only, with shorter runs (--small-seconds).
SMALL_SCENARIOS = [
    ("get-4k", "GET 4 KiB", ["--op", "get", "--size", "4KiB"]),
    ("put-4k", "PUT 4 KiB", ["--op", "put", "--size", "4KiB"]),
]
SCENARIOS += SMALL_SCENARIOS
SCENARIO_NAMES = [s[0] for s in SCENARIOS]
# --quick: the scenarios whose operations finish well within a short run,
# and one small one (under none and shim only) so that it stays tested.
QUICK_SCENARIOS = ["get-16m", "put-1m", "mix", "get-4k"]

# --real: setups and the configurations they run under.
REAL_SETUPS = [
    ("nginx-proxy", "nginx proxy (1 MiB proxy buffers) -> storaged, GET 16 MiB"),
    ("nginx-directio", "nginx static files, directio + 16 MiB output_buffers, GET 16 MiB"),
    ("haproxy", "haproxy -> storaged, GET 16 MiB"),
]
# The small real setups: the servers under the configuration, wrk never (it
# is the measuring instrument, and on 2 CPUs its own cost would blur theirs).
SMALL_REAL_SETUPS = [
    ("nginx-1k", "nginx static file, GET 1 KiB"),
    ("haproxy-nginx-1k", "haproxy -> nginx static file, GET 1 KiB"),
]
REAL_SETUPS += SMALL_REAL_SETUPS
REAL_NAMES = [s[0] for s in REAL_SETUPS]
SMALL_NAMES = [s[0] for s in SMALL_SCENARIOS] + [s[0] for s in SMALL_REAL_SETUPS]
SMALL_CONFIGS = ["none", "shim", "baseline"]
SMALL_SIZE = 1 << 10
# shim-proxy: the shim in nginx/haproxy only, not in storaged or wrk (what
# the server alone gains or loses).  What a user runs instead, without the
# shim (issue 46), beside none: sendfile (nginx-directio), the same file
# served as Debian's nginx.conf serves files, sendfile on and no directio;
# proxy-defaults (nginx-proxy), the same proxy with nginx's default proxy
# buffers (none of the 1 MiB buffer settings).
REAL_CONFIGS = ["none", "sendfile", "proxy-defaults", "shim", "shim-proxy", "baseline"]
# The settings without the shim each real setup runs, beside none (none
# there: the setup's own settings); its headline row is against the better
# of them in the run (targets.py).
NO_SHIM_ALTERNATIVES = {"nginx-directio": "sendfile", "nginx-proxy": "proxy-defaults"}
# Proxy setups whose configurations that differ in the proxy alone (the
# storaged behind it and wrk plain) run side by side (issue 46): one
# storaged, a server per configuration, wrk's bursts alternating between
# them (real.run_side), one round a plan entry of kind "side".  Their
# separate runs differed by 8-14% from run to run (a run's own requests
# explain 2-3%), so that 15 rounds left "no harm" undecided.
SIDE_BY_SIDE = ("nginx-proxy", "haproxy")
SIDE_CONFIGS = ("none", "proxy-defaults", "shim-proxy")


def side_bursts(args):
    """How many 1 s wrk bursts each configuration of a side-by-side round
    gets: twice --seconds (4 by default), at least 2, even, so that the
    mirrored order gives every configuration the same mean position."""
    n = max(2, round(2 * args.seconds))
    return n + n % 2


def side_group(scen, cfgs):
    """The configurations of cfgs that scen runs side by side (in cfgs'
    order); [] unless two or more."""
    group = [c for c in cfgs if c in SIDE_CONFIGS] if scen in SIDE_BY_SIDE else []
    return group if len(group) > 1 else []
REAL_SIZE = 16 << 20

# --real on Ceph (issue 16): radosgw on a one-node cluster (scripts/rgw),
# up once for all of them, radosgw restarted under each configuration;
# loadgen runs plain (it is the instrument).  The rgw-proxy setups put
# s3proxy --backend-auth in front of radosgw, both under the configuration.
RGW_SETUPS = [
    ("rgw-get-1m", "radosgw, GET 1 MiB", ["--op", "get", "--size", "1MiB"]),
    ("rgw-get-16m", "radosgw, GET 16 MiB", ["--op", "get", "--size", "16MiB"]),
    ("rgw-put-1m", "radosgw, PUT 1 MiB", ["--op", "put", "--size", "1MiB"]),
    ("rgw-put-16m", "radosgw, PUT 16 MiB", ["--op", "put", "--size", "16MiB"]),
    ("rgw-proxy-get-16m", "s3proxy --backend-auth -> radosgw, GET 16 MiB",
     ["--op", "get", "--size", "16MiB"]),
    ("rgw-proxy-put-16m", "s3proxy --backend-auth -> radosgw, PUT 16 MiB",
     ["--op", "put", "--size", "16MiB"]),
]
RGW_NAMES = [s[0] for s in RGW_SETUPS]
RGW_QUICK = ["rgw-get-16m", "rgw-put-1m", "rgw-proxy-get-16m"]
# shim-osd (with --shim-osd): radosgw and the OSD under the shim; the OSD
# restarts whenever it changes sides, so it is opt-in.
RGW_CONFIGS = ["none", "shim", "shim-osd", "baseline"]

# The proxy's text report is printed for this run (the last repeat).
TEXT_REPORT_SCENARIO = "get-16m"


def scenario_configs(scen, configs):
    """The configurations a scenario runs under, in configs' order."""
    if scen in SMALL_NAMES:
        return [c for c in configs if c in SMALL_CONFIGS]
    if scen in RGW_NAMES:
        return [c for c in RGW_CONFIGS if c in configs]
    if scen in REAL_NAMES:
        # shim-proxy goes with shim, but not for nginx-directio (nothing behind
        # nginx there); a setup's setting without the shim (sendfile,
        # proxy-defaults) goes with none.
        proxy_only = "shim" in configs and scen != "nginx-directio"
        alt = NO_SHIM_ALTERNATIVES.get(scen) if "none" in configs else None
        return [c for c in REAL_CONFIGS if c in configs or (c == "shim-proxy" and proxy_only)
                or c == alt]
    return list(configs)


def durations(args, scen):
    """(measured seconds, warm-up seconds) of one run of scen."""
    if scen in SMALL_NAMES:
        return args.small_seconds, args.small_warmup
    return args.seconds, args.warmup


def titles():
    """Every scenario's and setup's title, by name."""
    names = {n: t for n, t, _ in SCENARIOS}
    names.update({n: t for n, t in REAL_SETUPS})
    return names


def make_plan(repeat, configs, sel):
    """The runs, (kind, config, scenario, repeat index), interleaved: repeat
    1 of every scenario under every configuration, then repeat 2, ...; the
    demo stack first, then the real programs (likewise), then radosgw (one
    radosgw per configuration and repeat runs all the radosgw setups)."""
    plan = []
    for rep in range(repeat):
        # Configurations innermost, so that the runs a verdict pairs (one
        # round of one scenario) are seconds apart rather than minutes, and
        # in an order rotated each round, so that none always follows the
        # same neighbour.
        turn = configs[rep % len(configs):] + configs[:rep % len(configs)]
        for scen in sel.scenarios:
            for cfg in turn:
                if cfg in sel.plan_configs[scen]:
                    plan.append(("demo", cfg, scen, rep))
    for rep in range(repeat):
        turn = REAL_CONFIGS[rep % len(REAL_CONFIGS):] + REAL_CONFIGS[:rep % len(REAL_CONFIGS)]
        for setup in sel.real_setups:
            cfgs = [c for c in turn if c in sel.plan_configs[setup]]
            group = side_group(setup, cfgs)
            for cfg in cfgs:
                if cfg not in group:
                    plan.append(("real", cfg, setup, rep))
                elif cfg == group[0]:
                    plan.append(("side", tuple(group), setup, rep))
    for rep in range(repeat):
        for cfg in RGW_CONFIGS:
            for setup in sel.rgw_setups:
                if cfg in sel.plan_configs[setup]:
                    plan.append(("rgw", cfg, setup, rep))
    return plan


def text_report_run(repeat, configs, scenarios):
    """The run whose proxy writes the shim's text report: the last repeat of
    TEXT_REPORT_SCENARIO (else the first large scenario) under the shim;
    None without one."""
    if "shim" not in configs or not scenarios:
        return None
    big = [s for s in scenarios if s not in SMALL_NAMES]
    ts = TEXT_REPORT_SCENARIO if TEXT_REPORT_SCENARIO in scenarios else (big or scenarios)[0]
    return ("demo", "shim", ts, repeat - 1)


def seconds_per_run(args, plan):
    """An estimate of one run's seconds, for the progress line."""
    # wrk setups: a 1 s warm-up and whole seconds; every run ~1.5 s to start and
    # stop; side by side, per configuration a 1 s warm-up and 1 s bursts
    def est1(kind, cfg, scen):
        if kind == "side":
            return len(cfg) * (1 + side_bursts(args))
        if kind == "real":
            return 1 + max(1, round(durations(args, scen)[0]))
        return sum(durations(args, scen))
    est = [est1(kind, cfg, scen) for kind, cfg, scen, _ in plan]
    return sum(est) / len(est) + 1.5 if est else 0
