#!/bin/sh
# SPDX-License-Identifier: MIT
# scripts/bench small, briefly (a fiftieth of its loops), with the
# build's shim also standing in as the baseline shim: every loop measured
# under none, shim and baseline, speed ratios and the target column present,
# the libraries named, and the choice of baseline honoured.  The numbers
# themselves are not judged here (a loaded machine says nothing about 2%).
set -u
: "${PS_TOP_BUILDDIR:?PS_TOP_BUILDDIR must be set (make check does it)}"
: "${PS_TOP_SRCDIR:?PS_TOP_SRCDIR must be set (make check does it)}"
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
PYTHONDONTWRITEBYTECODE=1
export PS_TOP_BUILDDIR PYTHONDONTWRITEBYTECODE
unset POOLSHIM_LIB POOLSHIM_BASELINE_LIB
out=$(mktemp -d "${TMPDIR:-/tmp}/psbench.XXXXXX")
trap 'rm -rf "$out"' EXIT
trap 'exit 130' INT TERM HUP

# A copy, so that the baseline is a different file from the shim.
cp "$PS_TOP_BUILDDIR/.libs/libpoolshim.so" "$out/baseline.so" || exit 1
POOLSHIM_BASELINE_LIB="$out/baseline.so" $PYTHON "$PS_TOP_SRCDIR/scripts/bench" small \
	--scale 0.02 --repeat 2 --json "$out/small.json" > "$out/table.txt"
rc=$?
cat "$out/table.txt"
if [ $rc -ne 0 ]; then
	echo "FAIL: scripts/bench small exited with status $rc"
	exit 1
fi
$PYTHON - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
res = json.load(open(os.path.join(out, "small.json")))
table = open(os.path.join(out, "table.txt")).read()
fails = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)
loops = ["open", "pipe", "socket", "devnull"]
for loop in loops:
    for cfg in ("none", "shim", "baseline"):
        rows = [r for r in res["rows"] if r["loop"] == loop and r["config"] == cfg]
        check(len(rows) == 1 and len(rows[0]["ns_runs"]) == 2 and all(v > 0 for v in rows[0]["ns_runs"]),
              f"{loop} under {cfg}: 2 runs measured ({rows[0]['ns_runs'] if rows else '-'})")
check(all(abs(r["speed_x_none"] - 1.0) < 1e-9 for r in res["rows"] if r["config"] == "none"),
      "none's speed is 1 by definition")
check(res["baseline"] and res["baseline"].startswith(os.path.join(out, "baseline.so")),
      f"the baseline named is the one given ({res['baseline']})")
check(res["shim"].startswith(os.path.join(os.environ["PS_TOP_BUILDDIR"], ".libs", "libpoolshim.so")),
      f"the shim is the build's ({res['shim']})")
check("target >= 0.98x" in table and "shim/base" in table, "the table has the target and shim/base columns")
verdicts = [l for l in table.splitlines() if " met " in l or " MISSED " in l]
check(len(verdicts) == len(loops), f"a verdict on every loop's row ({len(verdicts)})")
sys.exit(1 if fails else 0)
PY
