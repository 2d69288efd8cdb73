#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Listing and bulk-delete checks through s3proxy (run by stack.sh).

Keys spread over both backends must come back merged, in order, exactly
once, through ListObjectsV2 continuation tokens, v1 markers and delimiter
grouping; DeleteObjects must reach every backend.  Prints one "ok:" or
"FAIL:" line per check; exits 1 if any failed.
"""
import base64
import glob
import hashlib
import http.client
import os
import re
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3req  # noqa: E402

fails = 0
conn = None


def check(what, cond, detail=""):
    global fails
    if cond:
        print(f"ok: {what}")
    else:
        fails += 1
        print(f"FAIL: {what} {detail}", file=sys.stderr)


def req(method, bucket, key=None, body=b"", query="", headers=()):
    o = s3req.Opts(query=query, headers=list(headers))
    return s3req.request(method, bucket, key, body, o, conn)


def unxml(s):
    return (s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
            .replace("&apos;", "'").replace("&amp;", "&"))


def items(xml):
    keys = [unxml(k) for k in re.findall(r"<Contents><Key>(.*?)</Key>", xml)]
    pfx = [unxml(p) for p in re.findall(r"<CommonPrefixes><Prefix>(.*?)</Prefix>", xml)]
    return keys, pfx


def tag(xml, name):
    m = re.search(f"<{name}>(.*?)</{name}>", xml)
    return unxml(m.group(1)) if m else None


def main():
    global conn
    u = urllib.parse.urlparse(os.environ["S3_ENDPOINT"])
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    datadirs = sys.argv[1:]
    b = "listing"
    st, _, _ = req("PUT", b)
    check("create bucket", st == 200, st)
    keys = [f"a/{i:02d}" for i in range(12)] + ["b/x/1", "b/x/2", "b/y/1", "c", "d/../e",
                                              "e&<>'\"", "f g", "g+h", "h%20i", "z" * 300]
    for k in keys:
        st, _, _ = req("PUT", b, k, k.encode())
        if st != 200:
            check(f"put {k}", False, st)
    want = sorted(keys, key=lambda s: s.encode())

    # Both backends hold some of the keys (rendezvous hashing spreads them).
    counts = [len(glob.glob(os.path.join(d, "buckets", b, "*.obj"))) for d in datadirs]
    check(f"keys spread over both backends {counts}", len(counts) == 2 and all(counts)
          and sum(counts) == len(keys))

    # ListObjectsV2, 7 at a time.
    got, token, pages, ok = [], None, 0, True
    while True:
        q = "list-type=2&max-keys=7" + (f"&continuation-token={urllib.parse.quote(token)}" if token else "")
        st, _, x = req("GET", b, query=q)
        x = x.decode()
        k, _ = items(x)
        ok = ok and st == 200 and len(k) <= 7 and tag(x, "KeyCount") == str(len(k))
        got += k
        pages += 1
        if tag(x, "IsTruncated") != "true" or pages > 20:
            break
        token = tag(x, "NextContinuationToken")
    check("ListObjectsV2 pages of 7 give every key once, in order", ok and got == want,
          f"{got} != {want}")
    check("ListObjectsV2 took 4 pages", pages == 4, pages)

    # ListObjects v1 with markers.
    got, marker, pages = [], None, 0
    while True:
        q = "max-keys=5" + (f"&marker={urllib.parse.quote(marker)}" if marker else "")
        st, _, x = req("GET", b, query=q)
        x = x.decode()
        k, _ = items(x)
        got += k
        pages += 1
        if tag(x, "IsTruncated") != "true" or pages > 20:
            break
        marker = tag(x, "NextMarker")
    check("ListObjects v1 markers give every key once, in order", got == want, f"{got}")

    # Delimiter grouping, two items per page.
    seen, token, pages = [], None, 0
    while True:
        q = "list-type=2&delimiter=/&max-keys=2" + (f"&continuation-token={urllib.parse.quote(token)}" if token else "")
        st, _, x = req("GET", b, query=q)
        x = x.decode()
        k, p = items(x)
        seen += sorted(k + p, key=lambda s: s.encode())
        pages += 1
        if tag(x, "IsTruncated") != "true" or pages > 20:
            break
        token = tag(x, "NextContinuationToken")
    wantd = sorted({k.split("/")[0] + "/" if "/" in k else k for k in keys}, key=lambda s: s.encode())
    check("delimiter listing pages through prefixes and keys once each", seen == wantd,
          f"{seen} != {wantd}")
    st, _, x = req("GET", b, query="list-type=2&delimiter=/&prefix=b/")
    k, p = items(x.decode())
    check("prefix b/ with delimiter gives b/x/ and b/y/", p == ["b/x/", "b/y/"] and k == [], f"{k} {p}")
    st, _, x = req("GET", b, query="list-type=2&prefix=f&encoding-type=url")
    k, _ = items(x.decode())
    check("encoding-type=url encodes keys", k == ["f%20g"], k)
    st, _, x = req("GET", b, query="list-type=2&start-after=c&max-keys=1")
    k, _ = items(x.decode())
    check("start-after", k == ["d/../e"], k)
    st, _, x = req("GET", b, query="list-type=2&max-keys=abc")
    check("bad max-keys -> 400 InvalidArgument", st == 400 and b"InvalidArgument" in x, st)
    st, _, x = req("GET", b, query="list-type=2&continuation-token=zz")
    check("bad continuation token -> 400", st == 400, st)

    # DeleteObjects across both backends.
    doc = "<Delete>" + "".join(
        f"<Object><Key>{k.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')}</Key></Object>"
        for k in keys) + "</Delete>"
    md5 = base64.b64encode(hashlib.md5(doc.encode()).digest()).decode()
    st, _, x = req("POST", b, body=doc.encode(), query="delete", headers=[f"Content-MD5: {md5}"])
    deleted = [unxml(k) for k in re.findall(r"<Deleted><Key>(.*?)</Key>", x.decode())]
    check("DeleteObjects reports every key", st == 200 and sorted(deleted) == sorted(keys),
          f"{st} {len(deleted)}")
    st, _, x = req("POST", b, body=doc.encode(), query="delete", headers=["Content-MD5: AAAAAAAAAAAAAAAAAAAAAA=="])
    check("DeleteObjects with a wrong Content-MD5 -> 400 BadDigest", st == 400 and b"BadDigest" in x, st)
    st, _, x = req("GET", b, query="list-type=2")
    check("bucket empty after DeleteObjects", items(x.decode()) == ([], []))
    counts = [len(glob.glob(os.path.join(d, "buckets", b, "*.obj"))) for d in datadirs]
    check("no object files left on the backends", sum(counts) == 0, counts)
    st, _, _ = req("DELETE", b)
    check("delete empty bucket -> 204", st == 204, st)
    st, _, _ = req("HEAD", b)
    check("deleted bucket -> 404", st == 404, st)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
