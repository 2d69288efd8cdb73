#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shim's layers, checked from the sources and the built objects.

    layers.py SRCDIR [BUILDDIR]

shim/format/ (what the tools link), shim/core/ (the runtime) and
shim/doors/ (the interposers and start-up) are layers in that order, and
tools/ sits on the format layer alone.  A file may include the headers of
its own layer and of those below it, never one above (docs/architecture.md
draws them).  Two graphs must have no circle: which unit includes which
unit's header (a unit is a file's name without .c or .h: pool.c and
pool.h are one), and, from the objects' symbol tables when BUILDDIR is
given, which unit calls or reads which unit's ps_* names.  The one call
that goes up is a door starting the shim (ps_init_slow, doors/start.h).
Prints one line per finding and exits 1 if there is any.
"""
import collections
import glob
import os
import re
import subprocess
import sys

LAYERS = ["format", "core", "doors"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# tools/ may include the format layer only.
ALLOWED_UP_CALLS = {"ps_init_slow"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def unit(path):
    return os.path.splitext(os.path.basename(path))[0]


def find_cycle(graph):
    """One circle of graph as a list of nodes, or None (iterative DFS)."""
    state = {}
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(sorted(graph.get(nxt, ())))))
    return None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: layers.py SRCDIR [BUILDDIR]")
    src = sys.argv[1]
    build = sys.argv[2] if len(sys.argv) == 3 else None
    problems = []
    files = {}
    for layer in LAYERS:
        for path in sorted(glob.glob(os.path.join(src, "shim", layer, "*.[ch]"))):
            files[path] = layer
    if len(files) < 20:
        problems.append(f"only {len(files)} files found under {src}/shim/{{{','.join(LAYERS)}}}")
    stray = [p for p in glob.glob(os.path.join(src, "shim", "*.c"))]
    for p in stray:
        problems.append(f"{os.path.relpath(p, src)}: a source file outside the layer folders")
    tools = sorted(glob.glob(os.path.join(src, "tools", "*.[ch]")))

    incgraph = collections.defaultdict(set)
    for path, layer in list(files.items()) + [(t, "tools") for t in tools]:
        text = open(path, encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            top = inc.split("/")[0] if "/" in inc else None
            rel = os.path.relpath(path, src)
            if top in RANK:
                limit = RANK["format"] if layer == "tools" else RANK[layer]
                if RANK[top] > limit:
                    problems.append(f"{rel}: includes \"{inc}\", a layer above {layer}")
            elif layer != "tools" and inc != "poolshim.h" and not inc.startswith("config."):
                problems.append(f"{rel}: includes \"{inc}\" without its layer's folder")
            if layer != "tools" and top in RANK and unit(inc) != unit(path):
                incgraph[unit(path)].add(unit(inc))
    cycle = find_cycle(incgraph)
    if cycle:
        problems.append("include circle: " + " -> ".join(cycle))

    if build:
        defs, undefs = {}, {}
        for path, layer in files.items():
            if not path.endswith(".c"):
                continue
            u = unit(path)
            objs = glob.glob(os.path.join(build, "shim", layer, ".libs", f"*-{u}.o")) or \
                glob.glob(os.path.join(build, "shim", layer, f"*-{u}.o"))
            if not objs:
                problems.append(f"no object for {os.path.relpath(path, src)} under {build}")
                continue
            out = subprocess.run(["nm", objs[0]], capture_output=True, text=True, check=True).stdout
            d, un = set(), set()
            for line in out.splitlines():
                f = line.split()
                if len(f) == 3 and f[1] in "TDBRVWCGS":
                    d.add(f[2])
                elif len(f) == 2 and f[0] == "U":
                    un.add(f[1])
            defs[u], undefs[u] = d, un
        owner = {}
        for u, names in defs.items():
            for name in names:
                owner.setdefault(name, u)
        usegraph = collections.defaultdict(set)
        ulayer = {unit(p): layer for p, layer in files.items() if p.endswith(".c")}
        for u, names in undefs.items():
            for name in names:
                o = owner.get(name)
                if o is None or o == u or not re.match(r"(ps_|poolshim_|real_)", name):
                    continue
                if name in ALLOWED_UP_CALLS:
                    continue
                if RANK[ulayer[o]] > RANK[ulayer[u]]:
                    problems.append(f"{u}.c ({ulayer[u]}) uses {name} of {o}.c ({ulayer[o]}), a layer above")
                usegraph[u].add(o)
        if len(defs) < 20:
            problems.append(f"only {len(defs)} objects read under {build}")
        cycle = find_cycle(usegraph)
        if cycle:
            problems.append("use circle: " + " -> ".join(cycle))

    for p in problems:
        print(p)
    if not problems:
        print(f"layers: {len(files)} files in {len(LAYERS)} layers and {len(tools)} tool files: "
              "no upward include or use, no circle" + ("" if build else " (includes only)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
