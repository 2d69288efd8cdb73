# SPDX-License-Identifier: MIT
# (included from Makefile.am)
