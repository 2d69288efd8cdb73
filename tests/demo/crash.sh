#!/bin/sh
# SPDX-License-Identifier: MIT
# Crash safety of storaged: kill -9 it in the middle of a write-heavy load
# (with fsync on, as deployed), restart it on the same data, and check that
# every object it lists reads back whole, matching its ETag, and that no
# temporary file is left visible.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

start_bg node "$STORAGED" --dir "$DEMO_TMP/data" --port 0
E=http://127.0.0.1:$PORT_node
"$LOADGEN" --endpoint "$E" --access-key x --secret-key y --bucket crash --op put \
	--size 4KiB-512KiB --concurrency 4 --duration 20s --warmup 0 >"$DEMO_TMP/lg.out" 2>&1 &
lg=$!
DEMO_PIDS="$DEMO_PIDS $lg"
sleep 2
kill -9 "$PID_node"
wait "$PID_node" 2>/dev/null
DEMO_PIDS=$(echo "$DEMO_PIDS" | sed "s/ $PID_node\b//")
kill "$lg"
wait "$lg" 2>/dev/null
DEMO_PIDS=$(echo "$DEMO_PIDS" | sed "s/ $lg\b//")

tmpfiles=$(find "$DEMO_TMP/data/tmp" -type f | wc -l)
echo "after kill -9: $tmpfiles temporary file(s) in flight"
start_bg node2 "$STORAGED" --dir "$DEMO_TMP/data" --port 0
expect_eq "temporary files removed at restart" "$(find "$DEMO_TMP/data/tmp" -type f | wc -l)" 0
S3_ENDPOINT=http://127.0.0.1:$PORT_node2 AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y \
	$PYTHON - "$DEMO_TMP/data" >"$DEMO_TMP/check.out" 2>&1 <<'PY'
import glob, hashlib, os, re, sys
sys.path.insert(0, os.path.join(os.environ["PS_TOP_SRCDIR"], "tests", "demo"))
import s3req
keys, token = [], None
while True:
    q = "list-type=2" + (f"&continuation-token={token}" if token else "")
    st, _, x = s3req.request("GET", "crash", None, b"", s3req.Opts(query=q))
    x = x.decode()
    for k, etag, size in re.findall(r"<Key>(.*?)</Key>.*?<ETag>&quot;(.*?)&quot;</ETag><Size>(\d+)</Size>", x):
        keys.append((k, etag, int(size)))
    m = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>", x)
    if not m:
        break
    token = m.group(1)
bad = 0
for k, etag, size in keys:
    st, h, body = s3req.request("GET", "crash", k)
    if st != 200 or len(body) != size or hashlib.md5(body).hexdigest() != etag:
        bad += 1
        print(f"bad object {k}: status {st}, {len(body)} of {size} bytes")
files = len(glob.glob(os.path.join(sys.argv[1], "buckets", "crash", "*.obj")))
print(f"objects {len(keys)} files {files} bad {bad}")
sys.exit(1 if bad or not keys or files != len(keys) else 0)
PY
rc=$?
if [ $rc -eq 0 ]; then
	pass "every object listed after the crash is whole: $(tail -n 1 "$DEMO_TMP/check.out")"
else
	fail "objects damaged or missing after the crash:"
	cat "$DEMO_TMP/check.out" >&2
fi
finish
