#!/bin/sh
# SPDX-License-Identifier: MIT
# S3 behaviour a real client relies on (s3compat.py, boto3), through
# s3proxy in front of two storaged nodes and against one storaged directly;
# then aws-cli's server-side cp and mv between keys through the proxy.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

if ! $PYTHON -c 'import boto3' 2>/dev/null; then
	echo "boto3 not installed (apt-get install python3-boto3): skipped"
	exit 77
fi
start_stack
for mode in proxy direct; do
	ep=$S3_ENDPOINT
	[ $mode = direct ] && ep=http://127.0.0.1:$PORT_node1
	if $PYTHON "$PS_TOP_SRCDIR/tests/demo/s3compat.py" "$ep" "compat-$mode" $mode \
		>"$DEMO_TMP/compat-$mode.out" 2>&1; then
		pass "boto3 checks, $mode ($(grep -c '^ok' "$DEMO_TMP/compat-$mode.out") checks)"
	else
		fail "boto3 checks, $mode:"
		grep -v '^ok' "$DEMO_TMP/compat-$mode.out" >&2
	fi
done

# --- aws-cli: server-side copy and move between keys --------------------
AWS=/usr/bin/aws
if [ -x "$AWS" ]; then
	A="$AWS --endpoint-url $S3_ENDPOINT s3"
	echo "aws cli object" >"$DEMO_TMP/awsobj"
	$A cp "$DEMO_TMP/awsobj" s3://compat-proxy/aws/x >"$DEMO_TMP/aws.out" 2>&1
	if $A cp s3://compat-proxy/aws/x s3://compat-proxy/aws/y >>"$DEMO_TMP/aws.out" 2>&1 &&
		$A mv s3://compat-proxy/aws/y s3://compat-proxy/aws/z >>"$DEMO_TMP/aws.out" 2>&1; then
		pass "aws s3 cp and mv between keys"
	else
		fail "aws s3 cp/mv: $(tail -n 5 "$DEMO_TMP/aws.out")"
	fi
	expect_eq "aws s3 mv moved the object" "$($A cp s3://compat-proxy/aws/z - 2>&1)" "aws cli object"
	expect_match "aws s3 mv removed the source" "$($A ls s3://compat-proxy/aws/ 2>&1)" '^[^y]*z$'
else
	echo "aws-cli not installed (apt-get install awscli): cp/mv checks skipped"
fi
finish
