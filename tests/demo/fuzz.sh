#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the demo's libFuzzer targets for a bounded time each (FUZZ_SECONDS,
# default 12: five targets, about a minute), starting from the seed
# corpora.  Skipped without clang.
set -u
: "${PS_TOP_BUILDDIR:?}" "${PS_TOP_SRCDIR:?}"
secs=${FUZZ_SECONDS:-12}
targets="request sigv4 listparams chunked range"
dir=$PS_TOP_BUILDDIR/tests/demo/fuzz
for t in $targets; do
	if [ ! -x "$dir/fuzz_$t" ]; then
		echo "fuzz_$t not built (needs clang with libFuzzer): skipped"
		exit 77
	fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/psfuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
rc=0
for t in $targets; do
	mkdir -p "$work/$t"
	# New inputs go to the scratch corpus; the seeds stay untouched.
	if "$dir/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/" \
		"$work/$t" "$PS_TOP_SRCDIR/tests/demo/fuzz/seeds/$t" >"$work/$t.log" 2>&1; then
		echo "ok: fuzz_$t: $(grep -E '^stat::number_of_executed_units' "$work/$t.log" | sed 's/.*: *//') runs"
	else
		echo "FAIL: fuzz_$t found a problem:"
		grep -A 30 -E 'ERROR|runtime error' "$work/$t.log" | head -60
		for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
			[ -f "$a" ] || continue
			echo "reproducer (base64):"
			base64 "$a" | head -20
		done
		rc=1
	fi
done
exit $rc
