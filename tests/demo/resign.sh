#!/bin/sh
# SPDX-License-Identifier: MIT
# s3proxy in front of an S3 server that checks signatures itself: a second
# s3proxy (with its own credentials) stands in for MinIO/RGW, and the front
# proxy re-signs every request with --backend-auth.  Objects, listings,
# multipart uploads, bulk deletes and the boto3 checks of s3compat.py must
# all get through.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

start_stack
printf 'FRONTKEY front-secret\n' >"$DEMO_TMP/front-creds"
start_bg front "$S3PROXY" --port 0 --credentials "$DEMO_TMP/front-creds" \
	--backend "http://127.0.0.1:$PORT_proxy" --backend-auth "$DEMO_AK:$DEMO_SK:us-east-1"
S3_ENDPOINT=http://127.0.0.1:$PORT_front
AWS_ACCESS_KEY_ID=FRONTKEY
AWS_SECRET_ACCESS_KEY=front-secret

if "$LOADGEN" --op mix --size 1KiB-512KiB --concurrency 4 --duration 2s --warmup 0 \
	--verify >"$DEMO_TMP/lg.out" 2>&1; then
	pass "loadgen mix --verify through the re-signing proxy"
else
	fail "loadgen through the re-signing proxy:"
	cat "$DEMO_TMP/lg.out" >&2
fi
if $PYTHON "$PS_TOP_SRCDIR/tests/demo/listing.py" "$DEMO_TMP/data1" "$DEMO_TMP/data2" \
	>"$DEMO_TMP/listing.out" 2>&1; then
	pass "listings, multipart and bulk delete through the re-signing proxy ($(grep -c '^ok' "$DEMO_TMP/listing.out") checks)"
else
	fail "listings through the re-signing proxy:"
	grep -v '^ok' "$DEMO_TMP/listing.out" >&2
fi
# What a re-signed backend such as RGW is asked for copies, versions
# listings, conditions, headers and multipart edges (boto3, s3compat.py).
if $PYTHON -c 'import boto3' 2>/dev/null; then
	if $PYTHON "$PS_TOP_SRCDIR/tests/demo/s3compat.py" "$S3_ENDPOINT" compat-resign proxy \
		>"$DEMO_TMP/compat.out" 2>&1; then
		pass "boto3 checks through the re-signing proxy ($(grep -c '^ok' "$DEMO_TMP/compat.out") checks)"
	else
		fail "boto3 checks through the re-signing proxy:"
		grep -v '^ok' "$DEMO_TMP/compat.out" >&2
	fi
fi
out=$($S3REQ --ak "$DEMO_AK" --sk "$DEMO_SK" GET mpu --query list-type=2)
expect_match "the back end's credentials do not work at the front" "$out" '^403.*InvalidAccessKeyId'

# Wrong backend credentials: the back end refuses, the client sees its 403.
start_bg front2 "$S3PROXY" --port 0 --credentials "$DEMO_TMP/front-creds" \
	--backend "http://127.0.0.1:$PORT_proxy" --backend-auth "$DEMO_AK:wrong-secret"
out=$($S3REQ --endpoint "http://127.0.0.1:$PORT_front2" GET mpu md5)
expect_match "wrong --backend-auth -> the backend's 403 passes through" "$out" '^403.*SignatureDoesNotMatch'
finish
