# SPDX-License-Identifier: MIT
# I/O benchmark (included from Makefile.am).
