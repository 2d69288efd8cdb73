#!/bin/sh
# SPDX-License-Identifier: MIT
# The program's own memory and threads under the shim's io_uring path
# (issues 25 and 27), each mode of io_uring_coherent run without the shim
# (the kernel's answer, which the program checks, must hold there) and
# under it:
# - memlock: as nobody without CAP_IPC_LOCK under an 8 MiB RLIMIT_MEMLOCK,
#   one O_DIRECT pread, then the program's own 6 MiB buffer registration
#   and a neighbour process's succeed.  Before: both ENOMEM (the pool's
#   slabs were registered, pinned against the user's limit);
# - dontneed: MADV_DONTNEED, then pread gives the file's bytes and pwrite
#   writes zeros.  Before: 0 of the file's bytes; the old contents written;
# - protect: raw mprotect/pkey_mprotect(PROT_READ) and a raw munmap, then
#   pread fails EFAULT.  Before: it succeeded into pinned pages;
# - cancel: pthread_cancel of a thread looping on pread, pwrite, preadv or
#   pwritev cancels it.  Before: it ran on and returned.
. "$PS_TOP_SRCDIR/tests/lib.sh"
P="$PRELOAD_BIN/io_uring_coherent"
uring_lock -s

# run NAME shim|plain [WRAPPER ...] -- MODE [ARG]: one run, limited in time
run() {
	name=$1 how=$2; shift 2
	wrap=
	while [ $# -gt 0 ] && [ "$1" != -- ]; do wrap="$wrap $1"; shift; done
	shift
	pre=
	[ "$how" = shim ] && pre="LD_PRELOAD=$SHIM"
	# shellcheck disable=SC2086
	timeout -s KILL 40 $wrap env POOLSHIM_LIVE=0 POOLSHIM_STATS=off $pre "$P" "$@" \
		>"$PST_TMP/$name.out" 2>&1
	rc=$?
	out=$(grep -v '^FAIL' "$PST_TMP/$name.out" | tr '\n' ' ')
	case $rc in
	0) pass "$name: $out" ;;
	77) skip "$name: $(cat "$PST_TMP/$name.out")" ;;
	137) fail "$name: killed after 40 s (hung)" ;;
	*) fail "$name: exit $rc: $(grep -m 4 -e FAIL -e io_uring_coherent "$PST_TMP/$name.out" | tr '\n' ' ')" ;;
	esac
}

for how in plain shim; do
	run "dontneed, $how" $how -- dontneed
	run "protect, $how" $how -- protect
	for call in pread pwrite preadv pwritev; do
		run "cancel $call, $how" $how -- cancel $call
	done
done

# memlock: as an unprivileged user, or skip.
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null || ! id nobody >/dev/null 2>&1; then
	echo "SKIP memlock: needs root, setpriv and user nobody"
else
	# The program and the shim must be readable by nobody.
	chmod 0755 "$PST_TMP"
	cp "$P" "$SHIM" "$PST_TMP/"
	chmod 0755 "$PST_TMP/io_uring_coherent" "$PST_TMP/libpoolshim.so"
	P="$PST_TMP/io_uring_coherent"
	SHIM="$PST_TMP/libpoolshim.so"
	group=nogroup
	getent group nogroup >/dev/null || group=nobody
	# ulimit -l is in KiB: 8 MiB, the common default for a user.
	cat >"$PST_TMP/asnobody" <<EOF_NOBODY
#!/bin/sh
ulimit -l 8192 || exit 99
exec setpriv --reuid=nobody --regid=$group --clear-groups --inh-caps=-all "\$@"
EOF_NOBODY
	chmod 0755 "$PST_TMP/asnobody"
	for how in plain shim; do
		run "memlock, $how" $how "$PST_TMP/asnobody" -- memlock
	done
fi
finish
