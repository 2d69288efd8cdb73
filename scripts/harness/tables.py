# SPDX-License-Identifier: MIT
"""The tables: printed for the terminal (print_table, print_small_table)
and as Markdown for results.md (markdown, small_markdown)."""


def fmt(v, spec, width):
    return f"{'-' if v is None else format(v, spec):>{width}}"


def print_table(rows, titles, header, labels=("proxy", "nodes")):
    """labels: what the two columns of each per-process figure stand for."""
    print(header)
    cols = (f"{'config':<14}{'MiB/s':>8}{'[min-max]':>14}{'x none':>7}{'ops/s':>8}{'p50 ms':>8}"
            f"{'p99 ms':>8}{'flt/op':>14}{'CPU s/GiB':>14}{'syscalls/op':>14}")
    pair = f"{labels[0]:>7}{labels[1]:>7}"
    sub = f"{'':<75}{pair:>14}{pair:>14}{pair:>14}"
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        print(f"\n{titles.get(scen, scen)}")
        print(cols)
        print(sub)
        for r in (x for x in rows if x["scenario"] == scen):
            spread = f"[{r['mib_s_min']:.0f}-{r['mib_s_max']:.0f}]"
            line = (f"{r['config']:<14}{r['mib_s']:8.0f}{spread:>14}{fmt(r['x_none'], '.2f', 7)}"
                    f"{r['ops_s']:8.1f}{fmt(r['p50_ms'], '.1f', 8)}{fmt(r['p99_ms'], '.1f', 8)}")
            for key, spec in (("faults_per_op", ".0f"), ("cpu_s_per_gib", ".2f"),
                              ("syscalls_per_op", ".0f")):
                line += fmt(r.get(f"proxy_{key}"), spec, 7) + fmt(r.get(f"nodes_{key}"), spec, 7)
            if r["data_errors"] or r["failed_ops"]:
                line += f"  DATA ERRORS {r['data_errors']}, FAILED OPS {r['failed_ops']}"
            print(line)


def print_small_table(rows, titles, header):
    """The small-request table: requests/s and p99 first, where harm would show."""
    print(header)
    cols = (f"{'config':<10}{'req/s':>9}{'[min-max]':>16}{'x none':>8}{'p50 ms':>8}{'p99 ms':>8}"
            f"{'[min-max]':>14}{'p99 x':>7}{'CPU us/req':>14}{'calls/req':>14}")
    sub = f"{'':<80}{'proxy nodes':>14}{'proxy nodes':>14}"
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        print(f"\n{titles.get(scen, scen)}")
        print(cols)
        print(sub)
        for r in (x for x in rows if x["scenario"] == scen):
            spread = f"[{r['ops_s_min']:.0f}-{r['ops_s_max']:.0f}]"
            p99 = ("-" if r["p99_ms_min"] is None
                   else f"[{r['p99_ms_min']:.2f}-{r['p99_ms_max']:.2f}]")
            line = (f"{r['config']:<10}{r['ops_s']:9.0f}{spread:>16}{fmt(r['x_none'], '.3f', 8)}"
                    f"{fmt(r['p50_ms'], '.2f', 8)}{fmt(r['p99_ms'], '.2f', 8)}{p99:>14}"
                    f"{fmt(r['p99_x_none'], '.2f', 7)}")
            for key, spec in (("cpu_us_per_op", ".0f"), ("syscalls_per_op", ".1f")):
                line += fmt(r.get(f"proxy_{key}"), spec, 7) + fmt(r.get(f"nodes_{key}"), spec, 7)
            if r["data_errors"] or r["failed_ops"]:
                line += f"  DATA ERRORS {r['data_errors']}, FAILED OPS {r['failed_ops']}"
            print(line)


def small_markdown(rows, titles):
    """The small-request table as Markdown (results.md, docs/results.md)."""
    def f(v, spec):
        return "-" if v is None else format(v, spec)
    out = []
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        out += [f"\n**{titles.get(scen, scen)}**\n",
                "| config | req/s | [min-max] | x none | p50 ms | p99 ms | p99 [min-max] | p99 x none | "
                "CPU us/req proxy | CPU us/req nodes | I/O calls/req proxy | I/O calls/req nodes |",
                "|---|" + "---:|" * 11]
        for r in (x for x in rows if x["scenario"] == scen):
            p99 = "-" if r["p99_ms_min"] is None else f"{r['p99_ms_min']:.2f}-{r['p99_ms_max']:.2f}"
            out.append(f"| {r['config']} | {r['ops_s']:.0f} | {r['ops_s_min']:.0f}-{r['ops_s_max']:.0f} | "
                       f"{f(r['x_none'], '.3f')} | {f(r['p50_ms'], '.2f')} | {f(r['p99_ms'], '.2f')} | "
                       f"{p99} | {f(r['p99_x_none'], '.2f')} | {f(r.get('proxy_cpu_us_per_op'), '.0f')} | "
                       f"{f(r.get('nodes_cpu_us_per_op'), '.0f')} | {f(r.get('proxy_syscalls_per_op'), '.1f')} | "
                       f"{f(r.get('nodes_syscalls_per_op'), '.1f')} |")
    return "\n".join(out) + "\n"


def markdown(rows, titles, labels=("proxy", "nodes")):
    """The table as Markdown (results.md), for docs/results.md."""
    def f(v, spec):
        return "-" if v is None else format(v, spec)
    a, b = labels
    out = []
    for scen in dict.fromkeys(r["scenario"] for r in rows):
        out += [f"\n**{titles.get(scen, scen)}**\n",
                f"| config | MiB/s | [min-max] | x none | ops/s | p50 ms | p99 ms | faults/op {a} | "
                f"faults/op {b} | CPU s/GiB {a} | CPU s/GiB {b} | I/O calls/op {a} | "
                f"I/O calls/op {b} |",
                "|---|" + "---:|" * 12]
        for r in (x for x in rows if x["scenario"] == scen):
            out.append(f"| {r['config']} | {r['mib_s']:.0f} | {r['mib_s_min']:.0f}-{r['mib_s_max']:.0f} | "
                       f"{f(r['x_none'], '.2f')} | {r['ops_s']:.1f} | {f(r['p50_ms'], '.1f')} | "
                       f"{f(r['p99_ms'], '.1f')} | {f(r.get('proxy_faults_per_op'), '.0f')} | "
                       f"{f(r.get('nodes_faults_per_op'), '.0f')} | {f(r.get('proxy_cpu_s_per_gib'), '.2f')} | "
                       f"{f(r.get('nodes_cpu_s_per_gib'), '.2f')} | {f(r.get('proxy_syscalls_per_op'), '.0f')} | "
                       f"{f(r.get('nodes_syscalls_per_op'), '.0f')} |")
    return "\n".join(out) + "\n"
