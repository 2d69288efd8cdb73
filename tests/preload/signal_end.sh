#!/bin/sh
# SPDX-License-Identifier: MIT
# A program stopped by SIGTERM, SIGINT or SIGHUP that it leaves at the
# default dies from that signal as without the shim (same exit status, the
# same SigCgt), writes nothing as it dies, and leaves its live record, from
# which `poolshim collect` writes its report where POOLSHIM_STATS said and
# removes the record (issue 34: the shim takes no signal; the record is the
# truth): a plain program (sleep), tests/preload/host_helper, and haproxy
# (-db, a loopback port) where installed.  What sigaction() and signal()
# tell the program about these signals is the same with and without the
# shim, with or without POOLSHIM_DUMP_SIGNAL; and a vfork child that sets
# the dump signal's disposition before exec changes nothing in its parent.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/host_helper"
PS="$PS_TOP_BUILDDIR/poolshim"

# wait_for FILE WORD: up to 5 s for WORD to appear in FILE.
wait_for() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
}

# stop NAME SIG WANT CMD...: run CMD without and with the shim, send SIG
# once it is up (READY names a word it prints, or a delay), compare.  The
# shimmed run makes its record at once (POOLSHIM_RUN, as under the wrapper).
stop() {
	name=$1 sig=$2 want=$3; shift 3
	d="$PST_TMP/$name"
	mkdir -p "$d/live"
	for how in none shim; do
		if [ $how = none ]; then
			"$@" >"$d/out.$how" 2>&1 &
		else
			env POOLSHIM_STATS="$d/r-%p.json" POOLSHIM_LIVE_DIR="$d/live" POOLSHIM_RUN="t$$" \
				LD_PRELOAD="$SHIM" "$@" >"$d/out.$how" 2>&1 &
		fi
		pid=$!
		if [ -n "$READY" ]; then wait_for "$d/out.$how" "$READY"; else sleep 1; fi
		eval "cgt_$how=\$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/$pid/status)"
		kill -"$sig" $pid
		wait $pid
		eval "rc_$how=\$?"
	done
	[ "$rc_none" = "$want" ] || fail "$name: exit $rc_none without the shim, not $want"
	[ "$rc_shim" = "$rc_none" ] && pass "$name: SIG$sig, exit $rc_shim as without the shim" ||
		fail "$name: exit $rc_shim under the shim, $rc_none without"
	[ "$cgt_shim" = "$cgt_none" ] && pass "$name: SigCgt $cgt_shim as without the shim" ||
		fail "$name: SigCgt $cgt_shim under the shim, $cgt_none without"
	n=$(find "$d" -maxdepth 1 -name 'r-*.json' | wc -l)
	[ "$n" = 0 ] && pass "$name: nothing written as it died" || fail "$name: $n reports written as it died"
	n=$(ls -A "$d/live" | wc -l)
	[ "$n" = 1 ] && pass "$name: its record is left" || fail "$name: $n records left: $(ls -A "$d/live")"
	"$PS" collect --live-dir "$d/live" >"$d/collect.out" 2>&1 ||
		fail "$name: poolshim collect: $(cat "$d/collect.out")"
	n=$(find "$d" -maxdepth 1 -name 'r-*.json' | wc -l)
	[ "$n" = 1 ] && pass "$name: poolshim collect wrote its report" || fail "$name: $n reports after collect"
	for r in "$d"/r-*.json; do
		[ -f "$r" ] && { json_get "$r" "r['pid']" >/dev/null 2>&1 || fail "$name: $r is no complete report"; }
	done
	left=$(ls -A "$d/live")
	[ -z "$left" ] && pass "$name: no live file left" || fail "$name: live files left: $left"
}

READY= stop sleep-term TERM 143 sleep 30
READY= stop sleep-hup HUP 129 sleep 30
READY=ready stop helper-int INT 130 "$H" wait-term
READY=ready stop helper-term TERM 143 "$H" wait-term
# The signal taken by a thread with the smallest stack (the report runs on its own).
READY=ready stop small-stack TERM 143 "$H" small-stack

# haproxy in the foreground (-db) on a loopback port.
if command -v haproxy >/dev/null 2>&1; then
	port=$((20000 + $$ % 20000))
	cat >"$PST_TMP/haproxy.cfg" <<EOF_CFG
global
    maxconn 100
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend f
    bind 127.0.0.1:$port
    http-request return status 200 content-type text/plain string ok
EOF_CFG
	READY= stop haproxy TERM 143 haproxy -db -f "$PST_TMP/haproxy.cfg"
else
	echo "haproxy not installed: its case skipped"
fi

# What the program is told about TERM, INT and HUP.
"$H" sigview >"$PST_TMP/view.none" 2>&1
for v in POOLSHIM_STATS=off POOLSHIM_DUMP_SIGNAL=TERM POOLSHIM_DUMP_SIGNAL=HUP; do
	shim POOLSHIM_STATS="$PST_TMP/v.json" "$v" -- "$H" sigview >"$PST_TMP/view.shim" 2>&1
	cmp -s "$PST_TMP/view.none" "$PST_TMP/view.shim" &&
		pass "sigaction and signal() tell the same ($v)" ||
		fail "sigaction/signal differ under $v: $(diff "$PST_TMP/view.none" "$PST_TMP/view.shim")"
done

# One-shot handlers (sysv_signal): handled once, then the default ends the
# program, leaving its record for collect.
"$H" resethand >"$PST_TMP/oneshot.none" 2>/dev/null
rc_none=$?
mkdir -p "$PST_TMP/oneshot.live"
shim POOLSHIM_STATS="$PST_TMP/oneshot.json" POOLSHIM_LIVE_DIR="$PST_TMP/oneshot.live" \
	POOLSHIM_RUN="t$$" -- "$H" resethand >"$PST_TMP/oneshot.shim" 2>/dev/null
rc_shim=$?
[ "$rc_none" = 143 ] || fail "resethand: exit $rc_none without the shim, not 143"
[ "$rc_shim" = "$rc_none" ] && cmp -s "$PST_TMP/oneshot.none" "$PST_TMP/oneshot.shim" &&
	pass "resethand: handled once, then ended by TERM (exit $rc_shim), as without the shim" ||
	fail "resethand: exit $rc_shim, $rc_none without; $(diff "$PST_TMP/oneshot.none" "$PST_TMP/oneshot.shim")"
"$PS" collect --live-dir "$PST_TMP/oneshot.live" >/dev/null 2>&1
[ -s "$PST_TMP/oneshot.json" ] && pass "resethand: a report from its record after the second TERM" ||
	fail "resethand: no report after the second TERM"

# vfork children that set TERM's disposition, then exec.
for m in vfork-dump:0 vfork-dfl:143; do
	mode=${m%%:*} want=${m#*:}
	# stdout only: a shell may print "Terminated" on the stderr it was given
	"$H" $mode >"$PST_TMP/$mode.none" 2>/dev/null
	rc_none=$?
	[ "$rc_none" = "$want" ] || fail "$mode: exit $rc_none without the shim, not $want"
	for v in POOLSHIM_DUMP_SIGNAL=TERM POOLSHIM_VERBOSE=0; do
		rm -f "$PST_TMP"/vf-*.json
		rm -rf "$PST_TMP/vf.live" && mkdir "$PST_TMP/vf.live"
		shim "$v" POOLSHIM_STATS="$PST_TMP/vf-%p.json" POOLSHIM_LIVE_DIR="$PST_TMP/vf.live" \
			POOLSHIM_RUN="t$$" -- "$H" $mode >"$PST_TMP/$mode.shim" 2>/dev/null
		rc_shim=$?
		# Ended by TERM at its default: the record, rendered by collect.
		"$PS" collect --live-dir "$PST_TMP/vf.live" >/dev/null 2>&1
		[ "$rc_shim" = "$rc_none" ] && cmp -s "$PST_TMP/$mode.none" "$PST_TMP/$mode.shim" &&
			pass "$mode ($v): exit $rc_shim and output as without the shim" ||
			fail "$mode ($v): exit $rc_shim, $rc_none without; $(diff "$PST_TMP/$mode.none" "$PST_TMP/$mode.shim")"
		n=$(find "$PST_TMP" -maxdepth 1 -name 'vf-*.json' | wc -l)
		[ "$n" -ge 1 ] && pass "$mode ($v): the parent's report" || fail "$mode ($v): no report"
	done
done
finish
