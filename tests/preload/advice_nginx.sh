#!/bin/sh
# SPDX-License-Identifier: MIT
# Issue 37, "why nothing": Debian's nginx serving files with `sendfile on`
# (as Debian's nginx.conf has it) and its default buffers gets nothing from
# the pool, and its report says why in nginx's terms: the largest
# allocation against POOLSHIM_POOL_MIN (pool_idle), the nginx settings that
# make large buffers with the measured figures (program_settings), and
# what sendfile means (sendfile).  nginx (one process, no daemon) listens
# on a Unix socket in a temporary prefix.  Skips without nginx or curl.
. "$PS_TOP_SRCDIR/tests/lib.sh"
NGINX=${PST_NGINX:-/usr/sbin/nginx}
[ -x "$NGINX" ] || skip "no $NGINX (Debian package nginx)"
command -v curl >/dev/null 2>&1 || skip "curl not installed"

P="$PST_TMP/ng"
nginx_prefix "$P" "master_process off;
worker_processes 1;"
sed -i 's/^\taccess_log off;$/\taccess_log off;\n\tsendfile on;/' "$P/nginx.conf"
head -c 1048576 /dev/zero >"$P/html/big"
at_exit '[ -s "$P/nginx.pid" ] && kill -KILL "$(cat "$P/nginx.pid")" 2>/dev/null'

env LD_PRELOAD="$SHIM" POOLSHIM_STATS="$P/r.json" POOLSHIM_LIVE_DIR="$P/tmp" \
	"$NGINX" -p "$P" -c "$P/nginx.conf" -e "$P/logs/error.log" >"$P/out" 2>&1 &
ng=$!
for _ in $(seq 300); do [ -S "$P/sock" ] && [ -s "$P/nginx.pid" ] && break; sleep 0.1; done
got=$(curl -s -m 60 --unix-socket "$P/sock" "http://localhost/big?[1-8]" | wc -c)
kill -QUIT "$ng"
for _ in $(seq 300); do kill -0 "$ng" 2>/dev/null || break; sleep 0.1; done
wait "$ng"
[ "$got" = $((8 * 1048576)) ] && pass "nginx served 8 MiB" || fail "served $got bytes: $(head -c 300 "$P/out")"
[ -s "$P/r.json" ] || { fail "no report: $(head -c 300 "$P/out")"; finish; }

python3 "$PS_TOP_SRCDIR/tests/report_schema.py" "$P/r.json" >"$PST_TMP/schema" 2>&1 &&
	pass "the report passes the schema" || fail "schema: $(head -3 "$PST_TMP/schema")"
ids=$(json_get "$P/r.json" "sorted(a['id'] for a in r['advice'])")
alloc=$(json_get "$P/r.json" "r['pool']['allocations']")
[ "$ids" = "['pool_idle', 'program_settings', 'sendfile']" ] && [ "$alloc" -lt 16 ] &&
	pass "pool served $alloc; advice $ids" || fail "pool served $alloc; advice $ids"
msg() { json_get "$P/r.json" "[a['message'] for a in r['advice'] if a['id'] == '$1'][0]"; }
msg pool_idle | grep -Eq "^the pool served [0-9]+ allocations: the largest allocations this process made were [0-9.]+[KB]?-[0-9.]+K \([0-9]+ of them\), below POOLSHIM_POOL_MIN=64K" &&
	pass "pool_idle: $(msg pool_idle | cut -c1-140)" || fail "pool_idle: $(msg pool_idle)"
msg program_settings | grep -q "output_buffers 2 16m measured 0.55x \[0.47-0.60\] sendfile on, MISSED" &&
	msg program_settings | grep -q "output_buffers with directio" &&
	pass "program_settings names nginx's settings and figures" || fail "program_settings: $(msg program_settings)"
msg sendfile | grep -Eq "^[0-9]+ sendfile/splice calls moved (8M|[0-9.]+M) inside the kernel.*sendfile on" &&
	pass "sendfile: $(msg sendfile | cut -c1-100)" || fail "sendfile: $(msg sendfile)"
finish
