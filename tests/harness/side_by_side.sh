#!/bin/sh
# SPDX-License-Identifier: MIT
# The proxies side by side (issue 46), one short round with real programs:
# scripts/demo --scenario nginx-proxy,haproxy --repeat 1 --seconds 1.  For
# each, none, shim-proxy (and nginx's proxy-defaults) ran in one run,
# wrk's bursts alternating: each has its record of that round, MiB/s from
# its bursts, marked side by side with the others; the shim in nginx or
# haproxy wrote its reports, and its I/O calls per request are counted;
# the shim everywhere ran apart; nginx's headline row is against the better
# of its two settings without the shim, and says so.  Skips without
# nginx, haproxy or wrk.
set -u
unset POOLSHIM_LIB POOLSHIM_BASELINE_LIB
: "${PS_TOP_BUILDDIR:?PS_TOP_BUILDDIR must be set (make check does it)}"
: "${PS_TOP_SRCDIR:?PS_TOP_SRCDIR must be set (make check does it)}"
if [ -n "${PS_SANITIZERS:-}" ]; then
	echo "SKIP: the demo programs are built with ASan, which cannot run under an LD_PRELOAD allocator"
	exit 77
fi
for p in nginx haproxy wrk; do
	command -v $p >/dev/null 2>&1 || [ -x /usr/sbin/$p ] || { echo "SKIP: no $p"; exit 77; }
done
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
PYTHONDONTWRITEBYTECODE=1
export PS_TOP_BUILDDIR PYTHONDONTWRITEBYTECODE
out=$(mktemp -d "${TMPDIR:-/tmp}/psside.XXXXXX")
trap 'rm -rf "$out"' EXIT
trap 'exit 130' INT TERM HUP

POOLSHIM_HUGEPAGES=thp $PYTHON "$PS_TOP_SRCDIR/scripts/harness.py" --scenario nginx-proxy,haproxy \
	--repeat 1 --seconds 1 --budget 0 --out "$out/results" >"$out/stdout" 2>"$out/stderr"
rc=$?
cat "$out/stdout"
if [ $rc -ne 0 ]; then
	cat "$out/stderr"
	echo "FAIL: the harness exited with status $rc"
	exit 1
fi
$PYTHON - "$out/results" "$out/stdout" <<'PY'
import json, os, sys
out, stdout = sys.argv[1], open(sys.argv[2]).read()
res = json.load(open(os.path.join(out, "results.json")))
fails = []
def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)
runs = res["real_runs"]
for scen, side in (("nginx-proxy", {"none", "proxy-defaults", "shim-proxy"}), ("haproxy", {"none", "shim-proxy"})):
    rs = {r["config"]: r for r in runs if r["scenario"] == scen}
    check(set(rs) == side | {"shim"}, f"{scen}: every configuration has its record ({sorted(rs)})")
    for c in side & set(rs):
        r = rs[c]
        sb = r.get("side_by_side") or {}
        check(r["repeat"] == 1 and r["mib_s"] > 0 and sb.get("bursts") == 2
              and set(sb.get("with", [])) == side - {c} and not r["errors"],
              f"{scen} {c}: {r['mib_s']:.0f} MiB/s from {sb.get('bursts')} bursts, side by side with {sb.get('with')}")
    if "shim" in rs:
        check("side_by_side" not in rs["shim"] and rs["shim"]["mib_s"] > 0,
              f"{scen}: the shim everywhere ran apart ({rs['shim']['mib_s']:.0f} MiB/s)")
    sp = rs.get("shim-proxy", {})
    check(sp.get("reports") and all(os.path.getsize(f) for f in sp["reports"])
          and (sp["procs"]["proxy"].get("syscalls_per_op") or 0) > 0,
          f"{scen}: the shim in the proxy wrote {len(sp.get('reports', []))} report(s), "
          f"{sp.get('procs', {}).get('proxy', {}).get('syscalls_per_op') or 0:.0f} I/O calls per request")
check("ran side by side in each round" in stdout, "the table says how they ran")
check("vs no preload (no harm), the better of 2 settings without the shim here" in stdout
      or "vs nginx's default proxy buffers without the shim (no harm), the better of 2 settings without the shim here" in stdout,
      "nginx's headline row is against the better of its settings without the shim")
sys.exit(1 if fails else 0)
PY
rc=$?
# A failed check shows what the harness said (a server killed after
# ignoring its stop signal, one that died) and what the reports hold.
if [ $rc -ne 0 ]; then
	echo "-- the harness's stderr (tail) --"
	tail -n 40 "$out/stderr"
	echo "-- the reports written --"
	find "$out/results/reports" -type f -exec ls -l {} + 2>/dev/null | tail -n 20
fi
exit $rc
