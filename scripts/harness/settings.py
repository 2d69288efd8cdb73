# SPDX-License-Identifier: MIT
"""Where the harness finds what it runs, and the configurations it runs it
under: the build's programs, the shim and the baseline shim, the
allocators, and the environment each configuration gives a process.

SHIM, BASELINE and CONFIGS change once, when the command line names other
libraries (set_libraries): read them as settings.SHIM etc., never through
"from .settings import SHIM".
"""
import os

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PS_TOP_BUILDDIR") or TOP
# The shim under test, and optionally a baseline shim (an older build) run
# side by side with it; --shim-lib/--baseline-lib override these.
SHIM = os.path.abspath(os.environ.get("POOLSHIM_LIB") or os.path.join(BUILD, ".libs", "libpoolshim.so"))
BASELINE = os.path.abspath(os.environ["POOLSHIM_BASELINE_LIB"]) if os.environ.get("POOLSHIM_BASELINE_LIB") else None
# The harness's own settings, kept from the shim (which warns about unknown POOLSHIM_ names).
HARNESS_ENV = ("POOLSHIM_LIB", "POOLSHIM_BASELINE_LIB")
STORAGED = os.path.join(BUILD, "demo", "storaged")
S3PROXY = os.path.join(BUILD, "demo", "s3proxy")
LOADGEN = os.path.join(BUILD, "demo", "loadgen")
PSSTAT = os.path.join(BUILD, "tools", "poolshim-stat")
PSCOLLECT = os.path.join(BUILD, "tools", "poolshim-collect")
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def make_configs():
    """(name, environment, Debian package of the preloaded library); the
    baseline shim only when one is given."""
    configs = [
        ("none", {}, None),
        ("jemalloc", {"LD_PRELOAD": f"{LIBDIR}/libjemalloc.so.2"}, "libjemalloc2"),
        ("tcmalloc", {"LD_PRELOAD": f"{LIBDIR}/libtcmalloc_minimal.so.4"}, "libtcmalloc-minimal4"),
        ("mimalloc", {"LD_PRELOAD": f"{LIBDIR}/libmimalloc.so.2"}, "libmimalloc2.0"),
        ("glibc-hugetlb", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, None),
        ("shim-nouring", {"LD_PRELOAD": SHIM, "POOLSHIM_URING": "off"}, None),
        ("shim", {"LD_PRELOAD": SHIM}, None),
    ]
    if BASELINE:
        configs.append(("baseline", {"LD_PRELOAD": BASELINE}, None))
    return configs


CONFIGS = make_configs()
# "baseline" is always a known name; it runs only when a baseline shim is given.
CONFIG_NAMES = [c[0] for c in CONFIGS if c[0] != "baseline"] + ["baseline"]


def set_libraries(shim_lib, baseline_lib):
    """--shim-lib and --baseline-lib, over the environment's (None: keep)."""
    global SHIM, BASELINE, CONFIGS
    if shim_lib:
        SHIM = os.path.abspath(shim_lib)
    if baseline_lib:
        BASELINE = os.path.abspath(baseline_lib)
    CONFIGS = make_configs()


# Kept from every process the harness starts, but for what its
# configuration sets.
QUIET_ENV = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "MIMALLOC_", "TCMALLOC_", "POOLSHIM")
# POOLSHIM_* settings of the caller (e.g. POOLSHIM_HUGEPAGES=thp) apply to
# the shim configurations, under each configuration's own; the report's
# destination is the harness's.
USER_SHIM_ENV = {k: v for k, v in os.environ.items()
                 if k.startswith("POOLSHIM_") and not k.startswith("POOLSHIM_STATS")
                 and k not in HARNESS_ENV}


def is_shim_env(env):
    return env.get("LD_PRELOAD") in (SHIM, BASELINE) and env.get("LD_PRELOAD") is not None


def config_env(name):
    for n, env, _ in CONFIGS:
        if n == name:
            if is_shim_env(env):
                return dict(USER_SHIM_ENV, **env)
            return dict(env)
    raise KeyError(name)


def is_shim(name):
    return is_shim_env(config_env(name))
