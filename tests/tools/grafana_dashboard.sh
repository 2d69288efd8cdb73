#!/bin/sh
# SPDX-License-Identifier: MIT
# docs/grafana/poolshim.json asks only for what `poolshim stat --prometheus`
# prints: every metric name in every PromQL expression of the dashboard
# (panels and template variables) is a name the exporter printed for a
# running shimmed process, every label it groups or matches on is a label
# of that metric, and every event or reason value it names is one the
# exporter prints; page faults and CPU time have panels.  With promtool
# (Debian package prometheus), each expression also parses as PromQL.
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
DASH="$PS_TOP_SRCDIR/docs/grafana/poolshim.json"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
[ -f "$DASH" ] || { fail "no dashboard: $DASH"; finish; }

# A program that pools buffers (so it publishes at once) and writes.
cat >"$PST_TMP/work.py" <<'PY'
import os, time
bufs = [bytearray(1 << 20) for _ in range(4)]
null = os.open("/dev/null", os.O_WRONLY)
for _ in range(200):
    os.write(null, b"x" * 4096)
print("ready", flush=True)
time.sleep(30)
PY
POOLSHIM_STATS=off LD_PRELOAD="$SHIM" python3 "$PST_TMP/work.py" >"$PST_TMP/out" 2>&1 &
pid=$!
at_exit "kill $pid 2>/dev/null"
for _ in $(seq 100); do grep -q ready "$PST_TMP/out" && break; sleep 0.1; done
"$STAT" --prometheus "$pid" >"$PST_TMP/scrape" 2>"$PST_TMP/scrape.err" ||
	fail "stat --prometheus: $(cat "$PST_TMP/scrape.err")"
kill "$pid" 2>/dev/null

python3 - "$DASH" "$PST_TMP/scrape" "$PST_TMP/rules.yml" <<'PY' >"$PST_TMP/v"
import json, re, sys
dash = json.load(open(sys.argv[1]))
# What the exporter printed: metric name -> label names, label -> values.
labels, values = {}, {}
for line in open(sys.argv[2]):
    m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} ', line)
    if not m:
        continue
    pairs = re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(2))
    labels.setdefault(m.group(1), set()).update(k for k, _ in pairs)
    for k, v in pairs:
        values.setdefault(k, set()).add(v)
exprs = []
def walk(panels):
    for p in panels:
        for t in p.get("targets", []):
            exprs.append((p.get("title"), t["expr"]))
        walk(p.get("panels", []))
walk(dash.get("panels", []))
for v in dash.get("templating", {}).get("list", []):
    q = v.get("query")
    if v.get("type") == "query":
        exprs.append((f"variable {v['name']}", q["query"] if isinstance(q, dict) else q))
if len(exprs) < 10:
    print(f"FAIL: only {len(exprs)} expressions found")
bad = 0
for title, e in exprs:
    code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', e)          # label values out of the way
    names = set(re.findall(r'\b(poolshim_[a-z_]+)\b', code))
    if not names:
        print(f"FAIL: {title}: no poolshim metric in {e}"); bad += 1
    for n in names - set(labels):
        print(f"FAIL: {title}: {n} is not a metric the exporter prints"); bad += 1
    have = set().union(*(labels.get(n, set()) for n in names)) | {"le", "__name__"}
    used = set()
    for grp in re.findall(r'\b(?:by|without)\s*\(([^)]*)\)', code):
        used.update(x.strip() for x in grp.split(",") if x.strip())
    used.update(re.findall(r'([a-zA-Z_]+)\s*(?:=~|!~|!=|=)\s*""', code))
    if "label_values(" in code:
        used.update(re.findall(r'label_values\([^,]*,\s*([a-zA-Z_]+)\)', code))
    for l in used - have:
        print(f"FAIL: {title}: label {l} is not on {sorted(names)}"); bad += 1
    # the event and reason values named must be ones the exporter prints
    for l, v in re.findall(r'\b(event|reason)\s*=~?\s*"([^"]*)"', e):
        for one in v.split("|"):
            if one not in values.get(l, set()):
                print(f"FAIL: {title}: {l}=\"{one}\" is never printed (have {sorted(values.get(l, []))})")
                bad += 1
if not bad:
    print(f"ok: {len(exprs)} expressions use only the {len(labels)} metrics and their labels "
          "the exporter prints")
# What the pool is for shows on the dashboard: page faults and CPU time.
for need in ("poolshim_page_faults_total", "poolshim_cpu_seconds_total"):
    shown = [t for t, e in exprs if need in e]
    print(f"ok: {need} in panels {shown}" if shown else f"FAIL: no panel shows {need}")
# For promtool: each expression as a recording rule, Grafana's variables filled.
with open(sys.argv[3], "w") as f:
    f.write("groups:\n  - name: poolshim_dashboard\n    rules:\n")
    for i, (_, e) in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$program", ".*")
        if e.startswith("label_values("):
            continue
        f.write(f"      - record: poolshim_dashboard_{i}\n        expr: {json.dumps(e)}\n")
PY
while read -r line; do
	case $line in ok:*) pass "${line#ok: }" ;; *) fail "${line#FAIL: }" ;; esac
done <"$PST_TMP/v"
[ -s "$PST_TMP/v" ] || fail "the check printed nothing"
if command -v promtool >/dev/null 2>&1; then
	promtool check rules "$PST_TMP/rules.yml" >"$PST_TMP/pt" 2>&1 &&
		pass "promtool: every expression parses ($(grep -o '[0-9]* rules found' "$PST_TMP/pt"))" ||
		fail "promtool check rules: $(cat "$PST_TMP/pt")"
else
	echo "(promtool not installed, Debian package prometheus: PromQL syntax not checked)"
fi
finish
