# SPDX-License-Identifier: MIT
"""The command line: its flags, their defaults and checks, and what a run
selects from them (configurations, scenarios, setups, the allocator
table), with the programs and libraries that needs checked."""
import argparse
import os

from . import settings, verdict
from .messages import say
from .procs import port_free
from .real import real_missing
from .scenarios import (QUICK_SCENARIOS, REAL_NAMES, RGW_NAMES, RGW_QUICK, SCENARIO_NAMES,
                        SMALL_NAMES, scenario_configs)


def parse_list(value, known, what):
    items = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in items if x not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad)}; known: {', '.join(known)}")
    return items


def parser(description):
    """scripts/demo's flags; description: its --help text."""
    ap = argparse.ArgumentParser(prog="scripts/demo", description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    all_names = SCENARIO_NAMES + REAL_NAMES + RGW_NAMES
    ap.add_argument("--quick", action="store_true",
                    help="one repeat of 1 s runs of GET 16 MiB, PUT 1 MiB and mixed, and 0.5 s runs "
                    "of GET 4 KiB (none and shim); no --real, no allocator table")
    ap.add_argument("--scenario", type=lambda v: parse_list(v, all_names, "scenario"),
                    help="only these, comma-separated: " + ",".join(all_names))
    ap.add_argument("--small", action="store_true",
                    help="only the small-request scenarios (" + ",".join(SMALL_NAMES) + ")")
    ap.add_argument("--no-small", action="store_true", help="skip the small-request scenarios")
    ap.add_argument("--config", type=lambda v: parse_list(v, settings.CONFIG_NAMES, "configuration"),
                    help="comma-separated: " + ",".join(settings.CONFIG_NAMES))
    ap.add_argument("--shim-lib", help="the libpoolshim.so of the shim configurations "
                    "(default: POOLSHIM_LIB, else the build's .libs/libpoolshim.so)")
    ap.add_argument("--baseline-lib", help="a second libpoolshim.so (e.g. the previous build), "
                    "run as configuration 'baseline' (default: POOLSHIM_BASELINE_LIB)")
    ap.add_argument("--repeat", type=int, help="interleaved repeats (default 3, --quick 1)")
    ap.add_argument("--budget", type=float,
                    help="minutes from the start within which rounds are added where a headline row "
                    "is undecided, after the planned repeats (default 13.5, --quick 0: none)")
    ap.add_argument("--max-rounds", type=int, default=15,
                    help="no scenario gets more rounds than this from --budget (default 15)")
    ap.add_argument("--par-band", type=float, default=0.05,
                    help="the rule: a row is at par when its range lies within this fraction of 1x "
                    "(default 0.05)")
    ap.add_argument("--coverage", type=float, default=0.90,
                    help="the rule: how often a range must cover the median of the paired ratios "
                    "(default 0.90: 5 rounds at least)")
    ap.add_argument("--seconds", type=float, help="measured seconds per run (default 2, --quick 1)")
    ap.add_argument("--warmup", type=float, help="unmeasured warm-up per run (default 0.5, --quick 0.3)")
    ap.add_argument("--small-seconds", type=float,
                    help="measured seconds per small-request run (default 1, --quick 0.5; wrk: "
                    "whole seconds, at least 1)")
    ap.add_argument("--small-warmup", type=float,
                    help="warm-up per small-request loadgen run (default 0.3, --quick 0.2; wrk: 1 s)")
    ap.add_argument("--concurrency", type=int, default=4, help="loadgen/wrk connections (default 4)")
    ap.add_argument("--port", type=int, default=0, help="s3proxy port (default 0: any free one)")
    ap.add_argument("--out", help="results directory (default results/demo-DATE-TIME)")
    ap.add_argument("--real", action="store_true",
                    help="run only the real programs: nginx/haproxy/wrk, and radosgw on a one-node "
                    "Ceph cluster (scripts/rgw) directly and behind s3proxy --backend-auth")
    ap.add_argument("--no-real", action="store_true", help="skip the nginx/haproxy/wrk part")
    ap.add_argument("--rgw", action="store_true",
                    help="run only the radosgw setups (with --quick: " + ",".join(RGW_QUICK) + ")")
    ap.add_argument("--shim-osd", action="store_true",
                    help="radosgw setups: also configuration shim-osd, radosgw and the Ceph OSD "
                    "under the shim (the OSD restarts at each change)")
    ap.add_argument("--alloc", action="store_true", help="run only the allocator table (scripts/bench alloc)")
    ap.add_argument("--no-alloc", action="store_true", help="skip the allocator table")
    ap.add_argument("--keep", action="store_true", help="keep each run's data and logs")
    return ap


def set_defaults(args):
    """The defaults that depend on --quick."""
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.seconds = args.seconds or (1.0 if args.quick else 2.0)
    if args.budget is None:
        args.budget = 0.0 if args.quick else 13.5
    args.warmup = args.warmup if args.warmup is not None else (0.3 if args.quick else 0.5)
    args.small_seconds = args.small_seconds or (0.5 if args.quick else 1.0)
    args.small_warmup = (args.small_warmup if args.small_warmup is not None
                         else (0.2 if args.quick else 0.3))


def check_args(ap, args):
    """Values and combinations the parser cannot check itself (ap.error)."""
    if (args.repeat < 1 or args.seconds <= 0 or args.warmup < 0 or args.concurrency < 1
            or args.small_seconds <= 0 or args.small_warmup < 0 or args.budget < 0
            or args.max_rounds < 1):
        ap.error("--repeat, --seconds, --small-seconds, --concurrency and --max-rounds must be "
                 "positive, --budget not negative")
    if not 0 < args.par_band < 0.5:
        ap.error("--par-band wants a fraction above 0 and below 0.5")
    if not 0.5 <= args.coverage < 1:
        ap.error("--coverage wants a fraction from 0.5 to below 1")
    if not 0 <= args.port < 65536:
        ap.error("--port wants 0..65535")
    if args.small and args.no_small:
        ap.error("--small and --no-small exclude each other")


def set_libraries(ap, args):
    """The libraries: flags over the environment."""
    settings.set_libraries(args.shim_lib, args.baseline_lib)
    if settings.BASELINE and not os.path.exists(settings.BASELINE):
        raise SystemExit(f"demo: the baseline shim {settings.BASELINE} does not exist")
    if args.config and "baseline" in args.config and not settings.BASELINE:
        ap.error("--config baseline needs a baseline shim (--baseline-lib or POOLSHIM_BASELINE_LIB)")


def parse_args(description, argv=None):
    """The command line, checked, its defaults filled in, the libraries set."""
    ap = parser(description)
    args = ap.parse_args(argv)
    set_defaults(args)
    check_args(ap, args)
    set_libraries(ap, args)
    verdict.PAR_BAND, verdict.COVERAGE = args.par_band, args.coverage
    return args


def wanted_names(args):
    """The scenarios and setups the flags ask for, and whether the
    allocator table runs."""
    explicit = bool(args.scenario or args.small or args.real or args.alloc or args.quick or args.rgw)
    if args.scenario:
        wanted = list(args.scenario)
    elif args.small:
        wanted = list(SMALL_NAMES)
    elif args.rgw:
        wanted = list(RGW_QUICK if args.quick else RGW_NAMES)
    elif args.quick:
        wanted = list(QUICK_SCENARIOS)
    elif args.real:
        # The radosgw setups run only when asked for: --real, --rgw, --scenario.
        wanted = REAL_NAMES + RGW_NAMES
    elif args.alloc:
        wanted = []
    else:
        # The default run; --config limits it to the demo stack, as before.
        wanted = SCENARIO_NAMES + ([] if args.config else REAL_NAMES)
    if args.no_small:
        wanted = [w for w in wanted if w not in SMALL_NAMES]
    if args.no_real:
        wanted = [w for w in wanted if w not in REAL_NAMES + RGW_NAMES]
    alloc_part = args.alloc or (not explicit and not args.no_alloc and not args.config)
    return wanted, alloc_part


class Selection:
    """What one invocation runs: the configurations (canonical order, always
    "none", which every ratio is against), the demo stack's scenarios, the
    real and the radosgw setups, the configurations of each
    (plan_configs), and whether the allocator table follows."""

    def __init__(self, args):
        wanted, self.alloc_part = wanted_names(args)
        self.configs = [c for c, _, _ in settings.CONFIGS
                        if c == "none" or not args.config or c in args.config]
        self.scenarios = [s for s in SCENARIO_NAMES if s in wanted]
        self.real_setups = [s for s in REAL_NAMES if s in wanted]
        self.rgw_setups = [s for s in RGW_NAMES if s in wanted]
        self.rgw_configs = self.configs + (["shim-osd"] if args.shim_osd and "shim" in self.configs else [])
        self.plan_configs = {}

    def plan(self):
        """Fills plan_configs, once real_setups is final."""
        self.plan_configs = {s: scenario_configs(s, self.configs) for s in self.scenarios + self.real_setups}
        self.plan_configs.update({s: scenario_configs(s, self.rgw_configs) for s in self.rgw_setups})


def drop_missing_real(args, sel):
    """Without nginx, haproxy or wrk: an error when their setups were asked
    for by name (or --real without Ceph beside), else they are skipped."""
    if not sel.real_setups or not real_missing():
        return
    if ((args.real and not sel.rgw_setups)
            or (args.scenario and any(s in REAL_NAMES for s in args.scenario))):
        raise SystemExit("demo: nginx/haproxy/wrk setups need " + ", ".join(real_missing())
                         + " (Debian packages nginx-light, haproxy, wrk)")
    say("demo: nginx/haproxy/wrk setups skipped: not installed: " + ", ".join(real_missing()))
    sel.real_setups = []


def check_deps(configs, want_real):
    missing = [p for p in (settings.STORAGED, settings.S3PROXY, settings.LOADGEN)
               if not os.access(p, os.X_OK)]
    if any(settings.is_shim(c) for c in configs) and not os.path.exists(settings.SHIM):
        missing.append(settings.SHIM)
    if missing:
        raise SystemExit("demo: not built: " + ", ".join(missing) + "\ndemo: run scripts/bootstrap "
                         "(or make in the build directory named by PS_TOP_BUILDDIR)")
    for name, env, pkg in settings.CONFIGS:
        lib = env.get("LD_PRELOAD")
        if name in configs and pkg and not os.path.exists(lib):
            raise SystemExit(f"demo: configuration {name} needs {lib} (Debian package {pkg}); "
                             f"install it (scripts/bootstrap does) or leave it out with --config")


def select(args):
    """What runs, with what it needs checked (SystemExit when it is missing)."""
    sel = Selection(args)
    drop_missing_real(args, sel)
    if sel.scenarios or sel.real_setups or sel.rgw_setups:
        check_deps(sel.configs, bool(sel.real_setups))
    if sel.scenarios and args.port and not port_free(args.port):
        raise SystemExit(f"demo: port {args.port} on 127.0.0.1 is taken; pick another with --port")
    sel.plan()
    return sel
