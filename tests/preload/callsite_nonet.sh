#!/bin/sh
# SPDX-License-Identifier: MIT
# Naming call sites at exit stays on the local disk.  elfutils' standard
# lookup falls back on debuginfod, which loads libcurl into the host and,
# with DEBUGINFOD_URLS set (Debian's login shells set it), connects to the
# servers from inside the program; the shim's own lookup (build id, then
# debuglink) never does.  A stripped copy of the helper (so that some debug
# info is missing: its functions are named from .dynsym, -rdynamic) runs
# under strace with DEBUGINFOD_URLS pointing at a local port: no
# libdebuginfod, no connect(), frames named.
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/callsite_helper"
command -v strace >/dev/null 2>&1 || skip "strace not installed"
strace -f -qq -o /dev/null true >/dev/null 2>&1 || skip "strace cannot trace here (ptrace refused)"
[ -e /usr/lib/x86_64-linux-gnu/libdw.so.1 ] || [ -e /lib/x86_64-linux-gnu/libdw.so.1 ] ||
	ldconfig -p 2>/dev/null | grep -q 'libdw\.so\.1' || skip "libdw.so.1 not installed (elfutils)"
command -v strip >/dev/null 2>&1 || skip "strip not installed (binutils)"
strip -o "$PST_TMP/helper" "$H" || fail "strip"
H="$PST_TMP/helper"
R="$PST_TMP/r.json"
env DEBUGINFOD_URLS=http://127.0.0.1:9 DEBUGINFOD_TIMEOUT=2 POOLSHIM_BACKTRACE=8 \
	POOLSHIM_BACKTRACE_SAMPLE=1 POOLSHIM_STATS="$R" POOLSHIM_STATS_FORMAT=json \
	strace -f -qq -e trace=openat,connect -o "$PST_TMP/trace" env LD_PRELOAD="$SHIM" "$H" \
	>/dev/null 2>&1 || fail "helper failed under strace"
[ "$(json_get "$R" "any(f['function'] == 'main' for s in r['callsites'] for f in s['frames'])")" = True ] &&
	pass "call sites named at exit" || fail "no named frames: $(head -c 300 "$R")"
grep -q 'libdw\.so' "$PST_TMP/trace" && pass "libdw was used" || fail "libdw never opened: naming went elsewhere"
if grep -E 'libdebuginfod|libcurl|connect\(' "$PST_TMP/trace" >"$PST_TMP/bad"; then
	fail "the shim reached for debuginfod: $(head -3 "$PST_TMP/bad")"
else
	pass "no libdebuginfod, no libcurl, no connect()"
fi
finish
