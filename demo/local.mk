# SPDX-License-Identifier: MIT
# Build and test rules for the demo S3 stack (included from Makefile.am).
