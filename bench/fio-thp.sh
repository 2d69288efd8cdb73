#!/bin/sh
# SPDX-License-Identifier: MIT
# What backs fio's buffer under the shim, and what the disk sees (issue 29,
# THP against hugetlb for O_DIRECT): for each pool backing (THP, the
# default; hugetlb; 4 KiB pages) and fio's own hugetlb buffer, one
# fio --thread psync randread run of BS (default 1M) for SECONDS (default
# 3), with
#   - the buffer's address and its offset within a 2 MiB page (fio's io_u
#     buffers start at the returned address: --verbose debug=mem prints it),
#   - AnonHugePages / Private_Hugetlb / Rss of the mapping that holds it
#     (/proc/PID/smaps, read half way through the run),
#   - the device's reads, merges and sectors from /proc/diskstats over the
#     run: average request size in KiB and merges per read,
#   - MiB/s and fio's usr+sys CPU per GiB.
#   bench/fio-thp.sh [FILE [BS [SECONDS]]]     (PS_FIO_THP_ROUNDS rounds, default 3;
#   PS_FIO_THP_CONFIGS, default "thp hugetlb 4k fio-shmhuge fio-malloc";
#   as root: reserves 64 hugetlb
#   pages with scripts/hugepages, given back afterwards)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
file=${1:-/var/tmp/poolshim-fio.dat}
bs=${2:-1M}
secs=${3:-3}
shim=${POOLSHIM_LIB:-$top/.libs/libpoolshim.so}
command -v fio >/dev/null || { echo "fio-thp: skipped: fio not installed"; exit 77; }
[ -f "$file" ] || { echo "fio-thp: $file missing (scripts/bench fio writes it)"; exit 2; }
if [ "${PS_FIO_THP_INNER:-}" != 1 ]; then
	PS_FIO_THP_INNER=1 exec "$top/scripts/hugepages" 64 "$0" "$@"
fi
dev=$(stat -c '%Hd:%Ld' "$file")
disk=$(basename "$(readlink -f "/sys/dev/block/$dev")")
[ -e "/sys/dev/block/$dev/partition" ] && disk=$(basename "$(dirname "$(readlink -f "/sys/dev/block/$dev")")")
stats() { awk -v d="$disk" '$3 == d { print $4, $5, $6 }' /proc/diskstats; }   # reads merges sectors

one() {  # one NAME ENV... -- FIO-ARGS...
	name=$1; shift
	envs=
	while [ "$1" != -- ]; do envs="$envs $1"; shift; done
	shift
	extra="$*"
	out=$(mktemp)
	set -- $(stats)
	r0=$1 m0=$2 s0=$3
	# shellcheck disable=SC2086
	env $envs POOLSHIM_STATS=off fio --name=j --filename="$file" --bs="$bs" --rw=randread \
		--direct=1 --ioengine=psync --thread --runtime="$secs" --time_based \
		--output-format=json --debug=mem $extra >"$out" 2>&1 &
	pid=$!
	sleep "$(echo "$secs / 2" | bc -l)"
	fio_pid=$(pgrep -n -f "filename=$file" || true)
	smaps=$(mktemp)
	cat "/proc/$fio_pid/smaps" >"$smaps" 2>/dev/null || true
	wait $pid || { echo "$name: fio failed: $(tail -3 "$out")"; return; }
	set -- $(stats)
	python3 - "$name" "$out" "$smaps" $((${1} - r0)) $((${2} - m0)) $((${3} - s0)) <<'EOF'
import json, re, sys
name, out, smaps, reads, merges, sectors = sys.argv[1:4] + [int(x) for x in sys.argv[4:7]]
text = open(out).read()
j = json.loads(text[text.index("{"):])["jobs"][0]
rt = j["job_runtime"] / 1000
gib = j["read"]["io_bytes"] / (1 << 30)
cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100 * rt / gib if gib else 0
# The biggest anonymous/hugetlb mapping with the most resident memory: the buffer's.
best = None
cur = None
for line in open(smaps):
    if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
        cur = {"range": line.split()[0], "name": line.split()[-1] if len(line.split()) > 5 else ""}
        continue
    k, _, v = line.partition(":")
    if cur is not None and k in ("Rss", "AnonHugePages", "Private_Hugetlb", "Shared_Hugetlb"):
        cur[k] = int(v.split()[0])
        if k == "Private_Hugetlb":
            tot = cur.get("AnonHugePages", 0) + cur.get("Private_Hugetlb", 0) + cur.get("Shared_Hugetlb", 0) + cur.get("Rss", 0)
            if best is None or tot > best[0]:
                best = (tot, dict(cur))
m = best[1] if best else {}
a = re.search(r"malloc \d+ (0x[0-9a-f]+)", text)
where = f"buffer {a.group(1)} (+{int(a.group(1), 16) % (2 << 20) >> 10} KiB in its 2 MiB page)" if a else "buffer (shm)"
print(f"{name:<14} {j['read']['io_bytes'] / (1 << 20) / rt:7.0f} MiB/s {cpu:7.4f} CPU s/GiB  "
      f"disk: {sectors * 512 / 1024 / reads if reads else 0:6.0f} KiB/request, "
      f"{merges / reads if reads else 0:.2f} merges/read  "
      f"{where}; map {m.get('range', '?')} Rss {m.get('Rss', 0)} kB AnonHugePages "
      f"{m.get('AnonHugePages', 0)} kB hugetlb {m.get('Private_Hugetlb', 0) + m.get('Shared_Hugetlb', 0)} kB")
EOF
	rm -f "$out" "$smaps"
}

echo "fio-thp: $file on $disk ($dev), bs $bs, ${secs}s per run, fio --thread psync randread; load $(cut -d' ' -f1 /proc/loadavg)"
for round in $(seq "${PS_FIO_THP_ROUNDS:-3}"); do
	for c in ${PS_FIO_THP_CONFIGS:-thp hugetlb 4k fio-shmhuge fio-malloc}; do
		case $c in
		thp) one thp LD_PRELOAD="$shim" -- ;;
		hugetlb) one hugetlb LD_PRELOAD="$shim" POOLSHIM_HUGEPAGES=hugetlb -- ;;
		4k) one 4k LD_PRELOAD="$shim" POOLSHIM_HUGEPAGES=none -- ;;
		fio-shmhuge) one fio-shmhuge -- --mem=shmhuge ;;
		fio-malloc) one fio-malloc -- --mem=malloc ;;
		esac
	done
done
