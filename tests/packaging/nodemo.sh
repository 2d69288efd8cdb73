#!/bin/sh
# SPDX-License-Identifier: MIT
# ./configure --disable-demo needs none of the demo's and the tests'
# libraries: on a copy of the tree, with a pkg-config that knows no check,
# libcrypto or libssl and configure told there is no http_parser.h, the full
# configure fails naming Check, --disable-demo succeeds, builds
# libpoolshim.so and the tools but no demo, benchmark or test program, the
# library runs preloaded into true, and make check runs the smoke test.
# It configures and builds the tree once more, so it runs only on CI or
# when asked:
#   PS_SLOW=1 make check TESTS=tests/packaging/nodemo.sh
. "$PS_TOP_SRCDIR/tests/lib.sh"
if [ "${CI:-}" != true ] && [ "${PS_SLOW:-}" != 1 ]; then
	skip "configures and builds the tree once more: run with CI=true or PS_SLOW=1"
fi
command -v git >/dev/null && git -C "$PS_TOP_SRCDIR" rev-parse --git-dir >/dev/null 2>&1 ||
	skip "$PS_TOP_SRCDIR is not a git checkout: the build uses a copy git lists"
real_pc=$(command -v pkg-config) || skip "pkg-config not installed"

start=$(date +%s)
src=$PST_TMP/src
mkdir "$src"
(cd "$PS_TOP_SRCDIR" && git ls-files -z --cached --others --exclude-standard |
	tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
cat >"$PST_TMP/pkg-config" <<PC
#!/bin/sh
# pkg-config as on a machine without Check and OpenSSL's development files.
for a in "\$@"; do
	case \$a in check|check\\ *|libcrypto*|libssl*|openssl*) exit 1 ;; esac
done
exec $real_pc "\$@"
PC
chmod +x "$PST_TMP/pkg-config"
# No MAKEFLAGS from the make check running this test; nothing else it set.
hide() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PS_TOP_BUILDDIR -u PS_TOP_SRCDIR -u PS_SLOW -u CI \
		PKG_CONFIG="$PST_TMP/pkg-config" ac_cv_header_http_parser_h=no \
		ac_cv_lib_http_parser_http_parser_execute=no "$@"
}
(cd "$src" && autoreconf -fi) >"$PST_TMP/autoreconf.log" 2>&1 ||
	{ fail "autoreconf: $(tail -5 "$PST_TMP/autoreconf.log")"; finish; }

(cd "$src" && hide ./configure -q) >"$PST_TMP/full.log" 2>&1
rc=$?
[ $rc != 0 ] && grep -q 'Check not found' "$PST_TMP/full.log" &&
	pass "the full configure stops: $(grep 'Check not found' "$PST_TMP/full.log")" ||
	fail "the full configure without Check: exit $rc, $(tail -3 "$PST_TMP/full.log")"

(cd "$src" && hide ./configure -q --disable-demo) >"$PST_TMP/configure.log" 2>&1
rc=$?
[ $rc = 0 ] && pass "./configure --disable-demo without Check, libcrypto, http-parser" ||
	{ fail "./configure --disable-demo: exit $rc, $(tail -5 "$PST_TMP/configure.log")"; finish; }
(cd "$src" && hide make -j"$(nproc)") >"$PST_TMP/make.log" 2>&1
rc=$?
[ $rc = 0 ] && pass "make ($(($(date +%s) - start)) s so far)" ||
	{ fail "make: exit $rc, $(tail -10 "$PST_TMP/make.log")"; finish; }

for f in .libs/libpoolshim.so tools/poolshim-stat poolshim poolshim-report; do
	[ -e "$src/$f" ] || fail "$f not built"
done
for f in demo/storaged demo/s3proxy demo/loadgen bench/allocbench bench/iobench tests/unit/unit; do
	[ ! -e "$src/$f" ] || fail "$f built, though --disable-demo"
done
env LD_PRELOAD="$src/.libs/libpoolshim.so" POOLSHIM_STATS_FORMAT=json \
	POOLSHIM_STATS="$PST_TMP/true.json" true
rc=$?
[ $rc = 0 ] && [ -s "$PST_TMP/true.json" ] && pass "libpoolshim.so preloaded into true: exit 0, report written" ||
	fail "libpoolshim.so preloaded into true: exit $rc"

(cd "$src" && hide make check) >"$PST_TMP/check.log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^PASS: tests/packaging/smoke.sh' "$PST_TMP/check.log" &&
	pass "make check: $(grep -E '^(PASS|SKIP|FAIL):' "$PST_TMP/check.log" | tr '\n' ' ')" ||
	fail "make check: exit $rc, $(grep -E '^(PASS|SKIP|FAIL|ERROR):' "$PST_TMP/check.log")"
echo "nodemo.sh took $(($(date +%s) - start)) s"
finish
