#!/bin/sh
# SPDX-License-Identifier: MIT
# Debian's nginx serving a 1 KiB file makes the same system calls per
# request under the shim as without it.  nginx (one process, no daemon)
# listens on a Unix socket in a temporary prefix and runs under strace -f;
# curl makes N and then 2N requests against a fresh server, on one
# keep-alive connection and then on a connection each, and the difference
# over N is one request's system calls: start-up and shutdown cancel out.  Skips when nginx, curl or strace is missing.
. "$PS_TOP_SRCDIR/tests/lib.sh"
NGINX=${PST_NGINX:-/usr/sbin/nginx}
[ -x "$NGINX" ] || skip "no $NGINX (Debian package nginx)"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
command -v strace >/dev/null 2>&1 || skip "strace not installed"
strace -f -qq -o /dev/null true >/dev/null 2>&1 || skip "strace cannot trace here (ptrace refused)"
N=${PST_NGINX_N:-200}

P="$PST_TMP/ng"
nginx_prefix "$P" "master_process off;
worker_processes 1;"

# Never leave a server behind, whatever happens to the test.
at_exit '[ -s "$P/nginx.pid" ] && kill -KILL "$(cat "$P/nginx.pid")" 2>/dev/null'

# serve REQUESTS [PRELOAD]: "name count" lines for one server's whole life.
# $CURL_ARGS: extra curl arguments.
serve() {
	rm -f "$P/sock" "$P/trace"
	# A private live directory: see io_syscalls.sh (a stale file of a reused pid).
	strace -f -qq -o "$P/trace" ${2:+-E LD_PRELOAD=$2} -E POOLSHIM_STATS=off -E POOLSHIM_LIVE_DIR="$P/tmp" \
		"$NGINX" -p "$P" -c "$P/nginx.conf" -e "$P/logs/error.log" >"$P/out" 2>&1 &
	tracer=$!
	i=0
	while { [ ! -S "$P/sock" ] || [ ! -s "$P/nginx.pid" ]; } && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	got=$(curl -s -m 20 $CURL_ARGS --unix-socket "$P/sock" "http://localhost/f?[1-$1]" | wc -c)
	# strace holds fatal signals back while it traces: tell nginx itself.
	ngpid=$(cat "$P/nginx.pid" 2>/dev/null)
	[ -n "$ngpid" ] && kill -QUIT "$ngpid" 2>/dev/null
	i=0
	while kill -0 $tracer 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	if kill -0 $tracer 2>/dev/null; then
		[ -n "$ngpid" ] && kill -KILL "$ngpid" 2>/dev/null
		kill -KILL $tracer 2>/dev/null
	fi
	wait $tracer
	if [ "$got" != $(($1 * 1024)) ]; then
		echo "failed: $got bytes served, want $(($1 * 1024)): $(head -c 300 "$P/out")"
		return
	fi
	sed -n 's/^[0-9]* *\([a-z_0-9]*\)(.*/\1/p' "$P/trace" | sort | uniq -c | awk '{ print $2, $1 }'
}

# per_request [PRELOAD]: "name count" per request, to a tenth, for the names
# that change; a call start-up makes once more in one run than in the other
# shows as 1/N and is dropped.
per_request() {
	serve "$N" ${1:+"$1"} >"$PST_TMP/a"
	serve $((2 * N)) ${1:+"$1"} >"$PST_TMP/b"
	if grep -q '^failed' "$PST_TMP/a" "$PST_TMP/b"; then
		cat "$PST_TMP/a" "$PST_TMP/b" | grep '^failed' | head -1
		return
	fi
	join -a1 -a2 -e 0 -o 0,1.2,2.2 "$PST_TMP/a" "$PST_TMP/b" |
		awk -v n="$N" '{ d = int(($3 - $2) * 10 / n + ($3 >= $2 ? 0.5 : -0.5)) / 10 }
			d != 0 { printf "%s %.1f\n", $1, d; t += d }
			END { printf "total %.1f\n", t }'
}

check() {  # check LABEL: compare with and without the shim
	plain=$(per_request)
	shimmed=$(per_request "$SHIM")
	echo "$1, without: $(echo "$plain" | tr '\n' ' ')"
	echo "$1, shim:    $(echo "$shimmed" | tr '\n' ' ')"
	pt=$(echo "$plain" | sed -n 's/^total //p')
	st=$(echo "$shimmed" | sed -n 's/^total //p')
	if [ -z "$pt" ]; then
		fail "$1: nginx without the shim: $plain"
	elif [ -z "$st" ]; then
		fail "$1: nginx under the shim: $shimmed"
	elif [ "$plain" = "$shimmed" ]; then
		pass "$1: $pt system calls per request, as without the shim"
	else
		fail "$1: $st system calls per request under the shim, $pt without"
	fi
}

CURL_ARGS= check "keep-alive"
CURL_ARGS="-H Connection:close" check "a connection per request"
finish
