# SPDX-License-Identifier: MIT
# (included from Makefile.am, in every configuration, --disable-demo too)
# smoke.sh: the built library loads into ordinary programs and the installed
# commands run; it is what a --disable-demo build (a distribution package)
# can test.  nodemo.sh: --disable-demo on a copy of the tree, with Check,
# libcrypto and http-parser hidden from configure.  deb.sh: dpkg-buildpackage on a copy of the tree, gated to CI
# (CI=true or PS_SLOW=1) like nodemo.sh, because they build once more.
# Each group adds its tests to pst_pkg_scripts, which make check runs and
# the tarball carries.
pst_pkg_scripts = tests/packaging/smoke.sh tests/packaging/nodemo.sh tests/packaging/deb.sh
TESTS += $(pst_pkg_scripts)
EXTRA_DIST += $(pst_pkg_scripts) debian

# `poolshim systemd`: the drop-in passes systemd-analyze verify and systemd
# reads its environment back as given (% escaped); --install --root.
pst_pkg_scripts += tests/packaging/systemd_dropin.sh
