#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 46: `poolshim report --diff A B` compares whole runs.  Each run is
# a directory of JSON reports: three processes of one program (one busy
# with O_DIRECT reads, two lighter) and a shell that did nothing.  The diff
# sums the program's processes, names the busiest, says what else differed
# (io_uring SQEs on one side only, the pool mode, the other programs), has
# a verdict under its header, compares latency call by call (no mean over
# all I/O calls), and takes the user's throughput figures.  Diffing
# different programs, or a lone process that did next to nothing against
# a busy one (a master against a worker), is warned about.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/advice_helper"
TOOL="$PS_TOP_SRCDIR/scripts/poolshim-report.py"
report() { python3 "$TOOL" "$@"; }
D=${TMPDIR:-/var/tmp}
[ -d /var/tmp ] && D=/var/tmp
F=$(mktemp "$D/pst-diffruns.XXXXXX") && at_exit "rm -f '$F' '$F.2'"

# run DIR POOL: one run of the "program" under the shim, its reports in DIR
run() {
	mkdir -p "$1"
	shim POOLSHIM_POOL="$2" "POOLSHIM_STATS=$1/%e-%p.json" -- sh -c '
		"$1" direct "$2"; echo "direct $?" >"$3/direct.rc"
		"$1" loop 80 1048576
		"$1" loop 70 393216' sh "$H" "$F" "$1" >/dev/null 2>&1
}
run "$PST_TMP/off" off
run "$PST_TMP/on" on
direct=$(cat "$PST_TMP/on/direct.rc")
# count PATTERN...: how many of the patterns name files
count() { n=0; for f in "$@"; do [ -e "$f" ] && n=$((n + 1)); done; echo $n; }
[ "$(count "$PST_TMP"/on/advice_helper-*.json)" = 3 ] && [ "$(count "$PST_TMP"/on/sh-*.json)" = 1 ] ||
	{ fail "want 3 advice_helper reports and 1 sh report: $(ls "$PST_TMP/off" "$PST_TMP/on")"; finish; }

report --diff "$PST_TMP/off" "$PST_TMP/on" --throughput 400MB/s,500MB/s >"$PST_TMP/diff" 2>"$PST_TMP/err" ||
	{ fail "--diff dirs: $(cat "$PST_TMP/err")"; finish; }
sed -n 1p "$PST_TMP/diff" | grep -q "^==== poolshim diff: A $PST_TMP/off -> B $PST_TMP/on ====" &&
	sed -n 2p "$PST_TMP/diff" | grep -Eq "^verdict  advice_helper, B against A: throughput x1.25 \(yours\), faults x[0-9.]+, CPU per MiB I/O x[0-9.]+$" &&
	pass "header and verdict: $(sed -n 2p "$PST_TMP/diff")" || fail "header/verdict: $(head -3 "$PST_TMP/diff")"
# the busiest process: the one that read with O_DIRECT (most I/O bytes), by its pid
busy=$(python3 - "$PST_TMP/on" <<'PY'
import json, os, sys
d = sys.argv[1]
best = max((json.load(open(os.path.join(d, f))) for f in os.listdir(d)
            if f.startswith("advice_helper-")),
           key=lambda r: sum(c["bytes"] for c in r["calls"] if c["kind"] != "none"))
print(best["pid"])
PY
)
grep -Eq "^B        advice_helper: 3 processes \(pid [0-9, ]+\), summed; busiest pid $busy \([0-9]+% of its I/O bytes, advice_helper-$busy.json\)$" "$PST_TMP/diff" &&
	pass "three processes summed, the busiest named (pid $busy)" || fail "busiest: $(grep '^[AB]   ' "$PST_TMP/diff")"
grep -q "^differs  other programs, not compared: A sh (1); B sh (1)$" "$PST_TMP/diff" &&
	pass "the shell is named, not compared" || fail "other programs: $(grep '^differs' "$PST_TMP/diff")"
grep -q "^differs  pool mode: A off, B " "$PST_TMP/diff" && pass "pool mode differs" || fail "pool mode: $(grep '^differs' "$PST_TMP/diff")"
grep -q "^throughput (yours, MB/s)  *400  *500  *x1.25$" "$PST_TMP/diff" && pass "the user's throughput row" ||
	fail "throughput row: $(grep throughput "$PST_TMP/diff")"
grep -q "mean latency of timed I/O calls" "$PST_TMP/diff" && fail "a mixed-latency row" || pass "no mixed-latency row"
grep -q "^latency  mean per call, B/A" "$PST_TMP/diff" && pass "latency call by call" || fail "no latency line"
# the sums: malloc calls of the three processes
want=$(python3 -c 'import json,os,sys
d=sys.argv[1]; print(sum(c["calls"] for f in os.listdir(d) if f.startswith("advice_helper-")
    for c in json.load(open(os.path.join(d,f)))["calls"] if c["call"] == "malloc"))' "$PST_TMP/on")
grep -Eq "^malloc +none +[0-9]+ +$want " "$PST_TMP/diff" && pass "malloc calls summed over the 3 processes: $want" ||
	fail "malloc sum $want: $(grep '^malloc' "$PST_TMP/diff")"
case $direct in
"direct 0")
	sqes=$(python3 -c 'import json,os,sys
d=sys.argv[1]; print(sum(json.load(open(os.path.join(d,f)))["uring"]["sqes"] for f in os.listdir(d) if f.endswith(".json")))' "$PST_TMP/on")
	if [ "$sqes" -gt 0 ]; then
		grep -q "^differs  io_uring: A 0 SQEs, B $sqes: O_DIRECT I/O went through the ring in B only" "$PST_TMP/diff" &&
			pass "io_uring differed: said" || fail "io_uring: $(grep '^differs' "$PST_TMP/diff")"
	else
		echo "no io_uring requests in B here: io_uring line not checked"
	fi ;;
*) echo "O_DIRECT not available under $D ($direct): io_uring line not checked" ;;
esac

# different programs: warned, and the verdict says not comparable
set -- "$PST_TMP"/on/advice_helper-*.json
one=$1
set -- "$PST_TMP"/on/sh-*.json
report --diff "$one" "$1" >"$PST_TMP/d2" 2>&1
grep -q "^verdict  not comparable: A is advice_helper, B is sh$" "$PST_TMP/d2" &&
	grep -q "^warning  A is advice_helper and B is sh: different programs" "$PST_TMP/d2" &&
	pass "different programs: warned" || fail "different programs: $(head -8 "$PST_TMP/d2")"

# a lone process that did next to nothing against a busy one: master against worker?
head -c 1048576 /dev/zero >"$F.2"
shim "POOLSHIM_STATS=$PST_TMP/idle.json" -- dd if="$F.2" of=/dev/null bs=4k count=1 2>/dev/null
shim "POOLSHIM_STATS=$PST_TMP/busy.json" -- dd if="$F.2" of=/dev/null bs=512 2>/dev/null
report --diff "$PST_TMP/idle.json" "$PST_TMP/busy.json" >"$PST_TMP/d3" 2>&1
grep -Eq "^warning  A's dd process made [0-9]+ I/O calls \([0-9.]+[KMG]?\) against [0-9]+ \([0-9.]+[KMG]?\): a master .* against a worker\?" "$PST_TMP/d3" &&
	sed -n 2p "$PST_TMP/d3" | grep -q "^verdict  not comparable as given" &&
	pass "master against worker: warned" || fail "master/worker: $(head -8 "$PST_TMP/d3")"
report --diff "$PST_TMP/busy.json" "$PST_TMP/busy.json" >"$PST_TMP/d4" 2>&1
grep -q "^warning" "$PST_TMP/d4" && fail "a warning for like against like: $(grep '^warning' "$PST_TMP/d4")" ||
	pass "like against like: no warning"

# --throughput needs --diff and two positive figures
report --throughput 1,2 "$PST_TMP/busy.json" >/dev/null 2>"$PST_TMP/err"
[ $? = 2 ] && grep -q "throughput goes with --diff" "$PST_TMP/err" && pass "--throughput alone: usage error" ||
	fail "--throughput alone: $(cat "$PST_TMP/err")"
report --diff "$PST_TMP/busy.json" "$PST_TMP/busy.json" --throughput 5 >/dev/null 2>"$PST_TMP/err"
[ $? = 2 ] && grep -q "want two figures" "$PST_TMP/err" && pass "--throughput 5: usage error" ||
	fail "--throughput 5: $(cat "$PST_TMP/err")"
finish
