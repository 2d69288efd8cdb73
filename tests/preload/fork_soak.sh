#!/bin/sh
# SPDX-License-Identifier: MIT
# A threaded program forking FORK_SOAK times (default 1000) while its other
# threads allocate and do O_DIRECT and pipe I/O (tests/preload/fork_soak).
# No child may hang or fail; every child's report must exist, name its own
# pid, and count exactly that child's /dev/null writes; the parent's report
# counts the parent's writes only.
. "$PS_TOP_SRCDIR/tests/lib.sh"
n=${FORK_SOAK:-1000}
mkdir "$PST_TMP/r"
start=$(date +%s)
timeout 600 env POOLSHIM_STATS="$PST_TMP/r/%p.json" POOLSHIM_STATS_FORMAT=json \
	LD_PRELOAD="$SHIM" "$PRELOAD_BIN/fork_soak" "$n" >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
[ $rc = 77 ] && skip "$(cat "$PST_TMP/err")"
echo "$n forks in $(($(date +%s) - start)) s"
if [ $rc != 0 ] || ! grep -q '^soak ok' "$PST_TMP/out"; then
	fail "fork_soak exit $rc: $(tail -5 "$PST_TMP/err")"
	finish
fi
pass "$n forks from a threaded program: no child hung or failed, data checked"
python3 - "$PST_TMP/out" "$PST_TMP/r" "$PS_TOP_SRCDIR/tests" <<'PY'
import json, os, sys
sys.path.insert(0, sys.argv[3])
import report_schema
out, rdir = sys.argv[1], sys.argv[2]
children, parent = {}, None
for line in open(out):
    f = line.split()
    if f[0] == "child":
        children[int(f[1])] = int(f[2])
    elif f[0] == "parent":
        parent = (int(f[1]), int(f[2]))
def null_writes(r):
    return sum(c["calls"] for c in r["calls"] if c["call"] == "write" and c["kind"] == "other")
bad = []
for pid, index in children.items():
    p = os.path.join(rdir, "%d.json" % pid)
    if not os.path.exists(p):
        bad.append("child %d (index %d): no report" % (pid, index))
        continue
    r = json.load(open(p))
    errs = report_schema.validate(r)
    if errs:
        bad.append("child %d: schema: %s" % (pid, errs[:3]))
    if r["pid"] != pid:
        bad.append("child %d: report names pid %d" % (pid, r["pid"]))
    want = 1 + index % 7
    if null_writes(r) != want:
        bad.append("child %d: %d /dev/null writes counted, it made %d" % (pid, null_writes(r), want))
ppid, pw = parent
r = json.load(open(os.path.join(rdir, "%d.json" % ppid)))
if null_writes(r) != pw:
    bad.append("parent: %d /dev/null writes counted, it made %d" % (null_writes(r), pw))
extra = len(os.listdir(rdir)) - len(children) - 1
if extra:
    bad.append("%d report(s) from processes that are neither the parent nor a child" % extra)
for b in bad[:20]:
    print("FAIL:", b)
print("checked %d child reports and the parent's (%d writes)" % (len(children), pw))
sys.exit(1 if bad else 0)
PY
[ $? = 0 ] && pass "every report found, its own pid, its own counts" || fail "reports lost or mixed"
finish
