# SPDX-License-Identifier: MIT
# Shared helpers for the demo stack tests: start storaged nodes and an
# s3proxy on ephemeral loopback ports, and always stop everything they
# started, however the test ends.  Source it; it sets S3_ENDPOINT, the
# credentials, and DEMO_TMP (removed at exit).

set -u
: "${PS_TOP_BUILDDIR:?PS_TOP_BUILDDIR must be set (make check does it)}"
: "${PS_TOP_SRCDIR:?PS_TOP_SRCDIR must be set (make check does it)}"

STORAGED=$PS_TOP_BUILDDIR/demo/storaged
S3PROXY=$PS_TOP_BUILDDIR/demo/s3proxy
LOADGEN=$PS_TOP_BUILDDIR/demo/loadgen
# Debian's interpreter directly when there is one: version-manager shims
# on PATH can cost most of a second per call.
PYTHON=python3
[ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
# The helpers import each other; keep the source tree free of bytecode.
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
S3REQ="$PYTHON $PS_TOP_SRCDIR/tests/demo/s3req.py"
RAWHTTP="$PYTHON $PS_TOP_SRCDIR/tests/demo/rawhttp.py"

for p in "$STORAGED" "$S3PROXY" "$LOADGEN"; do
	if [ ! -x "$p" ]; then
		echo "missing $p: build it first" >&2
		exit 99
	fi
done

DEMO_TMP=$(mktemp -d "${TMPDIR:-/tmp}/psdemo.XXXXXX")
DEMO_PIDS=""
FAILS=0

demo_cleanup() {
	status=$?
	for pid in $DEMO_PIDS; do
		kill "$pid" 2>/dev/null
	done
	for pid in $DEMO_PIDS; do
		# A clean SIGTERM shutdown is part of the contract: give each a
		# few seconds, then insist and count it as a failure.
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "FAIL: pid $pid ignored SIGTERM" >&2
			kill -9 "$pid" 2>/dev/null
			status=1
		fi
		wait "$pid" 2>/dev/null
		rc=$?
		if [ $rc -ne 0 ]; then
			echo "FAIL: pid $pid exited with status $rc after SIGTERM" >&2
			status=1
		fi
	done
	DEMO_PIDS=""
	# Sanitizer reports (an --enable-sanitizers build) fail the test.
	if grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$DEMO_TMP"/*.err >/dev/null 2>&1; then
		for f in $(grep -l -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$DEMO_TMP"/*.err); do
			echo "FAIL: sanitizer report in $(basename "$f"):" >&2
			grep -A 40 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f" | head -60 >&2
		done
		status=1
	fi
	rm -rf "$DEMO_TMP"
	exit $status
}
trap 'demo_cleanup' EXIT
trap 'exit 130' INT TERM HUP PIPE

# start_bg NAME CMD... : runs CMD in the background, output in
# $DEMO_TMP/NAME.out/.err, and waits for its "listening on" line; sets
# PORT_<NAME> and PID_<NAME>.
# DEMO_SHIM=1 runs the servers under the build's libpoolshim.so.
DEMO_PRELOAD=
if [ "${DEMO_SHIM:-0}" = 1 ]; then
	DEMO_PRELOAD=$PS_TOP_BUILDDIR/.libs/libpoolshim.so
	[ -f "$DEMO_PRELOAD" ] || { echo "DEMO_SHIM=1: $DEMO_PRELOAD not built" >&2; exit 99; }
fi

# demo_sanitized: true when the demo programs were built with ASan (an
# --enable-sanitizers build).  Such programs cannot run under valgrind,
# and ASan refuses to start behind another preloaded library.
demo_sanitized() {
	ldd "$STORAGED" 2>/dev/null | grep -q 'libasan'
}

start_bg() {
	name=$1
	shift
	if [ -n "$DEMO_PRELOAD" ]; then
		LD_PRELOAD=$DEMO_PRELOAD "$@" >"$DEMO_TMP/$name.out" 2>"$DEMO_TMP/$name.err" &
	else
		"$@" >"$DEMO_TMP/$name.out" 2>"$DEMO_TMP/$name.err" &
	fi
	pid=$!
	DEMO_PIDS="$DEMO_PIDS $pid"
	eval "PID_$name=$pid"
	i=0
	while ! grep -q '^listening on ' "$DEMO_TMP/$name.out" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null || [ $i -ge 100 ]; then
			echo "FAIL: $name did not start:" >&2
			cat "$DEMO_TMP/$name.err" >&2
			exit 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	port=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$DEMO_TMP/$name.out")
	eval "PORT_$name=$port"
}

DEMO_AK=AKDEMOTEST0001
DEMO_SK=demo-secret-key-for-tests

# start_stack [extra s3proxy flags...]: two nodes and a proxy.
start_stack() {
	start_bg node1 "$STORAGED" --dir "$DEMO_TMP/data1" --port 0 --no-fsync
	start_bg node2 "$STORAGED" --dir "$DEMO_TMP/data2" --port 0 --no-fsync
	printf '# test credentials\n%s %s\n' "$DEMO_AK" "$DEMO_SK" >"$DEMO_TMP/creds"
	start_bg proxy "$S3PROXY" --port 0 --credentials "$DEMO_TMP/creds" \
		--backend "http://127.0.0.1:$PORT_node1" --backend "http://127.0.0.1:$PORT_node2" "$@"
	S3_ENDPOINT=http://127.0.0.1:$PORT_proxy
	AWS_ACCESS_KEY_ID=$DEMO_AK
	AWS_SECRET_ACCESS_KEY=$DEMO_SK
	AWS_DEFAULT_REGION=us-east-1
	export S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION
}

pass() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*" >&2
	FAILS=$((FAILS + 1))
}

# expect_eq WHAT GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1: got '$2', want '$3'"
	fi
}

# expect_match WHAT TEXT REGEX
expect_match() {
	if printf '%s' "$2" | tr '\n' ' ' | grep -Eq -- "$3"; then
		pass "$1"
	else
		fail "$1: '$2' does not match /$3/"
	fi
}

finish() {
	if [ "$FAILS" -ne 0 ]; then
		echo "$FAILS check(s) failed; server logs:" >&2
		for f in "$DEMO_TMP"/*.err; do
			[ -f "$f" ] || continue
			echo "--- $f" >&2
			tail -n 40 "$f" >&2
		done
		exit 1
	fi
	exit 0
}
