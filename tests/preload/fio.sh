#!/bin/sh
# SPDX-License-Identifier: MIT
# fio as a client: `fio --ioengine=psync --direct=1` under the shim, its
# jobs as fork children (the default) and as threads (--thread), on an
# 8 MiB file read 300 times 1 MiB at a time.  The reports' pread calls and
# bytes, summed over every process, equal fio's own totals
# (--output-format=json), and fio's totals are the same without the shim.
# The file lives on a real disk (/var/tmp, or PST_FIO_DIR): tmpfs has no
# O_DIRECT.  Skipped without fio or O_DIRECT.
. "$PS_TOP_SRCDIR/tests/lib.sh"
command -v fio >/dev/null 2>&1 || skip "fio not installed (Debian package fio)"
D=$(mktemp -d "${PST_FIO_DIR:-/var/tmp}/pst-fio.XXXXXX") || skip "no directory for fio's file"
at_exit "rm -rf '$D'"
dd if=/dev/zero of="$D/probe" bs=4096 count=1 oflag=direct 2>/dev/null ||
	skip "no O_DIRECT in ${PST_FIO_DIR:-/var/tmp}"

# run_fio NAME [PRELOAD] FIO-ARGS...: fio's read totals "ios bytes" (its
# JSON is left in $D/NAME.json); with a PRELOAD library, its reports go
# to $D/NAME/r-PID.json.
run_fio() {
	name=$1 lib=$2; shift 2
	mkdir -p "$D/$name"
	env POOLSHIM_STATS="$D/$name/r-%p.json" ${lib:+LD_PRELOAD=$lib} \
		fio --name=j --filename="$D/file" --size=8M --bs=1M --rw=randread --io_size=300M \
		--ioengine=psync --direct=1 --output-format=json "$@" >"$D/$name.json" 2>"$D/$name.err" ||
		{ echo "fio failed: $(cat "$D/$name.err")"; return 1; }
	python3 -c 'import json,sys
o = json.load(open(sys.argv[1]))
print(sum(j["read"]["total_ios"] for j in o["jobs"]), sum(j["read"]["io_bytes"] for j in o["jobs"]))' "$D/$name.json"
}

# The reports' preads, summed over every process: "calls bytes reports"
sum_reports() {
	python3 -c 'import json,sys
calls = nbytes = 0
for f in sys.argv[1:]:
    r = json.load(open(f))
    for c in r["calls"]:
        if c["call"] == "pread":
            calls += c["calls"]; nbytes += c["bytes"]
print(calls, nbytes, len(sys.argv) - 1)' "$@"
}

run_fio layout "" >/dev/null    # lays the file out once, outside the comparison
for mode in processes thread; do
	extra=
	[ $mode = thread ] && extra=--thread
	# shellcheck disable=SC2086
	want=$(run_fio "none-$mode" "" $extra) || { fail "$mode: $want"; continue; }
	[ "$want" = "300 314572800" ] || fail "$mode: fio read '$want' without the shim, not 300 x 1 MiB"
	# shellcheck disable=SC2086
	got_fio=$(run_fio "shim-$mode" "$SHIM" $extra)
	[ "$got_fio" = "$want" ] && pass "$mode: fio reads $got_fio under the shim, as without" ||
		fail "$mode: fio reads '$got_fio' under the shim, '$want' without"
	set -- "$D/shim-$mode"/r-*.json
	[ -e "$1" ] || { fail "$mode: no reports"; continue; }
	got=$(sum_reports "$@")
	[ "${got% *}" = "$want" ] && pass "$mode: the reports count $want pread calls and bytes (${got##* } reports)" ||
		fail "$mode: the reports count '${got% *}' (calls bytes), fio '$want' (${got##* } reports)"
done
finish
