#!/bin/sh
# SPDX-License-Identifier: MIT
# The proxy under hostile clients: oversized heads (431), slowloris (cut off
# while others are served), request smuggling (400), oversized bodies (413),
# and the connection cap.  Every refusal must be S3 error XML.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

start_stack --header-timeout 2s --max-header 8KiB --max-body 1MiB --max-conns 40
$S3REQ PUT bkt >/dev/null

out=$($RAWHTTP bigheader 127.0.0.1 "$PORT_proxy" 20000 2>&1)
expect_eq "20 KB header -> 431" "$out" "431"
out=$($RAWHTTP bigheader 127.0.0.1 "$PORT_proxy" 200000 2>&1)
expect_eq "200 KB header -> 431" "$out" "431"
out=$($RAWHTTP bigheader 127.0.0.1 "$PORT_proxy" 4000 2>&1)
expect_eq "4 KB header is fine (404: anonymous, no such bucket)" "$out" "404"

for c in cl-te te-cl cl-cl te-gzip te-te cl-space bad-cl; do
	out=$($RAWHTTP smuggle 127.0.0.1 "$PORT_proxy" $c 2>&1)
	expect_eq "smuggling attempt $c -> one 400, nothing smuggled" "$out" "400"
done

out=$($RAWHTTP slowloris 127.0.0.1 "$PORT_proxy" 10 2>&1)
cut=$(printf '%s\n' "$out" | sed -n 's/^cut after \([0-9]*\)\..*/\1/p')
worst=$(printf '%s\n' "$out" | sed -n 's/^normal max \([0-9]*\)\..*/\1/p')
if [ -n "$cut" ] && [ "$cut" -le 4 ]; then pass "slowloris cut off ($out)"; else fail "slowloris not cut off in time: $out"; fi
if [ -n "$worst" ] && [ "$worst" -lt 2 ]; then pass "normal client served meanwhile"; else fail "normal client stalled: $out"; fi

head -c 2000000 /dev/zero >"$DEMO_TMP/2m"
out=$($S3REQ PUT bkt big --data-file "$DEMO_TMP/2m" 2>&1)
expect_match "body over --max-body -> 413 EntityTooLarge" "$out" '^413.*EntityTooLarge'
out=$($S3REQ PUT bkt ok --data small)
expect_match "the proxy still serves after all that" "$out" '^200'

# The connection cap: 60 idle connections against a cap of 40.
out=$($PYTHON - 127.0.0.1 "$PORT_proxy" <<'PY'
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
socks, refused = [], 0
for i in range(60):
    s = socket.create_connection((host, port))
    socks.append(s)
for s in socks[40:]:
    s.settimeout(3)
    try:
        if b"503" in s.recv(4096) :
            refused += 1
    except socket.timeout:
        pass
print(refused)
PY
)
# Exactly 20 unless a connection of an earlier check is still closing.
if [ "$out" -ge 20 ] 2>/dev/null && [ "$out" -le 22 ]; then
	pass "connections over the cap get 503 SlowDown ($out of 60)"
else
	fail "connection cap: $out of 60 connections refused, want 20"
fi
sleep 0.5
out=$($S3REQ GET bkt ok)
expect_match "served again once they are gone" "$out" '^200'

# SIGTERM while an upload is in flight: it completes, then the proxy exits.
$PYTHON - >"$DEMO_TMP/slowput.out" 2>&1 <<'PY' &
import http.client, os, sys, time, urllib.parse
sys.path.insert(0, os.path.join(os.environ["PS_TOP_SRCDIR"], "tests", "demo"))
import s3req
class Slow(http.client.HTTPConnection):
    def send(self, data):
        if isinstance(data, bytes) and len(data) > 100000:
            for i in range(0, len(data), 1 << 17):
                super().send(data[i:i + (1 << 17)])
                time.sleep(0.2)
        else:
            super().send(data)
u = urllib.parse.urlparse(os.environ["S3_ENDPOINT"])
print("started", flush=True)
st, _, _ = s3req.request("PUT", "bkt", "inflight", os.urandom(1000000),
                         s3req.Opts(payload="unsigned"), Slow(u.hostname, u.port, timeout=30))
print("status", st)
PY
slow=$!
while ! grep -q started "$DEMO_TMP/slowput.out" 2>/dev/null; do sleep 0.1; done
sleep 0.3
kill -TERM "$PID_proxy"
wait "$slow"
expect_eq "upload in flight at SIGTERM completes" "$(tail -n 1 "$DEMO_TMP/slowput.out")" "status 200"
i=0
while kill -0 "$PID_proxy" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
wait "$PID_proxy"
expect_eq "proxy exits 0 after SIGTERM" "$?" 0
DEMO_PIDS=$(echo "$DEMO_PIDS" | sed "s/ $PID_proxy\b//")
expect_match "proxy logged a clean stop" "$(cat "$DEMO_TMP/proxy.err")" 'waiting for 1 connection.*stopped'

finish
