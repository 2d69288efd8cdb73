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
    multipart()
    return 1 if fails else 0


def multipart():
    """Multipart upload corner cases that s3cmd does not reach."""
    b = "mpu"
    req("PUT", b)
    p1 = os.urandom(5 * 1024 * 1024)
    p2 = os.urandom(1000)
    st, _, x = req("POST", b, "obj", query="uploads", headers=["x-amz-meta-color: blue",
                                                                 "Content-Type: text/plain"])
    uid = tag(x.decode(), "UploadId")
    check("initiate multipart upload", st == 200 and uid, st)
    st, h1, _ = req("PUT", b, "obj", p1, query=f"partNumber=1&uploadId={uid}")
    st2, h2, _ = req("PUT", b, "obj", p2, query=f"partNumber=2&uploadId={uid}")
    e1, e2 = h1.get("etag", ""), h2.get("etag", "")
    check("upload two parts", st == 200 and st2 == 200 and e1 and e2, (st, st2))
    check("part ETag is the part's MD5", e1 == '"' + hashlib.md5(p1).hexdigest() + '"', e1)
    st, _, x = req("GET", b, "obj", query=f"uploadId={uid}")
    check("ListParts shows both parts", st == 200 and x.count(b"<Part>") == 2, st)
    st, _, x = req("GET", b, query="uploads")
    check("ListMultipartUploads shows the upload", st == 200 and uid.encode() in x, st)

    def complete(parts):
        doc = "<CompleteMultipartUpload>" + "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in parts) + \
            "</CompleteMultipartUpload>"
        return req("POST", b, "obj", doc.encode(), query=f"uploadId={uid}")

    st, _, x = complete([(1, e1), (2, '"00000000000000000000000000000000"')])
    check("wrong part ETag -> 400 InvalidPart", st == 400 and b"InvalidPart" in x, st)
    st, _, x = complete([(2, e2), (1, e1)])
    check("parts out of order -> 400 InvalidPartOrder", st == 400 and b"InvalidPartOrder" in x, st)
    st, _, x = complete([(2, e2), (3, e2)])
    check("missing part -> 400 InvalidPart", st == 400 and b"InvalidPart" in x, st)
    st, _, x = req("POST", b, "obj", b"<Complete", query=f"uploadId={uid}")
    check("malformed XML -> 400 MalformedXML", st == 400 and b"MalformedXML" in x, st)
    st, _, x = complete([(1, e1), (2, e2)])
    want = hashlib.md5(bytes.fromhex(e1.strip('"')) + bytes.fromhex(e2.strip('"'))).hexdigest() + "-2"
    check("complete -> md5-of-md5s-2 ETag", st == 200 and want.encode() in x, f"{st} {x[:300]}")
    st, h, body = req("GET", b, "obj")
    check("completed object reads back", st == 200 and body == p1 + p2, st)
    check("metadata and content type kept", h.get("x-amz-meta-color") == "blue"
          and h.get("content-type") == "text/plain", h)
    st, h, body = req("HEAD", b, "obj")
    check("HEAD gives the size and ETag", st == 200 and h.get("content-length") == str(len(p1) + len(p2))
          and h.get("etag") == f'"{want}"' and body == b"", h)
    st, _, x = req("PUT", b, "obj", p2, query=f"partNumber=1&uploadId={uid}")
    check("completed upload is gone -> 404 NoSuchUpload", st == 404 and b"NoSuchUpload" in x, st)
    st, _, x = req("POST", b, "small", query="uploads")
    uid = tag(x.decode(), "UploadId")
    st, h1, _ = req("PUT", b, "small", b"tiny", query=f"partNumber=1&uploadId={uid}")
    st, h2, _ = req("PUT", b, "small", b"tiny", query=f"partNumber=2&uploadId={uid}")
    doc = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>" + h1["etag"] +
           "</ETag></Part><Part><PartNumber>2</PartNumber><ETag>" + h2["etag"] +
           "</ETag></Part></CompleteMultipartUpload>")
    st, _, x = req("POST", b, "small", doc.encode(), query=f"uploadId={uid}")
    check("part under 5 MiB before the last -> 400 EntityTooSmall", st == 400 and b"EntityTooSmall" in x, st)
    st, _, _ = req("DELETE", b, "small", query=f"uploadId={uid}")
    check("abort -> 204", st == 204, st)
    st, _, x = req("DELETE", b, "small", query=f"uploadId={uid}")
    check("aborted upload -> 404 NoSuchUpload", st == 404 and b"NoSuchUpload" in x, st)
    st, _, x = req("PUT", b, "small", b"x", query="partNumber=1&uploadId=../../etc")
    check("bogus upload id -> 404 NoSuchUpload", st == 404 and b"NoSuchUpload" in x, st)
    st, _, x = req("PUT", b, "md5", b"hello", headers=["Content-MD5: XUFAKrxLKna5cZ2REBfFkg=="])
    check("matching Content-MD5 accepted", st == 200, st)
    st, _, x = req("PUT", b, "md5", b"hellO", headers=["Content-MD5: XUFAKrxLKna5cZ2REBfFkg=="])
    check("Content-MD5 mismatch -> 400 BadDigest", st == 400 and b"BadDigest" in x, st)
    st, _, x = req("PUT", b, "md5", b"hello", headers=["Content-MD5: nonsense"])
    check("malformed Content-MD5 -> 400 InvalidDigest", st == 400 and b"InvalidDigest" in x, st)


if __name__ == "__main__":
    sys.exit(main())
