#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/collect.c through its C API (tests/tools/collect_api.c says what
# each check does): report paths are opened without following a link
# anywhere along them, by openat2 and by the component walk used where
# the kernel has no openat2; and ps_collect() given the wait status and
# usage of a process its caller saw die (the `poolshim` wrapper's case)
# says in the report that SIGKILL ended it.
. "$PS_TOP_SRCDIR/tests/lib.sh"
API="$PS_TOP_BUILDDIR/tests/tools/collect_api"
mkdir "$PST_TMP/links" "$PST_TMP/live"
"$API" links "$PST_TMP/links" >"$PST_TMP/links.out" 2>&1
rc=$?
cat "$PST_TMP/links.out"
[ $rc = 0 ] && [ "$(grep -c '^ok' "$PST_TMP/links.out")" = 9 ] && pass "no link followed, by either way" ||
	fail "links: status $rc"

timeout 60 "$API" known "$PST_TMP/live" "$SHIM" dd if=/dev/zero of=/dev/null bs=4k \
	>"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 0 ] && pass "ps_collect: status 0" || fail "ps_collect: status $rc: $(cat "$PST_TMP/err")"
grep -q "^ended    killed by signal 9 (SIGKILL); report rendered by collect_api$" "$PST_TMP/out" &&
	pass "the report says SIGKILL ended it" || fail "ended line: $(grep ended "$PST_TMP/out")"
grep -Eq "^read +other +[1-9]" "$PST_TMP/out" && pass "with its reads" || fail "no reads in the report"
[ -z "$(ls -A "$PST_TMP/live")" ] && pass "no record left" || fail "records left: $(ls "$PST_TMP/live")"
finish
