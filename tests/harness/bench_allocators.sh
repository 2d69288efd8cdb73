#!/bin/sh
# SPDX-License-Identifier: MIT
# scripts/bench threads, footprint real, footprint shapes and alloc (issue
# 44's measuring tools), briefly and over a few configurations: every row
# measured, the ratios and target verdicts present, the outputs of the real
# programs the same as glibc's.  The numbers themselves are not judged here
# (a loaded machine says nothing).
set -u
: "${PS_TOP_BUILDDIR:?PS_TOP_BUILDDIR must be set (make check does it)}"
: "${PS_TOP_SRCDIR:?PS_TOP_SRCDIR must be set (make check does it)}"
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
PYTHONDONTWRITEBYTECODE=1
export PS_TOP_BUILDDIR PYTHONDONTWRITEBYTECODE
unset POOLSHIM_LIB POOLSHIM_BASELINE_LIB
for p in xz zstd sort sqlite3 /usr/bin/time; do
	command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done
out=$(mktemp -d "${TMPDIR:-/tmp}/psbench.XXXXXX")
trap 'rm -rf "$out"' EXIT
trap 'exit 130' INT TERM HUP
fail=0
bench() {
	name=$1
	shift
	$PYTHON "$PS_TOP_SRCDIR/scripts/bench" "$@" --json "$out/$name.json" >"$out/$name.txt"
	rc=$?
	cat "$out/$name.txt"
	[ $rc -eq 0 ] || { echo "FAIL: scripts/bench $* exited with status $rc"; fail=1; }
}
bench threads threads --threads 1,2 --steps 200 --repeat 1 --config glibc,mimalloc,poolshim
bench real footprint real --program sqlite3 --repeat 1 --config poolshim,prefault-off
bench shapes footprint shapes --idle-seconds 0.3 --count 20 --config poolshim
bench alloc alloc --threads 1 --seconds 0.3 --repeat 2 --config glibc,mimalloc,poolshim
$PYTHON - "$out" <<'PY' || fail=1
import json, os, sys
out = sys.argv[1]
fails = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)
def load(name):
    try:
        return json.load(open(os.path.join(out, name + ".json"))), open(os.path.join(out, name + ".txt")).read()
    except OSError as e:
        check(False, f"{name}: {e}")
        return None, ""
t, table = load("threads")
if t:
    for n in (1, 2):
        for touch in ("byte", "pages"):
            rows = {r["config"]: r for r in t["rows"] if r["threads"] == n and r["touch"] == touch}
            check(sorted(rows) == ["glibc", "mimalloc", "poolshim"] and
                  all(r["steps_per_cpu_s"] > 0 and r["maxrss_kib"] > 0 for r in rows.values()),
                  f"threads {n}, {touch}: every configuration measured")
            check(all(r["runs"][0]["steps"] == 200 * n for r in rows.values()),
                  f"threads {n}, {touch}: 200 steps per thread")
            # The verdict is the paired median: the shim's run over the best peer's, round by round.
            sh, pe = rows.get("poolshim"), rows.get(rows.get("poolshim", {}).get("best_peer"))
            check(sh is not None and pe is not None and
                  abs(sh["paired_ratio_best_peer"] - sh["runs"][0]["steps_per_cpu_s"] /
                      pe["runs"][0]["steps_per_cpu_s"]) < 1e-9 and
                  sh["target_met"] == (sh["paired_ratio_best_peer"] >= 1.0),
                  f"threads {n}, {touch}: the shim paired with the best peer, the verdict on it")
    check(table.count("poolshim/best") == 1 and
          sum((" met" in l or "MISSED" in l) for l in table.splitlines()) == 4,
          "threads: the shim's ratio to the best peer and a verdict on every row")
r, table = load("real")
if r:
    progs = {(x["program"], x["config"]) for x in r["rows"]}
    check(progs == {("sqlite3", c) for c in ("glibc", "poolshim", "prefault-off")},
          f"real: sqlite3 under glibc, poolshim, prefault-off ({sorted(progs)})")
    check(not r["errors"] and "OUTPUT MISMATCH" not in table, "real: outputs as glibc's")
    check(all(x["rss_mib"] > 1 and x["cpu_s"] > 0 for x in r["rows"]), "real: RSS and CPU measured")
    check("RSS <= 1.10x glibc + 4 MiB" in table, "real: the target named")
    # The CPU verdict is the paired median: each run over glibc's of its round.
    g = {x["program"]: x for x in r["rows"] if x["config"] == "glibc"}
    check(all(abs(x["cpu_paired_x_glibc"] - x["runs"][0][2] / g[x["program"]]["runs"][0][2]) < 1e-9
              and x["cpu_target_met"] == (x["cpu_paired_x_glibc"] <= 1.05) for x in r["rows"])
          and "paired per round" in table, "real: CPU paired per round, the verdict on it")
a, table = load("alloc")
if a:
    rows = {r["config"]: r for r in a["rows"] if r["threads"] == 1}
    check(sorted(rows) == ["glibc", "mimalloc", "poolshim"] and
          all(len(r["gbps_runs"]) == 2 and min(r["gbps_runs"]) > 0 for r in rows.values()),
          "alloc: every configuration measured in both rounds")
    sh = rows.get("poolshim", {})
    pe = rows.get(sh.get("best_peer"))
    if pe:
        ratios = [x / y for x, y in zip(sh["gbps_runs"], pe["gbps_runs"])]
        check(pe["gbps"] == max(rows["glibc"]["gbps"], rows["mimalloc"]["gbps"]) and
              abs(sh["paired_x_best_peer"] - (ratios[0] + ratios[1]) / 2) < 1e-9 and
              sh["target_met"] == (sh["paired_x_best_peer"] >= 1.0) and
              "paired per round" in table, "alloc: the shim paired with the best peer, the verdict on it")
    else:
        check(False, f"alloc: no best peer named ({sh})")
s, table = load("shapes")
if s:
    shapes = {(x["shape"], x["config"]) for x in s["rows"]}
    check(shapes == {(a, c) for a in ("aligned 2M", "aligned 64K", "aligned 8K", "idle")
                     for c in ("glibc", "poolshim")}, f"shapes: every shape measured ({sorted(shapes)})")
    check(all(x["rss_end_mib"] > 0 for x in s["rows"]), "shapes: RSS read")
sys.exit(1 if fails else 0)
PY
[ $fail -eq 0 ]
