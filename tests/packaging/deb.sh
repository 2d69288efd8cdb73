#!/bin/sh
# SPDX-License-Identifier: MIT
# The Debian package: dpkg-buildpackage -b on a copy of the tree (what git
# tracks plus new files it does not ignore, so uncommitted work is what gets
# tested) builds poolshim; its contents are checked (the documents it ships
# whole, its control texts true), the extracted commands
# and library run, lintian finds no error, and on CI (as root, when no
# poolshim package is installed already) it is installed with dpkg -i, run
# from /usr/bin and removed again.  It builds the library once more, so it
# runs only on CI or when asked:
#   PS_SLOW=1 make check TESTS=tests/packaging/deb.sh
#   PS_DEB_KEEP=DIR   build in DIR and keep it (default: a temporary directory)
. "$PS_TOP_SRCDIR/tests/lib.sh"
if [ "${CI:-}" != true ] && [ "${PS_SLOW:-}" != 1 ]; then
	skip "builds the whole package (a minute or two): run with CI=true or PS_SLOW=1"
fi
for t in dpkg-buildpackage dh dpkg-deb git; do
	command -v $t >/dev/null || skip "$t not installed (apt-get install debhelper dpkg-dev git)"
done
git -C "$PS_TOP_SRCDIR" rev-parse --git-dir >/dev/null 2>&1 ||
	skip "$PS_TOP_SRCDIR is not a git checkout: the package is built from a copy git lists"

start=$(date +%s)
work=${PS_DEB_KEEP:-$PST_TMP}
rm -rf "$work/src" "$work/root"
mkdir -p "$work/src" "$work/root"
src="$work/src/poolshim"
mkdir "$src"
(cd "$PS_TOP_SRCDIR" && git ls-files -z --cached --others --exclude-standard |
	tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"

# The package's version is the one configure.ac gives the program.
ver=$(sed -n 's/^AC_INIT(\[poolshim\], \[\([^]]*\)\].*/\1/p' "$src/configure.ac")
dver=$(cd "$src" && dpkg-parsechangelog -S Version)
case $dver in
"$ver"|"$ver"-*) pass "debian/changelog version $dver matches configure.ac's $ver" ;;
*) fail "debian/changelog says $dver, configure.ac $ver" ;;
esac

# Without this make check's MAKEFLAGS (its TESTS=... among them), the
# package's own make runs as if started by hand.
(cd "$src" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PS_TOP_BUILDDIR -u PS_TOP_SRCDIR \
	dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1
rc=$?
if [ $rc != 0 ]; then
	fail "dpkg-buildpackage exited $rc; the end of its log:"
	tail -40 "$work/build.log"
	finish
fi
pass "dpkg-buildpackage -b -us -uc ($(($(date +%s) - start)) s)"
grep -q 'PASS: tests/packaging/smoke.sh' "$work/build.log" &&
	pass "the package build ran its smoke test" || fail "no smoke test in the package build"

# nocheck: the override that runs the smoke test does nothing.
n=$(cd "$src" && DEB_BUILD_OPTIONS=nocheck env -u MAKEFLAGS -u MAKELEVEL \
	make -s -n -f debian/rules override_dh_auto_test 2>&1)
[ -z "$n" ] && pass "DEB_BUILD_OPTIONS=nocheck: no test run" ||
	fail "DEB_BUILD_OPTIONS=nocheck still runs: $n"

arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb="$work/src/poolshim_${dver}_$arch.deb"
[ -f "$deb" ] || { fail "$deb not built: $(ls "$work/src")"; finish; }
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|' >"$PST_TMP/list"
libpath=/usr/lib/$ma/poolshim/libpoolshim.so
for f in /usr/bin/poolshim /usr/bin/poolshim-stat /usr/bin/poolshim-report "$libpath" \
	/usr/share/man/man1/poolshim.1.gz /usr/share/man/man7/poolshim.7.gz \
	/usr/share/doc/poolshim/copyright /usr/share/doc/poolshim/README.md.gz \
	/usr/share/poolshim/report_schema.py; do
	grep -qx "$f" "$PST_TMP/list" || fail "the package lacks $f"
done
# Nothing of the demo, the benchmarks or libtool's archives.
extra=$(grep -E '\.la$|/(storaged|s3proxy|loadgen|allocbench|iobench|smallbench)$' "$PST_TMP/list")
[ -z "$extra" ] && pass "contents: commands, library, man pages, docs; no demo" ||
	fail "the package holds: $extra"
deps=$(dpkg-deb -f "$deb" Depends)
case $deps in
*libc6*) pass "Depends: $deps" ;;
*) fail "Depends lacks libc6: $deps" ;;
esac
case $deps in
*jemalloc*) fail "Depends names jemalloc, which the library carries privately: $deps" ;;
*liburing*) fail "Depends names liburing, which the library links statically (no load at every start): $deps" ;;
*libunwind*) fail "Depends names libunwind, which the shim opens only for POOLSHIM_BACKTRACE: $deps" ;;
esac
# `poolshim report --plot` draws with gnuplot: suggested, as deploy.md says.
sugg=$(dpkg-deb -f "$deb" Suggests)
case $sugg in
*gnuplot*) pass "Suggests: $sugg" ;;
*) fail "Suggests lacks gnuplot: $sugg" ;;
esac
# The description claims no registered buffers (the shim registers none).
dpkg-deb -f "$deb" Description | grep -qi 'registered buffers' &&
	fail "the description speaks of registered buffers: $(dpkg-deb -f "$deb" Description)"
# python3 is for poolshim-report alone: deploy.md says so, and Depends has it.
case $deps in
*python3*) grep -q 'depends on\( libc\)* alone' "$PS_TOP_SRCDIR/docs/deploy.md" &&
	fail "Depends has python3 but docs/deploy.md says the package depends on libc alone" ;;
esac
# libunwind and libdw are dlopen'd for call sites: recommended, not required.
recs=$(dpkg-deb -f "$deb" Recommends)
case $recs in
*libunwind8*libdw1*) pass "Recommends: $recs" ;;
*) fail "Recommends lacks libunwind8 or libdw1: $recs" ;;
esac

# The extracted files: the command's built-in library path is the package's,
# the library loads into a program, the commands run.
dpkg-deb -x "$deb" "$work/root"
root=$work/root
grep -q "$libpath" "$root/usr/bin/poolshim" &&
	pass "poolshim has $libpath built in" || fail "poolshim lacks $libpath: $(grep -n 'lib=' "$root/usr/bin/poolshim")"
v=$("$root/usr/bin/poolshim" --version 2>&1) && case $v in "poolshim $ver"*) true ;; *) false ;; esac &&
	pass "extracted poolshim --version: $v" || fail "extracted poolshim --version: $v"
env LD_PRELOAD="$root$libpath" POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/true.json" true
rc=$?
[ $rc = 0 ] && [ -s "$PST_TMP/true.json" ] && pass "extracted library preloaded into true: exit 0, report written" ||
	fail "extracted library preloaded into true: exit $rc"
# The documentation it ships is whole: the quick-starts and the Grafana
# dashboard, and every file README.md and docs/ link to (a manual page
# link: the installed page); dh_compress may have gzipped any of them.
for f in docs/quickstart.md docs/results.md docs/grafana/poolshim.json; do
	[ -e "$root/usr/share/doc/poolshim/$f" ] || [ -e "$root/usr/share/doc/poolshim/$f.gz" ] ||
		fail "the package lacks /usr/share/doc/poolshim/$f"
done
python3 - "$root" >"$PST_TMP/links" <<'PY'
import gzip, os, re, sys
root = sys.argv[1]
doc = os.path.join(root, "usr/share/doc/poolshim")
n = 0
for d, _, names in os.walk(doc):
    for name in names:
        if not (name.endswith(".md") or name.endswith(".md.gz")):
            continue
        path = os.path.join(d, name)
        text = (gzip.open if name.endswith(".gz") else open)(path, "rt", encoding="utf-8").read()
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            t = m.group(1).split("#")[0]
            if not t or re.match(r"[a-z]+:", t):
                continue
            n += 1
            target = os.path.normpath(os.path.join(d, t))
            page = re.search(r"(?:^|/)man/([\w-]+)\.([1-8])$", t)
            if page:
                target = os.path.join(root, "usr/share/man/man%s/%s.%s" % (page.group(2), page.group(1), page.group(2)))
            if not (os.path.exists(target) or os.path.exists(target + ".gz")):
                print("%s links to %s, not in the package" % (os.path.relpath(path, root), t))
print("links checked:", n)
PY
if grep -q 'not in the package' "$PST_TMP/links"; then
	fail "shipped documents link to files the package lacks: $(grep 'not in' "$PST_TMP/links" | tr '\n' ' ')"
else
	pass "the shipped documents' $(sed -n 's/^links checked: //p' "$PST_TMP/links") links all resolve in the package"
fi
"$root/usr/bin/poolshim-stat" --help >/dev/null 2>&1 && pass "extracted poolshim-stat --help" ||
	fail "extracted poolshim-stat --help failed"
"$root/usr/bin/poolshim-report" "$PST_TMP/true.json" >"$PST_TMP/out" 2>&1 &&
	pass "extracted poolshim-report reads the report" || fail "extracted poolshim-report: $(head -3 "$PST_TMP/out")"
# poolshim stat / report find the tools installed next to the command.
"$root/usr/bin/poolshim" report "$PST_TMP/true.json" >"$PST_TMP/out" 2>&1 &&
	"$root/usr/bin/poolshim" stat --help >/dev/null 2>&1 &&
	pass "extracted poolshim report, poolshim stat --help" ||
	fail "extracted poolshim report / stat: $(head -3 "$PST_TMP/out")"

# The command with its built-in path, the library where the package puts it:
# in a mount namespace of its own, the package's /usr/lib/<multiarch> laid
# over the system's (root only; nothing outside the namespace sees it).
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1/usr/lib/$2:/usr/lib/$2" "/usr/lib/$2"' \
		sh "$root" "$ma" 2>/dev/null; then
	unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1/usr/lib/$2:/usr/lib/$2" "/usr/lib/$2" &&
		exec "$1/usr/bin/poolshim" POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$3" ls /nonexistent' \
		sh "$root" "$ma" "$PST_TMP/ns.json" >/dev/null 2>&1
	rc=$?
	[ $rc = 2 ] && [ -s "$PST_TMP/ns.json" ] &&
		pass "poolshim with the library at $libpath: ls exits 2 under the shim" ||
		fail "poolshim with the library at $libpath: exit $rc, report: $(ls "$PST_TMP/ns.json" 2>&1)"
else
	echo "no mount namespace with overlayfs here: the built-in path is checked only by name"
fi

if command -v lintian >/dev/null; then
	lintian --fail-on error "$work"/src/poolshim_*.changes \
		>"$PST_TMP/lintian" 2>&1
	rc=$?
	sed 's/^/lintian: /' "$PST_TMP/lintian"
	[ $rc = 0 ] && pass "lintian: no errors" || fail "lintian exited $rc"
else
	echo "lintian not installed: not run"
fi

# The real installation, only where it cannot disturb anyone's system.
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ] && ! dpkg -s poolshim >/dev/null 2>&1; then
	if dpkg -i "$deb" >"$PST_TMP/dpkg" 2>&1; then
		at_exit 'dpkg -r poolshim >/dev/null 2>&1'
		(cd / && /usr/bin/poolshim POOLSHIM_STATS_FORMAT=json POOLSHIM_STATS="$PST_TMP/inst.json" \
			ls /nonexistent >/dev/null 2>&1)
		rc=$?
		[ $rc = 2 ] && [ -s "$PST_TMP/inst.json" ] &&
			pass "installed: poolshim ls (a missing file) exits 2 under the shim" ||
			fail "installed: poolshim ls exited $rc, report: $(ls -l "$PST_TMP/inst.json" 2>&1)"
		/usr/bin/poolshim report "$PST_TMP/inst.json" >"$PST_TMP/out" 2>&1 &&
			pass "installed: poolshim report reads it" ||
			fail "installed: poolshim report: $(head -3 "$PST_TMP/out")"
		dpkg -r poolshim >"$PST_TMP/dpkg" 2>&1 && [ ! -e "$libpath" ] &&
			pass "dpkg -r removes it" || fail "dpkg -r: $(cat "$PST_TMP/dpkg")"
	else
		fail "dpkg -i: $(cat "$PST_TMP/dpkg")"
	fi
fi
echo "deb.sh took $(($(date +%s) - start)) s"
finish
