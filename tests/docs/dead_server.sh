#!/bin/sh
# SPDX-License-Identifier: MIT
# A documentation example whose server dies at start fails at once (issue
# 46): every block of README.md, docs/*.md and the manual pages that starts
# a process in the background and waits for it in a loop is run by
# tests/docs/doctest.py with that server replaced by one that exits 1 at
# once (nginx and haproxy first on PATH, demo/storaged in a build
# directory of fakes).  Each must fail, within 20 s, not spin to the
# block's 60 s timeout ("still running") or for ever.  The blocks
# themselves are the documents' own: a loop that waits without asking
# whether the server still runs (kill -0) fails here.
. "$PS_TOP_SRCDIR/tests/lib.sh"
for p in "$PS_TOP_BUILDDIR/poolshim" "$PS_TOP_BUILDDIR/demo/loadgen" "$SHIM"; do
	[ -x "$p" ] || [ -f "$p" ] || { echo "ERROR: $p not built"; exit 99; }
done
command -v curl >/dev/null || skip "curl not installed"

# The fakes: each says so and exits 1, as nginx does on a load_module it
# cannot open or a port already taken.
mkdir "$PST_TMP/bin" "$PST_TMP/build" "$PST_TMP/build/demo" "$PST_TMP/live"
for f in nginx haproxy; do
	printf '#!/bin/sh\necho "fake %s: dies at start" >&2\nexit 1\n' "$f" >"$PST_TMP/bin/$f"
	chmod +x "$PST_TMP/bin/$f"
done
printf '#!/bin/sh\necho "fake storaged: dies at start" >&2\nexit 1\n' >"$PST_TMP/build/demo/storaged"
chmod +x "$PST_TMP/build/demo/storaged"
ln -s "$PS_TOP_BUILDDIR/demo/loadgen" "$PST_TMP/build/demo/loadgen"
ln -s "$PS_TOP_BUILDDIR/demo/s3proxy" "$PST_TMP/build/demo/s3proxy"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$PS_TOP_BUILDDIR/poolshim" >"$PST_TMP/bin/poolshim"
chmod +x "$PST_TMP/bin/poolshim"
ln -s "$PS_TOP_BUILDDIR/tools/poolshim-stat" "$PST_TMP/bin/poolshim-stat"
ln -s "$PS_TOP_SRCDIR/scripts/poolshim-report.py" "$PST_TMP/bin/poolshim-report"

cd "$PS_TOP_SRCDIR" || exit 99
# The blocks that start something in the background and wait for it.
PYTHONDONTWRITEBYTECODE=1 python3 - README.md docs/*.md man/*.1 man/*.7 >"$PST_TMP/blocks" <<'PY'
import re, sys
sys.path.insert(0, "tests/docs")
import doctest as dt
bg = re.compile(r"(?<![&>|])&(?![&>])")
loop = re.compile(r"\b(?:until|while)\b|\bfor\s+\w+\s+in\s+\$\(seq\b")
for path in sys.argv[1:]:
    for b in dt.blocks_of(path):
        text = (b.note("output-of") or [b.text])[0]
        if b.note("skip") or not (b.lang in dt.SHELL_LANGS or b.note("output-of")):
            continue
        if bg.search(text) and loop.search(text):
            print(b.where())
PY
n=$(wc -l <"$PST_TMP/blocks")
[ "$n" -ge 6 ] && pass "$n blocks start a server and wait for it" ||
	fail "only $n blocks that start a server and wait for it: $(cat "$PST_TMP/blocks")"

# The examples run in directories under $PST_TMP/tmp: what is left running
# there after a block (a loop still waiting when doctest.py was killed) is
# this test's, and is killed.
mkdir "$PST_TMP/tmp"
kill_left() {
	for d in /proc/[0-9]*; do
		case $(readlink "$d/cwd" 2>/dev/null) in
		"$PST_TMP/tmp"/*) kill -KILL "${d#/proc/}" 2>/dev/null ;;
		esac
	done
}
at_exit kill_left
while read -r where; do
	start=$(date +%s)
	env -u STACK_DIR PATH="$PST_TMP/bin:$PATH" PS_TOP_BUILDDIR="$PST_TMP/build" \
		POOLSHIM_LIVE_DIR="$PST_TMP/live" PYTHONDONTWRITEBYTECODE=1 TMPDIR="$PST_TMP/tmp" \
		timeout -s KILL 30 python3 tests/docs/doctest.py --only "$where" "${where%%:*}" \
		>"$PST_TMP/out" 2>&1
	rc=$?
	kill_left
	took=$(($(date +%s) - start))
	if grep -q "^SKIP: $where" "$PST_TMP/out"; then
		echo "SKIP: $where: $(sed -n "s|^SKIP: $where: ||p" "$PST_TMP/out")"
	elif [ $rc = 1 ] && grep -q "^FAIL: $where: exit status" "$PST_TMP/out" && [ "$took" -lt 20 ]; then
		pass "$where: the server died, the block failed in ${took}s"
	else
		fail "$where: exit $rc after ${took}s (want a failure within 20 s): $(grep -E '^(FAIL|ok)' "$PST_TMP/out")"
	fi
done <"$PST_TMP/blocks"
finish
