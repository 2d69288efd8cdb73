#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The edges of what the demo stack says it does (docs/demo.md's operations
table), run by s3edges.sh once through s3proxy and once against a storaged
node directly.

What it does not do is refused, never accepted and ignored: server-side
encryption, Object Lock, ?policyStatus.  And the answers S3 gives where the
demo used to differ: GET/HEAD ?partNumber past the last part, UploadPartCopy
ranges (the same answer whichever nodes hold the source and the
destination), Content-Encoding kept as sent, an unsigned PUT with
Expect: 100-continue answered at once, DeleteBucket taking its multipart
uploads with it, PUT If-None-Match: * on an existing key.

Keys are chosen so that, through the proxy, each check that depends on
placement runs with copies on both nodes: the node holding a key is found
by looking for its file (SHA-256 of the key) in each node's data directory.
Prints one "ok:" or "FAIL:" line per check; exits 1 if any failed.
Usage: s3edges.py ENDPOINT BUCKET proxy|direct DATADIR...
"""
import datetime
import hashlib
import os
import socket
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3req  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

EP, B, MODE = sys.argv[1], sys.argv[2], sys.argv[3]
DATA = sys.argv[4:]
os.environ["S3_ENDPOINT"] = EP
fails = 0
s3 = boto3.client("s3", endpoint_url=EP, region_name="us-east-1",
                  aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                  aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                  config=Config(s3={"addressing_style": "path"},
                                retries={"max_attempts": 1}))


def check(what, cond, detail=""):
    global fails
    if cond:
        print(f"ok: {MODE}: {what}")
    else:
        fails += 1
        print(f"FAIL: {MODE}: {what} {detail}", file=sys.stderr)


def run(what, fn):
    """Runs one group of checks; an exception fails the group."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        check(what, False, f"raised {e!r}")


def status_of(fn, *a, **kw):
    """(HTTP status, error code) of a call; (200, None) when it succeeds."""
    try:
        r = fn(*a, **kw)
        return r["ResponseMetadata"]["HTTPStatusCode"], None
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"].get("Code")


def raw(method, key=None, query="", headers=(), body=b"", bucket=B):
    o = s3req.Opts(query=query, headers=list(headers))
    return s3req.request(method, bucket, key, body, o)


def exists(key, bucket=B):
    return status_of(s3.head_object, Bucket=bucket, Key=key)[0] == 200


def node_of(key, bucket=B):
    """Index of the data directory holding key's file, or None."""
    name = hashlib.sha256(key.encode()).hexdigest() + ".obj"
    for i, d in enumerate(DATA):
        if os.path.exists(os.path.join(d, "buckets", bucket, name)):
            return i
    return None


def keys_by_node(prefix, per_node, bucket=B):
    """Key names under prefix, per_node of them on each node (through the
    proxy: both nodes; directly: the one), found by putting each and
    looking where it landed; the probes are deleted again."""
    found = [[] for _ in DATA]
    for i in range(40 * per_node * len(DATA)):
        k = f"{prefix}{i}"
        s3.put_object(Bucket=bucket, Key=k, Body=b"probe")
        n = node_of(k, bucket)
        s3.delete_object(Bucket=bucket, Key=k)
        if n is not None and len(found[n]) < per_node:
            found[n].append(k)
        if all(len(v) == per_node for v in found):
            return found
    raise RuntimeError(f"not enough keys found on every node: {found}")


s3.create_bucket(Bucket=B)
POOL = keys_by_node("k", 20)
NODES = range(len(DATA))


def take(n):
    """A fresh key that lives on node n."""
    return POOL[n].pop()


def t_encryption():
    kms = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "arn:aws:kms:us-east-1:1:key/x"}
    ssec = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": "k" * 32}
    for name, kw in [("SSE-S3", {"ServerSideEncryption": "AES256"}), ("SSE-KMS", kms),
                     ("SSE-C", ssec)]:
        for n in NODES:
            k = take(n)
            check(f"PutObject with {name} -> 501 NotImplemented, nothing stored (node {n})",
                  status_of(s3.put_object, Bucket=B, Key=k, Body=b"secret", **kw)
                  == (501, "NotImplemented") and not exists(k))
        check(f"CreateMultipartUpload with {name} -> 501 NotImplemented",
              status_of(s3.create_multipart_upload, Bucket=B, Key="mpu-" + name, **kw)
              == (501, "NotImplemented"))
    s3.put_object(Bucket=B, Key="plain", Body=b"plain")
    for n in NODES:
        k = take(n)
        check(f"CopyObject asking for SSE-S3 -> 501 NotImplemented (to node {n})",
              status_of(s3.copy_object, Bucket=B, Key=k, CopySource=f"{B}/plain",
                        ServerSideEncryption="AES256") == (501, "NotImplemented")
              and not exists(k))
    check("GetObject with an SSE-C key -> 400 InvalidRequest (no object is encrypted)",
          status_of(s3.get_object, Bucket=B, Key="plain", **ssec) == (400, "InvalidRequest"))


def t_object_lock():
    check("CreateBucket with ObjectLockEnabledForBucket -> 501 NotImplemented",
          status_of(s3.create_bucket, Bucket=B + "-lock", ObjectLockEnabledForBucket=True)
          == (501, "NotImplemented"))
    check("... and no bucket is created",
          status_of(s3.head_bucket, Bucket=B + "-lock")[0] == 404)
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    for n in NODES:
        k = take(n)
        check(f"PutObject with ObjectLockMode -> 400 InvalidRequest, nothing stored (node {n})",
              status_of(s3.put_object, Bucket=B, Key=k, Body=b"x",
                        ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until)
              == (400, "InvalidRequest") and not exists(k))
        k = take(n)
        check(f"PutObject with ObjectLockLegalHoldStatus -> 400 InvalidRequest (node {n})",
              status_of(s3.put_object, Bucket=B, Key=k, Body=b"x",
                        ObjectLockLegalHoldStatus="ON") == (400, "InvalidRequest")
              and not exists(k))
    check("CreateMultipartUpload with ObjectLockMode -> 400 InvalidRequest",
          status_of(s3.create_multipart_upload, Bucket=B, Key="mpu-lock",
                    ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)
          == (400, "InvalidRequest"))


def t_policy_status():
    check("GetBucketPolicyStatus -> 501 NotImplemented",
          status_of(s3.get_bucket_policy_status, Bucket=B) == (501, "NotImplemented"))


def t_part_number():
    for n in NODES:
        k = take(n)
        s3.put_object(Bucket=B, Key=k, Body=b"hello")
        check(f"GET partNumber=2 of a simple object -> 400 InvalidPart (node {n})",
              status_of(s3.get_object, Bucket=B, Key=k, PartNumber=2) == (400, "InvalidPart"))
        check(f"HEAD partNumber=2 of a simple object -> 400 (node {n})",
              status_of(s3.head_object, Bucket=B, Key=k, PartNumber=2)[0] == 400)
        k = take(n)
        u = s3.create_multipart_upload(Bucket=B, Key=k)["UploadId"]
        e = s3.upload_part(Bucket=B, Key=k, UploadId=u, PartNumber=1, Body=b"one part")["ETag"]
        s3.complete_multipart_upload(Bucket=B, Key=k, UploadId=u, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e}]})
        check(f"GET partNumber=1 of a one-part upload: its bytes (node {n})",
              s3.get_object(Bucket=B, Key=k, PartNumber=1)["Body"].read() == b"one part")
        check(f"GET partNumber=2 of a one-part upload -> 400 InvalidPart (node {n})",
              status_of(s3.get_object, Bucket=B, Key=k, PartNumber=2) == (400, "InvalidPart"))


def t_part_copy_ranges():
    """Every source node x destination node: the same answers."""
    src = b"hello"
    srcs = [take(n) for n in NODES]
    for k in srcs:
        s3.put_object(Bucket=B, Key=k, Body=src)
    bad = ["bytes=0-21", "bytes=5-6", "bytes=0-5", "bytes=0", "x", "bytes=-2", "bytes=2-",
           "bytes=0-1,3-4", "bytes=3-1", "bytes=hello-world"]
    good = [("bytes=1-3", src[1:4]), ("bytes=0-4", src), ("bytes=4-4", src[4:])]
    answers = {}
    for sn, sk in enumerate(srcs):
        for dn in NODES:
            dk = take(dn)
            where = f"source on node {sn}, destination on node {dn}"
            u = s3.create_multipart_upload(Bucket=B, Key=dk)["UploadId"]
            got = []
            for rng, want in [(b, None) for b in bad] + good:
                try:
                    r = s3.upload_part_copy(Bucket=B, Key=dk, UploadId=u, PartNumber=1,
                                            CopySource={"Bucket": B, "Key": sk},
                                            CopySourceRange=rng)
                    ans = (200, r["CopyPartResult"]["ETag"].strip('"'))
                except ClientError as e:
                    ans = (e.response["ResponseMetadata"]["HTTPStatusCode"],
                           e.response["Error"].get("Code"))
                got.append(ans)
                if want is None:
                    check(f"UploadPartCopy {rng} of a 5-byte source -> 400 InvalidArgument ({where})",
                          ans == (400, "InvalidArgument"), ans)
                else:
                    check(f"UploadPartCopy {rng}: the ETag is the MD5 of those bytes ({where})",
                          ans == (200, hashlib.md5(want).hexdigest()), ans)
            # The last copy stands as part 1.
            parts = s3.list_parts(Bucket=B, Key=dk, UploadId=u).get("Parts", [])
            s3.complete_multipart_upload(Bucket=B, Key=dk, UploadId=u, MultipartUpload={
                "Parts": [{"PartNumber": 1, "ETag": p["ETag"]} for p in parts]})
            check(f"UploadPartCopy result reads back ({where})",
                  s3.get_object(Bucket=B, Key=dk)["Body"].read() == good[-1][1])
            answers[(sn, dn)] = got
    check("UploadPartCopy answers do not depend on placement",
          len({tuple(v) for v in answers.values()}) == 1, answers)


def t_content_encoding():
    for n in NODES:
        k = take(n)
        s3.put_object(Bucket=B, Key=k, Body=b"x", ContentEncoding="deflate, gzip")
        h = s3.head_object(Bucket=B, Key=k)["ResponseMetadata"]["HTTPHeaders"]
        check(f"Content-Encoding 'deflate, gzip' comes back as sent (node {n})",
              h.get("content-encoding") == "deflate, gzip", h.get("content-encoding"))
        for dn in NODES:
            d = take(dn)
            s3.copy_object(Bucket=B, Key=d, CopySource=f"{B}/{k}")
            h = s3.head_object(Bucket=B, Key=d)["ResponseMetadata"]["HTTPHeaders"]
            check(f"CopyObject keeps Content-Encoding as sent (node {n} to node {dn})",
                  h.get("content-encoding") == "deflate, gzip", h.get("content-encoding"))
    if MODE == "proxy":
        # aws-chunked describes the request body: the proxy decodes it and
        # drops that token, keeping the rest as the client wrote it.
        for n in NODES:
            k = take(n)
            o = s3req.Opts(payload="streaming", headers=["Content-Encoding: deflate,  gzip"])
            st, _, _ = s3req.request("PUT", B, k, b"chunked body", o)
            h = s3.head_object(Bucket=B, Key=k)["ResponseMetadata"]["HTTPHeaders"]
            check(f"aws-chunked upload: the other encodings kept as sent (node {n})",
                  st == 200 and h.get("content-encoding") == "deflate,  gzip",
                  f"{st} {h.get('content-encoding')!r}")


def expect_put(path, auth=None, length=1000, limit=25.0):
    """Sends a PUT head with Expect: 100-continue and no body, then waits
    (up to limit seconds, a hang detector) for the answer.  Returns
    (status, seconds, saw 100 Continue)."""
    u = urllib.parse.urlparse(EP)
    s = socket.create_connection((u.hostname, u.port), timeout=limit)
    head = (f"PUT {path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Length: {length}\r\n"
            "Expect: 100-continue\r\n")
    if auth:
        head += auth
    t0 = time.time()
    s.sendall((head + "\r\n").encode())
    data = b""
    try:
        while b"\r\n\r\n" not in data or data.startswith(b"HTTP/1.1 100") and \
                data.count(b"\r\n\r\n") < 2:
            b = s.recv(4096)
            if not b:
                break
            data += b
    except socket.timeout:
        pass
    dt = time.time() - t0
    s.close()
    final = [ln for ln in data.split(b"\r\n") if ln.startswith(b"HTTP/1.1 ") and
             not ln.startswith(b"HTTP/1.1 100")]
    st = int(final[0].split()[1]) if final else 0
    return st, dt, data.startswith(b"HTTP/1.1 100")


def t_expect():
    if MODE == "proxy":
        for n in NODES:
            st, dt, cont = expect_put(f"/{B}/{take(n)}")
            check(f"unsigned PUT with Expect: 100-continue -> 403 at once, no 100 (node {n})",
                  st == 403 and not cont and dt < 20, f"{st} after {dt:.1f} s, 100: {cont}")
        bad = ("Authorization: AWS4-HMAC-SHA256 Credential=NOSUCHKEY/20200101/us-east-1/s3/"
               "aws4_request, SignedHeaders=host, Signature=" + "0" * 64 + "\r\n"
               "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n")
        st, dt, cont = expect_put(f"/{B}/{take(0)}", auth=bad)
        check("PUT with an unknown access key and Expect: 100-continue -> 403 at once",
              st == 403 and not cont and dt < 20, f"{st} after {dt:.1f} s")
    else:
        st, dt, cont = expect_put(f"/{B}-nosuch/k")
        check("PUT to a missing bucket with Expect: 100-continue -> 404 at once, no 100",
              st == 404 and not cont and dt < 20, f"{st} after {dt:.1f} s, 100: {cont}")
    check("served after the refused uploads", exists("plain"))


def uploads_on_disk(bucket):
    """Per node, the upload directories whose info file names bucket, plus
    any upload directory left without one."""
    counts = []
    for d in DATA:
        ud = os.path.join(d, "uploads")
        n = 0
        for e in os.listdir(ud):
            try:
                with open(os.path.join(ud, e, "info"), "rb") as f:
                    n += (bucket + "/").encode() in f.read(4096)
            except OSError:
                n += 1
        counts.append(n)
    return counts


def t_delete_bucket_uploads():
    bk = B + "-mpdel"
    s3.create_bucket(Bucket=bk)
    keys = keys_by_node("u", 1, bk)
    for n in NODES:
        k = keys[n][0]
        u = s3.create_multipart_upload(Bucket=bk, Key=k)["UploadId"]
        s3.upload_part(Bucket=bk, Key=k, UploadId=u, PartNumber=1, Body=b"part")
    listed = len(s3.list_multipart_uploads(Bucket=bk).get("Uploads", []))
    check("an upload in progress on every node",
          listed == len(DATA) and uploads_on_disk(bk) == [1] * len(DATA),
          f"{listed} listed, {uploads_on_disk(bk)} on disk")
    check("DeleteBucket with uploads in progress -> 204",
          status_of(s3.delete_bucket, Bucket=bk)[0] == 204)
    check("... and its uploads are gone from every node", uploads_on_disk(bk) == [0] * len(DATA),
          uploads_on_disk(bk))
    s3.create_bucket(Bucket=bk)
    r = s3.list_multipart_uploads(Bucket=bk)
    check("a new bucket of that name lists no uploads", not r.get("Uploads"), r.get("Uploads"))
    s3.delete_bucket(Bucket=bk)


def t_if_none_match():
    for n in NODES:
        k = take(n)
        s3.put_object(Bucket=B, Key=k, Body=b"first")
        for pl in ("hash", "unsigned", "streaming"):
            if pl == "streaming" and MODE != "proxy":
                continue
            o = s3req.Opts(payload=pl, headers=["If-None-Match: *"])
            st, _, _ = s3req.request("PUT", B, k, b"second", o)
            check(f"PUT If-None-Match: * on an existing key -> 412, object kept (node {n}, {pl})",
                  st == 412 and s3.get_object(Bucket=B, Key=k)["Body"].read() == b"first", st)
        st, _, _ = raw("PUT", take(n), headers=["If-None-Match: *"], body=b"new")
        check(f"PUT If-None-Match: * on a new key -> 200 (node {n})", st == 200, st)
        u = s3.create_multipart_upload(Bucket=B, Key=k)["UploadId"]
        e = s3.upload_part(Bucket=B, Key=k, UploadId=u, PartNumber=1, Body=b"mp")["ETag"]
        doc = (f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{e}</ETag>"
               "</Part></CompleteMultipartUpload>").encode()
        st, _, _ = raw("POST", k, query=f"uploadId={u}", headers=["If-None-Match: *"], body=doc)
        check(f"CompleteMultipartUpload If-None-Match: * on an existing key -> 412 (node {n})",
              st == 412 and s3.get_object(Bucket=B, Key=k)["Body"].read() == b"first", st)
        s3.abort_multipart_upload(Bucket=B, Key=k, UploadId=u)


for name, fn in [("encryption", t_encryption), ("object lock", t_object_lock),
                 ("policy status", t_policy_status), ("part number", t_part_number),
                 ("part copy ranges", t_part_copy_ranges),
                 ("content encoding", t_content_encoding), ("expect", t_expect),
                 ("delete bucket uploads", t_delete_bucket_uploads),
                 ("if-none-match", t_if_none_match)]:
    run(name, fn)
sys.exit(1 if fails else 0)
