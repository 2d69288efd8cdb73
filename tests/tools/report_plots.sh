#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 37, `poolshim report --plot`: what gnuplot is asked to draw, read
# from the scripts the tool writes (plot_group), then drawn.  Value labels of
# equal bars side by side sit at different heights; two call sites whose
# innermost frames are alike get different labels; a latency histogram is
# drawn only from enough timed calls (and the plot says why not), count
# axes have whole-number ticks; a program that only allocates gets no blank
# panel but one of what the pool served.
. "$PS_TOP_SRCDIR/tests/lib.sh"
TOOL="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"
T=$PST_TMP
shim "POOLSHIM_STATS=$T/alloc.json" -- "$PRELOAD_BIN/advice_helper" alloc 20 1048576 >/dev/null ||
	fail "advice_helper"

python3 - "$TOOL" "$T/alloc.json" "$T" <<'PY' >"$T/v"
import copy, importlib.util, json, re, sys
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
spec = importlib.util.spec_from_file_location("psreport", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
base = json.load(open(sys.argv[2]))
out = sys.argv[3]

def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)

def group(r):
    g = m.Group("program t")
    g.add("t.json", r)
    return g

def block(script, name):
    """Rows of the gnuplot data block $name, split like gnuplot does."""
    b = re.search(r"^\$" + name + r" << EOD\n(.*?)^EOD$", script, re.S | re.M)
    return [re.findall(r'"[^"]*"|\S+', l) for l in b.group(1).splitlines()] if b else None

# 1. a program that only allocates
s = m.plot_group(group(copy.deepcopy(base)), "a-", out, 10)
ov = s["a-overview.png"]
check("plot 2 notitle" not in ov and "the pool" in ov,
      "alloc-only overview: no blank panel, a panel of what the pool served")
mal = s.get("a-call-malloc.png", "")
check("layout 1,1" in mal and "latency not drawn: no call timed" in mal and "$lat" not in mal,
      "alloc-only malloc: the size histogram alone, and why no latency")

# 2. equal bars side by side, labels wider than a bar: at different heights
r = copy.deepcopy(base)
io = dict(kind="socket", bytes=1 << 20, calls=16, errors=0, eagain=0, timed=0, nsec=0, estimated=0,
          size_hist=[[65536, 16]], lat_hist=[], errnos={})
r["calls"] = [dict(io, call=c, timed=16, nsec=16 * 1234567, lat_hist=[[1048576, 16]])
              for c in ("read", "write", "recv", "send", "readv", "writev", "pread", "pwrite",
                        "recvmsg", "sendmsg", "sendfile", "preadv", "pwritev")]
rows = block(m.plot_group(group(r), "e-", out, 10)["e-overview.png"], "time")
labelled = [x for x in rows if x[2] != '""']
ys = [x[3] if len(x) > 3 else x[1] for x in labelled]  # label height (the bar, before)
check(len(labelled) == 13 and all(a != b for a, b in zip(ys, ys[1:])),
      f"13 equal bars: neighbouring labels at different heights ({' '.join(ys)})")

# 3. latency histograms: 5 timed calls are too few, 40 are enough
r = copy.deepcopy(base)
r["calls"] = [dict(io, call="read", calls=5, size_hist=[[65536, 5]], timed=5, nsec=5000,
                   lat_hist=[[512, 3], [1024, 2]]),
              dict(io, call="write", timed=16, nsec=64000, lat_hist=[[2048, 16]])]
s = m.plot_group(group(r), "l-", out, 10)
rd, wr = s["l-call-read_socket.png"], s["l-call-write_socket.png"]
check("$lat" not in rd and "latency not drawn: 5 timed calls, fewer than 20" in rd,
      "5 timed calls: no latency histogram, said")
r["calls"][1].update(timed=40, nsec=80000, lat_hist=[[2048, 40]])
r["calls"][1]["calls"] = r["calls"][1]["size_hist"][0][1] = 40
wr = m.plot_group(group(r), "l-", out, 10)["l-call-write_socket.png"]
check("$lat" in wr and "layout 1,2" in wr, "40 timed calls: latency histogram drawn")
check("set ytics 1\n" in rd, "counts up to 10: ticks at whole calls")

# 4. call sites alike in their two innermost frames
r = copy.deepcopy(base)
fr = lambda fn: {"function": fn, "offset": 16, "object": "/usr/sbin/app"}
common = [fr("__writev"), fr("ngx_writev")]
r["callsites"] = [
    {"kind": "io", "call": "writev", "count": 5, "bytes": 5 << 20, "nsec": 0,
     "frames": common + [fr("ngx_http_write_filter"), fr("main")]},
    {"kind": "io", "call": "writev", "count": 4, "bytes": 4 << 20, "nsec": 0,
     "frames": common + [fr("ngx_event_pipe_write_to_downstream"), fr("main")]},
]
r["callsite_sample"] = 1
rows = block(m.plot_group(group(r), "s-", out, 10)["s-callsites.png"], "sbytes")
labels = [x[0] for x in rows]
check(len(labels) == 2 and labels[0] != labels[1],
      f"two writev sites alike at depth 2: labels differ ({' | '.join(labels)})")
PY
while read -r line; do
	case $line in ok:*) pass "${line#ok: }" ;; *) fail "${line#FAIL: }" ;; esac
done <"$T/v"
[ "$(grep -c '^ok:' "$T/v")" = 7 ] || fail "want 7 checks passed: $(cat "$T/v")"

# 5. drawn: gnuplot accepts every script
if command -v gnuplot >/dev/null 2>&1; then
	python3 "$TOOL" --plot "$T/png" "$T/alloc.json" >"$T/out" 2>"$T/err" &&
		[ -s "$T/png/advice_helper-overview.png" ] && [ -s "$T/png/advice_helper-call-malloc.png" ] &&
		pass "drawn: $(ls "$T/png" | tr '\n' ' ')" || fail "--plot: $(cat "$T/err")"
fi
finish
