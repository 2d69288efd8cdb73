# SPDX-License-Identifier: MIT
"""--real on Ceph: radosgw on a one-node cluster (scripts/rgw), up once
for every radosgw run, and s3proxy --backend-auth in front of it; and the
shim's report for radosgw, with its call sites named."""
import os
import re
import signal
import subprocess
import time

from . import settings
from .loadgen import loadgen_cmd, loadgen_results, measure, run_loadgen
from .messages import Fail, say
from .procs import Proc, RunScope, clean_env, die_with_parent
from .sampler import Sampler
from .scenarios import RGW_SETUPS, durations
from .stack import ACCESS_KEY, SECRET_KEY, write_credentials
from .symbolize import symbolize_live

RGW_SCRIPT = os.path.join(settings.TOP, "scripts", "rgw")


class RgwCluster:
    """scripts/rgw's one-node cluster: brought up once for every radosgw
    run, radosgw restarted (and the OSD, for shim-osd) when the
    configuration or the repeat changes, taken down however the harness
    ends."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "rgw")
        self.state = None           # "up", "skipped", or None before up()
        self.session = None         # (cfg, rep) radosgw now runs for
        self.rgw_pids = {}          # its pids, and the OSD's, by name
        self.env = {}
        self.shimmed = set()        # pids of shimmed daemons, for their live files

    def script(self, argv, extra=None, timeout=120):
        env = clean_env({"RGW_BUILDDIR": settings.BUILD, **(extra or {})})
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
        r = subprocess.run([settings.LOADGEN, "--endpoint", env["S3_ENDPOINT"], "--access-key",
                            env["AWS_ACCESS_KEY_ID"], "--secret-key", env["AWS_SECRET_ACCESS_KEY"],
                            "--bucket", "psdemo", "--seed", "42"] + argv,
                           env=clean_env({}), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300, preexec_fn=die_with_parent)
        if r.returncode:
            raise Fail(f"loadgen {what} against radosgw failed (exit {r.returncode}):\n"
                       f"{(r.stdout + r.stderr)[-1000:]}")

    def gateway(self, cfg, stats, extra=None):
        """Restarts radosgw under cfg, its report going to stats; the pids
        of radosgw and the OSD."""
        env = rgw_env(cfg)
        argv = ["restart"]
        extra = dict(extra or {})
        if settings.is_shim_env(env):
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
        if settings.is_shim_env(env):
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
        # stay.  poolshim-collect writes a gone process's report where its
        # POOLSHIM_STATS said (one for stderr goes nowhere here) and
        # removes its record.
        gone = [str(p) for p in self.shimmed if not os.path.exists(f"/proc/{p}")]
        self.shimmed = set()
        if gone and os.access(settings.PSCOLLECT, os.X_OK):
            live = settings.USER_SHIM_ENV.get("POOLSHIM_LIVE_DIR")
            subprocess.run([settings.PSCOLLECT] + (["--live-dir", live] if live else []) + gone,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60)


def rgw_env(cfg):
    """radosgw's environment under cfg (shim-osd: the shim's)."""
    return settings.config_env("shim" if cfg == "shim-osd" else cfg)


def start_front_proxy(scope, env, shim, reports, endpoint, ak, sk):
    """rgw-proxy setups: s3proxy --backend-auth in front of radosgw, under
    the configuration; its Proc, listening, and its endpoint."""
    tmp = scope.tmp
    creds = write_credentials(tmp)
    penv = dict(env)
    if shim:
        penv["POOLSHIM_STATS"] = os.path.join(reports, "%e-%p.json")
    px = Proc("proxy", [settings.S3PROXY, "--port", "0", "--credentials", creds,
                        "--backend", endpoint, "--backend-auth", f"{ak}:{sk}:us-east-1"],
              clean_env(penv), tmp)
    scope.procs.append(px)
    return px, f"http://127.0.0.1:{px.wait_listening()}"


def run_rgw(args, cluster, cfg, setup, rep, workdir, outdir):
    """One run of a radosgw setup under cfg; its record.  radosgw restarts
    when the configuration or the repeat changes."""
    lgargs = next(a for n, _, a in RGW_SETUPS if n == setup)
    seconds, warmup = durations(args, setup)
    run_id = f"{setup}.{cfg}.{rep + 1}"
    with RunScope(args, run_id, workdir) as scope:
        tmp = scope.tmp
        env = rgw_env(cfg)
        shim = settings.is_shim_env(env)
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
        if setup.startswith("rgw-proxy-"):
            px, endpoint = start_front_proxy(scope, env, shim, reports, endpoint, ak, sk)
            ak, sk = ACCESS_KEY, SECRET_KEY
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
        for p in scope.procs:
            if not p.alive():
                raise Fail(f"{p.name} died (status {p.p.returncode}) during {run_id}; its log "
                           f"({p.err}):\n{p.log_tail()}")
        lgj = loadgen_results(tmp, run_id, rc)
        clean = all([p.stop() for p in scope.procs])
        scope.procs = []
        return measure(args, cfg, setup, rep, lgj, rc, sampler, t_end, shim, reports, clean, pids)


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
