#!/bin/sh
# SPDX-License-Identifier: MIT
# The shim in front of a production S3 gateway: scripts/rgw brings up a
# one-node Ceph cluster with radosgw under libpoolshim.so; a 32 MiB object
# goes through radosgw (boto3, else the demo's loadgen) and through s3proxy
# --backend-auth in front of it, verified byte for byte; radosgw restarts
# off the shim (scripts/rgw restart, as scripts/demo --real does) and
# serves again; scripts/rgw clean (and restart over RGW_CLEAN_AT) empties
# the OSD and S3 works after it; then the cluster goes down and nothing of
# it may be left running.  Skips (77) only when the
# Ceph packages are absent and cannot be installed.
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"

RGW="$PS_TOP_SRCDIR/scripts/rgw"
RGW_TMP=$(mktemp -d "${TMPDIR:-/tmp}/psrgw.XXXXXX")
export RGW_BUILDDIR=$PS_TOP_BUILDDIR

rgw_cleanup() {
	st=$?
	"$RGW" down --dir "$RGW_TMP" >/dev/null 2>&1
	rm -rf "$RGW_TMP"
	(exit $st)
	demo_cleanup
}
trap 'rgw_cleanup' EXIT

t0=$(date +%s)
"$RGW" up --shim --dir "$RGW_TMP" >"$DEMO_TMP/rgw.env" 2>"$DEMO_TMP/rgw.err"
rc=$?
if [ $rc -eq 3 ]; then
	cat "$DEMO_TMP/rgw.err"
	echo "Ceph packages not available: skipped"
	exit 77
fi
if [ $rc -ne 0 ]; then
	fail "scripts/rgw up --shim: $(tail -n 20 "$DEMO_TMP/rgw.err")"
	finish
fi
pass "cluster up in $(($(date +%s) - t0)) s"
eval "$(cat "$DEMO_TMP/rgw.env")"
RGW_AK=$AWS_ACCESS_KEY_ID
RGW_SK=$AWS_SECRET_ACCESS_KEY
RGW_ENDPOINT=$S3_ENDPOINT

rgw_pid=$(sed -n 's/^radosgw //p' "$RGW_TMP/pids")
if grep -q libpoolshim "/proc/$rgw_pid/maps" 2>/dev/null; then
	pass "radosgw runs under the shim"
else
	fail "radosgw (pid $rgw_pid) has no libpoolshim.so mapped"
fi

head -c 33554432 /dev/urandom >"$DEMO_TMP/obj"
if $PYTHON -c 'import boto3' 2>/dev/null; then
	if $PYTHON - "$DEMO_TMP/obj" >"$DEMO_TMP/boto.out" 2>&1 <<'PY'
import os, sys, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"],
                  region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
data = open(sys.argv[1], "rb").read()
s3.create_bucket(Bucket="psrgw")
s3.put_object(Bucket="psrgw", Key="obj32", Body=data)
back = s3.get_object(Bucket="psrgw", Key="obj32")["Body"].read()
sys.exit(0 if back == data else 1)
PY
	then pass "boto3 put/get 32 MiB through radosgw under the shim"
	else fail "boto3 through radosgw: $(tail -n 5 "$DEMO_TMP/boto.out")"
	fi
else
	for op in put get; do
		if "$LOADGEN" -e "$RGW_ENDPOINT" -o $op -s 32MiB -c 1 -n 2 --objects 1 --verify \
			>"$DEMO_TMP/lg.out" 2>&1
		then pass "loadgen $op 32 MiB --verify through radosgw under the shim"
		else fail "loadgen $op through radosgw: $(tail -n 5 "$DEMO_TMP/lg.out")"
		fi
	done
fi

# s3proxy fronting RGW: it checks the client's signature and signs its own
# requests to radosgw with the RGW user's key.
printf '# test credentials\n%s %s\n' "$DEMO_AK" "$DEMO_SK" >"$DEMO_TMP/creds"
start_bg proxy "$S3PROXY" --port 0 --credentials "$DEMO_TMP/creds" \
	--backend "$RGW_ENDPOINT" --backend-auth "$RGW_AK:$RGW_SK:us-east-1"
for op in put get; do
	if "$LOADGEN" -e "http://127.0.0.1:$PORT_proxy" --access-key "$DEMO_AK" --secret-key "$DEMO_SK" \
		-b psproxy -o $op -s 32MiB -c 1 -n 2 --objects 1 --verify >"$DEMO_TMP/lg.out" 2>&1
	then pass "loadgen $op 32 MiB --verify through s3proxy in front of radosgw"
	else fail "loadgen $op through s3proxy: $(tail -n 5 "$DEMO_TMP/lg.out")"
	fi
done
if [ -n "$(sed -n 's/^radosgw //p' "$RGW_TMP/pids")" ] && kill -0 "$rgw_pid" 2>/dev/null; then
	pass "radosgw still running after the transfers"
else
	fail "radosgw died: $(tail -n 20 "$RGW_TMP/log/client.rgw.a.log")"
fi

# scripts/demo --real switches radosgw between plain and shimmed with
# restart: the gateway comes back on the same port, off the shim, and
# serves what the shimmed one stored.
if "$RGW" restart --dir "$RGW_TMP" >"$DEMO_TMP/restart.out" 2>&1; then
	new_pid=$(sed -n 's/^radosgw //p' "$RGW_TMP/pids")
	if [ -n "$new_pid" ] && [ "$new_pid" != "$rgw_pid" ] && kill -0 "$new_pid" 2>/dev/null &&
		! grep -q libpoolshim "/proc/$new_pid/maps" 2>/dev/null; then
		pass "scripts/rgw restart: radosgw $rgw_pid -> $new_pid, no longer under the shim"
	else
		fail "scripts/rgw restart: radosgw pid '$rgw_pid' -> '$new_pid' (or still shimmed)"
	fi
	rgw_pid=$new_pid
	if "$LOADGEN" -e "http://127.0.0.1:$PORT_proxy" --access-key "$DEMO_AK" --secret-key "$DEMO_SK" \
		-b psproxy -o get -s 32MiB -c 1 -n 2 --objects 1 --verify >"$DEMO_TMP/lg.out" 2>&1
	then pass "after the restart: loadgen get 32 MiB --verify through s3proxy and the new radosgw"
	else fail "after the restart: $(tail -n 5 "$DEMO_TMP/lg.out")"
	fi
else
	fail "scripts/rgw restart: $(tail -n 10 "$DEMO_TMP/restart.out")"
fi

# Long PUT runs would fill the OSD (scripts/demo never deletes what it
# PUTs): clean empties it, and restart does when the OSD is fuller than
# RGW_CLEAN_AT per cent (-1: always).  Afterwards the buckets are gone
# and S3 works as before: the next PUT creates its bucket again.
buckets() {
	timeout 60 radosgw-admin -c "$RGW_TMP/ceph.conf" bucket list 2>/dev/null | tr -d ' \n'
}
if "$RGW" clean --dir "$RGW_TMP" >"$DEMO_TMP/clean.out" 2>&1; then
	pass "scripts/rgw clean: $(tail -n 1 "$DEMO_TMP/clean.out")"
else
	fail "scripts/rgw clean: $(tail -n 5 "$DEMO_TMP/clean.out")"
fi
expect_eq "no bucket left after scripts/rgw clean" "$(buckets)" "[]"
if "$LOADGEN" -e "http://127.0.0.1:$PORT_proxy" --access-key "$DEMO_AK" --secret-key "$DEMO_SK" \
	-b psproxy -o put -s 16MiB -c 1 -n 2 --verify >"$DEMO_TMP/lg.out" 2>&1
then pass "after clean: loadgen put 16 MiB through s3proxy creates its bucket again"
else fail "after clean: $(tail -n 5 "$DEMO_TMP/lg.out")"
fi
if RGW_CLEAN_AT=-1 "$RGW" restart --dir "$RGW_TMP" >"$DEMO_TMP/restart.out" 2>"$DEMO_TMP/restart.err"; then
	expect_match "restart over RGW_CLEAN_AT empties the OSD first" \
		"$(cat "$DEMO_TMP/restart.err")" "emptying it first"
	expect_eq "no bucket left after that restart" "$(buckets)" "[]"
else
	fail "RGW_CLEAN_AT=-1 scripts/rgw restart: $(tail -n 10 "$DEMO_TMP/restart.err")"
fi

pids=$(cat "$RGW_TMP/pids")
"$RGW" down --dir "$RGW_TMP" >"$DEMO_TMP/down.out" 2>&1 || fail "scripts/rgw down: $(cat "$DEMO_TMP/down.out")"
left=
for pid in $(echo "$pids" | awk '{print $2}'); do
	# A zombie waiting for its reaper has stopped running; anything else
	# under that pid is left over.
	st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
	[ -n "$st" ] && [ "$st" != Z ] && left="$left $pid($st)"
done
expect_eq "nothing of the cluster left running after down" "$left" ""
[ -e "$RGW_TMP/pids" ] && fail "pid file left after down"
echo "rgw test took $(($(date +%s) - t0)) s"
finish
