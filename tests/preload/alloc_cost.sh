#!/bin/sh
# SPDX-License-Identifier: MIT
# What the malloc and free doors cost, in user instructions (valgrind's
# callgrind: exact and load-independent).  tests/preload/alloc_cost runs
# N malloc + free pairs of 16-240 bytes with collection on only inside
# the loop; the shim's added instructions per pair, (shim - none) / N,
# must stay within budget (issue 26): 12 with the default settings (the
# report on: small mallocs counted one in about 128), 6 with POOLSHIM=off,
# and 8 when nothing reads the counters (POOLSHIM_STATS=off,
# POOLSHIM_LIVE=off).  The doors cost 10, 4 and 7 today, against 49 and
# 20 before (a check of every call's counters, errno and the heap's owner).
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/alloc_cost"
command -v valgrind >/dev/null 2>&1 || skip "valgrind not installed"
valgrind --tool=callgrind --callgrind-out-file=/dev/null true >/dev/null 2>&1 ||
	skip "valgrind cannot run here"
N=${PST_COST_N:-20000}

# run NAME [PRELOAD [VAR=VALUE...]]: the loop's instructions.
run() {
	name=$1
	shift
	pre=${1:-}
	[ $# -gt 0 ] && shift
	rm -f "$PST_TMP"/cg.*
	# shellcheck disable=SC2086
	env ${pre:+LD_PRELOAD=$pre} POOLSHIM_STATS=off "$@" valgrind -q --tool=callgrind \
		--collect-atstart=no --toggle-collect='cost_pairs' \
		--callgrind-out-file="$PST_TMP/cg.%p" "$P" "$N" >"$PST_TMP/out.$name" 2>&1 ||
		{ echo "run-failed"; return; }
	# Collected: warm()'s 1000 pairs and the N measured.
	sed -n 's/^summary: //p' "$PST_TMP"/cg.* | head -n 1
}

none=$(run none)
for spec in "default:12:POOLSHIM_LIVE=on:POOLSHIM_STATS=stderr" "off:6:POOLSHIM=off" \
	"quiet:8:POOLSHIM_LIVE=off"; do
	name=${spec%%:*} rest=${spec#*:}
	budget=${rest%%:*} vars=$(echo "${rest#*:}" | tr ':' ' ')
	# shellcheck disable=SC2086
	shim=$(run "$name" "$SHIM" $vars)
	case "$none $shim" in *run-failed* | " "* | *" ")
		fail "$name: callgrind run failed (none '$none', shim '$shim')"
		cat "$PST_TMP"/out.*
		continue ;;
	esac
	line=$(awk -v a="$none" -v b="$shim" -v n="$N" -v l="$name" 'BEGIN {
		printf "%s: %.1f instructions per pair without the shim, %.1f with it: %.1f added",
			l, a / (n + 1000), b / (n + 1000), (b - a) / (n + 1000) }')
	added=$(awk -v a="$none" -v b="$shim" -v n="$N" 'BEGIN { printf "%d", (b - a) / (n + 1000) + 0.5 }')
	if [ "$added" -le "$budget" ]; then
		pass "$line (budget $budget)"
	else
		fail "$line, over the budget of $budget"
	fi
done
finish
