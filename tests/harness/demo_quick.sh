#!/bin/sh
# SPDX-License-Identifier: MIT
# scripts/demo --quick once: the host's costs measured and printed first,
# every configuration produced results (the small GET 4 KiB scenario under
# none and shim), loadgen's verify mode found no data errors and no failed
# operation, the shim's reports were written and follow
# docs/report-schema.md, and every scenario has its verdicts, none of them
# decided by the single round --quick runs, headline rows apart and
# counted, the rule and the budget (0: no rounds added) said.
set -u
# The build's own shim, whatever the caller compares it with.
unset POOLSHIM_LIB POOLSHIM_BASELINE_LIB
: "${PS_TOP_BUILDDIR:?PS_TOP_BUILDDIR must be set (make check does it)}"
: "${PS_TOP_SRCDIR:?PS_TOP_SRCDIR must be set (make check does it)}"
# In an --enable-sanitizers build the demo programs carry ASan, whose
# runtime must be the first library loaded: they cannot run under the shim
# or the other allocators the demo preloads.
if [ -n "${PS_SANITIZERS:-}" ]; then
	echo "SKIP: the demo programs are built with ASan, which cannot run under an LD_PRELOAD allocator"
	exit 77
fi
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
PYTHONDONTWRITEBYTECODE=1
export PS_TOP_BUILDDIR PYTHONDONTWRITEBYTECODE
out=$(mktemp -d "${TMPDIR:-/tmp}/psharness.XXXXXX")
trap 'rm -rf "$out"' EXIT
trap 'exit 130' INT TERM HUP

# No hugetlb pages here: tests running in parallel (tests/preload/hugepages.sh)
# set nr_hugepages themselves and need the free pages they reserve.
DEMO_HUGEPAGES=0 POOLSHIM_HUGEPAGES=thp "$PS_TOP_SRCDIR/scripts/demo" --quick --out "$out/results" \
	> "$out/stdout"
rc=$?
cat "$out/stdout"
if [ $rc -ne 0 ]; then
	echo "FAIL: scripts/demo --quick exited with status $rc"
	exit 1
fi
$PYTHON - "$out/results" "$PS_TOP_SRCDIR/tests/report_schema.py" "$out/stdout" <<'PY'
import glob, json, os, subprocess, sys
out, schema, stdout = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
res = json.load(open(os.path.join(out, "results.json")))
fails = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)
configs = res["settings"]["configs"]
scenarios = res["settings"]["scenarios"]
plan = res["settings"]["scenario_configs"]
check(len(configs) == 7, f"all 7 configurations ran ({', '.join(configs)})")
check("get-4k" in scenarios and plan.get("get-4k") == ["none", "shim"],
      f"the small scenario ran under none and shim ({plan.get('get-4k')})")
for s in scenarios:
    summary = res["small_summary"] if s.endswith("-4k") else res["summary"]
    for c in plan[s]:
        rows = [r for r in summary if r["config"] == c and r["scenario"] == s]
        check(rows and rows[0]["ops_s"] > 0 and rows[0]["mib_s"] > 0,
              f"{s} under {c}: results ({rows[0]['ops_s']:.0f} ops/s)" if rows else f"{s} under {c}: results")
host = res.get("host", {})
check(all((host.get(k) or 0) > 0 for k in ("fault_4k_us", "syscall_ns", "memcpy_gbs", "md5_mibs")),
      f"the host's costs measured ({', '.join(f'{k} {v}' for k, v in host.items())})")
at = stdout.find("This host's costs")
check(0 <= at < stdout.find("== The demo S3 stack") and "4 KiB page fault" in stdout[at:],
      "the host's costs are printed first")
check(any("GET 4 KiB: shim vs no preload, requests/s" in t for t in res["targets"]),
      "the small scenario's verdict is printed")
verdicts = [e for e in res["verdicts"] if e["verdict"]]
for s in scenarios:
    title = [e for e in verdicts if e["scenario"] == s]
    check(title, f"{s}: verdicts printed ({len(title)})")
check(verdicts and all(e["verdict"]["state"] == "undecided" for e in verdicts),
      "one round decides no verdict: every one undecided")
check(any(e["headline"] for e in verdicts) and "-- Headline" in stdout and "-- Detail" in stdout,
      "headline and detail rows are printed apart")
check("\nheadline: 0 met, 0 MISSED, 0 at par, " in stdout and "No rounds are added (--budget 0)" in stdout
      and "(--par-band)" in stdout, "the headline is counted, the rule and the budget said")
check(res["settings"].get("budget_min") == 0 and not res.get("rounds", {}).get("added"),
      "--quick adds no rounds")
check(all(any(e["scenario"] == s and e["line"].startswith("(limit)") for e in res["verdicts"])
          for s in scenarios if not s.endswith("-4k")), "every large scenario states its limit")
runs = res["runs"]
check(all(r["mismatches"] == 0 for r in runs), "verify: no data mismatch in any run")
check(all(not r["errors"] for r in runs), "no failed operation in any run")
check(all(r["verified_bytes"] > 0 for r in runs if "get" in r["scenario"] or r["scenario"] == "mix"),
      "verify mode checked bytes in every run that reads")
check(all(r["clean_exit"] for r in runs), "every server exited cleanly on SIGTERM")
shim_runs = [r for r in runs if r["config"].startswith("shim")]
reports = [f for r in shim_runs for f in r.get("reports", []) if f.endswith(".json")]
progs = {json.load(open(f)).get("program") for f in reports}
check({"s3proxy", "storaged", "loadgen"} <= progs, f"shim JSON reports written ({len(reports)}: {sorted(progs)})")
bad = [f for f in reports if subprocess.run([sys.executable, schema, f]).returncode]
check(reports and not bad, f"every shim report parses and follows the schema ({len(bad)} bad)")
check(all(r["procs"]["proxy"].get("syscalls_per_op") is not None for r in shim_runs),
      "syscalls per operation measured for the shimmed proxy")
text = glob.glob(os.path.join(out, "reports", "*", "s3proxy-report.txt"))
check(text and "poolshim report" in open(text[0]).read(), "the proxy's text report was written")
pngs = glob.glob(os.path.join(out, "*.png"))
check(len(pngs) >= 1 or not os.path.exists("/usr/bin/gnuplot"), f"plots drawn ({len(pngs)})")
sys.exit(1 if fails else 0)
PY
