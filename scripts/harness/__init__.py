# SPDX-License-Identifier: MIT
"""The demo harness behind scripts/demo (entry point: scripts/harness.py,
which says what each module here does)."""
