#!/bin/sh
# SPDX-License-Identifier: MIT
# What counting a pass-through call costs, in user instructions: an exact,
# load-independent number (valgrind's callgrind), unlike wall time on a
# shared machine.  tests/preload/io_cost runs three loops of N iterations
# (1-byte write to /dev/null; open + pread 1 KiB + close; 1-byte send +
# recv on a socketpair) with collection on only inside them; the shim's
# added instructions per I/O call, (shim - none) / N / calls per
# iteration, must stay within each loop's budget.  The file loop's one
# call is its pread; open and close are not counted, they only tell the
# kind table, and their cost is in that loop's budget.  The budgets sit a
# little above what the shim costs now (devnull and sock: 36 per call,
# with the one-in-64 timing sample worth ~2 of them; file: 114 per
# iteration), and well below main before this test (81, 83, 198).  With
# nothing reading the counters (POOLSHIM_STATS=off, POOLSHIM_LIVE=off),
# devnull and sock must add at most 8 (issue 26; 3 now, 36 before).  A
# regression of the hot path shows up here as a number, long before it
# shows up in a benchmark's noise.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_cost"
command -v valgrind >/dev/null 2>&1 || skip "valgrind not installed"
valgrind --tool=callgrind --callgrind-out-file=/dev/null true >/dev/null 2>&1 ||
	skip "valgrind cannot run here"
N=${PST_COST_N:-5000}
# Budgets per call: devnull, file (per iteration), sock.
B_DEVNULL=${PST_COST_DEVNULL:-42}
B_FILE=${PST_COST_FILE:-130}
B_SOCK=${PST_COST_SOCK:-42}

# run NAME [PRELOAD [VAR=VALUE]]: "loop instructions" for each loop, from one run.
run() {
	rm -f "$PST_TMP"/cg.*
	# shellcheck disable=SC2086
	env ${2:+LD_PRELOAD=$2} POOLSHIM_STATS=off ${3:-} valgrind -q --tool=callgrind \
		--collect-atstart=no --toggle-collect='cost_*' --dump-after=cost_devnull \
		--dump-after=cost_file --dump-after=cost_sock \
		--callgrind-out-file="$PST_TMP/cg.%p" "$P" "$N" "$PST_TMP" >"$PST_TMP/out.$1" 2>&1 ||
		{ echo "run-failed"; return; }
	# One dump per loop, in order; each holds the instructions of N iterations.
	for f in $(ls "$PST_TMP"/cg.* | sort -t. -k3 -n); do
		loop=$(sed -n 's/^desc: Trigger: --dump-after=cost_//p' "$f")
		ir=$(sed -n 's/^summary: //p' "$f")
		[ -n "$loop" ] && echo "$loop $ir"
	done
}

run none >"$PST_TMP/none"
# Twice, the smaller count of each loop: the live record's work is paced by
# the clock (its ticks), so a loaded machine, where callgrind's loops take
# longer, added ticks to one run (sock: 55 a call at load 20, 36 quiet).
run shim "$SHIM" >"$PST_TMP/shim1"
run shim "$SHIM" >"$PST_TMP/shim2"
if grep -q run-failed "$PST_TMP/shim1" "$PST_TMP/shim2"; then
	cat "$PST_TMP/shim1" "$PST_TMP/shim2" >"$PST_TMP/shim"
else
	awk 'NR == FNR { a[$1] = $2; next } { print $1, ($2 < a[$1] ? $2 : a[$1]) }' \
		"$PST_TMP/shim1" "$PST_TMP/shim2" >"$PST_TMP/shim"
fi
# Nothing reads the counters (issue 26): the doors call libc and count nothing.
run quiet "$SHIM" POOLSHIM_LIVE=off >"$PST_TMP/quiet"
B_QUIET=${PST_COST_QUIET:-8}
if grep -q run-failed "$PST_TMP/none" "$PST_TMP/shim" "$PST_TMP/quiet"; then
	fail "callgrind run failed"
	cat "$PST_TMP"/out.*
	finish
fi
for spec in devnull:1:$B_DEVNULL:shim file:1:$B_FILE:shim sock:2:$B_SOCK:shim \
	devnull:1:$B_QUIET:quiet sock:2:$B_QUIET:quiet; do
	with=${spec##*:} spec=${spec%:*}
	loop=${spec%%:*} rest=${spec#*:}
	calls=${rest%:*} BUDGET=${rest#*:}
	a=$(awk -v l="$loop" '$1 == l { print $2 }' "$PST_TMP/none")
	b=$(awk -v l="$loop" '$1 == l { print $2 }' "$PST_TMP/$with")
	if [ -z "$a" ] || [ -z "$b" ]; then
		fail "$loop: no callgrind dump (none '${a}', shim '${b}')"
		continue
	fi
	line=$(awk -v a="$a" -v b="$b" -v n="$N" -v c="$calls" -v l="$loop" 'BEGIN {
		printf "%s: %.1f instructions per iteration without the shim, %.1f with it: %.1f added per call",
			l, a / n, b / n, (b - a) / n / c }')
	[ "$with" = quiet ] && line="$line (nothing reads the counters)"
	added=$(awk -v a="$a" -v b="$b" -v n="$N" -v c="$calls" 'BEGIN { printf "%d", (b - a) / n / c + 0.5 }')
	if [ "$added" -le "$BUDGET" ]; then
		pass "$line (budget $BUDGET)"
	else
		fail "$line, over the budget of $BUDGET"
	fi
done

# Counting fewer instructions must not count less: the same loops, without
# valgrind, counted exactly (calls = the size histogram's sum, bytes,
# sizes), with one call in 64 timed on average.
M=1000
if shim POOLSHIM_STATS="$PST_TMP/r.json" -- "$P" "$M" "$PST_TMP" >"$PST_TMP/out" 2>&1; then
	python3 - "$PST_TMP/r.json" "$M" <<'EOF_PY' >"$PST_TMP/verdicts"
import json, sys
r = json.load(open(sys.argv[1]))
n = int(sys.argv[2]) + 1          # the loop and warm()
rows = {(c["call"], c["kind"]): c for c in r["calls"]}
for call, kind, size, want in (("write", "other", 1, n), ("pread", "file", 1024, n),
                               ("send", "socket", 1, n), ("recv", "socket", 1, n)):
    c = rows.get((call, kind))
    got = c and (c["calls"], c["bytes"], c.get("errors", 0))
    exp = (want, want * size, 0)
    print(f"ok: {call} on {kind}: {got}" if got == exp
          else f"FAIL: {call} on {kind}: (calls, bytes, errors) {got}, want {exp}")
timed = {k[0]: c.get("timed", 0) for k, c in rows.items()}
# One call in 64 of the thread's on average (gaps of 32-95 calls, the
# first sample at its 16th call), whatever the call.
for calls, want in ((("write",), n), (("pread",), n), (("send", "recv"), 2 * n)):
    t = sum(timed.get(c, 0) for c in calls)
    lo, hi = (want - 16) // 96 + 1, (want - 16) // 32 + 1
    print(f"ok: {'+'.join(calls)} timed {t} of {want}" if lo <= t <= hi
          else f"FAIL: {'+'.join(calls)} timed {t} of {want}, want {lo}-{hi}")
# The loop alternates send and recv: with a fixed, even gap every sample
# would fall on the same one of them.
for call in ("send", "recv"):
    t = timed.get(call, 0)
    print(f"ok: {call} timed {t} times" if t >= 3
          else f"FAIL: {call} timed {t} times of {n}: the sampling always misses it")
EOF_PY
	cat "$PST_TMP/verdicts"
	grep -q '^FAIL' "$PST_TMP/verdicts" && pst_fail=1
else
	fail "io_cost under the shim: $(head -c 300 "$PST_TMP/out")"
fi
finish
