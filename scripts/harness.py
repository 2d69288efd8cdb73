#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The demo harness behind scripts/demo: the S3 stack under each allocator
configuration, measured side by side.

  scripts/demo [--quick] [--scenario S,...] [--small | --no-small] [--config C,...]
               [--repeat N] [--seconds S] [--small-seconds S] [--concurrency N]
               [--shim-lib PATH] [--baseline-lib PATH] [--out DIR] [--port P]
               [--real | --no-real] [--rgw] [--shim-osd] [--alloc | --no-alloc]

For every repeat, configuration and scenario (interleaved: repeat 1 of every
configuration, then repeat 2, ...) it starts two storaged nodes and an
s3proxy on loopback ports under that configuration, runs loadgen (also under
it) with --verify, samples /proc/PID/stat of the servers (page faults, CPU)
and, for the shim, its live counters (tools/poolshim-stat), then stops
everything.  Rates are taken over loadgen's measured window only.

Prints a table (median [min-max] over the repeats), writes results.json and
PNG plots (gnuplot) into the results directory, and prints the shim's text
report for the proxy of one run.  --real runs nginx (as a proxy with large
proxy buffers, and serving files with directio), haproxy and wrk, when
installed, and then the radosgw setups.  The default run ends with
scripts/bench alloc's allocator table.

radosgw (issue 16; --real, alone with --rgw, never in the default run):
scripts/rgw brings up a one-node Ceph cluster once (installing the Ceph
packages as root; skipped with one line when they cannot be had), radosgw
restarts under none and the shim for every repeat, and loadgen --verify
(plain) does GET and PUT of 1 and 16 MiB against it, and GET and PUT of
16 MiB through s3proxy --backend-auth in front of it; CPU per GiB and
faults of radosgw and the OSD, the target "no regression: >= 0.98x", and
the shim's report for radosgw with its call sites (from a separate,
unmeasured radosgw).  --shim-osd adds configuration shim-osd (the OSD
under the shim too).  The cluster goes down at the end, however it ends.

Small requests (issue 11, do no harm; part of the default run, alone with
--small): GET and PUT 4 KiB on the demo stack, nginx serving a 1 KiB file
and haproxy in front of it (wrk, not shimmed), under no preload, the shim
and the baseline shim only, in shorter runs (--small-seconds); requests/s
and p99, with the target "no regression: >= 0.98x".  --quick includes GET
4 KiB.  --scenario takes any scenario or real setup name.

The shim is the build's .libs/libpoolshim.so, or --shim-lib / POOLSHIM_LIB;
--baseline-lib / POOLSHIM_BASELINE_LIB adds configuration "baseline", a
second libpoolshim.so (say, the previous build) run beside it everywhere the
shim runs (not as shim-nouring or shim-proxy).
POOLSHIM_* variables in the environment (but POOLSHIM_STATS*, POOLSHIM_LIB
and POOLSHIM_BASELINE_LIB) apply to the shim configurations, baseline
included.
Exit status: 0 done, 1 a run failed (a process died, loadgen failed or found
data errors), 2 usage or a missing dependency.
"""
import argparse
import ctypes
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
LIBDIR = "/usr/lib/x86_64-linux-gnu"
CLK_TCK = os.sysconf("SC_CLK_TCK")


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
# the server alone gains or loses).
REAL_CONFIGS = ["none", "shim", "shim-proxy", "baseline"]
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

QUIET_ENV = ("LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "MIMALLOC_", "TCMALLOC_", "POOLSHIM")


class Fail(Exception):
    """A run failed in a way that stops the harness (message for the user)."""


def say(msg):
    progress.clear()
    print(msg, file=sys.stderr, flush=True)


class Progress:
    """One status line on stderr: what runs now and how long is left."""

    def __init__(self):
        self.total = 0
        self.done = 0
        self.spent = 0.0
        self.estimate = 0.0
        self.shown = False

    def plan(self, total, per_run):
        self.total, self.done, self.spent, self.estimate = total, 0, 0.0, per_run

    def show(self, what):
        if self.done:
            per = self.spent / self.done
        else:
            per = self.estimate
        left = (self.total - self.done) * per
        line = f"[{self.done + 1}/{self.total}] {what}  (~{int(left) // 60}m{int(left) % 60:02d}s left)"
        if sys.stderr.isatty():
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
            self.shown = True
        else:
            print(line, file=sys.stderr, flush=True)

    def finished(self, seconds):
        self.done += 1
        self.spent += seconds

    def clear(self):
        if self.shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
            self.shown = False


progress = Progress()


def bench_module():
    loader = importlib.machinery.SourceFileLoader("ps_bench", os.path.join(TOP, "scripts", "bench"))
    spec = importlib.util.spec_from_loader("ps_bench", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def machine():
    """scripts/bench's machine line, so both tables name the machine alike."""
    try:
        return bench_module().machine()
    except Exception as e:  # the harness runs without scripts/bench too
        return f"{os.cpu_count()} CPUs (machine() unavailable: {e})"


def lib_line(path):
    """scripts/bench's line naming a library (size, date, SHA-256 prefix)."""
    try:
        return bench_module().lib_line(path)
    except Exception:
        return path


# --------------------------------------------------------------------------
# Processes: every one started is registered, and stopped however we end.
# --------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # If the harness is killed outright, its children get SIGTERM.
    _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Proc:
    registry = []

    def __init__(self, name, argv, env, logdir, stdout=None):
        self.name = name
        self.out = os.path.join(logdir, f"{name}.out")
        self.err = os.path.join(logdir, f"{name}.err")
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                  stdout=stdout if stdout is not None else open(self.out, "w"),
                                  stderr=open(self.err, "w"), start_new_session=True,
                                  preexec_fn=_die_with_parent)
        self.pid = self.p.pid
        Proc.registry.append(self)

    def alive(self):
        return self.p.poll() is None

    def log_tail(self, n=15):
        try:
            with open(self.err, errors="replace") as f:
                lines = f.readlines()[-n:]
            return "".join("    " + l for l in lines) or "    (empty)\n"
        except OSError:
            return "    (no log)\n"

    def wait_listening(self, timeout=10.0):
        """Waits for the demo programs' 'listening on HOST:PORT' line; the port."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with open(self.out) as f:
                    m = re.search(r"^listening on .*:(\d+)$", f.read(), re.M)
                if m:
                    return int(m.group(1))
            except OSError:
                pass
            if not self.alive():
                raise Fail(f"{self.name} exited with status {self.p.returncode} while starting; "
                           f"its log ({self.err}):\n{self.log_tail()}")
            time.sleep(0.02)
        raise Fail(f"{self.name} did not start listening within {timeout:.0f}s; its log:\n{self.log_tail()}")

    stop_signal = signal.SIGTERM

    def term(self):
        if self.p.poll() is None:
            self.p.send_signal(self.stop_signal)

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL after timeout.  True when it exited 0 on SIGTERM."""
        if self in Proc.registry:
            Proc.registry.remove(self)
        if self.p.poll() is not None:
            return self.p.returncode == 0
        try:
            self.term()
            self.p.wait(timeout)
            return self.p.returncode in (0, -self.stop_signal)
        except subprocess.TimeoutExpired:
            say(f"demo: {self.name} (pid {self.pid}) ignored SIGTERM for {timeout:.0f}s; killing it")
            self.p.kill()
            self.p.wait()
            return False

    @classmethod
    def stop_all(cls):
        for p in list(reversed(cls.registry)):
            p.stop(timeout=5.0)


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(QUIET_ENV)}
    env.update(extra)
    return env


def port_free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(proc, port, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not proc.alive():
            raise Fail(f"{proc.name} exited with status {proc.p.returncode} while starting; "
                       f"its log ({proc.err}):\n{proc.log_tail()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise Fail(f"{proc.name} does not answer on 127.0.0.1:{port} after {timeout:.0f}s; its log:\n"
               f"{proc.log_tail()}")


# --------------------------------------------------------------------------
# Sampling: /proc/PID/stat of every server (faults, CPU), and the shim's
# live counters through tools/poolshim-stat, both timestamped so that rates
# come from loadgen's measured window only.
# --------------------------------------------------------------------------
def children(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
                if int(s[s.rindex(")") + 2:].split()[1]) == pid:
                    kids.append(int(d))
            except (OSError, ValueError):
                pass
    return kids


def proc_stat(pids):
    """(minflt, cpu seconds) summed over pids (a server and its workers)."""
    flt = cpu = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        fields = s[s.rindex(")") + 2:].split()
        flt += int(fields[7])
        cpu += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return flt, cpu


class Sampler:
    """Samples /proc every `interval` s for each group {name: [pids]}; for
    shimmed processes, also reads poolshim-stat's per-interval deltas."""

    def __init__(self, groups, shim_pids, logdir, interval=0.1):
        self.groups = groups
        self.interval = interval
        self.samples = []          # (t, {name: (flt, cpu)})
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)
        self.stat = None
        self.stat_recs = {}        # pid -> [(t, syscalls in that interval)]
        self.stat_interval = 0.25
        if shim_pids and os.access(PSSTAT, os.X_OK):
            self.stat = subprocess.Popen([PSSTAT, "-i", str(self.stat_interval), "--json"]
                                         + [str(p) for p in shim_pids],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         stdin=subprocess.DEVNULL, text=True,
                                         preexec_fn=_die_with_parent)
            self.stat_th = threading.Thread(target=self._read_stat, daemon=True)
            self.stat_th.start()
        self.th.start()

    def snapshot(self):
        return (time.monotonic(), {n: proc_stat(p) for n, p in self.groups.items()})

    def _run(self):
        while not self.stop_ev.is_set():
            self.samples.append(self.snapshot())
            self.stop_ev.wait(self.interval)

    def _read_stat(self):
        dec = json.JSONDecoder()
        buf = ""
        first = set()
        for line in self.stat.stdout:
            buf += line
            try:
                obj, _ = dec.raw_decode(buf.strip())
            except ValueError:
                continue
            buf = ""
            pid = obj.get("pid")
            calls = sum(c["calls"] for c in obj.get("calls", []) if c.get("kind") != "none")
            if pid not in first:        # round 0: totals so far, not a change
                first.add(pid)
                continue
            self.stat_recs.setdefault(pid, []).append((time.monotonic(), calls))

    def finish(self):
        self.stop_ev.set()
        self.th.join()
        self.samples.append(self.snapshot())
        if self.stat:
            self.stat.terminate()
            try:
                self.stat.wait(5)
            except subprocess.TimeoutExpired:
                self.stat.kill()
                self.stat.wait()

    def rates(self, t_a, t_b):
        """Per-second (faults, cpu) of each group over [t_a, t_b] (nearest samples inside)."""
        inside = [s for s in self.samples if t_a <= s[0] <= t_b + 0.05]
        if len(inside) < 2:
            inside = self.samples[-2:]
        (ta, a), (tb, b) = inside[0], inside[-1]
        dt = max(tb - ta, 1e-3)
        return {n: ((b[n][0] - a[n][0]) / dt, (b[n][1] - a[n][1]) / dt) for n in self.groups}, dt

    def syscall_rate(self, pid, t_a, t_b):
        """I/O calls per second of a shimmed pid over intervals inside [t_a, t_b].

        On a loaded machine poolshim-stat's first intervals can come in
        after a short (--quick) window has closed: then every interval it
        reported is used, the measurement's warm-up included, rather than
        none."""
        allrecs = self.stat_recs.get(pid, [])
        recs = [c for t, c in allrecs if t_a + self.stat_interval <= t <= t_b + 0.05]
        if not recs:
            recs = [c for _, c in allrecs]
        if not recs:
            return None
        return sum(recs) / (len(recs) * self.stat_interval)


# --------------------------------------------------------------------------
# One run of the demo stack.
# --------------------------------------------------------------------------
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


def scenario_configs(scen, configs):
    """The configurations a scenario runs under, in configs' order."""
    if scen in SMALL_NAMES:
        return [c for c in configs if c in SMALL_CONFIGS]
    if scen in RGW_NAMES:
        return [c for c in RGW_CONFIGS if c in configs]
    if scen in REAL_NAMES:
        # shim-proxy goes with shim, but not for nginx-directio (nothing behind nginx there)
        proxy_only = "shim" in configs and scen != "nginx-directio"
        return [c for c in REAL_CONFIGS if c in configs or (c == "shim-proxy" and proxy_only)]
    return list(configs)


def durations(args, scen):
    """(measured seconds, warm-up seconds) of one run of scen."""
    if scen in SMALL_NAMES:
        return args.small_seconds, args.small_warmup
    return args.seconds, args.warmup


def loadgen_cmd(args, tmp, endpoint, ak, sk, bucket, run_id, seconds, warmup, timeout, lgargs):
    """loadgen's command line for one measured run (--verify, results in tmp/loadgen.json)."""
    lg = [LOADGEN, "--endpoint", endpoint, "--access-key", ak, "--secret-key", sk,
          "--bucket", bucket, "--prefix", f"{run_id}/",
          "--concurrency", str(args.concurrency), "--duration", f"{seconds}s",
          "--warmup", f"{warmup}s", "--verify", "--seed", "42", "--timeout", timeout,
          "--json", f"{tmp}/loadgen.json"] + lgargs
    if "put" not in lgargs:
        lg += ["--objects", str(2 * args.concurrency)]
    return lg


def run_loadgen(lg, env, tmp, limit):
    """Run loadgen (output to tmp/loadgen.out); its exit status or "timeout", and when it ended."""
    try:
        r = subprocess.run(lg, env=clean_env(env), stdin=subprocess.DEVNULL,
                           stdout=open(f"{tmp}/loadgen.out", "w"), stderr=subprocess.STDOUT,
                           timeout=limit, preexec_fn=_die_with_parent)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    return rc, time.monotonic()


def loadgen_results(tmp, run_id, rc):
    """loadgen's JSON results, or Fail with the tail of its output."""
    try:
        with open(f"{tmp}/loadgen.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        with open(f"{tmp}/loadgen.out", errors="replace") as f:
            out = f.read()[-1500:]
        raise Fail(f"loadgen failed in {run_id} (exit {rc}) and wrote no results:\n{out}")


def run_demo(args, cfg, scen, rep, text_report, workdir, outdir):
    title, lgargs = next((t, a) for n, t, a in SCENARIOS if n == scen)
    seconds, warmup = durations(args, scen)
    run_id = f"{scen}.{cfg}.{rep + 1}"
    tmp = tempfile.mkdtemp(prefix=f"{run_id}.", dir=workdir)
    reports = os.path.join(outdir, "reports", run_id)
    shim = is_shim(cfg)
    env = config_env(cfg)
    if shim:
        os.makedirs(reports, exist_ok=True)
        env["POOLSHIM_STATS"] = os.path.join(reports, "%e-%p.json")
    procs = []
    try:
        n1 = Proc("node1", [STORAGED, "--dir", f"{tmp}/data1", "--port", "0", "--no-fsync"],
                  clean_env(env), tmp)
        n2 = Proc("node2", [STORAGED, "--dir", f"{tmp}/data2", "--port", "0", "--no-fsync"],
                  clean_env(env), tmp)
        procs += [n1, n2]
        p1, p2 = n1.wait_listening(), n2.wait_listening()
        with open(f"{tmp}/creds", "w") as f:
            f.write("# demo harness\nPSDEMOHARNESS demo-harness-secret\n")
        penv = dict(env)
        if text_report:
            penv["POOLSHIM_STATS"] = os.path.join(reports, "s3proxy-report.txt")
            penv["POOLSHIM_STATS_FORMAT"] = "text"
        if args.port and not port_free(args.port):
            raise Fail(f"port {args.port} on 127.0.0.1 is taken; pick another with --port "
                       f"(or --port 0 for any free one)")
        px = Proc("proxy", [S3PROXY, "--port", str(args.port), "--credentials", f"{tmp}/creds",
                            "--backend", f"http://127.0.0.1:{p1}",
                            "--backend", f"http://127.0.0.1:{p2}"], clean_env(penv), tmp)
        procs.append(px)
        pp = px.wait_listening()
        groups = {"proxy": [px.pid], "node1": [n1.pid], "node2": [n2.pid]}
        sampler = Sampler(groups, [px.pid, n1.pid, n2.pid] if shim else [], tmp)
        lg = loadgen_cmd(args, tmp, f"http://127.0.0.1:{pp}", "PSDEMOHARNESS",
                         "demo-harness-secret", "demo", run_id, seconds, warmup, "20s", lgargs)
        rc, t_end = run_loadgen(lg, env, tmp, seconds + warmup + 90)
        sampler.finish()
        dead = [p for p in procs if not p.alive()]
        if dead:
            p = dead[0]
            raise Fail(f"{p.name} died (status {p.p.returncode}) during {run_id}; its log "
                       f"({p.err}):\n{p.log_tail()}")
        lgj = loadgen_results(tmp, run_id, rc)
        clean = True
        for p in (px, n1, n2):      # no request is in flight: all at once
            p.term()
        for p in (px, n1, n2):
            clean &= p.stop()
        procs = []
        return measure(args, cfg, scen, rep, lgj, rc, sampler, t_end, shim, reports, clean,
                       {"proxy": px.pid, "node1": n1.pid, "node2": n2.pid})
    finally:
        for p in procs:
            p.stop(timeout=5.0)
        if args.keep or isinstance(sys.exc_info()[1], Fail):
            pass                    # kept for the logs
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def measure(args, cfg, scen, rep, lgj, rc, sampler, t_end, shim, reports, clean, pids):
    tot = lgj["ops"]["total"]
    seconds = lgj["seconds"]
    ops_s = tot["ops_per_s"]
    mib_s = tot["mib_per_s"]
    t_a = t_end - seconds
    rates, window = sampler.rates(t_a, t_end)
    run = {"scenario": scen, "config": cfg, "repeat": rep + 1, "loadgen_exit": rc,
           "mib_s": mib_s, "ops_s": ops_s, "ops": tot["count"],
           "p50_ms": tot["latency_ms"]["p50"], "p99_ms": tot["latency_ms"]["p99"],
           "errors": lgj.get("errors", {}), "mismatches": lgj.get("mismatches", 0),
           "verified_bytes": lgj.get("verified_bytes", 0), "clean_exit": clean,
           "window_s": round(window, 3), "procs": {}}
    gib_s = mib_s / 1024.0
    for name, (flt_s, cpu_s) in rates.items():
        d = {"faults_per_op": flt_s / ops_s if ops_s else None,
             "cpu_s_per_gib": cpu_s / gib_s if gib_s else None,
             "cpu_us_per_op": cpu_s / ops_s * 1e6 if ops_s else None,
             "cpu_util": cpu_s}
        if shim:
            sc = sampler.syscall_rate(pids[name], t_a, t_end)
            d["syscalls_per_op"] = sc / ops_s if sc is not None and ops_s else None
        run["procs"][name] = d
    if shim:
        run["reports"] = sorted(os.path.join(reports, f) for f in os.listdir(reports))
    return run


# --------------------------------------------------------------------------
# --real: nginx, haproxy, wrk.
# --------------------------------------------------------------------------
def which(prog):
    return shutil.which(prog) or next((p for p in (f"/usr/sbin/{prog}", f"/sbin/{prog}")
                                       if os.access(p, os.X_OK)), None)


def real_missing():
    return [p for p, pkg in (("nginx", "nginx-light"), ("haproxy", "haproxy"), ("wrk", "wrk"))
            if not which(p)]


def nginx_conf(tmp, port, body, workers=2):
    user = "user root;\n" if os.geteuid() == 0 else ""
    return f"""{user}worker_processes {workers};
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy_temp;
    fastcgi_temp_path {tmp}/fastcgi_temp;
    uwsgi_temp_path {tmp}/uwsgi_temp;
    scgi_temp_path {tmp}/scgi_temp;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{port};
{body}
    }}
}}
"""


def put_object(port, path, data):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for method, p, body in (("PUT", "/real", None), ("PUT", path, data)):
        c.request(method, p, body=body)
        r = c.getresponse()
        r.read()
        if r.status not in (200, 409):
            raise Fail(f"storaged refused {method} {p}: HTTP {r.status}")
    c.close()


def parse_wrk(out):
    rps = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if not rps:
        return None
    lat = {}
    for pct, val, unit in re.findall(r"^\s*(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        lat[pct] = float(val) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    errs = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    nerr = (int(errs.group(1)) if errs else 0) + (sum(map(int, sock.groups())) if sock else 0)
    return float(rps.group(1)), lat.get("50"), lat.get("99"), nerr


def nginx_workers(proc, want=2):
    """The pids of nginx's workers: its master listens before it forks them."""
    kids = children(proc.pid)
    end = time.monotonic() + 5
    while len(kids) < want and time.monotonic() < end:
        time.sleep(0.05)
        kids = children(proc.pid)
    return kids


def run_real(args, cfg, setup, rep, workdir, outdir):
    run_id = f"{setup}.{cfg}.{rep + 1}"
    tmp = tempfile.mkdtemp(prefix=f"{run_id}.", dir=workdir)
    os.chmod(tmp, 0o755)
    env = config_env("shim" if cfg == "shim-proxy" else cfg)
    shim = is_shim("shim" if cfg == "shim-proxy" else cfg)
    reports = os.path.join(outdir, "reports", run_id)
    if shim:
        os.makedirs(reports, exist_ok=True)
        # Not %e: nginx rewrites its argv (the process title), and the
        # name the shim then expands holds slashes.
        env["POOLSHIM_STATS"] = os.path.join(reports, "%p.json")
    srv_env = env
    small = setup in SMALL_NAMES
    size = SMALL_SIZE if small else REAL_SIZE
    if cfg == "shim-proxy" or small:
        env = {}                    # storaged and wrk run plain (small setups: wrk)
    procs = []
    try:
        groups = {}
        port = free_port()
        url = f"http://127.0.0.1:{port}/real/obj"
        # One worker for the small setups: with two, wrk's 4 connections
        # sometimes all land on one worker (nginx accepts without a mutex)
        # and a run measures 50k or 125k requests/s by that luck alone, in
        # every configuration; one worker measures the cost per request.
        workers = 1 if small else 2
        if small:
            # nginx's defaults: no sendfile, no open_file_cache, so every
            # request opens, reads and closes the file through the shim.
            os.makedirs(f"{tmp}/www/real")
            with open(f"{tmp}/www/real/obj", "wb") as f:
                f.write(os.urandom(SMALL_SIZE))
            body = f"        root {tmp}/www;"
        if setup == "haproxy-nginx-1k":
            nport = free_port()
            with open(f"{tmp}/nginx.conf", "w") as f:
                f.write(nginx_conf(tmp, nport, body, workers))
            be = Proc("nginx", [which("nginx"), "-p", tmp, "-c", f"{tmp}/nginx.conf",
                                "-e", f"{tmp}/nginx-error.log"], clean_env(srv_env), tmp)
            procs.append(be)
            wait_port(be, nport)
            groups["node1"] = [be.pid] + nginx_workers(be)
        if setup in ("nginx-proxy", "haproxy"):
            node = Proc("node1", [STORAGED, "--dir", f"{tmp}/data1", "--port", "0", "--no-fsync"],
                        clean_env(env), tmp)
            procs.append(node)
            nport = node.wait_listening()
            put_object(nport, "/real/obj", os.urandom(REAL_SIZE))
            groups["node1"] = [node.pid]
        if setup == "nginx-proxy":
            body = f"""        location / {{
            proxy_pass http://127.0.0.1:{nport};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering on;
            proxy_buffer_size 1m;
            proxy_buffers 16 1m;
            proxy_busy_buffers_size 2m;
            proxy_max_temp_file_size 0;
        }}"""
        elif setup == "nginx-directio":
            os.makedirs(f"{tmp}/www/real")
            with open(f"{tmp}/www/real/obj", "wb") as f:
                f.write(os.urandom(REAL_SIZE))
            body = f"""        root {tmp}/www;
        sendfile off;
        directio 1m;
        directio_alignment 4k;
        output_buffers 2 16m;"""
        if setup.startswith("nginx"):
            with open(f"{tmp}/nginx.conf", "w") as f:
                f.write(nginx_conf(tmp, port, body, workers))
            srv = Proc("nginx", [which("nginx"), "-p", tmp, "-c", f"{tmp}/nginx.conf",
                                 "-e", f"{tmp}/nginx-error.log"], clean_env(srv_env), tmp)
        else:
            with open(f"{tmp}/haproxy.cfg", "w") as f:
                f.write(f"""global
    maxconn 1000
    nbthread 2
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend f
    bind 127.0.0.1:{port}
    default_backend b
backend b
    http-reuse always
    server s1 127.0.0.1:{nport}
""")
            srv = Proc("haproxy", [which("haproxy"), "-db", "-f", f"{tmp}/haproxy.cfg"],
                       clean_env(srv_env), tmp)
            # SIGUSR1: a soft stop that ends in exit(), so the report is written.
            srv.stop_signal = signal.SIGUSR1
        procs.append(srv)
        wait_port(srv, port)
        kids = nginx_workers(srv) if setup.startswith("nginx") else children(srv.pid)
        groups = {"proxy": [srv.pid] + kids, **groups}
        # I/O calls come from the exit reports here: tools/poolshim-stat
        # crashes on nginx workers' live files (render_json, pool.requested).
        sampler = Sampler(groups, [], tmp)
        try:
            t0 = time.monotonic()
            # Warm-up, not measured, then the measured run.
            # wrk takes whole seconds.
            wu = subprocess.run([which("wrk"), "-t1", "-c2", "-d1s", url],
                                env=clean_env(env), capture_output=True, text=True,
                                timeout=60, preexec_fn=_die_with_parent)
            m = re.search(r"(\d+) requests in", wu.stdout)
            warm_reqs = int(m.group(1)) if m else 0
            t_a = time.monotonic()
            secs = max(1, round(durations(args, setup)[0]))
            r = subprocess.run([which("wrk"), "-t2", f"-c{args.concurrency}", f"-d{secs}s",
                                "--latency", "--timeout", "20s", url],
                               env=clean_env(env), capture_output=True, text=True,
                               timeout=secs + 60, preexec_fn=_die_with_parent)
            out = r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            raise Fail(f"wrk did not finish in {run_id}")
        t_b = time.monotonic()
        sampler.finish()
        for p in procs:
            if not p.alive():
                raise Fail(f"{p.name} died (status {p.p.returncode}) during {run_id}; its log:\n"
                           f"{p.log_tail()}")
        w = parse_wrk(out)
        if not w:
            raise Fail(f"wrk output not understood in {run_id}:\n{out[-1000:]}")
        rps, p50, p99, nerr = w
        m = re.search(r"(\d+) requests in", out)
        all_reqs = warm_reqs + (int(m.group(1)) if m else 0)
        with open(os.path.join(outdir, f"wrk-{run_id}.txt"), "w") as f:
            f.write(out)
        rates, window = sampler.rates(t_a, t_b)
        clean = True
        for p in procs:
            p.term()
        for p in reversed(procs):
            clean &= p.stop()
        procs = []
        mib_s = rps * size / (1 << 20)
        run = {"scenario": setup, "config": cfg, "repeat": rep + 1, "mib_s": mib_s,
               "ops_s": rps, "p50_ms": p50, "p99_ms": p99, "errors": nerr, "mismatches": 0,
               "clean_exit": clean, "window_s": round(window, 3), "procs": {}}
        for name, (flt_s, cpu_s) in rates.items():
            run["procs"][name] = {"faults_per_op": flt_s / rps if rps else None,
                                  "cpu_s_per_gib": cpu_s / (mib_s / 1024) if mib_s else None,
                                  "cpu_us_per_op": cpu_s / rps * 1e6 if rps else None,
                                  "cpu_util": cpu_s}
        if shim:
            run["reports"] = sorted(os.path.join(reports, f) for f in os.listdir(reports))
            # Whole-process counts (warm-up included) over every request wrk made.
            for name, pids in groups.items():
                calls, found = 0, False
                for pid in pids:
                    for f in run["reports"]:
                        if f.endswith(f"/{pid}.json"):
                            try:
                                with open(f) as fh:
                                    rep = json.load(fh)
                            except (OSError, ValueError):
                                continue
                            found = True
                            calls += sum(c["calls"] for c in rep["calls"] if c["kind"] != "none")
                if found and all_reqs:
                    run["procs"][name]["syscalls_per_op"] = calls / all_reqs
        return run
    finally:
        for p in reversed(procs):
            p.stop(timeout=5.0)
        if args.keep or isinstance(sys.exc_info()[1], Fail):
            pass                    # kept for the logs
        else:
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------
# --real on Ceph: radosgw (scripts/rgw), and s3proxy --backend-auth in front.
# --------------------------------------------------------------------------
RGW_SCRIPT = os.path.join(TOP, "scripts", "rgw")


class RgwCluster:
    """scripts/rgw's one-node cluster: brought up once for every radosgw
    run, radosgw restarted (and the OSD, for shim-osd) when the
    configuration or the repeat changes, taken down however the harness
    ends."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "rgw")
        self.state = None           # "up", "skipped", or None before up()
        self.session = None         # (cfg, rep) radosgw now runs for
        self.env = {}
        self.shimmed = set()        # pids of shimmed daemons, for their live files

    def script(self, argv, extra=None, timeout=120):
        env = clean_env({"RGW_BUILDDIR": BUILD, **(extra or {})})
        try:
            return subprocess.run([RGW_SCRIPT] + argv + ["--dir", self.dir], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail(f"scripts/rgw {argv[0]} took over {timeout} s; logs in {self.dir}/log")

    def parse_env(self, out):
        m = re.search(r"^export (.*)$", out, re.M)
        if not m:
            raise Fail(f"scripts/rgw printed no export line:\n{out[-500:]}")
        self.env = dict(kv.split("=", 1) for kv in m.group(1).split())

    def up(self):
        """True when the cluster runs; False when the Ceph packages are
        missing and cannot be installed (scripts/rgw's exit status 3)."""
        say("demo: bringing up the one-node Ceph cluster (scripts/rgw up)")
        r = self.script(["up"], timeout=900)
        if r.returncode == 3:
            self.state = "skipped"
            say("demo: radosgw setups skipped: " + (r.stderr.strip().splitlines() or ["?"])[-1])
            return False
        self.state = "up"
        if r.returncode:
            raise Fail(f"scripts/rgw up failed (exit {r.returncode}):\n{r.stderr[-1500:]}")
        self.parse_env(r.stdout)
        # The first writes create radosgw's pools and warm the OSD: not in
        # the first measured run (always "none"), but here.
        for op, size in (("put", "16MiB"), ("put", "1MiB"), ("get", "16MiB")):
            self.loadgen(["--prefix", "prime/", "--op", op, "--size", size, "--ops", "32",
                          "--concurrency", "4", "--verify"], f"priming ({op} {size})")
        return True

    def loadgen(self, argv, what):
        """Runs loadgen, plain, against radosgw (not measured)."""
        env = self.env
        if "get" in argv:
            argv = argv + ["--objects", "8"]
        r = subprocess.run([LOADGEN, "--endpoint", env["S3_ENDPOINT"], "--access-key",
                            env["AWS_ACCESS_KEY_ID"], "--secret-key", env["AWS_SECRET_ACCESS_KEY"],
                            "--bucket", "psdemo", "--seed", "42"] + argv,
                           env=clean_env({}), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300, preexec_fn=_die_with_parent)
        if r.returncode:
            raise Fail(f"loadgen {what} against radosgw failed (exit {r.returncode}):\n"
                       f"{(r.stdout + r.stderr)[-1000:]}")

    def gateway(self, cfg, stats, extra=None):
        """Restarts radosgw under cfg, its report going to stats; the pids
        of radosgw and the OSD."""
        env = rgw_env(cfg)
        argv = ["restart"]
        extra = dict(extra or {})
        if is_shim_env(env):
            argv.append("--shim")
            extra.update({k: v for k, v in env.items() if k != "LD_PRELOAD"})
            extra["RGW_SHIM_LIB"] = env["LD_PRELOAD"]
            extra["POOLSHIM_STATS"] = stats
        if cfg == "shim-osd":
            argv.append("--shim-osd")
        r = self.script(argv, extra, timeout=300)
        if r.returncode:
            raise Fail(f"scripts/rgw restart under {cfg} failed (exit {r.returncode}):\n"
                       f"{r.stderr[-1500:]}")
        self.parse_env(r.stdout)
        pids = self.pids()
        if is_shim_env(env):
            self.shimmed.add(pids["radosgw"])
        if cfg == "shim-osd":
            self.shimmed.add(pids["ceph-osd"])
        return pids

    def pids(self):
        pids = {}
        with open(os.path.join(self.dir, "pids")) as f:
            for line in f:
                name, pid = line.split()
                pids[name] = int(pid)
        return pids

    def down(self):
        if self.state != "up":
            return
        self.state = None
        self.session = None
        r = self.script(["down"], timeout=180)
        if r.returncode:
            say(f"demo: scripts/rgw down: exit {r.returncode}: {r.stderr.strip()[-500:]}")
        # The shimmed OSD ends without the shim's exit path, and so does
        # the radosgw of the report (see rgw_report): their live files
        # (22 MiB each in /dev/shm) stay.  poolshim-stat reads a gone
        # process's file once more and removes it.
        gone = [str(p) for p in self.shimmed if not os.path.exists(f"/proc/{p}")]
        self.shimmed = set()
        if gone and os.access(PSSTAT, os.X_OK):
            live = USER_SHIM_ENV.get("POOLSHIM_LIVE_DIR")
            subprocess.run([PSSTAT] + (["--live-dir", live] if live else []) + gone,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)


def rgw_env(cfg):
    return config_env("shim" if cfg == "shim-osd" else cfg)


def run_rgw(args, cluster, cfg, setup, rep, workdir, outdir):
    title, lgargs = next((t, a) for n, t, a in RGW_SETUPS if n == setup)
    seconds, warmup = durations(args, setup)
    run_id = f"{setup}.{cfg}.{rep + 1}"
    tmp = tempfile.mkdtemp(prefix=f"{run_id}.", dir=workdir)
    env = rgw_env(cfg)
    shim = is_shim_env(env)
    # One radosgw for every setup of a configuration and repeat: its
    # report, written as it stops, goes with that session.
    reports = os.path.join(outdir, "reports", f"rgw.{cfg}.{rep + 1}")
    if cluster.session != (cfg, rep):
        os.makedirs(reports, exist_ok=True)
        cluster.rgw_pids = cluster.gateway(cfg, os.path.join(reports, "%e-%p.json"))
        cluster.session = (cfg, rep)
    rgw, osd = cluster.rgw_pids["radosgw"], cluster.rgw_pids["ceph-osd"]
    ak, sk = cluster.env["AWS_ACCESS_KEY_ID"], cluster.env["AWS_SECRET_ACCESS_KEY"]
    endpoint = cluster.env["S3_ENDPOINT"]
    procs = []
    try:
        if setup.startswith("rgw-proxy-"):
            with open(f"{tmp}/creds", "w") as f:
                f.write("# demo harness\nPSDEMOHARNESS demo-harness-secret\n")
            penv = dict(env)
            if shim:
                penv["POOLSHIM_STATS"] = os.path.join(reports, "%e-%p.json")
            px = Proc("proxy", [S3PROXY, "--port", "0", "--credentials", f"{tmp}/creds",
                                "--backend", endpoint, "--backend-auth", f"{ak}:{sk}:us-east-1"],
                      clean_env(penv), tmp)
            procs.append(px)
            endpoint = f"http://127.0.0.1:{px.wait_listening()}"
            ak, sk = "PSDEMOHARNESS", "demo-harness-secret"
            pids = {"proxy": px.pid, "node1": rgw}
        else:
            pids = {"proxy": rgw, "node1": osd}
        groups = {n: [p] for n, p in pids.items()}
        sampler = Sampler(groups, [p for n, p in pids.items()
                                   if shim and (n == "proxy" or p == rgw or cfg == "shim-osd")], tmp)
        lg = loadgen_cmd(args, tmp, endpoint, ak, sk, "psdemo", run_id, seconds, warmup, "30s",
                         lgargs)
        rc, t_end = run_loadgen(lg, {}, tmp, seconds + warmup + 120)
        sampler.finish()
        for name, pid in (("radosgw", rgw), ("ceph-osd", osd)):
            if not os.path.exists(f"/proc/{pid}"):
                raise Fail(f"{name} (pid {pid}) died during {run_id}; its logs are in "
                           f"{cluster.dir}/log")
        for p in procs:
            if not p.alive():
                raise Fail(f"{p.name} died (status {p.p.returncode}) during {run_id}; its log "
                           f"({p.err}):\n{p.log_tail()}")
        lgj = loadgen_results(tmp, run_id, rc)
        clean = all([p.stop() for p in procs])
        procs = []
        return measure(args, cfg, setup, rep, lgj, rc, sampler, t_end, shim, reports, clean, pids)
    finally:
        for p in procs:
            p.stop(timeout=5.0)
        if args.keep or isinstance(sys.exc_info()[1], Fail):
            pass                    # kept for the logs
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def untemplate(name):
    """Boost's template arguments run to a screenful: "f<a<b>, c>(x)" -> "f<>(x)"
    (but operator<, operator<<, ... keep their name)."""
    out, depth = [], 0
    for i, ch in enumerate(name):
        if ch == "<" and not name[:i].endswith(("operator", "operator<")):
            depth += 1
            if depth == 1:
                out.append("<>")
        elif ch == ">" and depth and not name[:i].endswith("operator-"):
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def symbolize_live(text, pid):
    """Names the frames a report written on a signal leaves as bare
    addresses ("#0 0x7f.. (?)"), with eu-addr2line on the live process."""
    tool = shutil.which("eu-addr2line")
    addrs = sorted(set(re.findall(r"#\d+ (0x[0-9a-f]+) \(\?\)", text)))
    if not tool or not addrs:
        return text
    try:
        r = subprocess.run([tool, f"--pid={pid}", "-a", "-f", "-C", "-S"] + addrs,
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return text
    # -a: each answer starts with the address; a name, then source lines.
    names, at = {}, None
    for line in r.stdout.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line):
            at = hex(int(line, 16))
        elif at:
            if not line.startswith(("??", "()")):
                line = untemplate(line)
                names[at] = line if len(line) <= 160 else line[:157] + "..."
            at = None
    return re.sub(r"#(\d+) (0x[0-9a-f]+) \(\?\)",
                  lambda m: f"#{m.group(1)} {m.group(2)} " + (names.get(m.group(2)) or "(?)"), text)


def rgw_report(args, cluster, outdir):
    """The shim's text report for radosgw, with call sites: a radosgw of
    its own under the shim (POOLSHIM_BACKTRACE=8, so not measured), a few
    verified GETs and PUTs of 1 and 16 MiB, and the report it writes on
    SIGUSR2 (POOLSHIM_DUMP_SIGNAL), its frames named by eu-addr2line.  Not
    the report at exit: naming call sites there starts elfutils' debuginfod
    client, whose curl_global_init reaches the OpenSSL radosgw has already
    torn down, and radosgw dies half-way through the report.  The path of
    the report, or None."""
    path = os.path.join(outdir, "reports", "radosgw-report.txt")
    dump = os.path.join(cluster.dir, "log", "radosgw-report.txt")
    pids = cluster.gateway("shim", dump, {"POOLSHIM_STATS_FORMAT": "text", "POOLSHIM_BACKTRACE": "8",
                                          "POOLSHIM_DUMP_SIGNAL": "USR2"})
    cluster.session = None
    for op, size, n in (("put", "16MiB", 24), ("get", "16MiB", 48), ("put", "1MiB", 96),
                        ("get", "1MiB", 192)):
        cluster.loadgen(["--prefix", f"report-{size}/", "--op", op, "--size", size, "--ops", str(n),
                         "--concurrency", str(args.concurrency), "--verify"],
                        f"{op} {size} for radosgw's report")
    os.kill(pids["radosgw"], signal.SIGUSR2)
    text = ""
    end = time.monotonic() + 30
    while "end of poolshim report" not in text and time.monotonic() < end:
        time.sleep(0.2)
        try:
            with open(dump, errors="replace") as f:
                text = f.read()
        except OSError:
            pass
    if "end of poolshim report" in text:
        with open(path, "w") as f:
            f.write(symbolize_live(text, pids["radosgw"]))
    # Back to a plain radosgw.
    cluster.gateway("none", "")
    cluster.session = None
    return path if os.path.exists(path) else None


# --------------------------------------------------------------------------
# Summary, table, plots.
# --------------------------------------------------------------------------
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs, scenarios, configs):
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


def fmt(v, spec, width):
    return f"{'-' if v is None else format(v, spec):>{width}}"


def print_table(rows, titles, header, labels=("proxy", "nodes")):
    """labels: what the two columns of each per-process figure stand for."""
    print(header)
    cols = (f"{'config':<14}{'MiB/s':>8}{'[min-max]':>14}{'x none':>7}{'ops/s':>8}{'p50 ms':>8}"
            f"{'p99 ms':>8}{'flt/op':>14}{'CPU s/GiB':>14}{'syscalls/op':>14}")
    pair = f"{labels[0]:>7}{labels[1]:>7}"
    sub = f"{'':<75}{pair:>14}{pair:>14}{pair:>14}"
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        print(f"\n{titles.get(scen, scen)}")
        print(cols)
        print(sub)
        for r in (x for x in rows if x["scenario"] == scen):
            spread = f"[{r['mib_s_min']:.0f}-{r['mib_s_max']:.0f}]"
            line = (f"{r['config']:<14}{r['mib_s']:8.0f}{spread:>14}{fmt(r['x_none'], '.2f', 7)}"
                    f"{r['ops_s']:8.1f}{fmt(r['p50_ms'], '.1f', 8)}{fmt(r['p99_ms'], '.1f', 8)}")
            for key, spec in (("faults_per_op", ".0f"), ("cpu_s_per_gib", ".2f"),
                              ("syscalls_per_op", ".0f")):
                line += fmt(r.get(f"proxy_{key}"), spec, 7) + fmt(r.get(f"nodes_{key}"), spec, 7)
            if r["data_errors"] or r["failed_ops"]:
                line += f"  DATA ERRORS {r['data_errors']}, FAILED OPS {r['failed_ops']}"
            print(line)


def print_small_table(rows, titles, header):
    """The small-request table: requests/s and p99 first, where harm would show."""
    print(header)
    cols = (f"{'config':<10}{'req/s':>9}{'[min-max]':>16}{'x none':>8}{'p50 ms':>8}{'p99 ms':>8}"
            f"{'[min-max]':>14}{'p99 x':>7}{'CPU us/req':>14}{'calls/req':>14}")
    sub = f"{'':<80}{'proxy nodes':>14}{'proxy nodes':>14}"
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        print(f"\n{titles.get(scen, scen)}")
        print(cols)
        print(sub)
        for r in (x for x in rows if x["scenario"] == scen):
            spread = f"[{r['ops_s_min']:.0f}-{r['ops_s_max']:.0f}]"
            p99 = ("-" if r["p99_ms_min"] is None
                   else f"[{r['p99_ms_min']:.2f}-{r['p99_ms_max']:.2f}]")
            line = (f"{r['config']:<10}{r['ops_s']:9.0f}{spread:>16}{fmt(r['x_none'], '.3f', 8)}"
                    f"{fmt(r['p50_ms'], '.2f', 8)}{fmt(r['p99_ms'], '.2f', 8)}{p99:>14}"
                    f"{fmt(r['p99_x_none'], '.2f', 7)}")
            for key, spec in (("cpu_us_per_op", ".0f"), ("syscalls_per_op", ".1f")):
                line += fmt(r.get(f"proxy_{key}"), spec, 7) + fmt(r.get(f"nodes_{key}"), spec, 7)
            if r["data_errors"] or r["failed_ops"]:
                line += f"  DATA ERRORS {r['data_errors']}, FAILED OPS {r['failed_ops']}"
            print(line)


def small_markdown(rows, titles):
    """The small-request table as Markdown (results.md, docs/results.md)."""
    def f(v, spec):
        return "-" if v is None else format(v, spec)
    out = []
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        out += [f"\n**{titles.get(scen, scen)}**\n",
                "| config | req/s | [min-max] | x none | p50 ms | p99 ms | p99 [min-max] | p99 x none | "
                "CPU us/req proxy | CPU us/req nodes | I/O calls/req proxy | I/O calls/req nodes |",
                "|---|" + "---:|" * 11]
        for r in (x for x in rows if x["scenario"] == scen):
            p99 = "-" if r["p99_ms_min"] is None else f"{r['p99_ms_min']:.2f}-{r['p99_ms_max']:.2f}"
            out.append(f"| {r['config']} | {r['ops_s']:.0f} | {r['ops_s_min']:.0f}-{r['ops_s_max']:.0f} | "
                       f"{f(r['x_none'], '.3f')} | {f(r['p50_ms'], '.2f')} | {f(r['p99_ms'], '.2f')} | "
                       f"{p99} | {f(r['p99_x_none'], '.2f')} | {f(r.get('proxy_cpu_us_per_op'), '.0f')} | "
                       f"{f(r.get('nodes_cpu_us_per_op'), '.0f')} | {f(r.get('proxy_syscalls_per_op'), '.1f')} | "
                       f"{f(r.get('nodes_syscalls_per_op'), '.1f')} |")
    return "\n".join(out) + "\n"


def markdown(rows, titles, labels=("proxy", "nodes")):
    """The table as Markdown (results.md), for the README and docs/results.md."""
    def f(v, spec):
        return "-" if v is None else format(v, spec)
    a, b = labels
    out = []
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        out += [f"\n**{titles.get(scen, scen)}**\n",
                f"| config | MiB/s | [min-max] | x none | ops/s | p50 ms | p99 ms | faults/op {a} | "
                f"faults/op {b} | CPU s/GiB {a} | CPU s/GiB {b} | I/O calls/op {a} | "
                f"I/O calls/op {b} |",
                "|---|" + "---:|" * 12]
        for r in (x for x in rows if x["scenario"] == scen):
            out.append(f"| {r['config']} | {r['mib_s']:.0f} | {r['mib_s_min']:.0f}-{r['mib_s_max']:.0f} | "
                       f"{f(r['x_none'], '.2f')} | {r['ops_s']:.1f} | {f(r['p50_ms'], '.1f')} | "
                       f"{f(r['p99_ms'], '.1f')} | {f(r.get('proxy_faults_per_op'), '.0f')} | "
                       f"{f(r.get('nodes_faults_per_op'), '.0f')} | {f(r.get('proxy_cpu_s_per_gib'), '.2f')} | "
                       f"{f(r.get('nodes_cpu_s_per_gib'), '.2f')} | {f(r.get('proxy_syscalls_per_op'), '.0f')} | "
                       f"{f(r.get('nodes_syscalls_per_op'), '.0f')} |")
    return "\n".join(out) + "\n"


def plots(rows, scenarios, configs, titles, outdir, prefix):
    """PNG bar charts with gnuplot: throughput and p99 relative to no preload."""
    gp = shutil.which("gnuplot")
    if not gp:
        say("demo: gnuplot not installed (Debian: gnuplot-nox); no plots")
        return []
    made = []
    scen = [s for s in scenarios if any(r["scenario"] == s for r in rows)]
    cfgs = [c for c in configs if any(r["config"] == c for r in rows)]
    # Short x labels: the long titles overlap.
    short = {"nginx-proxy": "nginx proxy", "nginx-directio": "nginx directio", "haproxy": "haproxy"}
    for what, key, lo, hi, ylabel in (
            ("throughput", "mib_s", "mib_s_min", "mib_s_max", "throughput, x no preload (median, min-max)"),
            ("p99", "p99_ms", "p99_ms_min", "p99_ms_max", "p99 latency, x no preload (lower is better)")):
        data = os.path.join(outdir, f"{prefix}{what}.dat")
        with open(data, "w") as f:
            f.write("# scenario " + " ".join(f"{c} {c}-min {c}-max" for c in cfgs) + "\n")
            for s in scen:
                base = next((r for r in rows if r["scenario"] == s and r["config"] == "none"), None)
                vals = []
                for c in cfgs:
                    r = next((r for r in rows if r["scenario"] == s and r["config"] == c), None)
                    if not r or not base or not base[key] or r[key] is None:
                        vals += ["-", "-", "-"]
                    else:
                        vals += [f"{r[key] / base[key]:.4f}", f"{r[lo] / base[key]:.4f}",
                                 f"{r[hi] / base[key]:.4f}"]
                f.write(f"\"{short.get(s) or titles.get(s, s)}\" " + " ".join(vals) + "\n")
        png = os.path.join(outdir, f"{prefix}{what}.png")
        script = f"""set terminal pngcairo size 1100,520 font ",10"
set output "{png}"
set termoption noenhanced
set title "{ylabel}"
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key outside right top
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set datafile missing "-"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "black"
names = "{' '.join(cfgs)}"
plot for [i=0:{len(cfgs) - 1}] "{data}" using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title word(names, i+1)
"""
        r = subprocess.run([gp], input=script, text=True, capture_output=True)
        if r.returncode or not os.path.exists(png):
            script = script.replace("pngcairo", "png")
            r = subprocess.run([gp], input=script, text=True, capture_output=True)
        if r.returncode == 0 and os.path.exists(png):
            made.append(png)
        else:
            say(f"demo: gnuplot failed for {png}: {r.stderr.strip()[:300]}")
    return made


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


# --------------------------------------------------------------------------
def parse_list(value, known, what):
    items = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in items if x not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad)}; known: {', '.join(known)}")
    return items


def check_deps(configs, want_real):
    missing = [p for p in (STORAGED, S3PROXY, LOADGEN) if not os.access(p, os.X_OK)]
    if any(is_shim(c) for c in configs) and not os.path.exists(SHIM):
        missing.append(SHIM)
    if missing:
        raise SystemExit("demo: not built: " + ", ".join(missing) + "\ndemo: run scripts/bootstrap "
                         "(or make in the build directory named by PS_TOP_BUILDDIR)")
    for name, env, pkg in CONFIGS:
        lib = env.get("LD_PRELOAD")
        if name in configs and pkg and not os.path.exists(lib):
            raise SystemExit(f"demo: configuration {name} needs {lib} (Debian package {pkg}); "
                             f"install it (scripts/bootstrap does) or leave it out with --config")


def main():
    global SHIM, BASELINE, CONFIGS
    ap = argparse.ArgumentParser(prog="scripts/demo", description=__doc__,
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
    ap.add_argument("--config", type=lambda v: parse_list(v, CONFIG_NAMES, "configuration"),
                    help="comma-separated: " + ",".join(CONFIG_NAMES))
    ap.add_argument("--shim-lib", help="the libpoolshim.so of the shim configurations "
                    "(default: POOLSHIM_LIB, else the build's .libs/libpoolshim.so)")
    ap.add_argument("--baseline-lib", help="a second libpoolshim.so (e.g. the previous build), "
                    "run as configuration 'baseline' (default: POOLSHIM_BASELINE_LIB)")
    ap.add_argument("--repeat", type=int, help="interleaved repeats (default 3, --quick 1)")
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
    args = ap.parse_args()
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.seconds = args.seconds or (1.0 if args.quick else 2.0)
    args.warmup = args.warmup if args.warmup is not None else (0.3 if args.quick else 0.5)
    args.small_seconds = args.small_seconds or (0.5 if args.quick else 1.0)
    args.small_warmup = (args.small_warmup if args.small_warmup is not None
                         else (0.2 if args.quick else 0.3))
    if (args.repeat < 1 or args.seconds <= 0 or args.warmup < 0 or args.concurrency < 1
            or args.small_seconds <= 0 or args.small_warmup < 0):
        ap.error("--repeat, --seconds, --small-seconds and --concurrency must be positive")
    if not 0 <= args.port < 65536:
        ap.error("--port wants 0..65535")
    if args.small and args.no_small:
        ap.error("--small and --no-small exclude each other")

    # The libraries: flags over the environment.
    if args.shim_lib:
        SHIM = os.path.abspath(args.shim_lib)
    if args.baseline_lib:
        BASELINE = os.path.abspath(args.baseline_lib)
    CONFIGS = make_configs()
    if BASELINE and not os.path.exists(BASELINE):
        raise SystemExit(f"demo: the baseline shim {BASELINE} does not exist")
    if args.config and "baseline" in args.config and not BASELINE:
        ap.error("--config baseline needs a baseline shim (--baseline-lib or POOLSHIM_BASELINE_LIB)")

    # What runs: scenarios of the demo stack, real setups, the allocator table.
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
    # Canonical order, and always "none", which every ratio is against.
    configs = [c for c, _, _ in CONFIGS if c == "none" or not args.config or c in args.config]
    scenarios = [s for s in SCENARIO_NAMES if s in wanted]
    real_setups = [s for s in REAL_NAMES if s in wanted]
    rgw_setups = [s for s in RGW_NAMES if s in wanted]
    if real_setups and real_missing():
        # Asked for by name (or --real without Ceph beside): an error; part
        # of a larger run: skipped.
        if ((args.real and not rgw_setups)
                or (args.scenario and any(s in REAL_NAMES for s in args.scenario))):
            raise SystemExit("demo: nginx/haproxy/wrk setups need " + ", ".join(real_missing())
                             + " (Debian packages nginx-light, haproxy, wrk)")
        say("demo: nginx/haproxy/wrk setups skipped: not installed: " + ", ".join(real_missing()))
        real_setups = []
    if scenarios or real_setups or rgw_setups:
        check_deps(configs, bool(real_setups))
    if scenarios and args.port and not port_free(args.port):
        raise SystemExit(f"demo: port {args.port} on 127.0.0.1 is taken; pick another with --port")

    stamp = time.strftime("%Y%m%d-%H%M%S")
    outdir = os.path.abspath(args.out or os.path.join(TOP, "results", f"demo-{stamp}"))
    os.makedirs(outdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="psdemo.", dir=os.environ.get("TMPDIR", "/tmp"))

    def on_signal(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    titles = {n: t for n, t, _ in SCENARIOS}
    titles.update({n: t for n, t in REAL_SETUPS})
    libs = {"shim": lib_line(SHIM)}
    if BASELINE:
        libs["baseline"] = lib_line(BASELINE)
    plan_configs = {s: scenario_configs(s, configs) for s in scenarios + real_setups}
    rgw_configs = configs + (["shim-osd"] if args.shim_osd and "shim" in configs else [])
    plan_configs.update({s: scenario_configs(s, rgw_configs) for s in rgw_setups})
    result = {"harness": "poolshim demo", "version": 2, "machine": machine(),
              "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
              "settings": {"repeat": args.repeat, "seconds": args.seconds, "warmup": args.warmup,
                           "small_seconds": args.small_seconds, "small_warmup": args.small_warmup,
                           "concurrency": args.concurrency, "scenarios": scenarios,
                           "real_setups": real_setups, "rgw_setups": rgw_setups,
                           "scenario_configs": plan_configs,
                           "configs": configs, "shim_env": USER_SHIM_ENV, "libraries": libs,
                           "hugepages": open("/proc/sys/vm/nr_hugepages").read().strip()},
              "runs": [], "summary": [], "real_runs": [], "real_summary": [], "small_summary": [],
              "rgw_runs": [], "rgw_summary": []}
    failed = None
    keep_logs = False
    t_start = time.monotonic()
    cluster = RgwCluster(workdir)
    rgw_txt = None
    try:
        # Interleaved: repeat 1 of every configuration and scenario, then repeat 2, ...
        plan = []
        for rep in range(args.repeat):
            for cfg in configs:
                for scen in scenarios:
                    if cfg in plan_configs[scen]:
                        plan.append(("demo", cfg, scen, rep))
        for rep in range(args.repeat):
            for cfg in REAL_CONFIGS:
                for setup in real_setups:
                    if cfg in plan_configs[setup]:
                        plan.append(("real", cfg, setup, rep))
        # One radosgw per configuration and repeat runs all the radosgw setups.
        for rep in range(args.repeat):
            for cfg in RGW_CONFIGS:
                for setup in rgw_setups:
                    if cfg in plan_configs[setup]:
                        plan.append(("rgw", cfg, setup, rep))
        text_run = None
        big = [s for s in scenarios if s not in SMALL_NAMES]
        if "shim" in configs and scenarios:
            ts = (TEXT_REPORT_SCENARIO if TEXT_REPORT_SCENARIO in scenarios
                  else (big or scenarios)[0])
            text_run = ("demo", "shim", ts, args.repeat - 1)
        # wrk setups: a 1 s warm-up and whole seconds; every run ~1.5 s to start and stop
        est = [sum(durations(args, scen)) if kind != "real"
               else 1 + max(1, round(durations(args, scen)[0])) for kind, _, scen, _ in plan]
        progress.plan(len(plan), sum(est) / len(est) + 1.5 if est else 0)
        say(f"demo: {len(plan)} runs; results in {outdir}")
        for kind, cfg, scen, rep in plan:
            if kind == "rgw" and cluster.state is None:
                cluster.up()
            if kind == "rgw" and cluster.state == "skipped":
                progress.finished(0)
                continue
            progress.show(f"{kind} {scen} under {cfg}, repeat {rep + 1}/{args.repeat}")
            t0 = time.monotonic()
            if kind == "demo":
                run = run_demo(args, cfg, scen, rep, (kind, cfg, scen, rep) == text_run,
                               workdir, outdir)
                result["runs"].append(run)
            elif kind == "rgw":
                run = run_rgw(args, cluster, cfg, scen, rep, workdir, outdir)
                result["rgw_runs"].append(run)
            else:
                run = run_real(args, cfg, scen, rep, workdir, outdir)
                result["real_runs"].append(run)
            progress.finished(time.monotonic() - t0)
            if not run["ops_s"]:
                say(f"demo: {scen} under {cfg}: no operation completed in the measured "
                    f"{durations(args, scen)[0]:g} s; use a longer --seconds or --small-seconds")
            if run["mismatches"] or run["errors"]:
                say(f"demo: {scen} under {cfg}: data errors {run['mismatches']}, "
                    f"failed operations {run['errors']}")
        if cluster.state == "up" and any(r["config"] == "shim" for r in result["rgw_runs"]):
            progress.clear()
            say("demo: radosgw's report: a shimmed radosgw with POOLSHIM_BACKTRACE=8 (not measured)")
            rgw_txt = rgw_report(args, cluster, outdir)
    except Fail as e:
        failed = str(e)
        keep_logs = True
    except KeyboardInterrupt as e:
        failed = f"interrupted ({e or 'SIGINT'}); every process it started is stopped"
    finally:
        Proc.stop_all()
        try:
            cluster.down()
        except Fail as e:
            say(f"demo: {e}")
        progress.clear()
        if args.keep or keep_logs:
            say(f"demo: logs and data kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    hdr = (f"machine: {result['machine']}\n{args.repeat} interleaved repeat(s) of "
           f"{args.seconds:g} s measured (+{args.warmup:g} s warm-up), {args.concurrency} connections; "
           f"median [min-max]; per-op faults, CPU per GiB moved and I/O calls (shim only) over the "
           f"measured window; nodes = both storage nodes together"
           + ("".join(f"\n{k}: {v}" for k, v in libs.items()) if BASELINE else ""))
    wrk_s = max(1, round(args.small_seconds))
    small_hdr = (f"machine: {result['machine']}\n{args.repeat} interleaved repeat(s); loadgen: "
                 f"{args.small_seconds:g} s measured (+{args.small_warmup:g} s warm-up), wrk: {wrk_s} s "
                 f"(+1 s warm-up); {args.concurrency} connections; median [min-max]; x none = "
                 f"requests/s against no preload; CPU and I/O calls per request over the measured "
                 f"window (I/O calls: shim only; for wrk setups from the exit reports, warm-up "
                 f"included): proxy = s3proxy, nginx, or haproxy; nodes = both storaged, or the "
                 f"nginx behind haproxy; loadgen runs under the configuration, wrk never"
                 + "".join(f"\n{k}: {v}" for k, v in libs.items()))
    big_real = [s for s in real_setups if s not in SMALL_NAMES]
    big_demo = [s for s in scenarios if s not in SMALL_NAMES]
    small_all = [s for s in scenarios + real_setups if s in SMALL_NAMES]
    if result["runs"] and big_demo:
        result["summary"] = summarize(result["runs"], big_demo, configs)
        print("\n== The demo S3 stack: s3proxy + 2 storaged, loadgen --verify ==")
        print_table(result["summary"], titles, hdr)
    if result["real_runs"] and big_real:
        result["real_summary"] = summarize(result["real_runs"], big_real, REAL_CONFIGS)
        print("\n== Real programs: nginx, haproxy, driven by wrk (GET 16 MiB) ==")
        print_table(result["real_summary"], titles,
                    hdr.replace("nodes = both storage nodes together", "proxy = the server "
                                "(nginx master+workers, haproxy); nodes = the storaged behind it")
                    .replace(f"(+{args.warmup:g} s warm-up)", "(+1 s warm-up)")
                    .replace(f"of {args.seconds:g} s measured", f"of {max(1, round(args.seconds))} s measured"))
    if small_all and (result["runs"] or result["real_runs"]):
        result["small_summary"] = summarize(result["runs"] + result["real_runs"], small_all,
                                            SMALL_CONFIGS)
        print("\n== Small requests (do no harm): the demo stack, nginx, haproxy ==")
        print_small_table(result["small_summary"], titles, small_hdr)
    if result["rgw_runs"]:
        result["rgw_summary"] = summarize(result["rgw_runs"], rgw_setups, RGW_CONFIGS)
        rgw_hdr = (hdr.replace("nodes = both storage nodes together", "@GROUPS@")
                   + "\nCeph 16 on loopback (scripts/rgw: one mon, mgr and BlueStore OSD, pool "
                   "size 1); loadgen runs plain, the configuration applies to radosgw"
                   + (" and, for shim-osd, the OSD" if "shim-osd" in rgw_configs else ""))
        for what, sel, labels, groups in (
                ("Ceph RGW: radosgw on a one-node cluster, loadgen --verify",
                 lambda s: not s.startswith("rgw-proxy-"), ("rgw", "osd"),
                 "rgw = radosgw; osd = the ceph-osd behind it"),
                ("s3proxy --backend-auth in front of radosgw, loadgen --verify",
                 lambda s: s.startswith("rgw-proxy-"), ("s3prx", "rgw"),
                 "s3prx = s3proxy (under the configuration too); rgw = radosgw")):
            rows = [r for r in result["rgw_summary"] if sel(r["scenario"])]
            if rows:
                print(f"\n== {what} ==")
                print_table(rows, titles, rgw_hdr.replace("@GROUPS@", groups), labels)
    result["targets"] = (targets(result["summary"], result["real_summary"])
                         + small_targets(result["small_summary"])
                         + rgw_targets(result["rgw_summary"]))
    if result["targets"]:
        print("\n== Targets (issues 6, 11 and 16) ==")
        print("\n".join(result["targets"]))
    made = []
    if result["summary"]:
        made += plots(result["summary"], big_demo, configs, titles, outdir, "")
    if result["real_summary"]:
        made += plots(result["real_summary"], big_real, REAL_CONFIGS, titles, outdir, "real-")
    if result["small_summary"]:
        made += plots(result["small_summary"], small_all, SMALL_CONFIGS, titles, outdir, "small-")
    if result["rgw_summary"]:
        made += plots(result["rgw_summary"], rgw_setups, RGW_CONFIGS, titles, outdir, "rgw-")
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
        if result["targets"]:
            f.write("\n" + "".join(f"- {t}\n" for t in result["targets"]))
    txt = None
    if not failed and text_run:
        d = os.path.join(outdir, "reports", f"{text_run[2]}.shim.{text_run[3] + 1}")
        p = os.path.join(d, "s3proxy-report.txt")
        if os.path.exists(p):
            txt = p
            print(f"\n== poolshim's report for the proxy ({titles[text_run[2]]}, shim, "
                  f"repeat {text_run[3] + 1}) ==")
            with open(p) as f:
                sys.stdout.write(f.read())
    if not failed and rgw_txt:
        print("\n== poolshim's report for radosgw (GET and PUT of 1 and 16 MiB, "
              "POOLSHIM_BACKTRACE=8, not measured) ==")
        with open(rgw_txt) as f:
            sys.stdout.write(f.read())
    print(f"\nresults: {outdir}/results.json" + "".join(f"\nplot:    {m}" for m in made)
          + (f"\nreport:  {txt}" if txt else "") + (f"\nreport:  {rgw_txt}" if rgw_txt else ""))
    print(f"demo: {time.monotonic() - t_start:.0f} s", file=sys.stderr)
    sys.stdout.flush()
    if failed:
        print(f"demo: FAILED: {failed}", file=sys.stderr)
        return 1
    bad = [r for r in result["runs"] + result["real_runs"] + result["rgw_runs"]
           if r["mismatches"] or r["errors"]]
    if bad:
        print(f"demo: FAILED: {len(bad)} run(s) had data errors or failed operations "
              f"(see {outdir}/results.json)", file=sys.stderr)
        return 1
    if alloc_part:
        print("\n== Allocator micro-benchmark (scripts/bench alloc) ==", flush=True)
        r = subprocess.run([sys.executable, os.path.join(TOP, "scripts", "bench"), "alloc",
                            "--seconds", "0.5", "--repeat", "3", "--threads", "1",
                            "--shim-lib", SHIM, "--json", os.path.join(outdir, "alloc.json")])
        if r.returncode:
            return 1
    return 0

if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        Proc.stop_all()
