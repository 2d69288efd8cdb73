#!/bin/sh
# SPDX-License-Identifier: MIT
# The edges docs/demo.md's operations table claims (s3edges.py: boto3 and
# raw signed requests), through s3proxy in front of two storaged nodes, with
# keys placed on both, and against one storaged directly: what is refused
# (server-side encryption, Object Lock, ?policyStatus), ?partNumber past the
# last part, UploadPartCopy ranges whatever the placement, Content-Encoding
# as sent, Expect: 100-continue answered at once, DeleteBucket taking its
# multipart uploads, PUT If-None-Match: *.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

if ! $PYTHON -c 'import boto3' 2>/dev/null; then
	echo "boto3 not installed (apt-get install python3-boto3): skipped"
	exit 77
fi
start_stack
for mode in proxy direct; do
	if [ $mode = proxy ]; then
		set -- "$S3_ENDPOINT" "$DEMO_TMP/data1" "$DEMO_TMP/data2"
	else
		set -- "http://127.0.0.1:$PORT_node1" "$DEMO_TMP/data1"
	fi
	ep=$1
	shift
	if $PYTHON "$PS_TOP_SRCDIR/tests/demo/s3edges.py" "$ep" "edges-$mode" $mode "$@" \
		>"$DEMO_TMP/edges-$mode.out" 2>&1; then
		pass "S3 edges, $mode ($(grep -c '^ok' "$DEMO_TMP/edges-$mode.out") checks)"
	else
		fail "S3 edges, $mode:"
		grep -v '^ok' "$DEMO_TMP/edges-$mode.out" >&2
	fi
done
finish
