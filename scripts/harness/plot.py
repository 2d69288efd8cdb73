# SPDX-License-Identifier: MIT
"""PNG bar charts with gnuplot: throughput and p99 of each configuration
relative to no preload."""
import os
import shutil
import subprocess

from .messages import say


# Short x labels: the long titles overlap.
SHORT = {"nginx-proxy": "nginx proxy", "nginx-directio": "nginx directio", "haproxy": "haproxy"}
# What is plotted: name, the row's value and its spread, the title.
FIGURES = (
    ("throughput", "mib_s", "mib_s_min", "mib_s_max", "throughput, x no preload (median, min-max)"),
    ("p99", "p99_ms", "p99_ms_min", "p99_ms_max", "p99 latency, x no preload (lower is better)"))


def write_data(path, rows, scen, cfgs, key, lo, hi, titles):
    """gnuplot's data: a line per scenario, value, min and max per
    configuration, each over no preload's value ("-": missing)."""
    with open(path, "w") as f:
        f.write("# scenario " + " ".join(f"{c} {c}-min {c}-max" for c in cfgs) + "\n")
        for s in scen:
            base = next((r for r in rows if r["scenario"] == s and r["config"] == "none"), None)
            vals = []
            for c in cfgs:
                r = next((r for r in rows if r["scenario"] == s and r["config"] == c), None)
                if not r or not base or not base[key] or r[key] is None:
                    vals += ["-", "-", "-"]
                else:
                    vals += [f"{r[key] / base[key]:.4f}", f"{r[lo] / base[key]:.4f}",
                             f"{r[hi] / base[key]:.4f}"]
            f.write(f"\"{SHORT.get(s) or titles.get(s, s)}\" " + " ".join(vals) + "\n")


def script(png, data, ylabel, cfgs):
    return f"""set terminal pngcairo size 1100,520 font ",10"
set output "{png}"
set termoption noenhanced
set title "{ylabel}"
set style data histogram
set style histogram errorbars gap 2 lw 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key outside right top
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set datafile missing "-"
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "black"
names = "{' '.join(cfgs)}"
plot for [i=0:{len(cfgs) - 1}] "{data}" using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title word(names, i+1)
"""


def draw(gp, text, png):
    """Runs gnuplot (falling back from pngcairo to png); True when png was drawn."""
    r = subprocess.run([gp], input=text, text=True, capture_output=True)
    if r.returncode or not os.path.exists(png):
        text = text.replace("pngcairo", "png")
        r = subprocess.run([gp], input=text, text=True, capture_output=True)
    if r.returncode == 0 and os.path.exists(png):
        return True
    say(f"demo: gnuplot failed for {png}: {r.stderr.strip()[:300]}")
    return False


def plots(rows, scenarios, configs, titles, outdir, prefix):
    """PNG bar charts with gnuplot: throughput and p99 relative to no
    preload, files outdir/PREFIXthroughput.png etc.; the paths drawn."""
    gp = shutil.which("gnuplot")
    if not gp:
        say("demo: gnuplot not installed (Debian: gnuplot-nox); no plots")
        return []
    made = []
    scen = [s for s in scenarios if any(r["scenario"] == s for r in rows)]
    cfgs = [c for c in configs if any(r["config"] == c for r in rows)]
    for what, key, lo, hi, ylabel in FIGURES:
        data = os.path.join(outdir, f"{prefix}{what}.dat")
        write_data(data, rows, scen, cfgs, key, lo, hi, titles)
        png = os.path.join(outdir, f"{prefix}{what}.png")
        if draw(gp, script(png, data, ylabel, cfgs), png):
            made.append(png)
    return made
