#!/bin/sh
# SPDX-License-Identifier: MIT
# The shim does not change how the host's C++ exceptions unwind.  libunwind
# (for POOLSHIM_BACKTRACE) is opened RTLD_LOCAL, only when asked for, so
# its _Unwind_RaiseException and backtrace() never take the place of
# libgcc's and glibc's: N throws make as many rt_sigprocmask calls under
# the shim as without it (libunwind's unwinder makes two per frame), with
# and without backtraces, and libunwind is not even mapped without them.
# (Whether libunwind's unwinder took over depended on the load order: it
# did in radosgw, whose libgcc_s comes in below libstdc++; so the test also
# asks the loader which object each symbol comes from.)
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/cxx_throw"
command -v strace >/dev/null 2>&1 || skip "strace not installed"
strace -f -qq -o /dev/null true >/dev/null 2>&1 || skip "strace cannot trace here (ptrace refused)"
N=2000

# sigprocmask NAME [VAR=VALUE ...]: the run's rt_sigprocmask count; output in $PST_TMP/NAME
sigprocmask() {
	name=$1
	shift
	env POOLSHIM_STATS=off "$@" strace -f -qq -c -e trace=rt_sigprocmask -o "$PST_TMP/$name.c" \
		"$P" "$N" >"$PST_TMP/$name" 2>&1 || { echo "run-failed"; return; }
	awk '$NF == "rt_sigprocmask" { print $4 }' "$PST_TMP/$name.c" | grep . || echo 0
}

none=$(sigprocmask none)
shim=$(sigprocmask shim LD_PRELOAD="$SHIM")
# A byte sample of 1G: no capture of the shim's own lands in this short run
# (call sites are sampled by bytes, at random), so only the throws count.
bt=$(sigprocmask bt LD_PRELOAD="$SHIM" POOLSHIM_BACKTRACE=8 POOLSHIM_BACKTRACE_SAMPLE=1G)
for c in none shim bt; do
	grep -q "^caught=$N backtrace=1 " "$PST_TMP/$c" && pass "$c: $N exceptions caught, backtrace() works" ||
		fail "$c: $(cat "$PST_TMP/$c")"
done
[ "$shim" = "$none" ] && pass "rt_sigprocmask calls for $N throws: $none without the shim, $shim under it" ||
	fail "rt_sigprocmask calls for $N throws: $none without the shim, $shim under it"
[ "$bt" = "$none" ] && pass "with POOLSHIM_BACKTRACE=8: $bt" ||
	fail "with POOLSHIM_BACKTRACE=8: $bt rt_sigprocmask calls, $none without the shim"
grep -q 'libunwind=0' "$PST_TMP/shim" && pass "libunwind not mapped without POOLSHIM_BACKTRACE" ||
	fail "libunwind mapped into the host: $(cat "$PST_TMP/shim")"
grep -q 'libunwind=1' "$PST_TMP/bt" && pass "libunwind mapped (RTLD_LOCAL) with POOLSHIM_BACKTRACE" ||
	fail "POOLSHIM_BACKTRACE did not load libunwind: $(cat "$PST_TMP/bt")"
for c in shim bt; do
	grep -q 'unw_global=0 raise_from=libgcc_s' "$PST_TMP/$c" &&
		pass "$c: libunwind's symbols out of the global scope, _Unwind_RaiseException from libgcc_s" ||
		fail "$c: $(cat "$PST_TMP/$c")"
done
finish
