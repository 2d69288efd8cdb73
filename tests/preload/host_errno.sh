#!/bin/sh
# SPDX-License-Identifier: MIT
# errno and sizes the program sees are glibc's: fclose of streams without a
# descriptor (fmemopen, open_memstream) leaves errno alone on success; a
# failed posix_memalign leaves glibc's ENOMEM in errno; pvalloc's usable
# sizes below the pool threshold are glibc's own (pvalloc(0) is 24 bytes).
# tests/preload/host_helper errno prints each, run with and without the shim.
# The audit's checks of every door (docs/reliability.md) too: errno left
# alone by successful calls (keep-errno), and the same calls being
# cancellation points (or not: malloc, sigaction, fcntl F_GETFL) with and
# without the shim (cancel: a thread with a cancel pending makes the call).
. "$PS_TOP_SRCDIR/tests/lib.sh"
H="$PRELOAD_BIN/host_helper"

"$H" errno >"$PST_TMP/none" 2>&1 || fail "host_helper errno failed without the shim"
for v in POOLSHIM_STATS=off POOLSHIM_HUGEPAGES=none; do
	shim POOLSHIM_STATS=off "$v" -- "$H" errno >"$PST_TMP/shim" 2>&1 || fail "host_helper errno failed under $v"
	if cmp -s "$PST_TMP/none" "$PST_TMP/shim"; then
		pass "errno and sizes as without the shim ($v, $(wc -l <"$PST_TMP/none") cases)"
	else
		fail "differences under $v (< without, > with):
$(diff "$PST_TMP/none" "$PST_TMP/shim")"
	fi
done
for m in keep-errno cancel; do
	"$H" $m "$PST_TMP/f.$m" >"$PST_TMP/$m.none" 2>&1 || fail "host_helper $m failed without the shim"
	shim POOLSHIM_STATS=off -- "$H" $m "$PST_TMP/f.$m" >"$PST_TMP/$m.shim" 2>&1 || fail "host_helper $m failed under the shim"
	cmp -s "$PST_TMP/$m.none" "$PST_TMP/$m.shim" &&
		pass "$m: as without the shim ($(grep -c . "$PST_TMP/$m.none") lines)" ||
		fail "$m differs (< without, > with):
$(diff "$PST_TMP/$m.none" "$PST_TMP/$m.shim")"
done
grep -q '^malloc: returned' "$PST_TMP/cancel.none" && grep -q '^read: cancelled' "$PST_TMP/cancel.none" ||
	fail "cancel: unexpected without the shim: $(cat "$PST_TMP/cancel.none")"
grep -q 'pvalloc(0): usable 24,' "$PST_TMP/none" || echo "note: this glibc's pvalloc(0) is not 24 bytes"
finish
