# SPDX-License-Identifier: MIT
# (included from Makefile.am)
# poolshim(1): the command (run, stat, report); poolshim(7): configuration,
# the report and its JSON schema, what the shim cannot reach.
dist_man_MANS = man/poolshim.1 man/poolshim.7
