#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Idle-connection flood against s3proxy, for tests/demo/idle.sh.

  idle.py PROXY_PID HOST PORT NIDLE SECONDS

Opens NIDLE idle TCP connections (more than the proxy's descriptor limit)
plus a few slowloris clients dripping a request head, holds them SECONDS,
closes them, and reports one "name value" line per measurement:

  normal_ok / normal_bad   signed PUT+GET round trips on one keep-alive
                           connection made before the flood, throughout
  fresh_during_ok / _bad   fresh connections tried during the flood: ok
                           when served or refused with 503 SlowDown, bad
                           when no answer came within 2 s
  idle_open                idle connections the kernel accepted
  refused_503              idle connections answered 503 SlowDown
  cpu_pct                  proxy CPU while saturated (a spin shows here)
  rss_before/peak/after_kb the proxy's VmRSS
  recover_ms               until a fresh connection is served after close
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3req  # noqa: E402

pid, host, port, nidle, secs = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                int(sys.argv[4]), float(sys.argv[5]))
stats = {"normal_ok": 0, "normal_bad": 0, "fresh_during_ok": 0, "fresh_during_bad": 0}
stop = threading.Event()
bad_detail = []


def rss_kb():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def cpu_ticks():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def roundtrip(conn, i):
    body = os.urandom(1000 + (i * 7919) % 60000)
    key = f"normal/{i % 50}"
    st, _, _ = s3req.request("PUT", "idle", key, body, s3req.Opts(payload="unsigned"), conn)
    if st != 200:
        return f"PUT {st}"
    st, _, got = s3req.request("GET", "idle", key, b"", None, conn)
    if st != 200 or got != body:
        return f"GET {st}, {len(got)} of {len(body)} bytes" + (" (differ)" if len(got) == len(body) else "")
    return None


def normal_client(conn):
    import http.client
    i = 0
    while not stop.is_set():
        try:
            err = roundtrip(conn, i)
        except (OSError, http.client.HTTPException) as e:
            err = f"exception {e!r}"
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=10)
        if err:
            stats["normal_bad"] += 1
            bad_detail.append(err)
        else:
            stats["normal_ok"] += 1
        i += 1
        time.sleep(0.05)


def fresh_try(timeout=3):
    """A GET on a new connection: its status, or 0 for no answer in time."""
    import http.client
    try:
        c = http.client.HTTPConnection(host, port, timeout=timeout)
        st, _, body = s3req.request("GET", "idle", "normal/0", b"", None, c)
        c.close()
        if st == 503 and b"<Code>SlowDown</Code>" not in body:
            return -1
        return st
    except (OSError, http.client.HTTPException):
        return 0


def slowloris(n):
    socks = []
    while not stop.is_set():
        # Reconnect whatever the proxy cut off (408 after --header-timeout).
        while len(socks) < n and not stop.is_set():
            try:
                s = socket.create_connection((host, port), timeout=2)
                s.sendall(b"GET /idle/x HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            except OSError:
                break
        for s in list(socks):
            try:
                s.send(b"X-a: b\r\n")
            except OSError:
                socks.remove(s)
                s.close()
        time.sleep(0.5)
    for s in socks:
        s.close()


def main():
    import http.client
    # The bucket, and the normal client's connection before the flood.
    st, _, _ = s3req.request("PUT", "idle")
    conn = http.client.HTTPConnection(host, port, timeout=10)
    if roundtrip(conn, 0):
        print("normal client does not work before the flood", file=sys.stderr)
        return 1
    stats["rss_before_kb"] = rss_kb()
    nt = threading.Thread(target=normal_client, args=(conn,))
    nt.start()
    sl = threading.Thread(target=slowloris, args=(20,))
    sl.start()

    idle = []
    for _ in range(nidle):
        s = socket.socket()
        s.settimeout(0.5)
        try:
            s.connect((host, port))
            idle.append(s)
        except OSError:
            # The listen backlog is full: the kernel stops completing
            # handshakes while the proxy cannot accept.
            s.close()
    stats["idle_open"] = len(idle)
    t0, c0 = time.time(), cpu_ticks()
    peak = rss_kb()
    end = time.time() + secs
    while time.time() < end:
        st = fresh_try(timeout=2)
        # Served, or told to slow down: both are answers.  A timeout or a
        # reset is not.
        if st in (200, 503):
            stats["fresh_during_ok"] += 1
        else:
            stats["fresh_during_bad"] += 1
        peak = max(peak, rss_kb())
        time.sleep(0.3)
    hz = os.sysconf("SC_CLK_TCK")
    stats["cpu_pct"] = int(100 * (cpu_ticks() - c0) / hz / (time.time() - t0))
    refused = 0
    for s in idle:
        s.setblocking(False)
        try:
            if b" 503 " in s.recv(4096):
                refused += 1
        except OSError:
            pass
    stats["refused_503"] = refused
    stats["rss_peak_kb"] = peak
    for s in idle:
        s.close()
    t1 = time.time()
    while fresh_try(timeout=2) != 200:
        if time.time() - t1 > 20:
            break
    stats["recover_ms"] = int(1000 * (time.time() - t1))
    time.sleep(1)       # let the proxy's connection threads finish
    stop.set()
    nt.join()
    sl.join()
    stats["rss_after_kb"] = rss_kb()
    for k, v in stats.items():
        print(k, v)
    for d in bad_detail[:5]:
        print("normal client failure:", d, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
