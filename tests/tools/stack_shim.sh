#!/bin/sh
# SPDX-License-Identifier: MIT
# `scripts/stack up --shim` preloads the servers only: each log holds its
# server's report and none from nohup (which used to run preloaded and
# report before its exec, so merged reports counted twice the processes).
# One request reaches the proxy first: a process that did no work writes
# no report at all (issue 46).
. "$PS_TOP_SRCDIR/tests/lib.sh"
[ -x "$PS_TOP_BUILDDIR/demo/storaged" ] || skip "demo not built (--disable-demo)"
STACK_DIR=$PST_TMP/stack
STACK_BUILDDIR=$PS_TOP_BUILDDIR
POOLSHIM_LIVE_DIR=$PST_TMP
export STACK_DIR STACK_BUILDDIR POOLSHIM_LIVE_DIR
at_exit "'$PS_TOP_SRCDIR/scripts/stack' down >/dev/null 2>&1"
"$PS_TOP_SRCDIR/scripts/stack" up --shim --nodes 1 >"$PST_TMP/env" 2>"$PST_TMP/up" ||
	{ fail "stack up --shim: $(cat "$PST_TMP/up")"; finish; }
. "$PST_TMP/env"
curl -s -o /dev/null "$S3_ENDPOINT/" || fail "no answer from the proxy at $S3_ENDPOINT"
"$PS_TOP_SRCDIR/scripts/stack" status >"$PST_TMP/st" 2>&1
[ "$(grep -c 'running (libpoolshim)' "$PST_TMP/st")" = 2 ] && pass "node and proxy run under the shim" ||
	fail "status: $(cat "$PST_TMP/st")"
"$PS_TOP_SRCDIR/scripts/stack" down >/dev/null 2>&1
for log in node1 proxy; do
	heads=$(grep '^==== poolshim report: pid [0-9]* (' "$STACK_DIR/$log.log" | sed 's/.*(\(.*\)) ====$/\1/' | tr '\n' ' ')
	prog=storaged
	[ $log = proxy ] && prog=s3proxy
	[ "$heads" = "$prog " ] && pass "$log.log: the $prog report only" ||
		fail "$log.log: reports of '$heads', want '$prog' only"
done
finish
