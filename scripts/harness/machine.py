# SPDX-License-Identifier: MIT
"""The machine and the libraries, named as scripts/bench names them, so
that both tables say the same."""
import importlib.machinery
import importlib.util
import os

from . import settings


def bench_module():
    loader = importlib.machinery.SourceFileLoader("ps_bench", os.path.join(settings.TOP, "scripts", "bench"))
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
