#!/bin/sh
# SPDX-License-Identifier: MIT
# The documentation's shell examples as tests (tests/docs/doctest.py says
# how they are found, run and annotated): README.md, docs/*.md and the
# manual pages, each unmarked example run against this build with the demo
# stack up under the shim, in a private live directory (so `poolshim stat`
# sees this test's processes only, and removes no other test's files).
. "$PS_TOP_SRCDIR/tests/lib.sh"
for p in "$PS_TOP_BUILDDIR/poolshim" "$PS_TOP_BUILDDIR/tools/poolshim-stat" \
	"$PS_TOP_BUILDDIR/demo/storaged" "$SHIM"; do
	[ -x "$p" ] || [ -f "$p" ] || { echo "ERROR: $p not built"; exit 99; }
done

# PATH: the built commands first, as `make install` would put them.
mkdir "$PST_TMP/bin" "$PST_TMP/live"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$PS_TOP_BUILDDIR/poolshim" >"$PST_TMP/bin/poolshim"
ln -s "$PS_TOP_BUILDDIR/tools/poolshim-stat" "$PST_TMP/bin/poolshim-stat"
ln -s "$PS_TOP_SRCDIR/scripts/poolshim-report.py" "$PST_TMP/bin/poolshim-report"
chmod +x "$PST_TMP/bin/poolshim"
PATH=$PST_TMP/bin:$PATH
STACK_DIR=$PST_TMP/stack
STACK_BUILDDIR=$PS_TOP_BUILDDIR
POOLSHIM_LIVE_DIR=$PST_TMP/live
PYTHONDONTWRITEBYTECODE=1
export PATH STACK_DIR STACK_BUILDDIR POOLSHIM_LIVE_DIR PYTHONDONTWRITEBYTECODE
at_exit "'$PS_TOP_SRCDIR/scripts/stack' down >/dev/null 2>&1"

# The runner itself: a failing example fails it, a skipped one does not.
printf '```sh\ntrue\n```\n\n<!-- docs-test: skip (a reason) -->\n```sh\nfalse\n```\n' >"$PST_TMP/good.md"
printf '```sh\necho fine\n```\n\n```sh\nfalse\n```\n' >"$PST_TMP/bad.md"
env -u STACK_DIR python3 "$PS_TOP_SRCDIR/tests/docs/doctest.py" "$PST_TMP/good.md" >"$PST_TMP/self" 2>&1 &&
	! env -u STACK_DIR python3 "$PS_TOP_SRCDIR/tests/docs/doctest.py" "$PST_TMP/bad.md" >>"$PST_TMP/self" 2>&1 ||
	{ echo "ERROR: the runner does not tell a failing example: $(cat "$PST_TMP/self")"; exit 99; }

# The nginx quick-starts copy /etc/nginx: say whether Debian's dynamic
# modules (load_module lines, issue 46) are in what they are run with.
if ls /etc/nginx/modules-enabled/*.conf >/dev/null 2>&1; then
	echo "nginx modules enabled: $(cd /etc/nginx/modules-enabled && echo *.conf)"
elif command -v nginx >/dev/null; then
	echo "no dynamic nginx module enabled: the quick-starts' load_module case is not exercised here"
fi

cd "$PS_TOP_SRCDIR" || exit 99
python3 "$PS_TOP_SRCDIR/tests/docs/doctest.py" "$@" README.md docs/*.md man/*.1 man/*.7
