# SPDX-License-Identifier: MIT
"""This host's costs (issue 39), measured before the runs and printed
first: a 4 KiB page fault, a 2 MiB THP fault, a small system call, memcpy,
MD5 (what the storage nodes hash every PUT with) and the disk's O_DIRECT
MiB/s, from bench/hostcost and hashlib (OpenSSL's MD5, the one the nodes
link).  From them, per scenario: what the pool can save (the faults it
removes times their price, against the servers' CPU per operation) and
the limit the scenario runs into whatever the allocator (copies, MD5, the
disk, system calls).  expected_gain and limit are pure functions."""
import hashlib
import os
import subprocess
import time

from . import settings

PROBE = os.path.join(settings.BUILD, "bench", "hostcost")
MIB = 1 << 20


def md5_mibs(rounds=3, size=16 * MIB):
    """MiB/s of MD5 on one CPU (thread CPU time), the median of rounds."""
    buf = os.urandom(size)
    v = []
    for _ in range(rounds):
        t0 = time.thread_time()
        hashlib.md5(buf).digest()
        v.append(size / MIB / max(time.thread_time() - t0, 1e-6))
    return sorted(v)[len(v) // 2]


def thp_mode():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            s = f.read()
        return s[s.index("[") + 1:s.index("]")]
    except (OSError, ValueError):
        return "unknown"


def measure(workdir, rounds=5):
    """The costs as a dict (a figure it could not measure is None, with
    "<name>_why"); workdir: a directory on the disk the nodes use."""
    host = {"thp": thp_mode(), "load": os.getloadavg()[0]}
    try:
        out = subprocess.run([PROBE, "--dir", workdir, "--rounds", str(rounds)], capture_output=True,
                             text=True, timeout=120, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        host["probe_why"] = f"{PROBE}: {e}"
        out = ""
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        if name.endswith("_why"):
            host[name] = value
        else:
            try:
                host[name] = float(value)
            except ValueError:
                host[name] = None
    for k in ("fault_4k_us", "fault_thp_us", "syscall_ns", "memcpy_gbs", "direct_read_mibs",
              "direct_write_mibs"):
        host.setdefault(k, None)
    host["md5_mibs"] = md5_mibs()
    return host


def fmt(v, spec, unit):
    return "-" if v is None else f"{format(v, spec)} {unit}"


def lines(host):
    """The printed lines, one figure each, with what it prices."""
    why = host.get("probe_why", "")
    thp = host["fault_thp_us"]
    per4k = f" ({thp / 512:.2f} us per 4 KiB)" if thp else ""
    worst4k = (f"; worst round {host['fault_4k_max_us']:.2f} us" if host.get("fault_4k_max_us") else "")
    worst = (f"; worst round {host['fault_thp_max_us']:.0f} us (a huge page the hypervisor had not "
             "backed yet)" if host.get("fault_thp_max_us") and host["fault_thp_max_us"] > 2 * thp else "")
    return [
        f"4 KiB page fault   {fmt(host['fault_4k_us'], '.2f', 'us')}  (CPU to map, first touch and "
        "unmap a fresh page: what glibc's fresh big buffers pay per page, what the pool saves"
        f"{worst4k})",
        f"2 MiB THP fault    {fmt(thp, '.0f', 'us')}{per4k}  (THP mode: {host['thp']}{worst})"
        + (f"; {host['fault_thp_us_why']}" if host.get("fault_thp_us_why") else ""),
        f"system call        {fmt(host['syscall_ns'], '.0f', 'ns')}  (getppid: the floor under every "
        "read, write, send, recv)",
        f"memcpy             {fmt(host['memcpy_gbs'], '.1f', 'GB/s')}  (16 MiB buffers, one CPU: "
        "the price of each copy through a socket)",
        f"MD5                {host['md5_mibs']:.0f} MiB/s  (OpenSSL, one CPU: the nodes hash every PUT)",
        f"disk, O_DIRECT     read {fmt(host['direct_read_mibs'], '.0f', 'MiB/s')}, write "
        f"{fmt(host['direct_write_mibs'], '.0f', 'MiB/s')}  (1 MiB requests, 64 MiB file, "
        "next to the nodes' data)" + (f"; {host['direct_why']}" if host.get("direct_why") else ""),
    ] + save_lines(host) + ([f"probe failed: {why}"] if why else [])


def save_lines(host):
    """What the pool saves per fresh buffer it replaces, at this host's
    price: every 4 KiB page of it faulted in, and zeroed, once."""
    cost = host.get("fault_4k_us")
    if not cost:
        return []
    per = ", ".join(f"{n} MiB {n * 256 * cost / 1000:.2f} ms" for n in (1, 4, 16))
    return [f"pool saves         per fresh buffer a reused pooled one replaces: {per} of CPU "
            f"({cost:.2f} us x 256 pages per MiB); per operation: faults/op x {cost:.2f} us "
            "(the verdicts below)"]


def _sum(row, key):
    if not row:
        return None
    vals = [row.get(f"{g}_{key}") for g in ("proxy", "nodes")]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


def expected_gain(none_row, shim_row, host):
    """(ratio, text): the gain against no preload that the faults the shim
    removes explain at this host's price, if the servers' CPU bounds the
    rate: cpu / (cpu - saved), cpu the servers' CPU per operation under no
    preload, saved the faults removed times the probe's 4 KiB fault price.
    The text also gives the servers' CPU per operation measured under the
    shim: faults taken under load (many threads, TLB shootdowns on munmap)
    can cost more than the probe's, and then the shim saves more than the
    model says.  (None, why) when a figure is missing."""
    cost = host.get("fault_4k_us")
    f_none, f_shim = _sum(none_row, "faults_per_op"), _sum(shim_row, "faults_per_op")
    cpu, cpu_shim = _sum(none_row, "cpu_us_per_op"), _sum(shim_row, "cpu_us_per_op")
    if cost is None or f_none is None or f_shim is None or not cpu:
        return None, "not measured"
    saved_faults = max(f_none - f_shim, 0.0)
    saved = saved_faults * cost
    measured = (f"; measured, the servers' CPU per op is {cpu / 1000:.2f} ms under no preload and "
                f"{cpu_shim / 1000:.2f} ms under the shim" if cpu_shim else "")
    if saved >= cpu:
        return None, (f"the shim removes {saved_faults:.0f} faults/op x {cost:.2f} us = "
                      f"{saved / 1000:.2f} ms, more than the servers' CPU per op measured "
                      f"({cpu / 1000:.2f} ms)")
    x = cpu / (cpu - saved)
    return x, (f"~{x:.2f}x: {saved_faults:.0f} faults/op removed x {cost:.2f} us = "
               f"{saved / 1000:.2f} ms of {cpu / 1000:.2f} ms server CPU per op" + measured)


# What each scenario runs into whatever the allocator: (kind, copies per
# byte on the CPU).  GET through the demo stack: the node's send, the
# proxy's receive and send, loadgen's receive and its byte-for-byte
# compare; PUT: loadgen's payload assembly and send, the proxy's receive
# and send, the node's receive, then MD5 over every byte on the node.
LIMITS = {
    "get-1m": ("copies", 5), "get-16m": ("copies", 5),
    "put-1m": ("md5", 5), "put-16m": ("md5", 5),
    "mix": ("mix", 5),
    "nginx-proxy": ("copies", 4), "haproxy": ("copies", 4),
    "nginx-directio": ("disk", 2),
}


def limit(scen, host, small=False):
    """The limit scen runs into on this host, with its figure: a line."""
    mc = host.get("memcpy_gbs")
    copy = mc * 1e9 / MIB if mc else None
    rd, wr = host.get("direct_read_mibs"), host.get("direct_write_mibs")
    if small or scen not in LIMITS:
        sc = host.get("syscall_ns")
        return ("system calls and scheduling: small requests are a handful of calls each "
                f"({fmt(sc, '.0f', 'ns')} per call alone), nothing the pool takes")
    kind, n = LIMITS[scen]
    copies = (f"{n} copies per byte at {mc:.1f} GB/s: {copy / n:.0f} MiB/s per CPU" if copy
              else f"{n} copies per byte (memcpy not measured)")
    md5 = f"MD5 on the nodes, {host['md5_mibs']:.0f} MiB/s per CPU"
    if kind == "copies":
        return f"copies: {copies}" + (f"; disk O_DIRECT read {rd:.0f} MiB/s" if rd and scen.startswith("get") else "")
    if kind == "md5":
        both = (f" (together {1 / (1 / host['md5_mibs'] + n / copy):.0f} MiB/s per CPU)" if copy else "")
        return f"{md5}, plus {copies}{both}" + (f"; disk O_DIRECT write {wr:.0f} MiB/s" if wr else "")
    if kind == "mix":
        return f"PUTs: {md5}; GETs: {copies}"
    return f"the disk: O_DIRECT read {fmt(rd, '.0f', 'MiB/s')}, then {copies}"
