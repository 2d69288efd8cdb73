# SPDX-License-Identifier: MIT
"""Processes: every server the harness starts is a Proc, registered, and
stopped however the harness ends (Proc.stop_all); the environment they
start with, and the ports they listen on."""
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from . import settings
from .messages import Fail, say

_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    """preexec_fn of every child: if the harness is killed outright, its
    children get SIGTERM."""
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
                                  preexec_fn=die_with_parent)
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
    termed = False

    def term(self):
        """Send the stop signal, once: haproxy's soft stop (SIGUSR1) puts
        the default action back, and a second one, from stop() after the
        servers were all asked first, killed it before it wrote its exit
        report (a shim-proxy run without reports, once in a few runs)."""
        if self.p.poll() is None and not self.termed:
            self.termed = True
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
    """The harness's environment without any preload or allocator setting,
    plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(settings.QUIET_ENV)}
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


def children(pid):
    """The pids whose parent is pid (a server's workers)."""
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


class RunScope:
    """One run's processes and scratch directory (tmp).  On the way out,
    however it ends, what is still in procs is stopped (in reverse order
    with reverse=True), and tmp removed, but kept with --keep, and for its
    logs when the run failed (Fail)."""

    def __init__(self, args, run_id, workdir, reverse=False):
        self.tmp = tempfile.mkdtemp(prefix=f"{run_id}.", dir=workdir)
        self.keep = args.keep
        self.reverse = reverse
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, etype, exc, tb):
        for p in (reversed(self.procs) if self.reverse else self.procs):
            p.stop(timeout=5.0)
        if not (self.keep or isinstance(exc, Fail)):
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False
