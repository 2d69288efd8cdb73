#!/bin/sh
# SPDX-License-Identifier: MIT
# Kill-a-node soak under the shim: loadgen --verify drives mixed operations
# (4 KiB-4 MiB) through s3proxy into three storaged nodes, every process
# under libpoolshim.so, while one node and then another is killed with
# SIGKILL and restarted on the same data directory and port.  Checks:
#  - every PUT the proxy acknowledged (200) reads back whole afterwards,
#    with the MD5 of what loadgen sent, which is also the ETag it got;
#  - no GET returned wrong bytes (0 verify mismatches);
#  - operations failed only while a node was down (plus a short grace),
#    some did fail then (the kills bit), and everything after the last
#    restart succeeded; loadgen's error count matches its log;
#  - the poolshim JSON report of every process that exits normally
#    validates against the schema.
# SOAK_SECONDS (default 45) sets the load's length; the kills are placed
# at fixed fractions of it.  SOAK_SHIM=0 runs without the shim;
# SOAK_KEEP=DIR keeps the operation log and server logs of a failed run.
DEMO_SHIM=${SOAK_SHIM:-1}
. "$PS_TOP_SRCDIR/tests/demo/lib.sh"
if [ -n "$DEMO_PRELOAD" ] && demo_sanitized; then
	echo "the demo programs are built with ASan, which will not start behind the shim: running without it"
	DEMO_PRELOAD=
fi

secs=${SOAK_SECONDS:-45}
case $secs in
''|*[!0-9]*) echo "SOAK_SECONDS must be a whole number of seconds" >&2; exit 99 ;;
esac
[ "$secs" -ge 20 ] || { echo "SOAK_SECONDS must be at least 20" >&2; exit 99; }
down=3          # seconds a killed node stays down
grace=1500      # ms after a restart in which a failure still counts as the outage

POOLSHIM_STATS=$DEMO_TMP/report-%e-%p.json
POOLSHIM_STATS_FORMAT=json
export POOLSHIM_STATS POOLSHIM_STATS_FORMAT

ms() { date +%s%3N; }

start_bg node1 "$STORAGED" --dir "$DEMO_TMP/data1" --port 0
start_bg node2 "$STORAGED" --dir "$DEMO_TMP/data2" --port 0
start_bg node3 "$STORAGED" --dir "$DEMO_TMP/data3" --port 0
printf '%s %s\n' "$DEMO_AK" "$DEMO_SK" >"$DEMO_TMP/creds"
start_bg proxy "$S3PROXY" --port 0 --credentials "$DEMO_TMP/creds" \
	--backend "http://127.0.0.1:$PORT_node1" --backend "http://127.0.0.1:$PORT_node2" \
	--backend "http://127.0.0.1:$PORT_node3"
S3_ENDPOINT=http://127.0.0.1:$PORT_proxy
AWS_ACCESS_KEY_ID=$DEMO_AK
AWS_SECRET_ACCESS_KEY=$DEMO_SK
export S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY

# loadgen itself runs under the shim too.
if [ -n "$DEMO_PRELOAD" ]; then
	LD_PRELOAD=$DEMO_PRELOAD "$LOADGEN" --bucket soak --op mix --mix put=40,get=45,delete=5,list=10 \
		--size 4KiB-4MiB --concurrency 6 --duration "${secs}s" --warmup 0 --verify --timeout 20s \
		--json "$DEMO_TMP/lg.json" --op-log "$DEMO_TMP/ops.log" \
		>"$DEMO_TMP/loadgen.out" 2>"$DEMO_TMP/loadgen.err" &
else
	"$LOADGEN" --bucket soak --op mix --mix put=40,get=45,delete=5,list=10 \
		--size 4KiB-4MiB --concurrency 6 --duration "${secs}s" --warmup 0 --verify --timeout 20s \
		--json "$DEMO_TMP/lg.json" --op-log "$DEMO_TMP/ops.log" \
		>"$DEMO_TMP/loadgen.out" 2>"$DEMO_TMP/loadgen.err" &
fi
lg=$!
DEMO_PIDS="$DEMO_PIDS $lg"
t0=$(ms)

# kill_restart NODE NEWNAME: SIGKILL NODE, keep it down $down s, start
# NEWNAME on the same directory and port; appends "KILL_MS UP_MS" to
# $DEMO_TMP/outages.
kill_restart() {
	# (start_bg sets pid and port itself: other names here.)
	eval "kpid=\$PID_$1 kport=\$PORT_$1"
	kdir=$(tr '\0' '\n' <"/proc/$kpid/cmdline" | sed -n '/^--dir$/{n;p}')
	k=$(ms)
	kill -KILL "$kpid"
	wait "$kpid" 2>/dev/null
	DEMO_PIDS=$(echo "$DEMO_PIDS" | sed "s/ $kpid\b//")
	# A killed process leaves its live-counter file; it is ours to remove.
	rm -f "/dev/shm/poolshim-$kpid.stats" /dev/shm/poolshim-"$kpid"-*.stats
	sleep "$down"
	start_bg "$2" "$STORAGED" --dir "$kdir" --port "$kport"
	u=$(ms)
	echo "$k $u" >>"$DEMO_TMP/outages"
	echo "killed $1 (pid $kpid) at +$(((k - t0) / 1000)) s, $2 up on port $kport after $((u - k)) ms"
}

# Let the load run a while first so plenty of objects exist before the kill.
sleep $((secs / 4))
kill_restart node2 node2b
sleep $((secs / 3))
kill_restart node3 node3b

wait "$lg"
lgrc=$?
DEMO_PIDS=$(echo "$DEMO_PIDS" | sed "s/ $lg\b//")
echo "loadgen exited $lgrc after $((($(ms) - t0) / 1000)) s:"
sed -n '/^op /,$p' "$DEMO_TMP/loadgen.out"

# Everything from here on reads the final state through the restarted nodes.
tc=$(ms)
$PYTHON - "$DEMO_TMP/ops.log" "$DEMO_TMP/outages" "$DEMO_TMP/lg.json" "$grace" \
	>"$DEMO_TMP/check.out" 2>&1 <<'PY'
import hashlib, http.client, json, os, sys, threading, urllib.parse
sys.path.insert(0, os.path.join(os.environ["PS_TOP_SRCDIR"], "tests", "demo"))
import s3req

oplog, outages_f, lgjson, grace = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
outages = [tuple(map(int, l.split())) for l in open(outages_f)]
print("kills and restarts (ms):", outages)
ops = []
for line in open(oplog):
    f = line.rstrip("\n").split(" ", 8)
    ops.append(dict(start=int(f[0]), end=int(f[1]), op=f[2], ok=f[3] == "ok", key=f[4],
                    size=f[5], md5=f[6], etag=f[7], detail=f[8]))
bad = 0
def problem(msg):
    global bad
    bad += 1
    if bad <= 20:
        print("FAIL:", msg)

# Failures only while a node was down.
def in_outage(o):
    return any(o["end"] >= k and o["start"] <= u + grace for k, u in outages)
errs = [o for o in ops if not o["ok"]]
# A DELETE that failed during an outage may still have removed the object
# (the node can die between doing it and answering), so a later 404 for
# that key is the outage's doing too.
failed_del = {}
for o in errs:
    if o["op"] == "delete" and in_outage(o):
        failed_del.setdefault(o["key"], o["start"])
def excused(o):
    return "404" in o["detail"] and o["key"] in failed_del and failed_del[o["key"]] < o["start"]
outside = [o for o in errs if not in_outage(o) and not excused(o)]
nexcused = sum(1 for o in errs if not in_outage(o) and excused(o))
if nexcused:
    print(f"{nexcused} 404(s) after a DELETE that failed during an outage (its outcome unknown)")
inside = sum(1 for o in errs if in_outage(o))
for o in outside[:10]:
    problem(f"{o['op']} {o['key']} failed outside any outage ({o['start']}-{o['end']}): {o['detail']}")
    for h in ops if o["key"] != "-" else []:
        if h["key"] == o["key"]:
            print(f"    {h['start']}-{h['end']} {h['op']} {'ok' if h['ok'] else 'err'} {h['detail']}")
if outside:
    problem(f"{len(outside)} failure(s) outside the outages")
if inside == 0:
    problem("no operation failed while a node was down: did the kill happen?")
for k, u in outages:
    late = [o["end"] - u for o in errs if k <= o["end"] <= u + grace]
    print(f"outage of {u - k} ms: {sum(1 for o in errs if o['end'] >= k and o['start'] <= u + grace)} "
          f"failure(s), the last ending {max(late) if late else '-'} ms after the restart")
mism = [o for o in errs if "VerifyMismatch" in o["detail"]]
if mism:
    problem(f"{len(mism)} GET(s) returned wrong bytes")
last_up = max(u for _, u in outages)
after = [o for o in ops if o["start"] > last_up + grace]
if not any(o["ok"] for o in after):
    problem("nothing succeeded after the last restart")

# loadgen's own totals agree with its log.
j = json.load(open(lgjson))
if j["mismatches"] != 0:
    problem(f"loadgen counted {j['mismatches']} verify mismatch(es)")
if j["ops"]["total"]["errors"] != len(errs):
    problem(f"loadgen reports {j['ops']['total']['errors']} errors, its log {len(errs)}")

# Every acknowledged PUT not deleted since (or being deleted) reads back whole.
deleted = {o["key"] for o in ops if o["op"] == "delete"}
acked = [o for o in ops if o["op"] == "put" and o["ok"] and o["key"] not in deleted]
first_kill = min(k for k, _ in outages)
before = sum(1 for o in acked if o["end"] < first_kill)
if before == 0:
    problem("no PUT was acknowledged before the first kill")
u = urllib.parse.urlparse(os.environ["S3_ENDPOINT"])
opts = s3req.Opts(payload="unsigned")
nbytes = 0
lock = threading.Lock()
def reader(part):
    # Sockets and MD5 release the GIL: a few readers keep the stack busy.
    global nbytes
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    for o in part:
        if o["etag"] != o["md5"]:
            with lock:
                problem(f"PUT {o['key']}: ETag {o['etag']} is not the MD5 of what was sent, {o['md5']}")
        try:
            st, _, body = s3req.request("GET", "soak", o["key"], b"", opts, conn)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            with lock:
                problem(f"GET {o['key']}: {e}")
            continue
        md5 = hashlib.md5(body).hexdigest()
        with lock:
            nbytes += len(body)
            if st != 200 or len(body) != int(o["size"]) or md5 != o["md5"]:
                problem(f"acknowledged {o['key']}: status {st}, {len(body)} of {o['size']} bytes, "
                        f"md5 {md5} want {o['md5']}")
    conn.close()
threads = [threading.Thread(target=reader, args=(acked[i::4],)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"ops {len(ops)}, failed {len(errs)} (all during {len(outages)} outage(s): "
      f"{not outside}), acknowledged puts read back {len(acked)} "
      f"({before} before the first kill, {nbytes / 1048576:.0f} MiB), problems {bad}")
sys.exit(1 if bad else 0)
PY
rc=$?
echo "checks took $((($(ms) - tc) / 1000)) s"
if [ $rc -eq 0 ]; then
	sed -n 's/^outage/ok: outage/p' "$DEMO_TMP/check.out"
	pass "soak: $(tail -n 1 "$DEMO_TMP/check.out")"
else
	fail "soak checks failed:"
	cat "$DEMO_TMP/check.out" >&2
	if [ -n "${SOAK_KEEP:-}" ]; then
		mkdir -p "$SOAK_KEEP" && cp "$DEMO_TMP"/*.log "$DEMO_TMP"/*.err "$DEMO_TMP"/outages "$SOAK_KEEP"/
	fi
fi

# Stop the servers the normal way and check the reports they write.
expected=$lg
for pid in $DEMO_PIDS; do
	kill -TERM "$pid"
done
for pid in $DEMO_PIDS; do
	wait "$pid"
	rc=$?
	expect_eq "pid $pid exits 0 after SIGTERM" "$rc" 0
	expected="$expected $pid"
done
DEMO_PIDS=""
if [ -n "$DEMO_PRELOAD" ]; then
	for pid in $expected; do
		f=$(ls "$DEMO_TMP"/report-*-"$pid".json 2>/dev/null)
		if [ -z "$f" ]; then
			fail "no poolshim report from pid $pid"
		elif $PYTHON "$PS_TOP_SRCDIR/tests/report_schema.py" "$f" >"$DEMO_TMP/schema.out" 2>&1; then
			pass "report $(basename "$f") validates"
		else
			fail "report $(basename "$f") does not validate: $(cat "$DEMO_TMP/schema.out")"
		fi
	done
fi
finish
