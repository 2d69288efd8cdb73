#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Send one SigV4-signed S3 request, for the demo tests.

Prints the HTTP status on the first line of stdout, then the response body.
Options let a test break the request on purpose: a skewed clock, a wrong
signature, a tampered aws-chunked body, an unsigned or streaming payload.
"""
import argparse
import datetime
import hashlib
import hmac
import http.client
import os
import sys
import urllib.parse

EMPTY = hashlib.sha256(b"").hexdigest()


def hm(key, msg):
    return hmac.new(key, msg.encode() if isinstance(msg, str) else msg, hashlib.sha256).digest()


def enc(s, safe=""):
    return urllib.parse.quote(s, safe=safe)


class Opts:
    """Request options; the command-line flags of the same names."""
    def __init__(self, **kw):
        self.endpoint = os.environ.get("S3_ENDPOINT", "")
        self.ak = os.environ.get("AWS_ACCESS_KEY_ID", "")
        self.sk = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        self.region = "us-east-1"
        self.skew = 0
        self.payload = "hash"
        self.chunk = 65536
        self.bad_sig = False
        self.bad_chunk_sig = False
        self.headers = []
        self.query = ""
        self.unsigned = []      # headers sent but left out of SignedHeaders
        self.auth_style = "spaces"
        self.__dict__.update(kw)


def request(method, bucket, key=None, body=b"", o=None, conn=None):
    """Sends one signed request; returns (status, headers dict, body)."""
    a = o or Opts()
    u = urllib.parse.urlparse(a.endpoint)
    hostport = u.netloc
    path = "/" + enc(bucket)
    if key is not None:
        path += "/" + enc(key, "/")
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=a.skew)
    amzdate = t.strftime("%Y%m%dT%H%M%SZ")
    date = amzdate[:8]
    scope = f"{date}/{a.region}/s3/aws4_request"

    hdrs = {"host": hostport, "x-amz-date": amzdate}
    for h in a.headers:
        k, v = h.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    send_body = body
    if a.payload == "hash":
        phash = hashlib.sha256(body).hexdigest()
    elif a.payload == "wrong-hash":
        phash = hashlib.sha256(body + b"x").hexdigest()
    elif a.payload == "unsigned":
        phash = "UNSIGNED-PAYLOAD"
    elif a.payload == "streaming":
        phash = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
        # aws-chunked goes first, before any encoding of the object itself.
        ce = hdrs.get("content-encoding")
        hdrs["content-encoding"] = "aws-chunked" + (f",{ce}" if ce else "")
        hdrs["x-amz-decoded-content-length"] = str(len(body))
    else:
        phash = hashlib.sha256(body).hexdigest()
    if a.payload != "absent":
        hdrs["x-amz-content-sha256"] = phash
    chunks = []
    if a.payload == "streaming":
        # Content-Length of the framed body is needed before signing.
        n = 0
        chunks = [body[i:i + a.chunk] for i in range(0, len(body), a.chunk)] + [b""]
        for c in chunks:
            n += len(f"{len(c):x};chunk-signature=") + 64 + 2 + len(c) + 2
        hdrs["content-length"] = str(n)
    elif body or method in ("PUT", "POST"):
        hdrs["content-length"] = str(len(body))

    pairs = []
    if a.query:
        for p in a.query.split("&"):
            k, _, v = p.partition("=")
            pairs.append((enc(urllib.parse.unquote(k)), enc(urllib.parse.unquote(v))))
    cq = "&".join(f"{k}={v}" for k, v in sorted(pairs))
    signed = sorted(h for h in hdrs if h not in a.unsigned)
    canon = "\n".join([
        method, path, cq,
        "".join(f"{k}:{' '.join(hdrs[k].split())}\n" for k in signed),
        ";".join(signed), phash if a.payload != "absent" else hashlib.sha256(body).hexdigest()])
    # http.client sends str header values as latin-1: sign those bytes.
    try:
        cbytes = canon.encode("latin-1")
    except UnicodeEncodeError:
        cbytes = canon.encode()
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope, hashlib.sha256(cbytes).hexdigest()])
    skey = hm(hm(hm(hm(("AWS4" + a.sk).encode(), date), a.region), "s3"), "aws4_request")
    sig = hmac.new(skey, sts.encode(), hashlib.sha256).hexdigest()
    if a.bad_sig:
        sig = ("0" if sig[0] != "0" else "1") + sig[1:]
    parts = [f"Credential={a.ak}/{scope}", f"SignedHeaders={';'.join(signed)}", f"Signature={sig}"]
    sep = {"spaces": ", ", "nospace": ",", "wide": " ,\t  "}[a.auth_style]
    auth = "AWS4-HMAC-SHA256" + ("   " if a.auth_style == "wide" else " ") + sep.join(parts)

    if a.payload == "streaming":
        prev = sig
        out = b""
        for i, c in enumerate(chunks):
            s2 = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amzdate, scope, prev, EMPTY,
                            hashlib.sha256(c).hexdigest()])
            cs = hmac.new(skey, s2.encode(), hashlib.sha256).hexdigest()
            prev = cs
            if a.bad_chunk_sig and i == 0:
                cs = ("0" if cs[0] != "0" else "1") + cs[1:]
            out += f"{len(c):x};chunk-signature={cs}\r\n".encode() + c + b"\r\n"
        send_body = out

    own = conn is None
    if own:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.putrequest(method, path + ("?" + a.query if a.query else ""),
                    skip_host=True, skip_accept_encoding=True)
    for k in sorted(hdrs):
        conn.putheader(k, hdrs[k])
    conn.putheader("Authorization", auth)
    conn.endheaders()
    if send_body:
        conn.send(send_body)
    r = conn.getresponse()
    data = r.read()
    headers = {k.lower(): v for k, v in r.getheaders()}
    if own:
        conn.close()
    return r.status, headers, data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", default=os.environ.get("S3_ENDPOINT", ""))
    ap.add_argument("--ak", default=os.environ.get("AWS_ACCESS_KEY_ID", ""))
    ap.add_argument("--sk", default=os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--skew", type=int, default=0, help="seconds added to the clock")
    ap.add_argument("--payload", default="hash",
                    choices=["hash", "unsigned", "streaming", "absent", "wrong-hash"])
    ap.add_argument("--chunk", type=int, default=65536)
    ap.add_argument("--bad-sig", action="store_true")
    ap.add_argument("--bad-chunk-sig", action="store_true")
    ap.add_argument("-H", dest="headers", action="append", default=[])
    ap.add_argument("--query", default="", help="raw query string")
    ap.add_argument("--unsigned", action="append", default=[],
                    help="send this header but leave it out of SignedHeaders")
    ap.add_argument("--auth-style", default="spaces", choices=["spaces", "nospace", "wide"])
    ap.add_argument("--data", default=None)
    ap.add_argument("--data-file", default=None)
    ap.add_argument("--out", default=None, help="write the body here instead of stdout")
    ap.add_argument("method")
    ap.add_argument("bucket")
    ap.add_argument("key", nargs="?", default=None)
    a = ap.parse_args()
    body = b""
    if a.data is not None:
        body = a.data.encode()
    elif a.data_file:
        with open(a.data_file, "rb") as f:
            body = f.read()
    status, _, data = request(a.method, a.bucket, a.key, body, a)
    sys.stdout.write(f"{status}\n")
    sys.stdout.flush()
    if a.out:
        with open(a.out, "wb") as f:
            f.write(data)
    else:
        sys.stdout.buffer.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
