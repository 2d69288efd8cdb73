#!/bin/sh
# SPDX-License-Identifier: MIT
# Unit tests of the shim's core, linked directly (no preload).
exec "${PS_TOP_BUILDDIR:-.}/tests/unit/unit" "$@"
