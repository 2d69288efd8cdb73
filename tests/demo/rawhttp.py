#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile HTTP clients for the demo tests, over raw sockets.

  rawhttp.py bigheader HOST PORT SIZE       prints the status of the reply
  rawhttp.py smuggle HOST PORT CASE         prints the statuses of all replies
  rawhttp.py slowloris HOST PORT SECONDS    drips a request head one byte at
      a time while a normal client keeps being served; prints
      "cut after N.N s" and "normal max X.XX s" (or "not cut").
"""
import os
import re
import socket
import subprocess
import sys
import threading
import time


def statuses(data):
    return [int(m) for m in re.findall(rb"^HTTP/1\.1 (\d{3}) ", data, re.M)]


def read_all(s, limit=10.0):
    s.settimeout(limit)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def bigheader(host, port, size):
    s = socket.create_connection((host, port))
    req = (b"GET /bkt/x HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
    try:
        s.sendall(req)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = read_all(s)
    print(" ".join(map(str, statuses(data))) or "none")
    if b"<Error><Code>" not in data:
        print("no S3 error document", file=sys.stderr)


CASES = {
    "cl-te": b"POST /bkt/x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    "te-cl": b"POST /bkt/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
             b"Content-Length: 40\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    "cl-cl": b"POST /bkt/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 38\r\n\r\n"
             b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    "te-gzip": b"POST /bkt/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
               b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    "te-te": b"POST /bkt/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
             b"Transfer-Encoding: identity\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    "cl-space": b"POST /bkt/x HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello",
    "bad-cl": b"POST /bkt/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\nhello",
}


def smuggle(host, port, case):
    s = socket.create_connection((host, port))
    s.sendall(CASES[case])
    print(" ".join(map(str, statuses(read_all(s)))) or "none")


def slowloris(host, port, seconds):
    cut = [None]
    stop = threading.Event()

    def drip():
        s = socket.create_connection((host, port))
        head = b"GET /bkt/x HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10000
        t0 = time.time()
        try:
            for b in head:
                s.sendall(bytes([b]))
                s.settimeout(0.2)
                try:
                    if s.recv(4096) == b"":
                        break
                    break  # a response (408) means we were cut off too
                except socket.timeout:
                    pass
                if time.time() - t0 > seconds or stop.is_set():
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass
        cut[0] = time.time() - t0

    th = threading.Thread(target=drip)
    th.start()
    worst = 0.0
    req = [sys.executable, os.path.join(os.path.dirname(__file__), "s3req.py"), "GET", "bkt",
           "--query", "list-type=2&max-keys=1"]
    n = 0
    while th.is_alive():
        t = time.time()
        r = subprocess.run(req, capture_output=True)
        dt = time.time() - t
        n += 1
        if not r.stdout.startswith(b"200"):
            print("normal client failed: " + r.stdout[:200].decode(errors="replace"))
            worst = 99
        worst = max(worst, dt)
        time.sleep(0.2)
    stop.set()
    th.join()
    print(f"cut after {cut[0]:.1f} s" if cut[0] is not None else "not cut")
    print(f"normal max {worst:.2f} s over {n} requests")


def main():
    cmd, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if cmd == "bigheader":
        bigheader(host, port, int(sys.argv[4]))
    elif cmd == "smuggle":
        smuggle(host, port, sys.argv[4])
    elif cmd == "slowloris":
        slowloris(host, port, float(sys.argv[4]))
    else:
        print("unknown command", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
