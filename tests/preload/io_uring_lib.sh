# SPDX-License-Identifier: MIT
# Sourced by tests/preload/io_uring_*.sh: runs one mode of
# tests/preload/io_uring_cases under the shim, with a time limit (a hang is
# a failure, not a stuck suite), and holds the system-wide io_uring lock
# shared, as every test that needs io_uring working does (io_nouring.sh
# takes it exclusively while it switches io_uring off).
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_uring_cases"
uring_lock -s

# ucase NAME VAR=VAL ... -- MODE [ARGS]: run under the shim (no live file, no
# exit report), output in $PST_TMP/NAME.out, exit status in $rc.  Passes or
# fails NAME; a skip (77) ends the script.
ucase() {
	ucase_lib=$SHIM
	ucase_in "$@"
}

# hook_case NAME POOLSHIM_URING_TEST=MODE ... -- MODE [ARGS]: the same under
# the test build ($SHIM_TEST), for a case that forces a fault.  A library
# that does not know POOLSHIM_URING_TEST warns of an unknown variable and
# runs without the fault: that fails NAME.
hook_case() {
	need_test_hooks
	ucase_lib=$SHIM_TEST
	ucase_in "$@"
	! grep -q 'unknown variable POOLSHIM_URING_TEST' "$PST_TMP/$1.out" ||
		fail "$1: $SHIM_TEST ignored POOLSHIM_URING_TEST, so no fault was forced"
}

# What both run: the library is $ucase_lib.
ucase_in() {
	name=$1; shift
	vars=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do vars="$vars $1"; shift; done
	shift
	# shellcheck disable=SC2086
	# POOLSHIM_URING=on (a case may say off): these are the ring's own
	# cases, which the router would send half to the plain call.
	timeout -s KILL "${UCASE_LIMIT:-30}" env POOLSHIM_LIVE=0 POOLSHIM_STATS=off POOLSHIM_URING=on $vars \
		LD_PRELOAD="$ucase_lib" "$P" "$@" >"$PST_TMP/$name.out" 2>&1
	rc=$?
	case $rc in
	0) pass "$name: $(grep -v '^FAIL' "$PST_TMP/$name.out" | tail -3 | tr '\n' ' ')" ;;
	77) skip "$(cat "$PST_TMP/$name.out")" ;;
	137) fail "$name: killed after ${UCASE_LIMIT:-30} s (hung): $(tail -3 "$PST_TMP/$name.out" | tr '\n' ' ')" ;;
	*) fail "$name: exit $rc: $(grep -m 6 -e FAIL -e io_uring_cases "$PST_TMP/$name.out" | tr '\n' ' ')" ;;
	esac
	return 0
}
