# SPDX-License-Identifier: MIT
# I/O preload tests (included from tests/preload/local.mk).
