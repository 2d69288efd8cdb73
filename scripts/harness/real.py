# SPDX-License-Identifier: MIT
"""--real: nginx (a proxy with large proxy buffers, files with directio,
a small static file) and haproxy (in front of storaged, or of an nginx),
driven by wrk.  The large setups run storaged and wrk under the
configuration too, but for shim-proxy; the small ones never run wrk under
it."""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import time

from . import settings
from .messages import Fail
from .procs import Proc, RunScope, children, clean_env, die_with_parent, free_port, wait_port
from .sampler import Sampler
from .scenarios import NO_SHIM_ALTERNATIVES, REAL_SIZE, SMALL_NAMES, SMALL_SIZE, durations, side_bursts


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


def serve_file(tmp, size):
    """A file of size random bytes at /real/obj under tmp/www; the nginx
    root line that serves it."""
    os.makedirs(f"{tmp}/www/real")
    with open(f"{tmp}/www/real/obj", "wb") as f:
        f.write(os.urandom(size))
    return f"        root {tmp}/www;"


def proxy_body(nport, defaults=False):
    """nginx-proxy: to the storaged on nport, with large proxy buffers;
    defaults: with nginx's default proxy buffering instead (proxy_buffering
    on, proxy_buffer_size and proxy_buffers 8 of one page, 4 or 8 KiB,
    proxy_busy_buffers_size two of them, and what does not fit spilled to
    temporary files of up to 1 GiB), what a proxy_pass without buffer
    settings gets."""
    buffers = "" if defaults else """
            proxy_buffering on;
            proxy_buffer_size 1m;
            proxy_buffers 16 1m;
            proxy_busy_buffers_size 2m;
            proxy_max_temp_file_size 0;"""
    return f"""        location / {{
            proxy_pass http://127.0.0.1:{nport};
            proxy_http_version 1.1;
            proxy_set_header Connection "";{buffers}
        }}"""


def directio_body(tmp):
    """nginx-directio: a 16 MiB file read with O_DIRECT into large output buffers."""
    return serve_file(tmp, REAL_SIZE) + """
        sendfile off;
        directio 1m;
        directio_alignment 4k;
        output_buffers 2 16m;"""


def sendfile_body(tmp):
    """nginx-directio's baseline: the same file as Debian's nginx.conf
    serves files (sendfile on, tcp_nopush on), no directio."""
    return serve_file(tmp, REAL_SIZE) + """
        sendfile on;
        tcp_nopush on;"""


def start_nginx(tmp, port, body, workers, env):
    with open(f"{tmp}/nginx.conf", "w") as f:
        f.write(nginx_conf(tmp, port, body, workers))
    return Proc("nginx", [which("nginx"), "-p", tmp, "-c", f"{tmp}/nginx.conf",
                          "-e", f"{tmp}/nginx-error.log"], clean_env(env), tmp)


def start_haproxy(tmp, port, nport, env):
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
    srv = Proc("haproxy", [which("haproxy"), "-db", "-f", f"{tmp}/haproxy.cfg"], clean_env(env), tmp)
    # SIGUSR1: a soft stop that ends in exit(), so the report is written.
    srv.stop_signal = signal.SIGUSR1
    return srv


def start_backend(setup, scope, body, workers, srv_env, env):
    """What the server under test forwards to, started and answering: an
    nginx serving body (haproxy-nginx-1k, under srv_env), or a storaged
    holding the object (nginx-proxy, haproxy; under env); none for the
    others.  Its port and its group {"node1": pids} ((None, {}) for none)."""
    tmp = scope.tmp
    if setup == "haproxy-nginx-1k":
        nport = free_port()
        be = start_nginx(tmp, nport, body, workers, srv_env)
        scope.procs.append(be)
        wait_port(be, nport)
        return nport, {"node1": [be.pid] + nginx_workers(be)}
    if setup in ("nginx-proxy", "haproxy"):
        node = Proc("node1", [settings.STORAGED, "--dir", f"{tmp}/data1", "--port", "0", "--no-fsync"],
                    clean_env(env), tmp)
        scope.procs.append(node)
        nport = node.wait_listening()
        put_object(nport, "/real/obj", os.urandom(REAL_SIZE))
        return nport, {"node1": [node.pid]}
    return None, {}


def run_wrk(args, setup, url, env, run_id):
    """wrk: a 1 s warm-up, not measured, then the measured run (whole
    seconds).  Its output, the requests of both, and when the measured run
    started."""
    try:
        wu = subprocess.run([which("wrk"), "-t1", "-c2", "-d1s", url],
                            env=clean_env(env), capture_output=True, text=True,
                            timeout=60, preexec_fn=die_with_parent)
        m = re.search(r"(\d+) requests in", wu.stdout)
        warm_reqs = int(m.group(1)) if m else 0
        t_a = time.monotonic()
        secs = max(1, round(durations(args, setup)[0]))
        r = subprocess.run([which("wrk"), "-t2", f"-c{args.concurrency}", f"-d{secs}s",
                            "--latency", "--timeout", "20s", url],
                           env=clean_env(env), capture_output=True, text=True,
                           timeout=secs + 60, preexec_fn=die_with_parent)
        out = r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        raise Fail(f"wrk did not finish in {run_id}")
    m = re.search(r"(\d+) requests in", out)
    return out, warm_reqs + (int(m.group(1)) if m else 0), t_a


def wrk_record(setup, cfg, rep, size, w, rates, window, clean):
    """One run's record from wrk's figures w (see parse_wrk) and the
    samples' rates per group."""
    rps, p50, p99, nerr = w
    mib_s = rps * size / (1 << 20)
    run = {"scenario": setup, "config": cfg, "repeat": rep + 1, "mib_s": mib_s,
           "ops_s": rps, "p50_ms": p50, "p99_ms": p99, "errors": nerr, "mismatches": 0,
           "clean_exit": clean, "window_s": round(window, 3), "procs": {}}
    for name, (flt_s, cpu_s) in rates.items():
        run["procs"][name] = {"faults_per_op": flt_s / rps if rps else None,
                              "cpu_s_per_gib": cpu_s / (mib_s / 1024) if mib_s else None,
                              "cpu_us_per_op": cpu_s / rps * 1e6 if rps else None,
                              "cpu_util": cpu_s}
    return run


def exit_report_calls(run, groups, all_reqs):
    """I/O calls per request of each group from the shim's exit reports
    (PID.json): whole-process counts, warm-up included, over every request
    wrk made."""
    for name, pids in groups.items():
        calls, found = 0, False
        for pid in pids:
            for f in run["reports"]:
                if f.endswith(f"/{pid}.json"):
                    try:
                        with open(f) as fh:
                            report = json.load(fh)
                    except (OSError, ValueError):
                        continue
                    found = True
                    calls += sum(c["calls"] for c in report["calls"] if c["kind"] != "none")
        if found and all_reqs:
            run["procs"][name]["syscalls_per_op"] = calls / all_reqs


def start_servers(setup, scope, port, small, srv_env, env, alt=False):
    """The server under test on port (under srv_env), and what it forwards
    to, answering; the process groups {"proxy": the server and its workers,
    "node1": the backend's}.  alt: the setup's setting without the shim
    instead of its own (scenarios.NO_SHIM_ALTERNATIVES): nginx-directio
    with Debian's sendfile settings instead of directio, nginx-proxy with
    nginx's default proxy buffers."""
    tmp = scope.tmp
    # One worker for the small setups: with two, wrk's 4 connections
    # sometimes all land on one worker (nginx accepts without a mutex)
    # and a run measures 50k or 125k requests/s by that luck alone, in
    # every configuration; one worker measures the cost per request.
    workers = 1 if small else 2
    # nginx's defaults for the small file: no sendfile, no
    # open_file_cache, so every request opens, reads and closes the
    # file through the shim.
    body = serve_file(tmp, SMALL_SIZE) if small else None
    nport, groups = start_backend(setup, scope, body, workers, srv_env, env)
    if setup == "nginx-proxy":
        body = proxy_body(nport, defaults=alt)
    elif setup == "nginx-directio":
        body = sendfile_body(tmp) if alt else directio_body(tmp)
    if setup.startswith("nginx"):
        srv = start_nginx(tmp, port, body, workers, srv_env)
    else:
        srv = start_haproxy(tmp, port, nport, srv_env)
    scope.procs.append(srv)
    wait_port(srv, port)
    kids = nginx_workers(srv) if setup.startswith("nginx") else children(srv.pid)
    return {"proxy": [srv.pid] + kids, **groups}


def run_real(args, cfg, setup, rep, workdir, outdir):
    """One run of a real setup under cfg (shim-proxy: the shim in the server
    under test only; sendfile: nginx-directio served with sendfile, no
    shim; proxy-defaults: nginx-proxy with nginx's default proxy buffers,
    no shim); its record."""
    run_id = f"{setup}.{cfg}.{rep + 1}"
    alt = cfg == NO_SHIM_ALTERNATIVES.get(setup)
    plain = "shim" if cfg == "shim-proxy" else "none" if alt else cfg
    with RunScope(args, run_id, workdir, reverse=True) as scope:
        tmp = scope.tmp
        os.chmod(tmp, 0o755)
        env = settings.config_env(plain)
        shim = settings.is_shim(plain)
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
        port = free_port()
        url = f"http://127.0.0.1:{port}/real/obj"
        groups = start_servers(setup, scope, port, small, srv_env, env, alt=alt)
        # I/O calls come from the exit reports here: tools/poolshim-stat
        # crashes on nginx workers' live files (render_json, pool.requested).
        sampler = Sampler(groups, [], tmp)
        out, all_reqs, t_a = run_wrk(args, setup, url, env, run_id)
        t_b = time.monotonic()
        sampler.finish()
        for p in scope.procs:
            if not p.alive():
                raise Fail(f"{p.name} died (status {p.p.returncode}) during {run_id}; its log:\n"
                           f"{p.log_tail()}")
        w = parse_wrk(out)
        if not w:
            raise Fail(f"wrk output not understood in {run_id}:\n{out[-1000:]}")
        with open(os.path.join(outdir, f"wrk-{run_id}.txt"), "w") as f:
            f.write(out)
        rates, window = sampler.rates(t_a, t_b)
        clean = True
        for p in scope.procs:
            p.term()
        for p in reversed(scope.procs):
            clean &= p.stop()
        scope.procs = []
        run = wrk_record(setup, cfg, rep, size, w, rates, window, clean)
        if shim:
            run["reports"] = sorted(os.path.join(reports, f) for f in os.listdir(reports))
            exit_report_calls(run, groups, all_reqs)
        return run


def wrk_burst(url, secs, env):
    """One measured wrk burst: (bytes read, seconds, p50 ms, p99 ms, errors,
    its output).  Bytes, not requests: wrk counts every byte it reads, the
    unfinished responses' at the end too, while the requests it counts
    leave those out, which over 1 s understates a configuration by up to
    half its latency a second: a slower one more."""
    try:
        r = subprocess.run([which("wrk"), "-t2", "-c4", f"-d{secs}s", "--latency", "--timeout", "20s",
                            url], env=clean_env(env), capture_output=True, text=True,
                           timeout=secs + 60, preexec_fn=die_with_parent)
    except subprocess.TimeoutExpired:
        raise Fail(f"wrk did not finish against {url}")
    out = r.stdout + r.stderr
    w = parse_wrk(out)
    m = re.search(r"\d+ requests in ([\d.]+)(us|ms|s|m), ([\d.]+)(B|KB|MB|GB|TB) read", out)
    if not w or not m:
        raise Fail(f"wrk output not understood:\n{out[-1000:]}")
    took = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]
    nbytes = float(m.group(3)) * 1024 ** ("B KB MB GB TB".split().index(m.group(4)))
    return nbytes, took, w[1], w[2], w[3], out


def run_side(args, cfgs, setup, rep, workdir, outdir):
    """One side-by-side round of a proxy setup (scenarios.SIDE_BY_SIDE):
    one storaged, plain, and one server per configuration of cfgs (none,
    proxy-defaults, shim-proxy), all up at once on ports of their own;
    after a 1 s warm-up each, wrk's 1 s bursts go to each server in turn,
    the order mirrored every cycle (A B, B A, A B, ...), so that what the
    machine does meanwhile falls on every configuration alike.  One record
    per configuration, as run_real's: bytes wrk read over the seconds of its
    own bursts (ops_s: those bytes in 16 MiB objects), p50 and p99 the
    median of its bursts', its server's faults and
    CPU over the whole window per request of its own (it idles through
    the others' bursts); the storaged's are shared, per request of all."""
    rid = f"{setup}.side.{rep + 1}"
    with RunScope(args, rid, workdir, reverse=True) as scope:
        os.chmod(scope.tmp, 0o755)
        nport, groups = start_backend(setup, scope, None, 2, {}, {})
        servers = {}
        for cfg in cfgs:
            sub = os.path.join(scope.tmp, cfg)
            os.makedirs(sub)
            os.chmod(sub, 0o755)
            env = settings.config_env("shim" if cfg == "shim-proxy" else "none")
            if settings.is_shim("shim" if cfg == "shim-proxy" else "none"):
                reports = os.path.join(outdir, "reports", f"{setup}.{cfg}.{rep + 1}")
                os.makedirs(reports, exist_ok=True)
                env["POOLSHIM_STATS"] = os.path.join(reports, "%p.json")
            port = free_port()
            if setup == "nginx-proxy":
                srv = start_nginx(sub, port, proxy_body(nport, defaults=cfg == "proxy-defaults"), 2, env)
            else:
                srv = start_haproxy(sub, port, nport, env)
            scope.procs.append(srv)
            wait_port(srv, port)
            kids = nginx_workers(srv) if setup.startswith("nginx") else children(srv.pid)
            servers[cfg] = {"url": f"http://127.0.0.1:{port}/real/obj", "pids": [srv.pid] + kids,
                            "reports": env.get("POOLSHIM_STATS") and os.path.dirname(env["POOLSHIM_STATS"]),
                            "bytes": 0.0, "secs": 0.0, "p50": [], "p99": [], "errors": 0, "out": [], "warm": 0}
        for cfg, sv in servers.items():
            wu = subprocess.run([which("wrk"), "-t1", "-c2", "-d1s", sv["url"]], env=clean_env({}),
                                capture_output=True, text=True, timeout=60, preexec_fn=die_with_parent)
            m = re.search(r"(\d+) requests in", wu.stdout)
            sv["warm"] = int(m.group(1)) if m else 0
        sampled = dict({f"proxy:{c}": sv["pids"] for c, sv in servers.items()}, **groups)
        sampler = Sampler(sampled, [], scope.tmp)
        t_a = time.monotonic()
        for cycle in range(side_bursts(args)):
            for cfg in (cfgs if cycle % 2 == 0 else cfgs[::-1]):
                sv = servers[cfg]
                nbytes, took, p50, p99, nerr, out = wrk_burst(sv["url"], 1, {})
                sv["bytes"] += nbytes
                sv["secs"] += took
                sv["p50"].append(p50)
                sv["p99"].append(p99)
                sv["errors"] += nerr
                sv["out"].append(out)
        t_b = time.monotonic()
        sampler.finish()
        for p in scope.procs:
            if not p.alive():
                raise Fail(f"{p.name} died (status {p.p.returncode}) during {rid}; its log:\n"
                           f"{p.log_tail()}")
        rates, window = sampler.rates(t_a, t_b)
        clean = True
        for p in scope.procs:
            p.term()
        for p in reversed(scope.procs):
            clean &= p.stop()
        scope.procs = []
    # requests as bytes moved over the object's size (see wrk_burst)
    for sv in servers.values():
        sv["reqs"] = sv["bytes"] / REAL_SIZE
    all_reqs = sum(sv["reqs"] for sv in servers.values())
    recs = []
    for cfg, sv in servers.items():
        rps = sv["reqs"] / sv["secs"] if sv["secs"] else 0.0
        p50 = statistics.median(x for x in sv["p50"] if x is not None) if any(sv["p50"]) else None
        p99 = statistics.median(x for x in sv["p99"] if x is not None) if any(sv["p99"]) else None
        # per second of its own bursts, so that wrk_record's per-op figures
        # are its totals over the window per request of its own
        own = {"proxy": tuple(r * window / sv["secs"] if sv["secs"] else 0.0
                              for r in rates[f"proxy:{cfg}"])}
        for name in groups:
            own[name] = tuple(r * window / all_reqs * rps if all_reqs else 0.0 for r in rates[name])
        run = wrk_record(setup, cfg, rep, REAL_SIZE, (rps, p50, p99, sv["errors"]), own, sv["secs"], clean)
        run["side_by_side"] = {"bursts": len(sv["p50"]), "with": [c for c in cfgs if c != cfg]}
        with open(os.path.join(outdir, f"wrk-{setup}.{cfg}.{rep + 1}.txt"), "w") as f:
            f.write("\n".join(sv["out"]))
        if sv["reports"]:
            run["reports"] = sorted(os.path.join(sv["reports"], f) for f in os.listdir(sv["reports"]))
            exit_report_calls(run, {"proxy": sv["pids"]}, sv["warm"] + sv["reqs"])
        recs.append(run)
    return recs
