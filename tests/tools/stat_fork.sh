#!/bin/sh
# SPDX-License-Identifier: MIT
# Fork children in `poolshim stat`: a child that is still running a second
# after the fork (a server's worker) publishes a live file of its own, with
# its own counts, and removes it when it exits; a child that ends at once
# with _exit() leaves no file; the parent's file keeps the parent's counts.
# This test looks at /dev/shm itself: the shim publishes there, as by default.
PST_LIVE_DIR=default
. "$PS_TOP_SRCDIR/tests/lib.sh"
STAT="$PS_TOP_BUILDDIR/tools/poolshim-stat"
NS=$(stat -L -c %i /proc/self/ns/pid)
# On tmpfs: a live file takes blocks only while the directory keeps a
# quarter free, which a disk shared with other work may not.
D=$(mktemp -d /dev/shm/pst-stat-fork.XXXXXX) || skip "no /dev/shm"
at_exit "rm -rf '$D'"
command -v python3 >/dev/null 2>&1 || skip "python3 not installed"

cat >"$PST_TMP/fork.py" <<'PY'
import os, sys, time
null = os.open("/dev/null", os.O_WRONLY)
quick = os.fork()
if quick == 0:                       # does a little, then _exit: no file
    for _ in range(200):
        os.write(null, b"q")
    os._exit(0)
worker = os.fork()
if worker == 0:                      # lives on, like a server's worker
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        for _ in range(100):
            os.write(null, b"wx")
        time.sleep(0.01)
    sys.exit(0)                      # a normal exit: the file goes
os.waitpid(quick, 0)
print(f"pids {os.getpid()} {worker} {quick}", flush=True)
os.waitpid(worker, 0)
print("done", flush=True)
time.sleep(float(sys.argv[2]))
PY
env POOLSHIM_STATS=off POOLSHIM_LIVE_DIR="$D" LD_PRELOAD="$SHIM" python3 "$PST_TMP/fork.py" 3 2 \
	>"$PST_TMP/out" 2>&1 &
py=$!
at_exit "kill $py 2>/dev/null"
for _ in $(seq 100); do grep -q '^pids' "$PST_TMP/out" && break; sleep 0.1; done
set -- $(sed -n 's/^pids //p' "$PST_TMP/out")
parent=$1 worker=$2 quick=$3
[ -n "$quick" ] || { fail "no pids: $(cat "$PST_TMP/out")"; finish; }
sleep 1.8
[ -f "$D/poolshim-$worker-$NS.stats" ] && pass "a worker running after a second has its own file" ||
	fail "no live file for the worker: $(ls "$D")"
[ ! -e "$D/poolshim-$quick-$NS.stats" ] && pass "a child that _exit()ed at once left none" ||
	fail "the quick child left a file"
"$STAT" --live-dir "$D" --json "$worker" "$parent" >"$PST_TMP/j" 2>"$PST_TMP/j.err"
python3 - "$PST_TMP/j" "$worker" "$parent" <<'PY' >"$PST_TMP/v"
import json, sys
rows = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        rows[r["pid"]] = r
w, p = int(sys.argv[2]), int(sys.argv[3])
def writes(r):
    return sum(c["calls"] for c in r["calls"] if c["call"] == "write")
def wbytes(r):
    return sum(c["bytes"] for c in r["calls"] if c["call"] == "write")
if w not in rows or p not in rows:
    print(f"FAIL: stat shows pids {sorted(rows)}, want {w} and {p}")
else:
    # The worker writes 2 bytes a call, 100 calls a round: its counts carry
    # the calls from before its file (moved in) and go on rising.
    n, b = writes(rows[w]), wbytes(rows[w])
    print(f"ok: worker {n} writes, {b} bytes" if n >= 1000 and b == 2 * n
          else f"FAIL: worker writes {n}, bytes {b}")
    # The parent's own writes are its one or two lines to stdout.
    pn = writes(rows[p])
    print(f"ok: parent {pn} writes, its own" if pn <= 3 else f"FAIL: parent shows {pn} writes (the children's?)")
PY
while read -r line; do
	case $line in ok:*) pass "${line#ok: }" ;; *) fail "$line" ;; esac
done <"$PST_TMP/v"
for _ in $(seq 60); do grep -q '^done' "$PST_TMP/out" && break; sleep 0.1; done
[ ! -e "$D/poolshim-$worker-$NS.stats" ] && pass "the worker's file is gone after its exit" ||
	fail "the worker's file outlived it"
wait $py
finish
