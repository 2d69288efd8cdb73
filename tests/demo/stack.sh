#!/bin/sh
# SPDX-License-Identifier: MIT
# End-to-end checks of the demo stack: two storaged nodes behind s3proxy.
# loadgen in verify mode, curl --aws-sigv4, authentication failures,
# path-traversal keys, Range edge cases, aws-chunked uploads.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

start_stack
CURL="curl -s --aws-sigv4 aws:amz:us-east-1:s3 --user $DEMO_AK:$DEMO_SK"
E=$S3_ENDPOINT

# --- loadgen, mixed operations, every byte checked ---------------------
if "$LOADGEN" --op mix --size 4KiB-1MiB --concurrency 4 --duration 3s --warmup 0.5s \
	--verify --json "$DEMO_TMP/lg.json" >"$DEMO_TMP/lg.out" 2>&1; then
	pass "loadgen mix --verify exits 0"
else
	fail "loadgen mix --verify failed:"
	cat "$DEMO_TMP/lg.out" >&2
fi
expect_match "loadgen verified bytes with no mismatch" "$(cat "$DEMO_TMP/lg.json")" '"mismatches": 0'
expect_match "loadgen checked a real amount of data" "$(cat "$DEMO_TMP/lg.json")" '"verified_bytes": [1-9][0-9]{5,}'
expect_match "loadgen reports no errors" "$(tr -d '\n' <"$DEMO_TMP/lg.json")" '"errors": \{\}'
for op in put get delete list; do
	expect_match "loadgen ran $op" "$(cat "$DEMO_TMP/lg.json")" "\"$op\": \\{\"count\": [1-9]"
done

# --- curl --aws-sigv4: put, get, delete ---------------------------------
expect_eq "create bucket" "$($CURL -o /dev/null -w '%{http_code}' -X PUT "$E/demo")" 200
head -c 300000 /dev/urandom >"$DEMO_TMP/obj"
H=$(sha256sum "$DEMO_TMP/obj" | cut -d' ' -f1)
expect_eq "curl put" "$($CURL -o /dev/null -w '%{http_code}' -H "x-amz-content-sha256: $H" \
	-T "$DEMO_TMP/obj" "$E/demo/curl/obj")" 200
$CURL -o "$DEMO_TMP/obj.back" "$E/demo/curl/obj"
if cmp -s "$DEMO_TMP/obj" "$DEMO_TMP/obj.back"; then pass "curl get returns the bytes"; else fail "curl get differs"; fi
expect_eq "curl delete" "$($CURL -o /dev/null -w '%{http_code}' -X DELETE "$E/demo/curl/obj")" 204
out=$($CURL -v -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H 'Expect: 100-continue' \
	-T "$DEMO_TMP/obj" "$E/demo/curl/expect" 2>&1 | tr -d '\r')
expect_match "proxy answers Expect: 100-continue" "$out" '< HTTP/1.1 100 Continue.*< HTTP/1.1 200 OK'
out=$(curl -s -v -H 'Expect: 100-continue' -T "$DEMO_TMP/obj" \
	"http://127.0.0.1:$PORT_node1/demo/direct-expect" 2>&1 | tr -d '\r')
expect_match "storaged answers Expect: 100-continue" "$out" '< HTTP/1.1 100 Continue.*< HTTP/1.1 200 OK'
expect_eq "deleted object is gone" "$($CURL -o /dev/null -w '%{http_code}' "$E/demo/curl/obj")" 404
expect_match "404 carries S3 error XML" "$($CURL "$E/demo/curl/obj")" '<Code>NoSuchKey</Code>.*<RequestId>'
expect_eq "payload hash mismatch" "$($CURL -o /dev/null -w '%{http_code}' \
	-H "x-amz-content-sha256: $(echo x | sha256sum | cut -d' ' -f1)" -T "$DEMO_TMP/obj" "$E/demo/curl/bad")" 400

# --- authentication failures ---------------------------------------------
out=$($S3REQ --bad-sig GET demo --query list-type=2)
expect_match "bad signature -> 403 SignatureDoesNotMatch" "$out" '^403.*SignatureDoesNotMatch'
out=$($S3REQ --ak NOSUCHKEY GET demo --query list-type=2)
expect_match "unknown access key -> 403 InvalidAccessKeyId" "$out" '^403.*InvalidAccessKeyId'
out=$($S3REQ --sk wrong-secret PUT demo k --data x)
expect_match "wrong secret -> 403" "$out" '^403.*SignatureDoesNotMatch'
out=$($S3REQ --skew 1200 GET demo --query list-type=2)
expect_match "clock 20 min ahead -> 403 RequestTimeTooSkewed" "$out" '^403.*RequestTimeTooSkewed'
out=$($S3REQ --skew -1200 GET demo --query list-type=2)
expect_match "clock 20 min behind -> 403 RequestTimeTooSkewed" "$out" '^403.*RequestTimeTooSkewed'
out=$($S3REQ --skew 600 GET demo --query list-type=2)
expect_match "clock 10 min off is accepted" "$out" '^200'
out=$(curl -s -w '\n%{http_code}' "$E/demo?list-type=2")
expect_match "anonymous request -> 403 AccessDenied" "$out" 'AccessDenied.*403$'
out=$($S3REQ --auth-style nospace GET demo --query list-type=2)
expect_match "Authorization without spaces after commas" "$out" '^200'
out=$($S3REQ --auth-style wide GET demo --query list-type=2)
expect_match "Authorization with extra spaces and tabs" "$out" '^200'
out=$($S3REQ --unsigned host GET demo --query list-type=2)
expect_match "host not signed -> 403 AccessDenied" "$out" '^403.*AccessDenied'
out=$($S3REQ -H 'x-amz-meta-a: b' --unsigned x-amz-meta-a PUT demo k --data x)
expect_match "unsigned x-amz-* header -> 403 AccessDenied" "$out" '^403.*AccessDenied'
out=$($S3REQ --region eu-west-1 GET demo --query list-type=2)
expect_match "wrong region in the scope -> 400 AuthorizationHeaderMalformed" "$out" '^400.*AuthorizationHeaderMalformed'
out=$($S3REQ -H 'x-amz-meta-a: b' --payload unsigned PUT demo signed-meta --data x)
expect_match "UNSIGNED-PAYLOAD accepted" "$out" '^200'
out=$($S3REQ --payload wrong-hash PUT demo k --data x)
expect_match "payload hash checked" "$out" '^400.*XAmzContentSHA256Mismatch'

# --- aws-chunked (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) ---------------------
head -c 200000 /dev/urandom >"$DEMO_TMP/chunked"
out=$($S3REQ --payload streaming --chunk 65536 --data-file "$DEMO_TMP/chunked" PUT demo chunked)
expect_match "aws-chunked upload" "$out" '^200'
$S3REQ GET demo chunked --out "$DEMO_TMP/chunked.back" >/dev/null
if cmp -s "$DEMO_TMP/chunked" "$DEMO_TMP/chunked.back"; then pass "aws-chunked body decoded"; else fail "aws-chunked body differs"; fi
out=$($S3REQ --payload streaming --bad-chunk-sig --data-file "$DEMO_TMP/chunked" PUT demo chunked2)
expect_match "bad chunk signature -> 403" "$out" '^403.*SignatureDoesNotMatch'

# --- keys are never paths -------------------------------------------------
mkdir -p "$DEMO_TMP/sentinel"
before=$(cd "$DEMO_TMP" && find . -path ./data1 -prune -o -path ./data2 -prune -o -print | sort)
for k in '../x' '../../sentinel/evil' '/etc/passwd' 'a//b' '..' '.' 'a/./b' '%2e%2e%2fx' \
	'ünïcødé/日本語/🙂' 'sp ace?&=#+' \
	"$(printf 'nul\\x00-like')" "$(head -c 1000 /dev/zero | tr '\0' k)"; do
	out=$($S3REQ PUT demo "$k" --data "content of $k")
	expect_match "put key '$(printf '%.40s' "$k")'" "$out" '^200'
	out=$($S3REQ GET demo "$k")
	expect_eq "get key '$(printf '%.40s' "$k")'" "$out" "200
content of $k"
done
out=$($S3REQ GET demo --query 'list-type=2&prefix=..')
expect_match "listing shows '../x' as a plain key" "$out" '<Key>\.\./x</Key>'
expect_match "listing shows '../../sentinel/evil'" "$out" '<Key>\.\./\.\./sentinel/evil</Key>'
out=$($S3REQ GET demo --query 'list-type=2&prefix=%2F')
expect_match "listing shows '/etc/passwd'" "$out" '<Key>/etc/passwd</Key>'
after=$(cd "$DEMO_TMP" && find . -path ./data1 -prune -o -path ./data2 -prune -o -print | sort)
expect_eq "nothing written outside the data directories" "$after" "$before"
stray=$(cd "$DEMO_TMP" && find data1 data2 -type f | grep -Ev '^data[12]/(buckets/[a-z0-9.-]+/[0-9a-f]{64}\.obj|storaged\.lock)$' || true)
expect_eq "data directories hold only hashed object files" "$stray" ""
out=$($S3REQ PUT demo "$(head -c 1025 /dev/zero | tr '\0' k)" --data x)
expect_match "1025-byte key refused" "$out" '^400.*KeyTooLongError'

# --- listings merged across backends, DeleteObjects ---------------------
if $PYTHON "$PS_TOP_SRCDIR/tests/demo/listing.py" "$DEMO_TMP/data1" "$DEMO_TMP/data2" \
	>"$DEMO_TMP/listing.out" 2>&1; then
	pass "listing and bulk delete ($(grep -c '^ok' "$DEMO_TMP/listing.out") checks)"
else
	fail "listing and bulk delete:"
	grep -v '^ok' "$DEMO_TMP/listing.out" >&2
fi

# --- Range ------------------------------------------------------------------
$S3REQ PUT demo range --data 0123456789 >/dev/null
r() { $CURL -H "Range: $1" -w ' %{http_code}' "$E/demo/range"; }
expect_eq "range bytes=2-4" "$(r bytes=2-4)" "234 206"
expect_eq "suffix range bytes=-3" "$(r bytes=-3)" "789 206"
expect_eq "suffix longer than object" "$(r bytes=-50)" "0123456789 206"
expect_eq "open-ended bytes=7-" "$(r bytes=7-)" "789 206"
expect_eq "end past the object is clamped" "$(r bytes=5-100)" "56789 206"
expect_eq "last byte" "$(r bytes=9-9)" "9 206"
expect_match "start past the end -> 416 InvalidRange" "$(r bytes=10-)" 'InvalidRange.*416$'
expect_match "empty suffix -> 416" "$(r bytes=-0)" 'InvalidRange.*416$'
expect_eq "malformed range is ignored" "$(r bytes=abc)" "0123456789 200"
expect_eq "multiple ranges serve the whole object" "$(r bytes=0-1,3-4)" "0123456789 200"
cr=$($CURL -D - -o /dev/null -H 'Range: bytes=2-4' "$E/demo/range" | tr -d '\r' | grep -i '^content-range:')
expect_eq "Content-Range header" "$cr" "Content-Range: bytes 2-4/10"

finish
