#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Validate a poolshim JSON report against the schema in docs/report-schema.md.

Checks that every documented field is present with the right type, that no
undocumented top-level field appears, and that the totals are consistent
(histogram counts add up to call counts, backed_by adds up to backed,
the peak is not below what is in use).  Exit 0 when valid.
"""
import json
import sys

U = int  # non-negative integers, checked below

SCHEMA = {
    "schema": str, "version": int, "pid": int, "program": str,
    "pool": {
        "mode": str, "requested": str, "heap_owner": (str, type(None)),
        "hugetlb_reason": (str, type(None)),
        "thp_reason": (str, type(None)), "slabs": U, "backed": U,
        "backed_by": {"hugetlb": U, "thp": U, "4k": U},
        "in_use": U, "peak": U, "cap": U, "threshold": U, "reserve": U,
        "retain": U, "decay_ms": U, "purged": U, "purges": U,
        "cgroup_limit": U, "cgroup_version": U,
        "allocations": U, "frees": U,
        "fallbacks": {"pool_full": U, "too_large": U, "no_memory": U,
                      "no_address_space": U, "not_ready": U},
    },
    "process": {"minflt": U, "majflt": U, "utime_us": U, "stime_us": U, "threads": U},
    "uring": {
        "state": str, "reason": (str, type(None)), "rings": U, "enters": U, "sqes": U,
        "fixed": U, "split_calls": U, "sqes_per_enter": list,
        "fallbacks": {"setup": U, "register": U, "not_pooled": U, "small": U, "error": U,
                      "protected": U, "nested": U, "unaligned": U},
        # the O_DIRECT router (issue 36)
        "route_mode": (str, type(None)), "devices": list,
    },
    "calls": list,
    # version 3: what makes two reports comparable, and advice
    "meta": {"version": str, "host": str, "kernel": str, "start_time": (str, type(None))},
    "config": dict,
    "advice": list,
}
ADVICE = {"id": str, "message": str, "variable": str, "suggested": (str, type(None))}
ADVICE_IDS = {"pool_min", "memlock", "unaligned", "pool_full", "hugetlb_none", "thp_disabled",
              "hugetlb_pays", "pool_idle", "program_settings", "sendfile", "uring_route",
              "pool_off"}
CALL = {"call": str, "kind": str, "calls": U, "bytes": U, "errors": U, "eagain": U,
        "timed": U, "nsec": U, "estimated": U, "size_hist": list, "lat_hist": list, "errnos": dict}
WINDOW = {"samples": U, "bytes": U, "cpu_ns": U, "wall_ns": U, "mib_s": U, "cpu_us_per_gib": U}
DEVICE = {"device": str, "op": str, "route": str, "route_chosen": (str, type(None)),
          "route_decisions": U, "route_changes": U, "route_measured": dict,
          "route_calls": {"plain": U, "ring": U}, "route_bytes": {"plain": U, "ring": U}}
ROUTE_STATES = {"measuring", "plain", "ring", "forced_ring"}
MODES = {"hugetlb", "thp", "4k", "mixed", "unused", "unavailable", "foreign", "off"}
# pool.allocator (issue 35, within version 3): what placed the pooled blocks,
# null where the configuration is not known; absent from older reports.
ALLOCATORS = {"pages", "jemalloc", None}
POOL_FREE = {"blocks": U, "bytes": U, "largest": U, "resident_max": U, "zero": U}
POOL_ARENAS = {"used": U, "max": U}
KINDS = {"none", "socket", "file", "direct", "pipe", "other"}
# The calls whose small sizes are counted by sampling (shim/core/alloc.h).
SAMPLED = {"malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
           "memalign", "valloc", "pvalloc"}


def check(obj, schema, path, errors):
    for key, want in schema.items():
        if key not in obj:
            errors.append(f"{path}.{key}: missing")
            continue
        val = obj[key]
        if isinstance(want, dict):
            if not isinstance(val, dict):
                errors.append(f"{path}.{key}: not an object")
            else:
                check(val, want, f"{path}.{key}", errors)
        elif not isinstance(val, want) or (want is int and isinstance(val, bool)):
            errors.append(f"{path}.{key}: {type(val).__name__}, want {want}")
        elif want is int and val < 0:
            errors.append(f"{path}.{key}: negative")
    extra = set(obj) - set(schema)
    if extra:
        errors.append(f"{path}: undocumented fields {sorted(extra)}")


SITE = {"kind": str, "call": str, "count": U, "bytes": U, "nsec": U, "frames": list}
FRAME = {"function": (str, type(None)), "offset": U, "object": str, "address": str}
# Version 3 frames also carry what offline symbolization needs.
OPT_STR = (str, type(None))
FRAME3 = dict(FRAME, path=OPT_STR, build_id=OPT_STR, rel=U, file=OPT_STR,
              line=(int, type(None)))


# What the pool saved: in reports from the shim that has pool_fresh (issue 37)
# on; optional so that older version 3 reports still read.
SAVED = {"allocations": U, "reused": U, "fresh": U, "taken": U, "pages": U,
         "glibc_mmaps_min": U, "glibc_mmaps_max": U,
         "glibc_faults_min": U, "glibc_faults_max": U}

# The verdict: one line that says the answer (issue 46, within version 3);
# optional so that older version 3 reports still read.
VERDICT = {"kind": str, "text": str}
VERDICT_KINDS = {"no_work", "baseline", "foreign", "idle", "saved"}

# How the process ended: only in a report rendered after it (poolshim collect, the wrapper).
ENDED = {"how": str, "status": (int, type(None)), "signal": (str, type(None)),
         "usage_as_of": (str, type(None)), "rendered_by": (str, type(None))}


def validate(report):
    errors = []
    # `poolshim stat --json` prints live snapshots: a report that opens with
    # "timestamp" (when it was read, seconds since the epoch).  The stat tool
    # cannot see the process's environment, so a snapshot's config is empty.
    snapshot = "timestamp" in report
    stamp = report.pop("timestamp", None)
    if snapshot and (not isinstance(stamp, (int, float)) or isinstance(stamp, bool) or stamp < 0):
        errors.append("$.timestamp: want seconds since the epoch")
    # call sites are present only with POOLSHIM_BACKTRACE
    sites = report.pop("callsites", None)
    sample = report.pop("callsite_sample", None)
    ended = report.pop("ended", None)
    saved = report.pop("saved", None)
    verdict = report.pop("verdict", None)
    if verdict is not None:
        if not isinstance(verdict, dict):
            errors.append("$.verdict: not an object")
        else:
            check(verdict, VERDICT, "$.verdict", errors)
            if verdict.get("kind") not in VERDICT_KINDS:
                errors.append(f"$.verdict.kind {verdict.get('kind')}")
            if isinstance(verdict.get("text"), str) and ("\n" in verdict["text"] or not verdict["text"]):
                errors.append("$.verdict.text: want one non-empty line")
    if saved is not None:
        if not isinstance(saved, dict):
            errors.append("$.saved: not an object")
        else:
            check(saved, SAVED, "$.saved", errors)
    if ended is not None:
        if not isinstance(ended, dict):
            errors.append("$.ended: not an object")
        else:
            check(ended, ENDED, "$.ended", errors)
            how = ended.get("how")
            if how not in ("exit", "signal", "unseen"):
                errors.append(f"$.ended.how {how}")
            if how != "exit" and ended.get("status") is not None:
                errors.append("$.ended.status: only an exit has a status")
            if (how == "signal") != (ended.get("signal") is not None):
                errors.append("$.ended.signal: want a name exactly when a signal ended it")
            at = ended.get("usage_as_of")
            if at is not None and (how != "unseen" or not __import__("re").fullmatch(
                    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", at)):
                errors.append(f"$.ended.usage_as_of {at}")
    schema = SCHEMA
    if report.get("version") == 1:
        # Version 1 had no heap_owner (and no "foreign" pool mode).
        schema = dict(SCHEMA, pool={k: v for k, v in SCHEMA["pool"].items() if k != "heap_owner"})
    if report.get("version") in (1, 2):
        # meta, config, advice and uring.fallbacks.unaligned came with version 3.
        schema = {k: v for k, v in schema.items() if k not in ("meta", "config", "advice")}
        fb = {k: v for k, v in SCHEMA["uring"]["fallbacks"].items() if k != "unaligned"}
        u = {k: v for k, v in SCHEMA["uring"].items() if k not in ("route_mode", "devices")}
        schema["uring"] = dict(u, fallbacks=fb)
    if isinstance(report.get("pool"), dict) and "allocator" in report["pool"]:
        schema = dict(schema, pool=dict(schema["pool"], allocator=(str, type(None))))
    # pool.cached (issue 44, within version 3): allocations served from a
    # thread's cache; absent from older reports.
    if isinstance(report.get("pool"), dict) and "cached" in report["pool"]:
        schema = dict(schema, pool=dict(schema["pool"], cached=U))
    # pool.paced (issue 44, within version 3): frees past a slow CPU's cache; absent from older reports.
    if isinstance(report.get("pool"), dict) and "paced" in report["pool"]:
        schema = dict(schema, pool=dict(schema["pool"], paced=U))
    # pool.tails (issue 44, within version 3): frees that gave back their block's unwritten tail.
    if isinstance(report.get("pool"), dict) and "tails" in report["pool"]:
        schema = dict(schema, pool=dict(schema["pool"], tails=U))
    # pool.cached_bytes: what the caches held at the report, in the process's own report only.
    if isinstance(report.get("pool"), dict) and "cached_bytes" in report["pool"]:
        schema = dict(schema, pool=dict(schema["pool"], cached_bytes=U))
    # pool.free (issue 35, within version 3): the page-exact placement's
    # free blocks, null where not known; absent from older reports.
    free = report["pool"].get("free") if isinstance(report.get("pool"), dict) else None
    if isinstance(report.get("pool"), dict) and "free" in report["pool"]:
        schema = dict(schema, pool=dict(schema["pool"],
                                        free=POOL_FREE if isinstance(free, dict) else type(None)))
    if isinstance(free, dict) and all(isinstance(free.get(k), int) for k in POOL_FREE) and \
            (free["resident_max"] + free["zero"] != free["bytes"] or free["largest"] > free["bytes"]):
        errors.append(f"$.pool.free: its parts do not add up: {free}")
    # pool.arenas (issue 44, within version 3): the page placement's arenas,
    # null where free is; absent from older reports.
    arenas = report["pool"].get("arenas") if isinstance(report.get("pool"), dict) else None
    if isinstance(report.get("pool"), dict) and "arenas" in report["pool"]:
        schema = dict(schema, pool=dict(schema["pool"],
                                        arenas=POOL_ARENAS if isinstance(arenas, dict) else type(None)))
    if isinstance(arenas, dict) and all(isinstance(arenas.get(k), int) for k in POOL_ARENAS) and \
            (arenas["used"] < 1 or (arenas["max"] and arenas["used"] > arenas["max"])):
        errors.append(f"$.pool.arenas: used is not within 1..max: {arenas}")
    check(report, schema, "$", errors)
    if ended is not None:
        report["ended"] = ended
    if sites is not None:
        report["callsites"] = sites
        report["callsite_sample"] = sample
        if not isinstance(sample, int) or sample < 1:
            errors.append("$.callsite_sample: want a positive integer")
        for i, s in enumerate(sites):
            check(s, SITE, f"$.callsites[{i}]", errors)
            if s.get("kind") not in ("alloc", "io"):
                errors.append(f"$.callsites[{i}].kind {s.get('kind')}")
            for j, f in enumerate(s.get("frames", [])):
                check(f, FRAME3 if report.get("version", 0) >= 3 else FRAME,
                      f"$.callsites[{i}].frames[{j}]", errors)
    if saved is not None:
        report["saved"] = saved
    if verdict is not None:
        report["verdict"] = verdict
    if snapshot:
        report["timestamp"] = stamp
    if errors:
        return errors
    if report["schema"] != "poolshim-report" or report["version"] not in (1, 2, 3):
        errors.append("schema/version")
    if report["version"] >= 3:
        for i, a in enumerate(report["advice"]):
            check(a, ADVICE, f"$.advice[{i}]", errors)
            if a.get("id") not in ADVICE_IDS:
                errors.append(f"$.advice[{i}].id {a.get('id')}")
        cfg = report["config"]
        if (not cfg.get("POOLSHIM_POOL_MIN") and not (snapshot and not cfg)) or not all(
                k.startswith("POOLSHIM") and isinstance(v, str) for k, v in cfg.items()):
            errors.append("$.config: want every POOLSHIM_* option as a string")
        st = report["meta"]["start_time"]
        if st is not None and not __import__("re").fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", st):
            errors.append(f"$.meta.start_time {st}: want ISO 8601 UTC")
    pool = report["pool"]
    if pool["mode"] not in MODES:
        errors.append(f"pool.mode {pool['mode']}")
    if pool.get("allocator") not in ALLOCATORS:
        errors.append(f"pool.allocator {pool['allocator']}")
    # POOLSHIM_POOL=off (issue 37): counted, nothing pooled, no slab taken.
    if pool["mode"] == "off" and (pool["allocations"] or pool["slabs"] or pool["backed"]):
        errors.append("pool.mode off with pooled allocations or slabs")
    if sum(pool["backed_by"].values()) != pool["backed"]:
        errors.append("pool.backed_by does not add up to pool.backed")
    # No frees-versus-allocations check: a fork child counts from zero and
    # may free blocks its parent allocated.
    if pool["peak"] < pool["in_use"]:
        errors.append("pool.peak below pool.in_use")
    if saved is not None:
        if saved["allocations"] != pool["allocations"] or \
                saved["reused"] + saved["fresh"] != saved["allocations"]:
            errors.append("saved: reused + fresh is not pool.allocations")
        if saved["taken"] != pool["backed"]:
            errors.append("saved.taken is not pool.backed")
        if not (saved["glibc_mmaps_min"] <= saved["glibc_mmaps_max"] <= saved["allocations"]) or \
                saved["glibc_faults_min"] > saved["glibc_faults_max"]:
            errors.append("saved: glibc estimates out of order")
    uring = report["uring"]
    if uring["state"] not in ("ok", "off", "unavailable"):
        errors.append(f"uring.state {uring['state']}")
    if sum(n for _, n in uring["sqes_per_enter"]) != uring["enters"]:
        errors.append("uring.sqes_per_enter does not add up to uring.enters")
    if uring["fixed"] > uring["sqes"] or uring["split_calls"] > uring["enters"] + uring["sqes"]:
        errors.append("uring counters inconsistent")
    for i, dv in enumerate(uring.get("devices", [])):
        check(dv, DEVICE, f"$.uring.devices[{i}]", errors)
        if errors:
            break
        if dv["op"] not in ("read", "write") or dv["route"] not in ROUTE_STATES or \
                dv["route_chosen"] not in (None, "plain", "ring"):
            errors.append(f"$.uring.devices[{i}]: op, route or route_chosen out of range")
        # the measurement behind the last decision, when there was one
        want = {"plain": WINDOW, "ring": WINDOW} if dv["route_decisions"] else {}
        check(dv["route_measured"], want, f"$.uring.devices[{i}].route_measured", errors)
    for i, c in enumerate(report["calls"]):
        check(c, CALL, f"$.calls[{i}]", errors)
        if errors:
            continue
        if c["kind"] not in KINDS:
            errors.append(f"calls[{i}].kind {c['kind']}")
        for hist in ("size_hist", "lat_hist"):
            for pair in c[hist]:
                if (not isinstance(pair, list) or len(pair) != 2 or
                        pair[0] & (pair[0] - 1)):
                    errors.append(f"calls[{i}].{hist}: bad bucket {pair}")
        total = sum(n for _, n in c["size_hist"])
        if c["call"] != "free" and total != c["calls"]:
            errors.append(f"calls[{i}] ({c['call']}): size_hist adds to {total}, calls {c['calls']}")
        if sum(n for _, n in c["lat_hist"]) != c["timed"] or c["timed"] > c["calls"]:
            errors.append(f"calls[{i}] ({c['call']}): lat_hist does not add up to timed")
        if c["estimated"] > c["calls"] or (c["estimated"] and c["call"] not in SAMPLED):
            errors.append(f"calls[{i}] ({c['call']}): estimated {c['estimated']} of {c['calls']}")
        if c["errors"] > c["calls"] or c["eagain"] > c["errors"]:
            errors.append(f"calls[{i}]: errors/eagain exceed calls")
    return errors


def main():
    if len(sys.argv) != 2:
        print("usage: report_schema.py REPORT.json", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        report = json.load(f)
    errors = validate(report)
    for e in errors:
        print(f"{sys.argv[1]}: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
