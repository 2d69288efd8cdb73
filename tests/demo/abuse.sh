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
expect_eq "4 KB header is fine (403: no auth)" "$out" "403"

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
expect_eq "connections over the cap get 503 SlowDown" "$out" "20"
out=$($S3REQ GET bkt ok)
expect_match "served again once they are gone" "$out" '^200'

finish
