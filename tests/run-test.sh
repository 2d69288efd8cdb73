#!/bin/sh
# SPDX-License-Identifier: MIT
# LOG_COMPILER for preload tests: runs one test program with libpoolshim.so
# preloaded into that program only (not into automake's driver shell), once
# per configuration in PS_CONFIGS (default: the standard matrix).  Exit 77
# from every run means skip; any other non-zero exit fails the test.
set -u
prog="$1"; shift
lib="${PS_TOP_BUILDDIR:-.}/.libs/libpoolshim.so"
# The C tests fork per test case; each child would print a report.
POOLSHIM_STATS=${POOLSHIM_STATS:-off}
export POOLSHIM_STATS
[ -r "$lib" ] || { echo "run-test: $lib missing" >&2; exit 99; }

# Each entry: a label and the POOLSHIM_* settings for that run.
configs="${PS_CONFIGS:-default:
thp:POOLSHIM_HUGEPAGES=thp
nohuge:POOLSHIM_HUGEPAGES=none
prefault:POOLSHIM_PREFAULT=1}"

ran=0; skipped=0; failed=0
old_ifs=$IFS
IFS='
'
for entry in $configs; do
	IFS=$old_ifs
	label=${entry%%:*}
	vars=${entry#*:}
	[ "$vars" = "$label" ] && vars=
	echo "== $prog [$label] $vars"
	# shellcheck disable=SC2086
	env $vars LD_PRELOAD="$lib" "$prog" "$@"
	rc=$?
	case $rc in
	0) ran=$((ran + 1)) ;;
	77) skipped=$((skipped + 1)); echo "   (skipped)" ;;
	*) failed=$((failed + 1)); echo "   FAILED with exit $rc under [$label]" ;;
	esac
	IFS='
'
done
IFS=$old_ifs
[ $failed -gt 0 ] && exit 1
[ $ran -eq 0 ] && [ $skipped -gt 0 ] && exit 77
exit 0
