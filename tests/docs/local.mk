# SPDX-License-Identifier: MIT
# (included from Makefile.am, in the full configure: it needs the demo.)
# examples.sh: the shell examples of README.md, docs/*.md and the manual
# pages run as tests against this build, with the demo stack up
# (tests/docs/doctest.py extracts and runs them; annotations in the
# documents mark the ones that need root, a cluster or Docker).
# dead_server.sh: every example that starts a server and waits for it
# fails at once when the server dies at start.  links.sh: every relative
# link and #anchor of README.md and docs/ resolves.  variables.sh: every
# variable of the option table is in poolshim(7), README's table names
# only real ones.
pst_docs_scripts = tests/docs/examples.sh tests/docs/dead_server.sh tests/docs/links.sh \
	tests/docs/variables.sh
TESTS += $(pst_docs_scripts)
EXTRA_DIST += $(pst_docs_scripts) tests/docs/doctest.py README.md docs
