#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 45: a FIFO report path whose reader never reads costs `poolshim
# collect` a bounded time, not 2 s per record: the collection waits for
# FIFO readers 500 ms in all (FIFO_BUDGET_MS), then refuses the reports
# it could not write and keeps their records.  Six killed dd's whose
# POOLSHIM_STATS is a FIFO held open by a reader that never reads, its
# buffer already full: collect ends within 3 s (12 s before), says so for
# each and keeps every record.
. "$PS_TOP_SRCDIR/tests/lib.sh"
COLLECT="$PS_TOP_BUILDDIR/tools/poolshim-collect"
L="$PST_TMP/live"
mkdir "$L"
F="$PST_TMP/fifo"
mkfifo "$F"
exec 3<>"$F"
# A pipe holds 64 KiB: full, so every write waits for the reader.
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
try:
    while True:
        os.write(fd, b"x" * 4096)
except BlockingIOError:
    pass' "$F" || { fail "filling the FIFO"; finish; }

pids=
for i in 1 2 3 4 5 6; do
	env POOLSHIM_LIVE_DIR="$L" POOLSHIM_RUN=fifo POOLSHIM_STATS="$F" LD_PRELOAD="$SHIM" \
		dd if=/dev/zero of=/dev/null bs=4k 2>/dev/null &
	p=$!
	for _ in $(seq 100); do ls "$L"/poolshim-"$p"-*.stats >/dev/null 2>&1 && break; sleep 0.1; done
	sleep 0.2
	kill -KILL "$p"; wait "$p" 2>/dev/null
	pids="$pids $p"
done
[ "$(ls "$L" | wc -l)" = 6 ] || fail "not six records: $(ls "$L")"

start=$(date +%s%N)
timeout 60 "$COLLECT" --live-dir "$L" --run fifo >"$PST_TMP/out" 2>"$PST_TMP/err"
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
exec 3<&-
cat "$PST_TMP/err"
[ "$ms" -lt 3000 ] && pass "collect took $ms ms for six" || fail "collect took $ms ms for six"
[ $rc = 3 ] && pass "exit status 3" || fail "exit status $rc, want 3"
for p in $pids; do
	grep -q "pid $p (dd): cannot write the report to $F .*; record kept" "$PST_TMP/err" ||
		fail "no line for $p"
done
[ "$(ls "$L" | wc -l)" = 6 ] && pass "every record kept" || fail "records: $(ls "$L")"
finish
