# SPDX-License-Identifier: MIT
"""Sampling: /proc/PID/stat of every server (faults, CPU), and the shim's
live counters through tools/poolshim-stat, both timestamped so that rates
come from loadgen's measured window only."""
import json
import os
import subprocess
import threading
import time

from . import settings
from .procs import die_with_parent

CLK_TCK = os.sysconf("SC_CLK_TCK")


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
        if shim_pids and os.access(settings.PSSTAT, os.X_OK):
            self.stat = subprocess.Popen([settings.PSSTAT, "-i", str(self.stat_interval), "--json"]
                                         + [str(p) for p in shim_pids],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         stdin=subprocess.DEVNULL, text=True,
                                         preexec_fn=die_with_parent)
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
