#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""poolshim-report: merge poolshim JSON reports, print tables, draw plots.

A forking server run under libpoolshim.so writes one JSON report per process
(POOLSHIM_STATS=/tmp/r-%e-%p.json).  This tool reads any number of them,
validates each against docs/report-schema.md, and prints the numbers merged
per program and per process, in the same columns as the shim's text report.
Every merged number is the exact sum of the per-process numbers, except the
threads (the most in any one process); every process's advice is kept, with
the process it is about.

    poolshim-report [--plot DIR] [--json OUT] [--top N] [--summary] [--exact]
                    [--csv | --folded[=count|bytes]] [--debug-dir DIR]... [--no-symbolize] FILE...
    poolshim-report --diff A B

--plot DIR draws PNG files with gnuplot (Debian: gnuplot-nox), --json OUT
writes the merged numbers.  A file may hold several reports, one JSON object
per line, as `poolshim stat --json` prints its snapshots of live processes
(each opening with "timestamp"); each process may appear once.  Call-site frames the report left unnamed are
named here from their object's build id and offset (eu-addr2line, from
elfutils), unless --no-symbolize.  Exit status: 0 done, 1 a plot or output could
not be written, 2 bad usage or a file that is unreadable or not a valid
report (each named on one line of stderr), 3 nothing to print (--folded with
no call sites).  Standard library only.
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

PROG = "poolshim-report"
MERGED_SCHEMA = "poolshim-merged-report"
MERGED_VERSION = 1


class BadInput(Exception):
    """A file that cannot be used; the message names the problem."""


# ---------------------------------------------------------------------------
# Validation.  The full schema lives in tests/report_schema.py (kept next to
# docs/report-schema.md); it is used when found, next to this tool, in
# ../tests (a source tree) or in ../share/poolshim (an installation).  The
# shape checks below always run: they cover exactly what merging reads, so a
# report that passes them can never make the merge fail.
# ---------------------------------------------------------------------------

def find_validator():
    here = os.path.dirname(os.path.realpath(__file__))
    for d in (here, os.path.join(here, "..", "tests"),
              os.path.join(here, "..", "share", "poolshim")):
        path = os.path.join(d, "report_schema.py")
        if os.path.isfile(path):
            sys.path.insert(0, os.path.abspath(d))
            sys.dont_write_bytecode = True  # leave no __pycache__ in a source tree
            try:
                import report_schema  # noqa: E402 (found at run time)
                return report_schema.validate
            except Exception:  # a broken validator must not break the tool
                return None
            finally:
                sys.path.pop(0)
    return None


def is_uint(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def hist_ok(h):
    return isinstance(h, list) and all(
        isinstance(p, list) and len(p) == 2 and is_uint(p[0]) and is_uint(p[1]) for p in h)


POOL_NUMS = ("slabs", "backed", "in_use", "peak", "cap", "threshold", "reserve",
             "allocations", "frees")
PROCESS_NUMS = ("minflt", "majflt", "utime_us", "stime_us", "threads")
URING_NUMS = ("rings", "enters", "sqes", "fixed", "split_calls")
CALL_NUMS = ("calls", "bytes", "errors", "eagain", "timed", "nsec")
SITE_NUMS = ("count", "bytes", "nsec")
ALLOC_CALLS = ["malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
               "memalign", "valloc", "pvalloc", "free"]
KINDS = ["none", "socket", "file", "direct", "pipe", "other"]


def sampled_below(r):
    """The size under which the report's malloc-family calls are counted by
    sampling (shim/core/alloc.h: POOLSHIM_POOL_MIN/16), or None if it does not say."""
    t = (r.get("pool") or {}).get("threshold")
    return t // 16 if is_uint(t) and t else None


def shape_errors(r):
    """What the merge needs, checked without ever raising."""
    if not isinstance(r, dict):
        return ["not a JSON object"]
    if r.get("schema") != "poolshim-report":
        return ['"schema" is not "poolshim-report"']
    errs = []
    if not is_uint(r.get("pid")):
        errs.append("pid: not a non-negative integer")
    if not isinstance(r.get("program"), str):
        errs.append("program: not a string")

    def numbers(obj, path, names):
        if not isinstance(obj, dict):
            errs.append(f"{path}: missing or not an object")
            return False
        for n in names:
            if not is_uint(obj.get(n)):
                errs.append(f"{path}.{n}: missing or not a non-negative integer")
        return True

    pool, uring = r.get("pool"), r.get("uring")
    if numbers(pool, "pool", POOL_NUMS):
        if not isinstance(pool.get("mode"), str):
            errs.append("pool.mode: not a string")
        numbers(pool.get("backed_by"), "pool.backed_by", ())
        numbers(pool.get("fallbacks"), "pool.fallbacks", ())
        for sub in ("backed_by", "fallbacks"):
            if isinstance(pool.get(sub), dict):
                numbers(pool[sub], f"pool.{sub}", list(pool[sub]))
    numbers(r.get("process"), "process", PROCESS_NUMS)
    if numbers(uring, "uring", URING_NUMS):
        if not isinstance(uring.get("state"), str):
            errs.append("uring.state: not a string")
        if not hist_ok(uring.get("sqes_per_enter")):
            errs.append("uring.sqes_per_enter: not a list of [bucket, count] pairs")
        if isinstance(uring.get("fallbacks"), dict):
            numbers(uring["fallbacks"], "uring.fallbacks", list(uring["fallbacks"]))
        else:
            errs.append("uring.fallbacks: missing or not an object")
    calls = r.get("calls")
    if not isinstance(calls, list):
        errs.append("calls: missing or not a list")
    else:
        for i, c in enumerate(calls):
            if not numbers(c, f"calls[{i}]", CALL_NUMS):
                continue
            if not isinstance(c.get("call"), str) or not isinstance(c.get("kind"), str):
                errs.append(f"calls[{i}]: call/kind not strings")
            for h in ("size_hist", "lat_hist"):
                if not hist_ok(c.get(h)):
                    errs.append(f"calls[{i}].{h}: not a list of [bucket, count] pairs")
            e = c.get("errnos")
            if not isinstance(e, dict) or not all(is_uint(v) for v in e.values()):
                errs.append(f"calls[{i}].errnos: not an object of counts")
    sites = r.get("callsites")
    if sites is not None:
        if not isinstance(sites, list):
            errs.append("callsites: not a list")
        else:
            for i, s in enumerate(sites):
                if not numbers(s, f"callsites[{i}]", SITE_NUMS):
                    continue
                if s.get("kind") not in ("alloc", "io") or not isinstance(s.get("call"), str):
                    errs.append(f"callsites[{i}]: kind must be alloc or io, call a string")
                fr = s.get("frames")
                if not isinstance(fr, list) or not all(
                        isinstance(f, dict) and is_uint(f.get("offset")) and
                        isinstance(f.get("function"), (str, type(None))) and
                        isinstance(f.get("object"), (str, type(None))) for f in fr):
                    errs.append(f"callsites[{i}].frames: want [{{function, offset, object}}]")
    return errs


READ_VERSIONS = (1, 2, 3)


def parse_json(raw):
    """The JSON objects in a file's text: one report, or the one-per-line
    snapshots `poolshim stat --json` prints.  Raises BadInput."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"not UTF-8 text (byte {e.start})")
    dec, docs, pos = json.JSONDecoder(), [], 0
    ws = re.compile(r"\s*")
    try:
        while True:
            pos = ws.match(text, pos).end()
            if pos >= len(text):
                return docs
            obj, pos = dec.raw_decode(text, pos)
            if not isinstance(obj, dict):
                raise BadInput("not a poolshim report: not a JSON object")
            docs.append(obj)
    except json.JSONDecodeError as e:
        if e.doc.lstrip().startswith("==== poolshim report"):
            raise BadInput("a text report; the tool reads JSON reports "
                           "(POOLSHIM_STATS=path.json or POOLSHIM_STATS_FORMAT=json)")
        # a string cut off by the end of the file is reported at its start
        if e.pos >= len(e.doc.rstrip()) or (e.msg.startswith("Unterminated string")
                                            and '"' not in e.doc[e.pos + 1:]):
            raise BadInput(f"not valid JSON: it ends early, at byte {e.pos} (truncated?)")
        raise BadInput(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        raise BadInput("not valid JSON: nested too deeply")


def check_report(r, validate):
    """Raises BadInput unless r is a report this tool reads.  A snapshot from
    `poolshim stat --json` opens with "timestamp" (seconds since the epoch,
    when it was read): taken off here, the rest is a report."""
    if isinstance(r, dict) and r.get("schema") == "poolshim-report" and \
            r.get("version") not in READ_VERSIONS:
        v = r.get("version")
        raise BadInput(f"report version {json.dumps(v)}: this poolshim report reads versions "
                       f"{READ_VERSIONS[0]} to {READ_VERSIONS[-1]} (docs/report-schema.md); "
                       "read it with the poolshim that wrote it")
    errs = shape_errors(r)
    if not errs and validate is not None:
        errs = run_validator(validate, r)
    if errs:
        more = f" (and {len(errs) - 3} more)" if len(errs) > 3 else ""
        raise BadInput("not a valid poolshim report: " + "; ".join(errs[:3]) + more)
    return r


def read_raw(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        why = e.strerror or str(e)
        if os.path.islink(path):
            why += f" (a symbolic link to {os.readlink(path)}, which cannot be read)"
        raise BadInput(f"cannot read: {why}")


def load_reports(path, validate):
    """[(label, report, timestamp or None)] of a file: one report, or the
    snapshots of `poolshim stat --json` (one per line, labelled FILE:N when
    there are several)."""
    raw = read_raw(path)
    if not raw.strip():
        raise BadInput("empty file (did the process exit before writing its report?)")
    docs = parse_json(raw)
    out = []
    for i, r in enumerate(docs):
        try:
            check_report(r, validate)
        except BadInput as e:
            if len(docs) == 1:
                raise
            raise BadInput(f"report {i + 1} of {len(docs)}: {e}")
        out.append((f"{path}:{i + 1}" if len(docs) > 1 else path, r, r.pop("timestamp", None)))
    return out


def run_validator(validate, r):
    try:
        errs = validate(r)
        if errs and "callsites" in r:
            # A validator older than call sites; the shape checks cover them.
            rest = {k: v for k, v in r.items() if k != "callsites"}
            if not validate(rest):
                errs = []
        return list(errs)
    except Exception as e:  # never a traceback, whatever the file holds
        return [f"schema check failed ({type(e).__name__}: {e})"]


# ---------------------------------------------------------------------------
# Merging.  A group is the sum of some reports; every number is an exact sum.
# ---------------------------------------------------------------------------

def add_hist(into, pairs):
    for lo, n in pairs:
        into[lo] = into.get(lo, 0) + n


def add_counts(into, d):
    for k, v in d.items():
        into[k] = into.get(k, 0) + v


class Group:
    def __init__(self, label):
        self.label = label
        self.members = []  # (file, pid, program)
        self.pool = {n: 0 for n in POOL_NUMS if n != "threshold"}
        self.backed_by, self.pool_fallbacks = {}, {}
        self.modes, self.requested, self.thresholds = {}, {}, {}
        self.allocators = {}  # placement (pool.allocator) -> processes
        self.reasons = {}  # (kind, text) -> processes
        self.process = {n: 0 for n in PROCESS_NUMS}
        self.uring = {n: 0 for n in URING_NUMS}
        self.uring_states, self.uring_reasons = {}, {}
        self.sqes_per_enter, self.uring_fallbacks = {}, {}
        self.calls = {}  # (call, kind) -> row; insertion order follows the reports
        self.errnos = {}  # call -> {errno: count}, merged over kinds
        self.sites = {}  # (kind, call, frames) -> {count, bytes, nsec}
        self.advice = []  # (pid, program, advice item), every process's own
        self.sampled_below = {}  # malloc-family size counted by sampling -> processes
        self.saved = {}  # the reports' "saved" objects, summed (those that have one)
        self.saved_from = 0
        self.cached = None  # pool.cached summed over the reports that have it (issue 44)
        self.paced = None  # pool.paced likewise
        self.tails = None  # pool.tails likewise
        self.verdicts = []  # (pid, verdict object) of the reports that have one

    def add(self, path, r):
        self.members.append((path, r["pid"], r["program"]))
        p = r["pool"]
        for n in self.pool:
            self.pool[n] += p[n]
        if is_uint(p.get("cached")):
            self.cached = (self.cached or 0) + p["cached"]
        if is_uint(p.get("paced")):
            self.paced = (self.paced or 0) + p["paced"]
        if is_uint(p.get("tails")):
            self.tails = (self.tails or 0) + p["tails"]
        add_counts(self.backed_by, p["backed_by"])
        add_counts(self.pool_fallbacks, p["fallbacks"])
        add_counts(self.modes, {p["mode"]: 1})
        add_counts(self.requested, {str(p.get("requested")): 1})
        add_counts(self.allocators, {placement(p): 1})
        add_counts(self.thresholds, {p["threshold"]: 1})
        for kind in ("hugetlb", "thp"):
            why = p.get(kind + "_reason")
            if isinstance(why, str):
                add_counts(self.reasons, {(kind, why): 1})
        for n in self.process:
            if n == "threads":
                # Threads of different processes never run at once in one
                # process: the most of any one of them, not a sum.
                self.process[n] = max(self.process[n], r["process"][n])
            else:
                self.process[n] += r["process"][n]
        for item in r.get("advice") or ():
            self.advice.append((r["pid"], r["program"], item))
        if isinstance(r.get("saved"), dict):
            add_counts(self.saved, r["saved"])
            self.saved_from += 1
        v = r.get("verdict")
        if isinstance(v, dict) and isinstance(v.get("kind"), str) and isinstance(v.get("text"), str):
            self.verdicts.append((r["pid"], v))
        add_counts(self.sampled_below, {sampled_below(r): 1})
        u = r["uring"]
        for n in self.uring:
            self.uring[n] += u[n]
        add_counts(self.uring_states, {u["state"]: 1})
        if isinstance(u.get("reason"), str):
            add_counts(self.uring_reasons, {u["reason"]: 1})
        add_hist(self.sqes_per_enter, u["sqes_per_enter"])
        add_counts(self.uring_fallbacks, u["fallbacks"])
        for c in r["calls"]:
            row = self.calls.get((c["call"], c["kind"]))
            if row is None:
                row = self.calls[(c["call"], c["kind"])] = dict(
                    {n: 0 for n in CALL_NUMS}, estimated=0, size_hist={}, lat_hist={})
            for n in CALL_NUMS:
                row[n] += c[n]
            row["estimated"] += c.get("estimated", 0) if is_uint(c.get("estimated")) else 0
            add_hist(row["size_hist"], c["size_hist"])
            add_hist(row["lat_hist"], c["lat_hist"])
            add_counts(self.errnos.setdefault(c["call"], {}), c["errnos"])
        for s in r.get("callsites") or ():
            frames = tuple((f.get("function"), f["offset"], f.get("object"), f.get("file"),
                            f.get("line"), tuple(f.get("inlined") or ()))
                           for f in s["frames"])
            site = self.sites.setdefault((s["kind"], s["call"], frames),
                                         {n: 0 for n in SITE_NUMS})
            for n in SITE_NUMS:
                site[n] += s[n]

    def rows(self):
        """(call, kind, row) in the shim's order: allocation calls, then I/O
        calls as first seen, each by descriptor kind."""
        seen = {}
        for call, _ in self.calls:
            seen.setdefault(call, len(seen))

        def key(ck):
            call, kind = ck
            first = ALLOC_CALLS.index(call) if call in ALLOC_CALLS else len(ALLOC_CALLS) + seen[call]
            return (first, KINDS.index(kind) if kind in KINDS else len(KINDS), kind)
        return [(c, k, self.calls[(c, k)]) for c, k in sorted(self.calls, key=key)]

    # Derived numbers
    def est_nsec(self, row):
        """Time of all calls, scaled up from the timed sample."""
        return row["nsec"] * row["calls"] // row["timed"] if row["timed"] else 0

    def top_sites(self, key, n):
        return sorted(self.sites.items(), key=lambda kv: (-kv[1][key], -kv[1]["bytes"]))[:n]

    def to_json(self):
        calls, seen = [], set()
        for call, kind, row in self.rows():
            first = call not in seen
            seen.add(call)
            calls.append(dict(
                call=call, kind=kind, **{n: row[n] for n in CALL_NUMS},
                estimated=row["estimated"],
                avg_ns=row["nsec"] // row["timed"] if row["timed"] else None,
                est_nsec=self.est_nsec(row),
                size_hist=sorted([lo, n] for lo, n in row["size_hist"].items()),
                lat_hist=sorted([lo, n] for lo, n in row["lat_hist"].items()),
                errnos=dict(self.errnos.get(call, {})) if first else {}))
        pool = dict(self.pool, **({} if self.cached is None else {"cached": self.cached}),
                    **({} if self.paced is None else {"paced": self.paced}),
                    **({} if self.tails is None else {"tails": self.tails}),
                    backed_by=self.backed_by, fallbacks=self.pool_fallbacks,
                    modes=self.modes, requested=self.requested, allocators=self.allocators,
                    # Processes per POOLSHIM_POOL_MIN, like modes and requested
                    # (JSON keys are strings: the byte count written out).
                    thresholds={str(t): n for t, n in sorted(self.thresholds.items())},
                    reasons=[{"kind": k, "reason": t, "processes": n}
                             for (k, t), n in self.reasons.items()])
        uring = dict(self.uring, states=self.uring_states,
                     reasons=self.uring_reasons, fallbacks=self.uring_fallbacks,
                     sqes_per_enter=sorted([lo, n] for lo, n in self.sqes_per_enter.items()))
        return {
            "label": self.label,
            "processes": len(self.members),
            "programs": sorted({m[2] for m in self.members}),
            "pids": [m[1] for m in self.members],
            "files": [m[0] for m in self.members],
            "pool": pool, "process": dict(self.process), "uring": uring, "calls": calls,
            # what the pool saved, summed over the reports that have it (null: none has),
            # and how many of them do
            "saved": dict(self.saved) if self.saved_from else None,
            "saved_reports": self.saved_from,
            # every process's advice, each with the process it is about
            "advice": [dict(item, pid=pid, program=prog) for pid, prog, item in self.advice],
            "callsites": [dict(kind=k, call=c, **v, frames=[
                dict({"function": fn, "offset": off, "object": obj, "file": file, "line": line},
                     **({"inlined": list(inl)} if inl else {}))
                for fn, off, obj, file, line, inl in fr])
                for (k, c, fr), v in self.sites.items()],
        }


# ---------------------------------------------------------------------------
# Text, in the columns of the shim's own report (shim/format/report.c)
# ---------------------------------------------------------------------------

def size(v):
    """Bytes as the shim prints them: 8, 4K, 20.0M (nearest tenth)."""
    if v < 1024:
        return str(v)
    scale, unit = 1024, 0
    while unit < 5 and v >= scale * 1024:
        scale *= 1024
        unit += 1
    if v % scale == 0:
        s = str(v // scale)
    else:
        tenths = (v * 10 + scale // 2) // scale
        s = f"{tenths // 10}.{tenths % 10}"
    return s + "KMGTPE"[unit]


def seconds(us):
    tenths = (us * 10 + 500000) // 1000000
    return f"{tenths // 10}.{tenths % 10}s"


def nsec_human(ns):
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= scale:
            return f"{ns / scale:.3g}{unit}"
    return f"{ns}ns"


def placement(pool):
    """What placed a report's pooled blocks (pool.allocator): 'unknown' where
    the report does not say (null, or a report older than the member)."""
    a = pool.get("allocator")
    return a if isinstance(a, str) else "unknown"


def all_off(g):
    """Whether every report of the group ran with POOLSHIM_POOL=off."""
    return set(g.modes) == {"off"}


def tally(d):
    """{value: processes} as 'a' or 'a:2 b:1' when the processes differ."""
    if len(d) == 1:
        return str(next(iter(d)))
    return " ".join(f"{k}:{n}" for k, n in sorted(d.items(), key=lambda kv: -kv[1]))


def frame_text(fn, off, obj, file=None, line=None, inlined=()):
    where = f"{fn}+0x{off:x}" if fn else f"0x{off:x}"
    text = f"{where} ({os.path.basename(obj) if obj else '??'})"
    if file:
        text += f" {file}:{line}"
    if inlined:
        text += " [inlined: " + " < ".join(inlined) + "]"
    return text


def render(g, out, exact, top):
    bytes_cell = str if exact else size
    n = len(g.members)
    w = out.write
    if n == 1:
        path, pid, prog = g.members[0]
        w(f"==== {g.label}: pid {pid} ({prog}), {path} ====\n")
    else:
        w(f"==== {g.label}: {n} processes, pids {' '.join(str(m[1]) for m in g.members)} ====\n")
    # The answer first: the process's own verdict, or how the processes' verdicts tally.
    if n == 1 and g.verdicts:
        w(f"verdict  {g.verdicts[0][1]['text']}\n")
    elif g.verdicts:
        kinds = {}
        for _, v in g.verdicts:
            add_counts(kinds, {v["kind"]: 1})
        w(f"verdict  {len(g.verdicts)} of {n} processes' verdicts: {tally(kinds)}\n")
    p = g.pool
    sumof = " (sum over processes)" if n > 1 else ""
    w(f"pool     mode {tally(g.modes)} (requested {tally(g.requested)}); placement "
      f"{tally(g.allocators)}; {p['slabs']} slabs, "
      f"{bytes_cell(p['backed'])} backed [" +
      ", ".join(f"{k} {bytes_cell(v)}" for k, v in g.backed_by.items()) +
      f"]; in use {bytes_cell(p['in_use'])}, peak {bytes_cell(p['peak'])}{sumof}, "
      f"cap {bytes_cell(p['cap'])}, threshold {tally({size(t): c for t, c in g.thresholds.items()})}\n")
    cached = "" if g.cached is None else f" ({g.cached} from the CPUs' caches" + (
        "" if g.paced is None else
        f"; {g.paced} frees went past them, their CPUs slower than the pace") + (
        "" if g.tails is None else
        f"; {g.tails} gave back their block's unwritten tail") + ")"
    w(f"pool     {p['allocations']} allocations served{cached}, {p['frees']} freed; fallbacks to glibc's "
      "heap:" + "".join(f" {k} {v}" for k, v in g.pool_fallbacks.items()) + "\n")
    sv = g.saved
    if all_off(g):
        w("saved    nothing: the pool was off (POOLSHIM_POOL=off)" +
          (" in every process" if n > 1 else "") + ", every allocation went to the program's heap\n")
    elif g.saved_from:
        of = f" ({g.saved_from} of {n} reports have it)" if g.saved_from < n else ""
        w(f"saved    {sv['allocations']} pooled allocations: {sv['reused']} on memory the pool "
          f"held, {sv['fresh']} past its peak; it took {bytes_cell(sv['taken'])} from the kernel "
          f"in {sv['pages']} pages; glibc would have needed (estimate) {sv['glibc_mmaps_min']}-"
          f"{sv['glibc_mmaps_max']} mmap+munmap pairs and {sv['glibc_faults_min']}-"
          f"{sv['glibc_faults_max']} page faults{sumof}{of}\n")
    for (kind, why), c in g.reasons.items():
        what = "hugetlb" if kind == "hugetlb" else "THP"
        w(f"pool     {what} not used: {why}" + (f" ({c} processes)" if n > 1 else "") + "\n")
    pr = g.process
    w(f"process  page faults {pr['minflt']} minor, {pr['majflt']} major; cpu "
      f"{seconds(pr['utime_us'])} user, {seconds(pr['stime_us'])} sys; "
      f"at most {pr['threads']} threads at once" + (" (in any one process)" if n > 1 else "") +
      "\n")
    u = g.uring
    reasons = "; ".join(g.uring_reasons)
    w(f"io_uring {tally(g.uring_states)}{': ' + reasons if reasons else ''}; {u['rings']} rings, "
      f"{u['enters']} enters, {u['sqes']} SQEs ({u['fixed']} fixed), {u['split_calls']} split calls;"
      " fallbacks:" + "".join(f" {k} {v}" for k, v in g.uring_fallbacks.items()) + "\n")
    if u["enters"]:
        w("io_uring SQEs per enter:" +
          "".join(f" {lo}:{c}" for lo, c in sorted(g.sqes_per_enter.items()) if c) + "\n")
    w("call            kind         calls      bytes   errors   eagain   avg-ns  top-errno\n")
    for call, kind, row in g.rows():
        errs = g.errnos.get(call, {})
        top_e = max(errs.items(), key=lambda kv: kv[1], default=None) if errs else None
        avg = str(row["nsec"] // row["timed"]) if row["timed"] else "-"
        w(f"{call:<16}{'-' if kind == 'none' else kind:<8}{row['calls']:>10}"
          f"{bytes_cell(row['bytes']):>11}{row['errors']:>9}{row['eagain']:>9}{avg:>9}  "
          f"{f'{top_e[0]}:{top_e[1]}' if top_e and top_e[1] else '-'}" +
          (f"  ~ {row['estimated']} estimated" if row["estimated"] else "") + "\n")
    if any(row["estimated"] for _, _, row in g.rows()):
        sizes = "/".join(sorted({size(t) for t in g.sampled_below if t})) or "POOLSHIM_POOL_MIN/16"
        w(f"(~ estimated: malloc-family calls below {sizes} are counted one in about 128 "
          "per thread; their calls and bytes are estimates, the larger ones exact)\n")
    hists = [(call, kind, row["size_hist"]) for call, kind, row in g.rows()
             if any(row["size_hist"].values())]
    if hists:
        w("size histogram (bucket = lower bound in bytes: calls)\n")
        for call, kind, h in hists:
            w(f"{call:<16}{'-' if kind == 'none' else kind:<8}" +
              "".join(f" {size(lo)}:{c}" for lo, c in sorted(h.items()) if c) + "\n")
    lats = [(call, kind, row["lat_hist"]) for call, kind, row in g.rows()
            if row["nsec"]]
    if lats:
        w("latency histogram (bucket = lower bound in ns: calls)\n")
        for call, kind, h in lats:
            w(f"{call:<16}{'-' if kind == 'none' else kind:<8}" +
              "".join(f" {lo}:{c}" for lo, c in sorted(h.items()) if c) + "\n")
    if g.sites:
        for key, what in (("bytes", "bytes"), ("count", "captures")):
            w(f"top call sites by {what} (sampled)       captures      bytes     time\n")
            for (kind, call, frames), s in g.top_sites(key, top):
                t = nsec_human(s["nsec"]) if s["nsec"] else "-"
                w(f"  {call:<16}{kind:<21}{s['count']:>10}{bytes_cell(s['bytes']):>11}{t:>9}\n")
                for i, f in enumerate(frames):
                    w(f"      #{i} {frame_text(*f)}\n")
    if g.advice:
        w("advice\n")
        for pid, prog, item in g.advice:
            who = f"[pid {pid} {prog}] " if n > 1 else ""
            w(f"  - {who}{item.get('message')}\n")
    w("\n")


# ---------------------------------------------------------------------------
# Plots: gnuplot scripts with inline data blocks, one PNG each
# ---------------------------------------------------------------------------

def gp_str(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', "'") + '"'


def datablock(name, rows):
    lines = [f"${name} << EOD"] + [" ".join(str(c) if isinstance(c, int) else gp_str(c)
                                            for c in r) for r in rows] + ["EOD"]
    return "\n".join(lines) + "\n"


def log2_rows(h, label):
    """Contiguous log2 buckets from the smallest to the largest present."""
    if not h:
        return []
    lo, hi = min(h), max(h)
    rows, b = [], lo
    while b <= hi:
        rows.append((label(b), h.get(b, 0)))
        b *= 2
    return rows


BAR_STYLE = ("set style fill solid 0.8 border -1\nset boxwidth 0.8\nset grid ytics\n"
             "set xtics rotate by -45 nomirror\nset yrange [0:*]\nset offsets 0, 0, graph 0.1, 0\n")


def empty_panel(title):
    return (f"set title {gp_str(title)}\nunset xtics\nunset ytics\nunset xlabel\nunset ylabel\n"
            "set xrange [0:1]\nset yrange [0:1]\nplot 2 notitle\nset xtics\nset ytics\n"
            "set autoscale\n")


def count_tics(top):
    """Whole-number ticks for a count axis (no tick at half a call)."""
    return "set ytics 1\n" if top <= 10 else "set format y \"%.0f\"\n"


def hist_panel(name, title, rows, xlabel, color):
    if not rows:
        return empty_panel(title + " (none recorded)")
    return (datablock(name, rows) + f"set title {gp_str(title)}\nset xlabel {gp_str(xlabel)}\n"
            f"set ylabel \"calls\"\nset xrange [-0.6:{len(rows) - 0.4}]\n" + BAR_STYLE +
            count_tics(max(r[1] for r in rows)) +
            f"plot ${name} using 0:2:xtic(1) with boxes lc rgb \"{color}\" notitle, "
            f"'' using 0:2:(sprintf(\"%d\", $2)) with labels offset 0,0.7 font \",8\" notitle\n"
            "set autoscale\nset ytics\nset format y \"% h\"\n")


BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "bytes"))
NSEC_UNITS = ((10**9, "s"), (10**6, "ms"), (10**3, "us"), (1, "ns"))


def bar_panel(name, title, rows, units, color, fmt, keep=12, empty=None, shares=True):
    """rows: (label, value); the largest first, the rest summed into one bar,
    the axis in the unit of the largest, shares printed on the bigger bars."""
    rows = sorted((r for r in rows if r[1] > 0), key=lambda r: -r[1])
    if not rows:
        return empty_panel(empty or title + " (nothing recorded)")
    if len(rows) > keep + 1:
        rest = rows[keep:]
        rows = rows[:keep] + [(f"{len(rest)} others", sum(r[1] for r in rest))]
    total = sum(r[1] for r in rows)
    scale, unit = next(u for u in units if rows[0][1] >= u[0] or u[0] == 1)
    texts = [(f"{fmt(v)} {100 * v // total}%" if shares else fmt(v)) if 100 * v >= 3 * total
             else "" for _, v in rows]
    data = [(lab, f"{v / scale:.6g}", texts[i], label_y(rows, texts, i, scale))
            for i, (lab, v) in enumerate(rows)]
    top = max(float(d[3]) for d in data)
    block = f"${name} << EOD\n" + "".join(f"{gp_str(a)} {b} {gp_str(c)} {y}\n"
                                          for a, b, c, y in data) + "EOD\n"
    return (block + f"set title {gp_str(title)}\nunset xlabel\n"
            f"set ylabel {gp_str(unit)}\nset xrange [-0.6:{len(rows) - 0.4}]\n" + BAR_STYLE +
            f"set yrange [0:{top * 1.12:.6g}]\n" + (count_tics(rows[0][1]) if unit in ("captures", "allocations") else "") +
            f"plot ${name} using 0:2:xtic(1) with boxes lc rgb \"{color}\" notitle, "
            f"'' using 0:4:3 with labels offset 0,0.7 font \",8\" notitle\n"
            "set autoscale\nset ytics\nset format y \"% h\"\n")


# About how wide a panel's plot area and a label character are, in pixels.
PANEL_PX, LABEL_CHAR_PX = 600, 6


def hbar_panel(name, title, rows, units, color, fmt):
    """Horizontal bars, the largest on top, each labelled at its left with
    the whole of its (long) label and at its end with its value and share."""
    rows = sorted((r for r in rows if r[1] > 0), key=lambda r: -r[1])
    if not rows:
        return empty_panel(title + " (nothing recorded)")
    total = sum(r[1] for r in rows)
    scale, unit = next(u for u in units if rows[0][1] >= u[0] or u[0] == 1)
    block = f"${name} << EOD\n" + "".join(
        f"{gp_str(lab)} {v / scale:.6g} {gp_str(f'{fmt(v)} {100 * v // total}%')}\n"
        for lab, v in rows) + "EOD\n"
    return (block + f"set title {gp_str(title)}\nset xlabel {gp_str(unit)}\nunset ylabel\n"
            f"set yrange [{len(rows) - 0.5}:-0.5]\nset xrange [0:{rows[0][1] / scale * 1.2:.6g}]\n"
            "set style fill solid 0.8 border -1\nset grid xtics\nset ytics scale 0\n"
            "set xtics norotate\n" + (count_tics(rows[0][1]).replace("ytics", "xtics").replace(
                "format y", "format x") if unit == "captures" else "") +
            f"plot ${name} using ($2 / 2):0:($2 / 2):(0.4):yticlabels(1) with boxxyerror "
            f"lc rgb \"{color}\" notitle, '' using 2:0:3 with labels left offset 0.5,0 "
            "font \",8\" notitle\n"
            "set autoscale\nunset grid\nset grid ytics\nset xtics rotate by -45 nomirror\n"
            "set ytics\nset format x \"% h\"\nset xtics autofreq\nunset xlabel\n")


def label_y(rows, texts, i, scale, step=0.08):
    """Where bar i's value label sits, in axis units: on the bar, or lifted
    a line per neighbour to its left at nearly the same height whose label
    it would run into, so that the labels of equal bars side by side never
    print over each other."""
    biggest = rows[0][1]
    slot = PANEL_PX / len(rows)

    def clash(a, b):
        return texts[a] and texts[b] and abs(rows[a][1] - rows[b][1]) <= step * biggest and \
            (len(texts[a]) + len(texts[b])) * LABEL_CHAR_PX / 2 > slot
    lift = 0
    while lift < i and clash(i - lift - 1, i - lift):
        lift += 1
    return f"{(rows[i][1] + (lift % 4) * step * biggest) / scale:.6g}"


def row_label(call, kind):
    return call if kind == "none" else f"{call}/{kind}"


def caption(g):
    """The pool, page faults and io_uring in one line, under the title."""
    p, u = g.pool, g.uring
    fb = sum(g.pool_fallbacks.values())
    ufb = sum(g.uring_fallbacks.values())
    return (f"pool {tally(g.modes)}: {p['allocations']} allocations served, {fb} fallbacks, "
            f"peak {size(p['peak'])}, {size(p['backed'])} backed;  page faults "
            f"{g.process['minflt']} minor, {g.process['majflt']} major;  io_uring "
            f"{tally(g.uring_states)}: {u['sqes']} SQEs ({u['fixed']} fixed) in {u['enters']} enters, "
            f"{ufb} fallbacks")


def plot_group(g, stem, outdir, top, per_call=True):
    """gnuplot scripts for one group: {file name: script}."""
    scripts = {}
    term = ("set terminal pngcairo noenhanced size {w},{h} font \"sans,9\"\n"
            "set output {out}\n")
    rows = [(row_label(c, k), r) for c, k, r in g.rows()]
    who = f"{g.label} ({len(g.members)} process{'es' if len(g.members) > 1 else ''})"
    # The overview: where the bytes go, where the time goes.
    png = f"{stem}overview.png"
    timed = any(r["timed"] for _, r in rows)
    panels = [bar_panel("bytes", "bytes requested (allocations) or transferred (I/O)",
                        [(lab, r["bytes"]) for lab, r in rows], BYTE_UNITS, "#4477aa", size)]
    if timed:
        panels.append(bar_panel("time", "time in calls (average of the timed calls x calls)",
                                [(lab, g.est_nsec(r)) for lab, r in rows], NSEC_UNITS,
                                "#cc6677", nsec_human))
    # What the pool did, beside them: a program that only allocates has no
    # timed calls, and this is what it wants to see.  When it served
    # nothing, the caption says why instead of an empty panel.
    pool, pool_why = pool_panel(g)
    if pool:
        panels.append(pool)
    saved = saved_panel(g)
    if saved:
        panels.append(saved)
    scripts[png] = (
        term.format(w=700 * len(panels), h=620, out=gp_str(os.path.join(outdir, png))) +
        f"set multiplot layout 1,{len(panels)} title "
        f"{gp_str('poolshim: where the bytes and the time go - ' + who)}"
        f' . "\\n" . {gp_str(caption(g) + ("" if timed else ";  no timed calls (allocations are not timed)") + pool_why)}\n'
        "set bmargin 7\n" + "".join(panels) + "unset multiplot\n")
    # Per call and kind: size histogram and latency histogram side by side.
    for lab, r in rows if per_call else ():
        timed = sum(r["lat_hist"].values())
        if not r["size_hist"] and timed < MIN_TIMED:
            continue  # free: no size, no timing worth a histogram
        png = f"{stem}call-{safe(lab)}.png"
        panels = []
        if r["size_hist"]:
            panels.append(hist_panel("size", f"size: {r['calls']} calls, {size(r['bytes'])}",
                                     log2_rows(r["size_hist"], size),
                                     "size (log2 bucket, lower bound, bytes)", "#4477aa"))
        if timed >= MIN_TIMED:
            panels.append(hist_panel("lat", f"latency: {r['timed']} timed calls",
                                     log2_rows(r["lat_hist"], nsec_human),
                                     "latency (log2 bucket, lower bound)", "#cc6677"))
            why = ""
        elif timed:
            why = (f"latency not drawn: {timed} timed call{'s' if timed > 1 else ''}, "
                   f"fewer than {MIN_TIMED}")
        else:
            why = "latency not drawn: no call timed" + (
                " (allocation calls are not timed)" if lab in ALLOC_CALLS else "")
        title = gp_str(lab + ' - ' + who) + (f' . "\\n" . {gp_str(why)}' if why else "")
        scripts[png] = (
            term.format(w=max(800, 600 * len(panels)), h=480,
                        out=gp_str(os.path.join(outdir, png))) +
            f"set multiplot layout 1,{len(panels)} title {title}\n"
            "set bmargin 5\n" + "".join(panels) + "unset multiplot\n")
    if g.sites:
        png = f"{stem}callsites.png"

        by_bytes, by_count = g.top_sites("bytes", top), g.top_sites("count", top)
        labels = site_labels([k for k, _ in by_bytes] + [k for k, _ in by_count])
        # Sideways bars: a stack's label is long, and is read whole at the left.
        width = max(len(t) for t in labels.values())
        bars = max(len(by_bytes), len(by_count))
        scripts[png] = (
            term.format(w=max(1000, 7 * width + 700), h=2 * (110 + 28 * bars),
                        out=gp_str(os.path.join(outdir, png))) +
            f"set multiplot layout 2,1 title {gp_str('top call sites (sampled) - ' + who)}\n"
            f"set lmargin {width + 3}\nset bmargin 3\n" +
            hbar_panel("sbytes", "by bytes", [(labels[k], s["bytes"]) for k, s in by_bytes],
                       BYTE_UNITS, "#4477aa", size) +
            hbar_panel("scount", "by captures", [(labels[k], s["count"]) for k, s in by_count],
                       ((1, "captures"),), "#228833", str) +
            "unset multiplot\n")
    return scripts


# A latency histogram is drawn from at least this many timed calls.
MIN_TIMED = 20
SITE_NAME_MAX = 28


def short_name(name):
    return name if len(name) <= SITE_NAME_MAX else name[:SITE_NAME_MAX - 3] + "..."


def frame_name(f):
    fn, off, obj = f[0], f[1], f[2]
    return short_name(fn) if fn else f"{os.path.basename(obj) if obj else '??'}+0x{off:x}"


def site_labels(keys):
    """{site key: label}: the call and its innermost frames, as many as it
    takes for no two sites to read the same (two writev stacks that differ
    only further out show where they differ); '#n' when whole stacks
    print alike."""
    keys = list(dict.fromkeys(keys))
    depth = {k: 2 for k in keys}

    def text(k):
        kind, call, frames = k
        names = [frame_name(f) for f in frames][:depth[k]] or ["??"]
        more = " < ..." if len(frames) > depth[k] else ""
        return " < ".join([call] + names) + more
    for _ in range(64):
        by_text = {}
        for k in keys:
            by_text.setdefault(text(k), []).append(k)
        grown = False
        for same in by_text.values():
            if len(same) > 1:
                for k in same:
                    if depth[k] < len(k[2]):
                        depth[k] += 1
                        grown = True
        if not grown:
            break
    out, seen = {}, {}
    for k in keys:
        t = text(k)
        seen[t] = seen.get(t, 0) + 1
        out[k] = t if seen[t] == 1 else f"{t} #{seen[t]}"
    return out


def pool_panel(g):
    """What the pool served, and what it could not: counts of allocations."""
    p = g.pool
    rows = [("served by the pool", p["allocations"]), ("pooled frees", p["frees"])] + \
        [(f"fallback: {k}", v) for k, v in g.pool_fallbacks.items()]
    if all_off(g):
        return None, ";  the pool was off (POOLSHIM_POOL=off): a baseline, nothing pooled"
    if not p["allocations"] and not any(g.pool_fallbacks.values()):
        largest = max((lo for c, k, r in g.rows() if k == "none" and c != "free"
                       for lo, n in r["size_hist"].items() if n), default=None)
        th = tally({size(t): c for t, c in g.thresholds.items()})
        why = (f"the largest allocation was {size(largest)}-{size(largest * 2)}, below the "
               f"{th} threshold" if largest else "no allocation was counted")
        return None, f";  the pool served nothing: {why}"
    return bar_panel("pool", f"the pool: allocations served (each one fresh pages avoided) "
                     f"and fallbacks; threshold {tally({size(t): c for t, c in g.thresholds.items()})}",
                     rows, ((1, "allocations"),), "#228833", str, shares=False), ""


def saved_panel(g):
    """What the pool saved (the reports' saved objects, summed), or None
    when it served nothing: its allocations on memory it already held and
    past its peak, and the pages it took, beside the mmap+munmap pairs and
    page faults glibc would have needed, an estimate drawn as its range
    (dark: the lower figure, light: the upper).  On a log scale: faults run
    to hundreds of thousands where allocations are tens."""
    sv = g.saved
    if not g.saved_from or not sv.get("allocations"):
        return None
    # Short labels: the axis turns them, and the title says what they are.
    rows = [("reused", sv["reused"], sv["reused"]),
            ("fresh", sv["fresh"], sv["fresh"]),
            ("pool pages", sv["pages"], sv["pages"]),
            ("glibc mmaps ~", sv["glibc_mmaps_min"], sv["glibc_mmaps_max"]),
            ("glibc faults ~", sv["glibc_faults_min"], sv["glibc_faults_max"])]
    top = max(hi for _, _, hi in rows)
    data = [(lab, lo, hi, str(hi) if lo == hi else f"{lo}-{hi}", max(hi, 1)) for lab, lo, hi in rows]
    block = "$saved << EOD\n" + "".join(f"{gp_str(lab)} {lo} {hi} {gp_str(t)} {y}\n"
                                        for lab, lo, hi, t, y in data) + "EOD\n"
    title = (gp_str("what the pool saved: allocations on memory it held (reused) or new to "
                    "it (fresh), pages it took") + ' . "\\n" . ' +
             gp_str("~ glibc's mmap+munmap pairs and page faults without the pool "
                    "(estimate; dark: low, light: high)"))
    return (block + f"set title {title}\n"
            "unset xlabel\nset ylabel \"count (log scale)\"\n"
            f"set xrange [-0.6:{len(rows) - 0.4}]\n" + BAR_STYLE +
            f"set logscale y\nset yrange [0.8:{top * 8 if top else 10}]\n"
            "plot $saved using 0:($3 > 0 ? $3 : 1/0):xtic(1) with boxes lc rgb \"#88ccee\" notitle, "
            "'' using 0:($2 > 0 ? $2 : 1/0) with boxes lc rgb \"#228833\" notitle, "
            "'' using 0:5:4 with labels offset 0,0.7 font \",8\" notitle\n"
            "unset logscale y\nset autoscale\nset ytics\nset format y \"% h\"\n")


def safe(s):
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", s) or "_"


def plot(groups, outdir, top):
    gp = shutil.which("gnuplot")
    if gp is None:
        raise RuntimeError("gnuplot not found (Debian package gnuplot-nox)")
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"{outdir}: cannot create: {e.strerror or e}")
    scripts = {}
    for stem, g, per_call in groups:
        scripts.update(plot_group(g, stem, outdir, top, per_call))
    with tempfile.TemporaryDirectory(prefix="poolshim-report.") as tmp:
        for png, script in scripts.items():
            path = os.path.join(tmp, png + ".gp")
            with open(path, "w") as f:
                f.write(script)
            res = subprocess.run([gp, path], stdin=subprocess.DEVNULL, capture_output=True,
                                 text=True)
            target = os.path.join(outdir, png)
            if res.returncode != 0 or not os.path.isfile(target) or not os.path.getsize(target):
                msg = (res.stderr.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"gnuplot failed on {png}: {msg}")
    return sorted(scripts)


# ---------------------------------------------------------------------------
# CSV of the per-call table, and the per-call change between two runs.
# ---------------------------------------------------------------------------

CSV_FIELDS = ("program", "call", "kind", "calls", "bytes", "errors", "eagain", "timed", "nsec",
              "mean_ns")


def mean_ns(row):
    return row["nsec"] // row["timed"] if row["timed"] else None


def write_csv(programs, out):
    """One header line, then one row per program, call and descriptor kind."""
    import csv
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for name, g in programs.items():
        for call, kind, row in g.rows():
            m = mean_ns(row)
            w.writerow([name, call, kind] + [row[n] for n in CSV_FIELDS[3:-1]] +
                       ["" if m is None else m])


def ratio(a, b):
    """B relative to A: x1.50, or what happened when one side is zero."""
    if a is None or b is None:
        return "-"
    if a == 0:
        return "=" if b == 0 else "new"
    return "gone" if b == 0 else f"x{b / a:.2f}"


DIFF_COLS = ("calls", "bytes", "errors", "mean_ns")


def diff_rows(ga, gb):
    """(call, kind, {col: (a, b)}) over the union of both runs' rows."""
    ra = {(c, k): row for c, k, row in ga.rows()}
    rb = {(c, k): row for c, k, row in gb.rows()}
    order = list(ra) + [ck for ck in rb if ck not in ra]
    zero = dict({n: 0 for n in CALL_NUMS}, estimated=0)
    out = []
    for ck in order:
        a, b = ra.get(ck, zero), rb.get(ck, zero)
        cols = {n: (a[n], b[n]) for n in DIFF_COLS[:-1]}
        cols["mean_ns"] = (mean_ns(a), mean_ns(b))
        est = (a["estimated"], b["estimated"]) if a["estimated"] or b["estimated"] else None
        out.append((ck[0], ck[1], cols, est))
    return out


def io_rows(g):
    return [(c, k, row) for c, k, row in g.rows() if k != "none"]


def process_figures(g):
    """[(name, value or None, how to print it)]: the process-wide numbers
    --diff compares, each derived from the report's own counts.  No mean
    latency over all I/O calls: two runs with different mixes of calls would
    compare unlike things; latency is compared call by call."""
    pr, u = g.process, g.uring
    io = io_rows(g)
    io_calls = sum(r["calls"] for _, _, r in io)
    io_bytes = sum(r["bytes"] for _, _, r in io)
    alloc_bytes = sum(r["bytes"] for c, k, r in g.rows() if k == "none" and c != "free")
    cpu = pr["utime_us"] + pr["stime_us"]
    # O_DIRECT calls the ring served made io_uring_enter calls instead of
    # their own system call; every other counted I/O call is one system call.
    direct = sum(r["calls"] for _, k, r in io if k == "direct")
    ring = max(0, direct - sum(g.uring_fallbacks.values())) if u["enters"] else 0
    syscalls = io_calls - ring + u["enters"]
    moved, what = (io_bytes, "I/O") if io_bytes else (alloc_bytes, "allocated")
    fl = lambda v: None if v is None else float(v)  # noqa: E731
    return [
        ("page faults, minor", pr["minflt"], str),
        ("page faults, major", pr["majflt"], str),
        ("CPU user+sys, ms", cpu / 1000, lambda v: f"{v:.1f}"),
        (f"CPU us per MiB {what}", fl(cpu * 2**20 / moved) if moved else None,
         lambda v: f"{v:.3g}"),
        ("I/O system calls per I/O call", fl(syscalls / io_calls) if io_calls else None,
         lambda v: f"{v:.3f}"),
        ("io_uring requests (SQEs)", u["sqes"], str),
        ("pool allocations served", g.pool["allocations"], str),
    ]


def mode_text(g):
    """The pool's mode as the diff names it: 'off' said as the baseline it is."""
    return ("off (POOLSHIM_POOL=off: every call counted, nothing pooled)" if all_off(g)
            else tally(g.modes))


# ---------------------------------------------------------------------------
# --diff: whole runs.  Each side is a report file, a directory of them or a
# glob; its processes are grouped by program, the busiest program is the one
# compared (all its processes summed), and its busiest process is named.
# ---------------------------------------------------------------------------

def work_of(r):
    """How much a report's process did, for choosing the busiest: I/O bytes,
    then bytes allocated, then CPU time."""
    io = sum(c["bytes"] for c in r["calls"] if c["kind"] != "none")
    alloc = sum(c["bytes"] for c in r["calls"] if c["kind"] == "none" and c["call"] != "free")
    io_calls = sum(c["calls"] for c in r["calls"] if c["kind"] != "none")
    return (io, alloc, r["process"]["utime_us"] + r["process"]["stime_us"], io_calls)


class Side:
    def __init__(self, name, spec, validate):
        self.name, self.spec = name, spec
        self.reports = []  # (label, report)
        for path in side_paths(spec):
            for label, r, _ in load_reports(path, validate):
                self.reports.append((label, r))
        if not self.reports:
            raise BadInput("no reports")
        by_prog = {}
        for label, r in self.reports:
            by_prog.setdefault(r["program"], []).append((label, r))
        # The program compared: the one that did the most.
        tot = lambda rs: tuple(map(sum, zip(*(work_of(r) for _, r in rs))))  # noqa: E731
        self.program = max(by_prog, key=lambda p: tot(by_prog[p]))
        self.members = by_prog[self.program]
        self.others = {p: len(rs) for p, rs in by_prog.items() if p != self.program}
        self.group = Group(f"{name} {self.program}")
        for label, r in self.members:
            self.group.add(label, r)
        self.busiest = max(self.members, key=lambda lr: work_of(lr[1]))
        self.work = tot(self.members)

    def label(self):
        return self.spec

    def busiest_text(self):
        label, r = self.busiest
        io, alloc, cpu, _ = self.work
        b = work_of(r)
        if io:
            share = f"{100 * b[0] / io:.0f}% of its I/O bytes"
        elif alloc:
            share = f"{100 * b[1] / alloc:.0f}% of its bytes allocated"
        else:
            share = f"{100 * b[2] / cpu:.0f}% of its CPU time" if cpu else "no work"
        return f"busiest pid {r['pid']} ({share}, {os.path.basename(label)})"

    def config(self):
        cfg = self.busiest[1].get("config")
        return cfg if isinstance(cfg, dict) else {}

    def verdict(self):
        v = self.busiest[1].get("verdict")
        return v if isinstance(v, dict) else {}


def side_paths(spec):
    """The report files a --diff side names: a file, a directory (its
    *.json), or a glob pattern."""
    import glob
    if os.path.isdir(spec):
        paths = sorted(os.path.join(spec, f) for f in os.listdir(spec) if f.endswith(".json"))
        if not paths:
            raise BadInput("a directory with no .json reports")
        return paths
    if not os.path.exists(spec) and any(ch in spec for ch in "*?["):
        paths = sorted(glob.glob(spec))
        if not paths:
            raise BadInput("no file matches")
        return paths
    return [spec]


def parse_throughput(text):
    """'421,525' or '421MB/s,525MB/s' -> (421.0, 525.0, 'MB/s')."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError("want two figures, A,B")
    vals, units = [], set()
    for p in parts:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(\S*)\s*", p)
        if not m or float(m.group(1)) <= 0:
            raise ValueError(f"'{p}' is not a positive number")
        vals.append(float(m.group(1)))
        units.add(m.group(2))
    if len(units) > 1:
        raise ValueError(f"the two figures have different units: {' and '.join(sorted(units))}")
    return vals[0], vals[1], units.pop()


def fnum(v):
    return f"{v:.6g}"


def latency_pairs(ga, gb):
    """[(call, kind, mean A, mean B)] for the calls timed on both sides, and
    the (call, kind) timed on one side only."""
    ra = {(c, k): row for c, k, row in ga.rows() if k != "none"}
    rb = {(c, k): row for c, k, row in gb.rows() if k != "none"}
    both, one = [], []
    for ck in list(ra) + [ck for ck in rb if ck not in ra]:
        a, b = ra.get(ck), rb.get(ck)
        ta = a["timed"] if a else 0
        tb = b["timed"] if b else 0
        if ta and tb:
            both.append((ck[0], ck[1], a["nsec"] / ta, b["nsec"] / tb))
        elif ta or tb:
            one.append((ck[0], ck[1], "A" if ta else "B"))
    return both, one


CONFIG_IGNORED = {"POOLSHIM_STATS", "POOLSHIM_RUN", "POOLSHIM_LIVE_DIR", "POOLSHIM_STATS_FORMAT"}


def diff_differences(a, b):
    """What else differed between the runs, beyond the counts: [text]."""
    ga, gb = a.group, b.group
    out = []
    if a.program != b.program:
        out.append(f"program: A {a.program}, B {b.program}")
    if len(a.members) != len(b.members):
        out.append(f"processes of {a.program if a.program == b.program else 'the program'}: "
                   f"A {len(a.members)}, B {len(b.members)}")
    sa, sb = ga.uring["sqes"], gb.uring["sqes"]
    if (sa == 0) != (sb == 0):
        on, off = ("B", "A") if sb else ("A", "B")
        out.append(f"io_uring: A {sa} SQEs, B {sb}: O_DIRECT I/O went through the ring in {on} "
                   f"only ({off}: {tally(ga.uring_states if off == 'A' else gb.uring_states)})")
    if mode_text(ga) != mode_text(gb):
        out.append(f"pool mode: A {tally(ga.modes)}, B {tally(gb.modes)}")
    ca, cb = a.config(), b.config()
    if ca and cb:
        changed = [f"{k} {ca.get(k, '-')} -> {cb.get(k, '-')}" for k in sorted(set(ca) | set(cb))
                   if k not in CONFIG_IGNORED and ca.get(k) != cb.get(k)]
        if changed:
            out.append("settings: " + ", ".join(changed))
    if a.others or b.others:
        also = lambda s: ", ".join(f"{p} ({n})" for p, n in sorted(s.others.items())) or "none"  # noqa: E731
        out.append(f"other programs, not compared: A {also(a)}; B {also(b)}")
    return out


def diff_warnings(a, b):
    """Why the comparison may mislead: [text]."""
    out = []
    if a.program != b.program:
        out.append(f"A is {a.program} and B is {b.program}: different programs do different "
                   "work, and the figures below compare unlike things")
    elif len(a.members) == 1 and len(b.members) == 1:
        # One process against one, one of them next to idle: by I/O bytes
        # (100 times fewer, the other past 1 MiB) or calls (20 times fewer,
        # the other past 200).
        (ba, ca), (bb, cb) = (a.work[0], a.work[3]), (b.work[0], b.work[3])
        small = "A" if (ba, ca) < (bb, cb) else "B"
        (lb, lc), (hb, hc) = ((ba, ca), (bb, cb)) if small == "A" else ((bb, cb), (ba, ca))
        if (hb >= 2**20 and hb >= 100 * max(lb, 1)) or (hc >= 200 and hc >= 20 * max(lc, 1)):
            out.append(f"{small}'s {a.program} process made {lc} I/O calls ({size(lb)}) against "
                       f"{hc} ({size(hb)}): a master (which does next to nothing) against a "
                       "worker?  Give each run's reports (a directory, or a glob) to compare "
                       "whole runs")
    return out


def diff_verdict(a, b, figs, throughput, warnings):
    """One line: the answer of the diff."""
    if a.program != b.program:
        return f"not comparable: A is {a.program}, B is {b.program}"
    if warnings:
        return "not comparable as given: " + warnings[0].split(":")[0] + "; see the warning"
    parts = []
    if throughput:
        parts.append(f"throughput x{throughput[1] / throughput[0]:.2f} (yours)")
    for name, va, vb in figs:
        if name in ("page faults, minor",) or name.startswith("CPU us per MiB"):
            short = "faults" if name.startswith("page") else name.replace("CPU us per MiB", "CPU per MiB")
            if va is not None and vb is not None and va > 0:
                parts.append(f"{short} {ratio(va, vb)}")
    text = ", ".join(parts) if parts else "no figure to compare"
    # The pool idle over all of B's processes (the shim's rule: fewer than
    # 16 reused): why, as its busiest process's report says it.
    vb = b.verdict()
    reused = b.group.saved.get("reused") if b.group.saved_from else None
    if not all_off(b.group) and reused is not None and reused < 16 and \
            vb.get("kind") in ("idle", "no_work", "foreign"):
        text += f"; in B, {vb.get('text', 'pool idle').split(';')[0]}"
    return f"{b.program}, B against A: {text}"


def render_diff(a, b, out, throughput=None):
    ga, gb = a.group, b.group
    w = out.write
    figs_a, figs_b = process_figures(ga), process_figures(gb)
    figs = [(n, va, vb) for (n, va, _), (_, vb, _) in zip(figs_a, figs_b)]
    warnings = diff_warnings(a, b)
    w(f"==== poolshim diff: A {a.label()} -> B {b.label()} ====\n")
    w(f"verdict  {diff_verdict(a, b, figs, throughput, warnings)}\n")
    for name, s in (("A", a), ("B", b)):
        pids = ", ".join(str(r["pid"]) for _, r in s.members[:8])
        more = f" and {len(s.members) - 8} more" if len(s.members) > 8 else ""
        if len(s.members) == 1:
            w(f"{name}        {s.program}: 1 process (pid {pids})\n")
        else:
            w(f"{name}        {s.program}: {len(s.members)} processes (pid {pids}{more}), summed; "
              f"{s.busiest_text()}\n")
    for text in diff_differences(a, b):
        w(f"differs  {text}\n")
    for text in warnings:
        w(f"warning  {text}\n")
    w(f"pool mode: A {mode_text(ga)}; B {mode_text(gb)}\n")
    w(f"pool placement: A {tally(ga.allocators)}; B {tally(gb.allocators)}\n")
    w(f"{'call':<15} {'kind':<7}" + "".join(
        f" {n + ' A':>12} {n + ' B':>12} {'B/A':>7}" for n in DIFF_COLS) + "\n")
    est_rows = 0
    for call, kind, cols, est in diff_rows(ga, gb):
        line = f"{call:<15} {kind:<7}"
        for n in DIFF_COLS:
            va, vb = cols[n]
            line += f" {'-' if va is None else va:>12} {'-' if vb is None else vb:>12} {ratio(va, vb):>7}"
        if est:
            line += f"  ~ estimate: {est[0]} of A's calls and {est[1]} of B's are sampled"
            est_rows += 1
        w(line + "\n")
    both, one = latency_pairs(ga, gb)
    if both or one:
        text = ", ".join(f"{c} {k} {ratio(la, lb)}" for c, k, la, lb in both) or "none"
        w(f"latency  mean per call, B/A, calls timed on both sides: {text}")
        if one:
            w("; timed on one side only (not compared): " +
              ", ".join(f"{c} {k} ({side})" for c, k, side in one))
        w("\n")
    w(f"{'process':<40} {'A':>14} {'B':>14} {'B/A':>7}\n")
    if throughput:
        ta, tb, unit = throughput
        w(f"{'throughput (yours' + (', ' + unit if unit else '') + ')':<40} {fnum(ta):>14} "
          f"{fnum(tb):>14} {ratio(ta, tb):>7}\n")
    for (name, va, fmt), (_, vb, _) in zip(figs_a, figs_b):
        if va is None and vb is None:
            continue
        w(f"{name:<40} {'-' if va is None else fmt(va):>14} {'-' if vb is None else fmt(vb):>14} "
          f"{ratio(va, vb):>7}\n")
    if all_off(ga) and not all_off(gb):
        w("A is the baseline, the same counts with the pool off: B/A is what the pool changed "
          "(page faults and CPU time are the process's own, from getrusage; the pool's "
          "allocations are B's alone).\n")
    if ga.allocators != gb.allocators and not all_off(ga) and not all_off(gb):
        w("A and B placed their pooled blocks differently (POOLSHIM_POOL_ALLOCATOR): the pool's "
          "footprint and page faults differ by that too.\n")
    if est_rows:
        sizes = sorted({size(t) for g in (ga, gb) for t in g.sampled_below if t})
        below = "/".join(sizes) if sizes else "POOLSHIM_POOL_MIN/16"
        w(f"~ sampled estimate: malloc-family calls (malloc, calloc, realloc, reallocarray, "
          f"posix_memalign, aligned_alloc, memalign, valloc, pvalloc) below {below} "
          f"(POOLSHIM_POOL_MIN/16) are counted one in about 128 per thread, so their calls and "
          f"bytes differ run to run; the calls at or above it are exact.\n")


def diff_main(specs, validate, throughput=None):
    sides = []
    for name, spec in zip("AB", specs):
        try:
            sides.append(Side(name, spec, validate))
        except BadInput as e:
            print(f"{PROG}: {spec}: {e}", file=sys.stderr)
            return 2
    render_diff(sides[0], sides[1], sys.stdout, throughput)
    return 0


# ---------------------------------------------------------------------------
# Offline symbolization.  A report written where there was no debug info has
# frames with "function": null but the object's path, build id and the
# object-relative address ("rel").  They are named here, on the machine that
# reads the report, with elfutils' eu-addr2line, from the first of:
#   DIR/.build-id/xx/rest.debug for each --debug-dir DIR, then /usr/lib/debug;
#   the object at its recorded path when its build id is the report's (its
#   .gnu_debuglink target first, when that is found with the same build id).
# An object whose build id differs from the report's names nothing: its code
# is not the code that ran.
# ---------------------------------------------------------------------------

SYSTEM_DEBUG_DIR = "/usr/lib/debug"
ADDR2LINE = ("eu-addr2line", "-a", "-f", "-i", "-C", "-S")


def elf_sections(f, hdr):
    """(name, type, offset, size, align) of each section, [] if none can be read."""
    is64, end = hdr[4] == 2, "<" if hdr[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack(end + "Q", hdr[0x28:0x30])
        shentsize, shnum, shstrndx = struct.unpack(end + "HHH", hdr[0x3a:0x40])
        fmt = end + "IIQQQQIIQ"
    else:
        shoff, = struct.unpack(end + "I", hdr[0x20:0x24])
        shentsize, shnum, shstrndx = struct.unpack(end + "HHH", hdr[0x2e:0x34])
        fmt = end + "IIIIIIIII"
    width = struct.calcsize(fmt)
    if not shoff or shentsize < width or shnum > 65535:
        return []
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    raw = []
    for i in range(len(table) // shentsize):
        s = struct.unpack(fmt, table[i * shentsize:i * shentsize + width])
        raw.append((s[0], s[1], s[4], s[5], s[8]))  # name, type, offset, size, addralign
    names = b""
    if shstrndx < len(raw):
        f.seek(raw[shstrndx][2])
        names = f.read(min(raw[shstrndx][3], 1 << 20))
    out = []
    for name, typ, off, size, align in raw:
        n = names[name:names.find(b"\0", name)] if name < len(names) else b""
        out.append((n.decode("latin-1"), typ, off, size, align))
    return out


def elf_notes(data, align, end):
    """(type, name, desc) of each note in a note section's bytes."""
    align = 8 if align == 8 else 4
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, typ = struct.unpack(end + "III", data[pos:pos + 12])
        pos += 12
        name = data[pos:pos + namesz].rstrip(b"\0")
        pos += (namesz + align - 1) & ~(align - 1)
        desc = data[pos:pos + descsz]
        pos += (descsz + align - 1) & ~(align - 1)
        yield typ, name, desc


def elf_info(path):
    """(build id in hex or None, .gnu_debuglink file name or None); None if
    the file cannot be read or is not ELF."""
    try:
        with open(path, "rb") as f:
            hdr = f.read(64)
            if len(hdr) < 52 or hdr[:4] != b"\x7fELF" or hdr[4] not in (1, 2):
                return None
            end = "<" if hdr[5] == 1 else ">"
            build_id = link = None
            for name, typ, off, size, align in elf_sections(f, hdr):
                if typ == 7 and build_id is None:  # SHT_NOTE
                    f.seek(off)
                    for ntype, nname, desc in elf_notes(f.read(min(size, 1 << 16)), align, end):
                        if ntype == 3 and nname == b"GNU":  # NT_GNU_BUILD_ID
                            build_id = desc.hex()
                elif name == ".gnu_debuglink" and typ != 8:  # not NOBITS
                    f.seek(off)
                    data = f.read(min(size, 4096))
                    link = data[:data.find(b"\0")].decode("utf-8", "replace") or None
            return build_id, link
    except (OSError, ValueError, IndexError, struct.error):
        return None


class Symbolizer:
    """Finds the file to name each object's frames from, once per object."""

    def __init__(self, debug_dirs, warn):
        self.dirs = list(debug_dirs) + [SYSTEM_DEBUG_DIR]
        self.warn = warn
        self.files = {}  # (path, build_id) -> file to read, or None

    def matches(self, path, build_id):
        info = elf_info(path)
        return info is not None and info[0] == build_id

    def by_build_id(self, build_id):
        for d in self.dirs:
            for sub in (os.path.join(d, ".build-id"), d):
                cand = os.path.join(sub, build_id[:2], build_id[2:] + ".debug")
                if os.path.isfile(cand) and self.matches(cand, build_id):
                    return cand
        return None

    def source(self, path, build_id):
        key = (path, build_id)
        if key in self.files:
            return self.files[key]
        found = self.by_build_id(build_id)
        if found is None and path and os.path.isfile(path):
            info = elf_info(path)
            if info is None or info[0] != build_id:
                have = info[0] if info and info[0] else "none"
                self.warn(f"{path}: build id {have} here, {build_id} in the report: "
                          "not naming its frames from it (give --debug-dir with the "
                          "debug info of the build that ran)")
            else:
                found = path
                link = info[1]
                if link:
                    here = os.path.dirname(path)
                    for cand in [os.path.join(here, link), os.path.join(here, ".debug", link)] + \
                            [os.path.join(d, here.lstrip("/"), link) for d in self.dirs]:
                        if os.path.isfile(cand) and self.matches(cand, build_id):
                            found = cand
                            break
        elif found is None:
            self.warn(f"{path or '?'} (build id {build_id}): no such object here and no "
                      "debug file by its build id; its frames stay unnamed")
        self.files[key] = found
        return found


SRC_LINE = re.compile(r"^(.*):(\d+):\d+$|^(.*):(\d+)$")
SYM_OFF = re.compile(r"^(.+)\+0x([0-9a-f]+)$")
INLINED = re.compile(r"^(.*) inlined at .* in (.+)$")


def known(name):
    return bool(name) and name != "??" and not name.startswith("(")


def parse_addr2line(lines):
    """One address's lines of `eu-addr2line -f -i -S` output (without the
    address line): (symbol, offset or None, [functions innermost first],
    file, line).  Each level is a function line (-f; absent without DWARF),
    the symbol+0xoffset (-S; on the first level only, and folded into an
    "X inlined at F:L in sym+0xoff" function line) and file:line."""
    sym, funcs, src = None, [], None
    i, n = 0, len(lines)
    while i < n:
        first = lines[i]
        i += 1
        m = INLINED.match(first)
        fn = first
        if m:
            fn = m.group(1)
            sym = sym or m.group(2)
        elif not funcs and SYM_OFF.match(first) and (i >= n or SRC_LINE.match(lines[i])):
            fn, sym = None, sym or first  # no DWARF: the -S line alone
        elif i < n and SYM_OFF.match(lines[i]) and not SRC_LINE.match(lines[i]):
            sym = sym or lines[i]
            i += 1
        if i < n and SRC_LINE.match(lines[i]):
            src = src or lines[i]
            i += 1
        if known(fn):
            funcs.append(fn)
    off = None
    m = SYM_OFF.match(sym or "")
    if m:
        sym, off = m.group(1), int(m.group(2), 16)
    if not known(sym):
        sym = funcs[-1] if funcs else None
    file = line = None
    m = SRC_LINE.match(src or "")
    if m:
        file, line = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
        if file == "??" or int(line) <= 0:
            file = line = None
        else:
            line = int(line)
    return sym, off, funcs, file, line


def addr2line(tool, path, addrs, warn):
    """{address: parsed record} for the addresses, one eu-addr2line run."""
    try:
        res = subprocess.run([tool] + list(ADDR2LINE[1:]) + ["-e", path],
                             input="".join(f"0x{a:x}\n" for a in addrs),
                             capture_output=True, text=True, errors="replace")
    except OSError as e:
        warn(f"{tool}: {e.strerror or e}")
        return {}
    if res.returncode != 0 and not res.stdout:
        warn(f"eu-addr2line -e {path}: " + (res.stderr.strip().splitlines() or
                                            [f"exit status {res.returncode}"])[-1])
    heads = {f"0x{a:016x}": a for a in addrs}
    out, cur, lines = {}, None, []
    for text in res.stdout.splitlines() + [None]:
        if text is None or text in heads:
            if cur is not None:
                out[cur] = parse_addr2line(lines)
            if text is not None:
                cur, lines = heads[text], []
            continue
        lines.append(text)
    return out


def symbolize(reports, debug_dirs, warn):
    """Name in place the frames of the reports that have no function name;
    returns how many were named."""
    todo = {}  # (path, build_id) -> [frames]
    for _, r in reports:
        for s in r.get("callsites") or ():
            for f in s.get("frames") or ():
                if f.get("function") is None and isinstance(f.get("build_id"), str) and \
                        is_uint(f.get("rel")) and f["rel"] > 0:
                    todo.setdefault((f.get("path"), f["build_id"].lower()), []).append(f)
    if not todo:
        return 0
    tool = shutil.which(ADDR2LINE[0])
    if tool is None:
        warn(f"{len(todo)} objects have unnamed frames, and eu-addr2line is not installed "
             "(Debian package elfutils): they stay unnamed")
        return 0
    sym = Symbolizer(debug_dirs, warn)
    named = 0
    for (path, build_id), frames in todo.items():
        src = sym.source(path, build_id)
        if src is None:
            continue
        # a return address: the call is the byte before it
        found = addr2line(tool, src, sorted({f["rel"] - 1 for f in frames}), warn)
        for f in frames:
            rec = found.get(f["rel"] - 1)
            if rec is None or rec[0] is None:
                continue
            fn, off, funcs, file, line = rec
            f["function"] = fn
            if off is not None:
                f["offset"] = off + 1
            if file is not None and not f.get("file"):
                f["file"], f["line"] = file, line
            if len(funcs) > 1:
                f["inlined"] = funcs[:-1]
            named += 1
    return named


# ---------------------------------------------------------------------------

def folded_name(name):
    """No spaces or ';' in a frame (flamegraph.pl splits on them)."""
    return name.replace(" ", "_").replace(";", ":")


def folded_frames(f):
    """A frame root first: the function, then what was inlined into it,
    marked _[i] as stackcollapse-perf does."""
    if not f.get("function"):
        return [folded_name(f"{f.get('object') or '?'}+0x{f.get('rel', f.get('offset', 0)):x}")]
    return [folded_name(f["function"])] + [folded_name(n) + "_[i]"
                                           for n in reversed(f.get("inlined") or ())]


def write_folded(reports, key, out):
    """--folded: one line per stack, root first, ';'-joined, then the count or bytes."""
    stacks = {}
    for _, r in reports:
        for site in r.get("callsites", []):
            frames = [n for f in reversed(site["frames"]) for n in folded_frames(f)]
            frames.append(f"{site['kind']}:{site['call']}")
            line = ";".join(frames)
            stacks[line] = stacks.get(line, 0) + site["count" if key == "count" else "bytes"]
    for line, n in sorted(stacks.items()):
        out.write(f"{line} {n}\n")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog=PROG, description="Merge poolshim JSON reports (one per process), print the "
        "merged tables per program and per process, optionally plot them.",
        epilog="Exit status: 0 ok, 1 a plot or output could not be written, "
        "2 bad usage or a file that is unreadable or not a valid report, "
        "3 nothing to print: --folded and no report has call sites (POOLSHIM_BACKTRACE=1 "
        "captures them).  A FILE may hold the one-per-line snapshots `poolshim stat --json` "
        "prints, one per process.  See poolshim(1).")
    ap.add_argument("files", nargs="*", metavar="FILE", help="JSON reports (POOLSHIM_STATS=...json)")
    ap.add_argument("--plot", metavar="DIR", help="write PNG plots (gnuplot) into DIR")
    ap.add_argument("--json", metavar="OUT", help="write the merged numbers as JSON to OUT (- for stdout)")
    ap.add_argument("--top", metavar="N", type=int, default=10, help="call sites listed and plotted (default 10)")
    ap.add_argument("--summary", action="store_true", help="per program only, no per-process tables")
    ap.add_argument("--exact", action="store_true", help="print bytes as exact integers, not 1.5M")
    ap.add_argument("--csv", action="store_true", help="print the per-call table as CSV, one row per program, call and kind")
    ap.add_argument("--diff", nargs=2, metavar=("A", "B"),
                    help="print what changed from run A (the base: a run with "
                    "POOLSHIM_POOL=off is the baseline, counted with nothing pooled) to run "
                    "B; each a report file, a directory of reports or a quoted glob: the "
                    "busiest program's processes are summed and its busiest process named.  "
                    "A verdict line, what else differed (io_uring, pool mode, settings, "
                    "programs), per call and kind, latency call by call, then page faults, "
                    "CPU per MiB and system calls per I/O call; rows whose counts are sampled "
                    "estimates are marked ~")
    ap.add_argument("--throughput", metavar="A,B",
                    help="with --diff: the throughput your load generator measured for A and "
                    "for B (same unit, e.g. 421,525 or 421MB/s,525MB/s), compared beside the "
                    "shim's figures")
    ap.add_argument("--folded", nargs="?", const="count", metavar="count|bytes",
                    help="print call-site stacks folded (flamegraph.pl), weighted by count or bytes")
    ap.add_argument("--debug-dir", metavar="DIR", action="append", default=[],
                    help="name unnamed call-site frames from DIR/.build-id/xx/rest.debug "
                    "(repeatable; " + SYSTEM_DEBUG_DIR + " is always searched last)")
    ap.add_argument("--no-symbolize", action="store_true",
                    help="leave frames the report did not name unnamed")
    a = ap.parse_args(argv)
    if a.folded not in (None, "count", "bytes"):
        # "--folded FILE": the optional value was a report, not a weight
        a.files.insert(0, a.folded)
        a.folded = "count"
    if not a.files and not a.diff:
        ap.error("give report FILEs, or --diff A B")
    if a.diff and a.files:
        ap.error(f"--diff compares exactly two reports, A and B; also given: {' '.join(a.files)}")
    if a.throughput is not None:
        if not a.diff:
            ap.error("--throughput goes with --diff A B")
        try:
            a.throughput = parse_throughput(a.throughput)
        except ValueError as e:
            ap.error(f"--throughput {a.throughput}: {e}")
    if a.top < 1:
        ap.error("--top must be at least 1")
    if a.json and a.json != "-":
        clash = json_output_clash(a.json, a.files + list(a.diff or ()))
        if clash:
            ap.error(clash)
    return a


def json_output_clash(out, inputs):
    """Why --json OUT must not be written, or None: OUT is one of the input
    reports, or is itself a report (`--json A.json B.json` names A.json as
    the output where the user meant two inputs)."""
    for path in inputs:
        try:
            same = os.path.samefile(out, path)
        except OSError:
            same = os.path.realpath(out) == os.path.realpath(path)
        if same:
            return (f"--json {out}: that is also an input report; --json takes the name of a "
                    "new file for the merged numbers (or - for stdout), refusing to overwrite it")
    try:
        with open(out, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if re.search(rb'"schema"\s*:\s*"poolshim-report"', head):
        return (f"--json {out}: {out} is a poolshim report, not an output: --json takes the name "
                f"of a new file for the merged numbers, as in `--json merged.json {out} ...` "
                "(or --json - for stdout); refusing to overwrite it")
    return None


def main(argv):
    a = parse_args(argv)
    validate = find_validator()
    if a.diff:
        return diff_main(a.diff, validate, a.throughput)
    reports, bad, seen = [], 0, {}
    for path in a.files:
        try:
            for label, r, stamp in load_reports(path, validate):
                # A snapshot of a process given again, or beside its exit
                # report (two scrapes, or `stat -i` whose later lines are
                # changes, not totals), would be counted twice.
                key = (r["pid"], r["program"])
                if key in seen and (stamp is not None or seen[key][1]):
                    raise BadInput(f"pid {r['pid']} ({r['program']}) again, already in "
                                   f"{seen[key][0]}: give one report or snapshot per process "
                                   "(the lines of `poolshim stat -i --json` after the first "
                                   "are changes, not totals)")
                seen.setdefault(key, (label, stamp is not None))
                reports.append((label, r))
        except BadInput as e:
            print(f"{PROG}: {path}: {e}", file=sys.stderr)
            bad += 1
    if bad:
        return 2
    if not a.no_symbolize and not a.csv:  # the CSV has no frames
        told = set()

        def warn(msg):
            if msg not in told:
                told.add(msg)
                print(f"{PROG}: {msg}", file=sys.stderr)
        symbolize(reports, a.debug_dir, warn)

    total = Group("all programs")
    programs, processes = {}, []
    for path, r in reports:
        total.add(path, r)
        prog = programs.setdefault(r["program"], Group(f"program {r['program']}"))
        prog.add(path, r)
        proc = Group("process")
        proc.add(path, r)
        processes.append(proc)

    if a.folded:
        if not any(r.get("callsites") for _, r in reports):
            print(f"{PROG}: --folded: no call sites in {'this report' if len(reports) == 1 else 'these reports'} "
                  "(they are captured with POOLSHIM_BACKTRACE=1): nothing to print",
                  file=sys.stderr)
            return 3
        write_folded(reports, a.folded, sys.stdout)
        return 0
    out = sys.stdout
    if a.csv:
        write_csv(programs, out)
        return 0
    if a.json == "-":
        out = sys.stderr  # keep stdout for the JSON
    if len(programs) > 1:
        render(total, out, a.exact, a.top)
    for g in programs.values():
        render(g, out, a.exact, a.top)
    if len(processes) > 1 and not a.summary:
        for g in processes:
            render(g, out, a.exact, a.top)

    rc = 0
    if a.json:
        doc = {"schema": MERGED_SCHEMA, "version": MERGED_VERSION,
               "total": total.to_json(),
               "programs": [g.to_json() for g in programs.values()],
               "processes": [g.to_json() for g in processes]}
        try:
            if a.json == "-":
                json.dump(doc, sys.stdout, indent=1)
                sys.stdout.write("\n")
            else:
                with open(a.json, "w") as f:
                    json.dump(doc, f, indent=1)
                    f.write("\n")
        except OSError as e:
            print(f"{PROG}: {a.json}: cannot write: {e.strerror or e}", file=sys.stderr)
            rc = 1
    if a.plot:
        # Per-call histograms mix nothing: one set per program; the overview
        # of all programs together only when there are several.
        groups = [(f"{safe(name)}-", g, True) for name, g in programs.items()]
        if len(programs) > 1:
            groups.insert(0, ("all-", total, False))
        try:
            pngs = plot(groups, a.plot, a.top)
            print(f"plots: {len(pngs)} PNG files in {a.plot}: {', '.join(pngs)}", file=out)
        except (RuntimeError, OSError) as e:
            print(f"{PROG}: plot: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
