#!/bin/sh
# SPDX-License-Identifier: MIT
# `poolshim report --folded[=count|bytes]`: the folded-stack format that
# flamegraph.pl, inferno and speedscope read.  No Debian package ships one of
# those tools, so the grammar is checked strictly here: one line per stack,
# `frame;frame;... N`, root first (the program's entry point) down to the
# leaf (kind:call), frames without spaces or ';', N a positive integer, and
# the totals those of the reports' call sites, merged over reports.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/callsite_plain"
REPORT="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
# the program's frames are named in the process (.symtab through libdwfl)
[ -e /usr/lib/x86_64-linux-gnu/libdw.so.1 ] || [ -e /lib/x86_64-linux-gnu/libdw.so.1 ] || skip "libdw.so.1 not installed"
for i in 1 2; do
	shim POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1 "POOLSHIM_STATS=$PST_TMP/r$i.json" -- "$H" $i >/dev/null ||
		fail "helper run $i"
done
# a name with a space and a ';' (a demangled C++ name can have both)
python3 - "$PST_TMP/r2.json" "$PST_TMP/r3.json" <<'PY' || fail "making r3"
import json, sys
r = json.load(open(sys.argv[1]))
r["callsites"][0]["frames"][0]["function"] = "ns::f(int, char); x"
r["callsites"][0]["frames"][1]["function"] = None
json.dump(r, open(sys.argv[2], "w"))
PY
for w in count bytes; do
	python3 "$REPORT" --no-symbolize --folded=$w "$PST_TMP/r1.json" "$PST_TMP/r2.json" "$PST_TMP/r3.json" \
		>"$PST_TMP/$w.folded" 2>"$PST_TMP/$w.err" || fail "--folded=$w: $(cat "$PST_TMP/$w.err")"
	python3 - "$w" "$PST_TMP/$w.folded" "$PST_TMP"/r1.json "$PST_TMP"/r2.json "$PST_TMP"/r3.json <<'PY' &&
import json, re, sys
weight, folded, reports = sys.argv[1], sys.argv[2], sys.argv[3:]
key = "count" if weight == "count" else "bytes"
lines = open(folded).read().split("\n")
assert lines[-1] == "", "no final newline"
lines = lines[:-1]
assert lines, "no stacks"
grammar = re.compile(r"^[^ ;\t\n]+(;[^ ;\t\n]+)* [1-9][0-9]*$")
got = {}
for ln in lines:
    assert grammar.match(ln), f"not frame;frame;... N: {ln!r}"
    stack, n = ln.rsplit(" ", 1)
    assert stack not in got, f"stack listed twice: {stack}"
    got[stack] = int(n)
want, total = {}, 0
for path in reports:
    r = json.load(open(path))
    for s in r["callsites"]:
        fr = s["frames"]
        # root first: the outermost frame (the entry point) first, the call last
        parts = [(f["function"] or "%s+0x%x" % (f["object"], f["rel"])).replace(" ", "_").replace(";", ":")
                 for f in reversed(fr)] + [f"{s['kind']}:{s['call']}"]
        st = ";".join(parts)
        want[st] = want.get(st, 0) + s[key]
        total += s[key]
want = {k: v for k, v in want.items() if v}
assert got == want, f"stacks differ:\n got {got}\n want {want}"
assert sum(got.values()) == total, (sum(got.values()), total)
roots = {st.split(";")[0] for st in got}
assert roots == {"_start"}, f"roots {roots}"
assert any(";ns::f(int,_char):_x;" in st for st in got), "the odd name is not sanitised"
assert any(st.endswith(";site_big_buffers;alloc:malloc") for st in got), "no leaf site"
print(f"{len(got)} stacks, total {total}")
PY
	pass "--folded=$w: grammar, root first, totals" || fail "--folded=$w: $(head -3 "$PST_TMP/$w.folded")"
done
# the bare option is --folded=count, and a report right after it is a report
python3 "$REPORT" --no-symbolize --folded "$PST_TMP/r1.json" >"$PST_TMP/bare" || fail "--folded FILE"
python3 "$REPORT" --no-symbolize --folded=count "$PST_TMP/r1.json" | cmp -s - "$PST_TMP/bare" &&
	pass "--folded FILE is --folded=count" || fail "--folded FILE: $(head -2 "$PST_TMP/bare")"
# two runs of one program: the same stack, counts added (run 2 did twice the rounds)
n1=$(grep ";site_read_file;io:pread " "$PST_TMP/bare" | awk '{ print $NF }')
n12=$(python3 "$REPORT" --no-symbolize --folded "$PST_TMP/r1.json" "$PST_TMP/r2.json" | grep ";site_read_file;io:pread " | awk '{ print $NF }')
[ "$n1" = 30 ] && [ "$n12" = 90 ] && pass "merged over reports: 30 + 60 captures" || fail "pread counts: $n1, $n12"
finish
