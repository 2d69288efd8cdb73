# SPDX-License-Identifier: MIT
"""One run of the demo stack: two storaged nodes and an s3proxy in front of
them, all under the configuration, driven by loadgen --verify (under it
too)."""
import os

from . import settings
from .loadgen import loadgen_cmd, loadgen_results, measure, run_loadgen
from .messages import Fail
from .procs import Proc, RunScope, clean_env, port_free
from .sampler import Sampler
from .scenarios import SCENARIOS, durations

# The proxy's credentials for loadgen.
ACCESS_KEY, SECRET_KEY = "PSDEMOHARNESS", "demo-harness-secret"


def write_credentials(tmp):
    """s3proxy's --credentials file; its path."""
    path = f"{tmp}/creds"
    with open(path, "w") as f:
        f.write(f"# demo harness\n{ACCESS_KEY} {SECRET_KEY}\n")
    return path


def start_stack(args, scope, env, penv):
    """The two nodes (under env) and the proxy (under penv), listening; the
    three Procs and the proxy's port."""
    tmp = scope.tmp
    n1 = Proc("node1", [settings.STORAGED, "--dir", f"{tmp}/data1", "--port", "0", "--no-fsync"],
              clean_env(env), tmp)
    n2 = Proc("node2", [settings.STORAGED, "--dir", f"{tmp}/data2", "--port", "0", "--no-fsync"],
              clean_env(env), tmp)
    scope.procs += [n1, n2]
    p1, p2 = n1.wait_listening(), n2.wait_listening()
    creds = write_credentials(tmp)
    if args.port and not port_free(args.port):
        raise Fail(f"port {args.port} on 127.0.0.1 is taken; pick another with --port "
                   f"(or --port 0 for any free one)")
    px = Proc("proxy", [settings.S3PROXY, "--port", str(args.port), "--credentials", creds,
                        "--backend", f"http://127.0.0.1:{p1}",
                        "--backend", f"http://127.0.0.1:{p2}"], clean_env(penv), tmp)
    scope.procs.append(px)
    return px, n1, n2, px.wait_listening()


def run_demo(args, cfg, scen, rep, text_report, workdir, outdir):
    """One run of scenario scen under configuration cfg; its record (see
    measure).  text_report: the proxy writes the shim's text report."""
    lgargs = next(a for n, _, a in SCENARIOS if n == scen)
    seconds, warmup = durations(args, scen)
    run_id = f"{scen}.{cfg}.{rep + 1}"
    with RunScope(args, run_id, workdir) as scope:
        tmp = scope.tmp
        reports = os.path.join(outdir, "reports", run_id)
        shim = settings.is_shim(cfg)
        env = settings.config_env(cfg)
        if shim:
            os.makedirs(reports, exist_ok=True)
            env["POOLSHIM_STATS"] = os.path.join(reports, "%e-%p.json")
        penv = dict(env)
        if text_report:
            penv["POOLSHIM_STATS"] = os.path.join(reports, "s3proxy-report.txt")
            penv["POOLSHIM_STATS_FORMAT"] = "text"
        px, n1, n2, pp = start_stack(args, scope, env, penv)
        groups = {"proxy": [px.pid], "node1": [n1.pid], "node2": [n2.pid]}
        sampler = Sampler(groups, [px.pid, n1.pid, n2.pid] if shim else [], tmp)
        lg = loadgen_cmd(args, tmp, f"http://127.0.0.1:{pp}", ACCESS_KEY, SECRET_KEY, "demo",
                         run_id, seconds, warmup, "20s", lgargs)
        rc, t_end = run_loadgen(lg, env, tmp, seconds + warmup + 90)
        sampler.finish()
        dead = [p for p in scope.procs if not p.alive()]
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
        scope.procs = []
        return measure(args, cfg, scen, rep, lgj, rc, sampler, t_end, shim, reports, clean,
                       {"proxy": px.pid, "node1": n1.pid, "node2": n2.pid})
