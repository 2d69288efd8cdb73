#!/bin/sh
# SPDX-License-Identifier: MIT
# A real S3 client against the demo stack: s3cmd (path-style, SigV4) makes a
# bucket, uploads small and multipart objects, lists, downloads and deletes.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

if ! command -v s3cmd >/dev/null 2>&1; then
	echo "s3cmd not installed (apt-get install s3cmd): skipped"
	exit 77
fi
start_stack
cat >"$DEMO_TMP/s3cfg" <<CFG
[default]
access_key = $DEMO_AK
secret_key = $DEMO_SK
host_base = 127.0.0.1:$PORT_proxy
host_bucket = 127.0.0.1:$PORT_proxy
use_https = False
signature_v2 = False
bucket_location = us-east-1
check_ssl_certificate = False
progress_meter = False
CFG
S3="s3cmd -c $DEMO_TMP/s3cfg --no-check-md5"
S3V="s3cmd -c $DEMO_TMP/s3cfg"

run() {
	what=$1
	shift
	if "$@" >"$DEMO_TMP/s3cmd.out" 2>&1; then
		pass "$what"
	else
		fail "$what: $(tail -n 5 "$DEMO_TMP/s3cmd.out")"
	fi
}

run "s3cmd mb" $S3 mb s3://s3cmd-test
head -c 1000 /dev/urandom >"$DEMO_TMP/small"
head -c 11534336 /dev/urandom >"$DEMO_TMP/big"   # 11 MiB: three 5 MiB-chunked parts
run "s3cmd put small" $S3V put "$DEMO_TMP/small" s3://s3cmd-test/dir/small.bin
run "s3cmd put multipart" $S3V put --multipart-chunk-size-mb=5 "$DEMO_TMP/big" s3://s3cmd-test/big.bin
$S3 ls s3://s3cmd-test >"$DEMO_TMP/ls" 2>&1
expect_match "s3cmd ls shows the directory" "$(cat "$DEMO_TMP/ls")" 'DIR +s3://s3cmd-test/dir/'
expect_match "s3cmd ls shows the big object" "$(cat "$DEMO_TMP/ls")" '11534336 +s3://s3cmd-test/big.bin'
$S3 ls -r s3://s3cmd-test >"$DEMO_TMP/ls" 2>&1
expect_match "s3cmd ls -r shows the small object" "$(cat "$DEMO_TMP/ls")" '1000 +s3://s3cmd-test/dir/small.bin'
$S3 ls >"$DEMO_TMP/ls" 2>&1
expect_match "s3cmd ls lists the bucket" "$(cat "$DEMO_TMP/ls")" 's3://s3cmd-test'
run "s3cmd get small" $S3V get s3://s3cmd-test/dir/small.bin "$DEMO_TMP/small.back"
run "s3cmd get multipart" $S3V get s3://s3cmd-test/big.bin "$DEMO_TMP/big.back"
if cmp -s "$DEMO_TMP/small" "$DEMO_TMP/small.back"; then pass "small object round trip"; else fail "small object differs"; fi
if cmp -s "$DEMO_TMP/big" "$DEMO_TMP/big.back"; then pass "multipart object round trip"; else fail "multipart object differs"; fi
etag=$(curl -s -I --aws-sigv4 aws:amz:us-east-1:s3 --user "$DEMO_AK:$DEMO_SK" \
	"$S3_ENDPOINT/s3cmd-test/big.bin" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: *//p')
expect_match "multipart upload in 3 parts: ETag md5-of-md5s-3" "$etag" '^"[0-9a-f]{32}-3"$'
out=$($S3 rb s3://s3cmd-test 2>&1)
expect_match "non-empty bucket is not removed" "$out" 'BucketNotEmpty'
run "s3cmd del small" $S3 del s3://s3cmd-test/dir/small.bin
run "s3cmd del multipart" $S3 del s3://s3cmd-test/big.bin
$S3 ls -r s3://s3cmd-test >"$DEMO_TMP/ls" 2>&1
expect_eq "bucket is empty after del" "$(cat "$DEMO_TMP/ls")" ""
run "s3cmd rb" $S3 rb s3://s3cmd-test
$S3 ls >"$DEMO_TMP/ls" 2>&1
if grep -q s3cmd-test "$DEMO_TMP/ls"; then fail "bucket still listed after rb"; else pass "bucket gone after rb"; fi

finish
