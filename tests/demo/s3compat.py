#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""S3 behaviour checks with a real client (boto3), run by s3compat.sh once
against s3proxy and once against a storaged node directly.

Each check is what an S3 client or conformance suite expects: CopyObject and
UploadPartCopy, ListObjectVersions on a never-versioned bucket, conditional
GET/HEAD/PUT, listing edges, stored and overridden headers, RFC 2047 user
metadata, status codes, multipart edges, and a clean 501 for what the demo
leaves out.  Prints one "ok:" or "FAIL:" line per check; exits 1 if any
failed.  Usage: s3compat.py ENDPOINT BUCKET [proxy|direct]
"""
import datetime
import email.header
import email.utils
import http.client
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3req  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

EP, B = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "proxy"
os.environ["S3_ENDPOINT"] = EP
fails = 0
s3 = boto3.client("s3", endpoint_url=EP, region_name="us-east-1",
                  aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                  aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                  config=Config(s3={"addressing_style": "path"},
                                retries={"max_attempts": 1}))
MiB = 1 << 20


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
    """(HTTP status, error code) of a call expected to fail; (200, None) if not."""
    try:
        r = fn(*a, **kw)
        return r["ResponseMetadata"]["HTTPStatusCode"], None
    except ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"].get("Code")


def raw(method, key=None, query="", headers=(), body=b""):
    o = s3req.Opts(query=query, headers=list(headers))
    return s3req.request(method, B, key, body, o)


def anon(method, path):
    u = urllib.parse.urlparse(EP)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request(method, path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def body_of(key, **kw):
    return s3.get_object(Bucket=B, Key=key, **kw)["Body"].read()


s3.create_bucket(Bucket=B)
SRC = b"copy me " * 1000
src = s3.put_object(Bucket=B, Key="src", Body=SRC, ContentType="text/x-src",
                    Metadata={"color": "blue"}, CacheControl="max-age=60")


def t_copy():
    r = s3.copy_object(Bucket=B, Key="dst", CopySource={"Bucket": B, "Key": "src"})
    check("CopyObject answers with the source's ETag",
          r["CopyObjectResult"]["ETag"] == src["ETag"], r.get("CopyObjectResult"))
    h = s3.head_object(Bucket=B, Key="dst")
    check("CopyObject copies the bytes", body_of("dst") == SRC)
    check("CopyObject keeps metadata and Content-Type (COPY directive)",
          h["Metadata"] == {"color": "blue"} and h["ContentType"] == "text/x-src"
          and h.get("CacheControl") == "max-age=60", h)
    s3.copy_object(Bucket=B, Key="dst2", CopySource=f"{B}/src", MetadataDirective="REPLACE",
                   Metadata={"color": "red"}, ContentType="text/x-new")
    h = s3.head_object(Bucket=B, Key="dst2")
    check("CopyObject REPLACE directive takes the request's metadata",
          h["Metadata"] == {"color": "red"} and h["ContentType"] == "text/x-new", h)
    check("CopyObject onto itself without REPLACE -> 400",
          status_of(s3.copy_object, Bucket=B, Key="src",
                    CopySource={"Bucket": B, "Key": "src"})[0] == 400)
    s3.copy_object(Bucket=B, Key="src", CopySource={"Bucket": B, "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"color": "blue"},
                   ContentType="text/x-src", CacheControl="max-age=60")
    check("CopyObject onto itself with REPLACE keeps the bytes", body_of("src") == SRC)
    check("CopyObject of a missing source -> 404 NoSuchKey",
          status_of(s3.copy_object, Bucket=B, Key="x",
                    CopySource={"Bucket": B, "Key": "nosuch"}) == (404, "NoSuchKey"))
    check("CopyObject with x-amz-copy-source-if-match that fails -> 412",
          status_of(s3.copy_object, Bucket=B, Key="x", CopySource={"Bucket": B, "Key": "src"},
                    CopySourceIfMatch='"0123"')[0] == 412)
    # Keys spread over both backends behind the proxy: copies cross them.
    for i in range(6):
        s3.copy_object(Bucket=B, Key=f"spread/{i}", CopySource={"Bucket": B, "Key": "src"})
    check("CopyObject to many keys (across backends)",
          all(body_of(f"spread/{i}") == SRC for i in range(6)))


def t_part_copy():
    u = s3.create_multipart_upload(Bucket=B, Key="pc")["UploadId"]
    r = s3.upload_part_copy(Bucket=B, Key="pc", UploadId=u, PartNumber=1,
                            CopySource={"Bucket": B, "Key": "src"}, CopySourceRange="bytes=8-23")
    et = r["CopyPartResult"]["ETag"]
    s3.complete_multipart_upload(Bucket=B, Key="pc", UploadId=u, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": et}]})
    check("UploadPartCopy with a range", body_of("pc") == SRC[8:24])


def t_versions():
    s3.put_object(Bucket=B, Key="v/a", Body=b"a")
    s3.put_object(Bucket=B, Key="v/b", Body=b"b")
    r = s3.list_object_versions(Bucket=B, Prefix="v/")
    vs = r.get("Versions", [])
    check("ListObjectVersions lists every key",
          [v["Key"] for v in vs] == ["v/a", "v/b"], r)
    check("ListObjectVersions: version id null, latest",
          all(v["VersionId"] == "null" and v["IsLatest"] for v in vs))
    r = s3.list_object_versions(Bucket=B, Prefix="v/", MaxKeys=1)
    check("ListObjectVersions pages with NextKeyMarker",
          r["IsTruncated"] and r.get("NextKeyMarker") == "v/a", r)
    r = s3.list_object_versions(Bucket=B, Prefix="v/", KeyMarker="v/a")
    check("ListObjectVersions resumes after KeyMarker",
          [v["Key"] for v in r.get("Versions", [])] == ["v/b"], r)
    check("GET versionId=null is the object", body_of("v/a", VersionId="null") == b"a")
    check("GET of another version id -> 400",
          status_of(s3.get_object, Bucket=B, Key="v/a", VersionId="3HL4kqtJlcpXroDTDmjVBH40Nrjfkd")[0] == 400)
    s3.delete_object(Bucket=B, Key="v/a", VersionId="null")
    s3.delete_objects(Bucket=B, Delete={"Objects": [{"Key": "v/b", "VersionId": "null"}]})
    r = s3.list_object_versions(Bucket=B, Prefix="v/")
    check("emptying by version id null", not r.get("Versions"), r)


def t_conditional():
    et = src["ETag"]
    h = s3.head_object(Bucket=B, Key="src")
    lm = h["LastModified"]
    past = lm - datetime.timedelta(days=1)
    future = lm + datetime.timedelta(days=1)
    check("GET If-Match matching -> 200", status_of(s3.get_object, Bucket=B, Key="src", IfMatch=et)[0] == 200)
    check("GET If-Match other -> 412 PreconditionFailed",
          status_of(s3.get_object, Bucket=B, Key="src", IfMatch='"abc"') == (412, "PreconditionFailed"))
    check("GET If-None-Match matching -> 304",
          status_of(s3.get_object, Bucket=B, Key="src", IfNoneMatch=et)[0] == 304)
    check("GET If-None-Match other -> 200",
          status_of(s3.get_object, Bucket=B, Key="src", IfNoneMatch='"abc"')[0] == 200)
    check("GET If-Modified-Since later -> 304",
          status_of(s3.get_object, Bucket=B, Key="src", IfModifiedSince=future)[0] == 304)
    check("GET If-Modified-Since earlier -> 200",
          status_of(s3.get_object, Bucket=B, Key="src", IfModifiedSince=past)[0] == 200)
    check("GET If-Unmodified-Since earlier -> 412",
          status_of(s3.get_object, Bucket=B, Key="src", IfUnmodifiedSince=past)[0] == 412)
    check("GET If-Unmodified-Since later -> 200",
          status_of(s3.get_object, Bucket=B, Key="src", IfUnmodifiedSince=future)[0] == 200)
    check("HEAD If-None-Match matching -> 304",
          status_of(s3.head_object, Bucket=B, Key="src", IfNoneMatch=et)[0] == 304)
    check("HEAD If-Match other -> 412",
          status_of(s3.head_object, Bucket=B, Key="src", IfMatch='"abc"')[0] == 412)
    st, _, _ = raw("PUT", "src", headers=["If-None-Match: *"], body=b"overwritten")
    check("PUT If-None-Match: * on an existing key -> 412", st == 412 and body_of("src") == SRC, st)
    st, _, _ = raw("PUT", "cond-new", headers=["If-None-Match: *"], body=b"new")
    check("PUT If-None-Match: * on a new key -> 200", st == 200, st)
    st, _, _ = raw("PUT", "src", headers=['If-Match: "abc"'], body=b"overwritten")
    check("PUT If-Match other -> 412", st == 412 and body_of("src") == SRC, st)
    st, _, _ = raw("PUT", "cond-new", headers=[f"If-Match: {et}"], body=b"x")
    check("PUT If-Match on another object's ETag -> 412", st == 412, st)
    st, _, _ = raw("PUT", "nosuch-cond", headers=['If-Match: "abc"'], body=b"x")
    check("PUT If-Match on a missing key -> 404", st == 404, st)


def t_listing():
    for k in ("l/bar", "l/baz", "l/foo"):
        s3.put_object(Bucket=B, Key=k, Body=b"x")
    r = s3.list_objects_v2(Bucket=B, Prefix="l/", ContinuationToken="")
    check("ListObjectsV2 with an empty continuation token starts at the beginning",
          [c["Key"] for c in r.get("Contents", [])] == ["l/bar", "l/baz", "l/foo"]
          and r.get("ContinuationToken") == "", r)
    r = s3.list_objects_v2(Bucket=B, Prefix="l/", FetchOwner=True)
    check("ListObjectsV2 fetch-owner=true gives Owner",
          all("Owner" in c and c["Owner"].get("ID") for c in r.get("Contents", [])), r)
    r = s3.list_objects(Bucket=B, Prefix="l/")
    check("ListObjects (v1) gives Owner", all("Owner" in c for c in r.get("Contents", [])), r)
    s3.put_object(Bucket=B, Key="nl\nkey/x", Body=b"x")
    st, _, x = raw("GET", query="list-type=2&encoding-type=url&prefix=nl%0A")
    x = x.decode()
    check("encoding-type=url echoed", "<EncodingType>url</EncodingType>" in x, x)
    check("encoding-type=url applies to Prefix and Key",
          "<Prefix>nl%0A</Prefix>" in x and "<Key>nl%0Akey/x</Key>" in x, x)
    r = s3.list_objects_v2(Bucket=B, Prefix="nl\n", Delimiter="/")
    check("boto3 decodes a listing of a prefix with a newline",
          r.get("Prefix") == "nl\n" and [p["Prefix"] for p in r.get("CommonPrefixes", [])] == ["nl\nkey/"], r)
    r = s3.list_objects(Bucket=B, Prefix="nl\n", Delimiter="/")
    check("ListObjects (v1) under encoding-type=url: a prefix with a newline reads back",
          r.get("Prefix") == "nl\n" and r.get("EncodingType") == "url"
          and [p["Prefix"] for p in r.get("CommonPrefixes", [])] == ["nl\nkey/"], r)


def t_headers():
    exp = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    s3.put_object(Bucket=B, Key="hdr", Body=b"hello", CacheControl="no-store",
                  Expires=exp, ContentEncoding="x-demo", ContentDisposition='inline; filename="h"',
                  ContentLanguage="de")
    h = s3.head_object(Bucket=B, Key="hdr")["ResponseMetadata"]["HTTPHeaders"]
    check("Cache-Control stored and returned", h.get("cache-control") == "no-store", h)
    check("Expires stored and returned",
          email.utils.parsedate_to_datetime(h.get("expires", "x, 1 Jan 1970 00:00:00 GMT")) == exp, h)
    check("Content-Encoding stored and returned", h.get("content-encoding") == "x-demo", h)
    check("Content-Disposition and Content-Language returned",
          h.get("content-disposition") == 'inline; filename="h"' and h.get("content-language") == "de", h)
    r = s3.get_object(Bucket=B, Key="hdr", ResponseContentType="text/x-over",
                      ResponseCacheControl="no-cache", ResponseContentDisposition="attachment",
                      ResponseContentEncoding="identity", ResponseContentLanguage="fr",
                      ResponseExpires=exp + datetime.timedelta(days=1))
    g = r["ResponseMetadata"]["HTTPHeaders"]
    check("GET response-* overrides",
          g.get("content-type") == "text/x-over" and g.get("cache-control") == "no-cache"
          and g.get("content-disposition") == "attachment" and g.get("content-encoding") == "identity"
          and g.get("content-language") == "fr" and "2030" in g.get("expires", ""), g)
    check("response-* overrides keep the body", r["Body"].read() == b"hello")
    # UTF-8 bytes on the wire (http.client sends str headers as latin-1).
    val = "grüße 日本"
    wire = val.encode().decode("latin-1")
    st, _, _ = raw("PUT", "meta8", headers=[f"x-amz-meta-word: {wire}"], body=b"m")
    got = s3.head_object(Bucket=B, Key="meta8")["Metadata"].get("word", "")
    dec = "".join(p.decode(c or "ascii") if isinstance(p, bytes) else p
                  for p, c in email.header.decode_header(got))
    check("non-ASCII user metadata comes back RFC 2047-encoded",
          st == 200 and got.isascii() and got.startswith("=?UTF-8?") and dec == val, f"{st} {got!r}")
    for i in range(4):
        s3.copy_object(Bucket=B, Key=f"meta8/{i}", CopySource={"Bucket": B, "Key": "meta8"})
    check("CopyObject keeps non-ASCII metadata (across backends)",
          all(s3.head_object(Bucket=B, Key=f"meta8/{i}")["Metadata"].get("word") == got
              for i in range(4)))
    st, hd, x = raw("GET", "no-such-key")
    x = x.decode()
    check("error body RequestId equals x-amz-request-id",
          st == 404 and f"<RequestId>{hd.get('x-amz-request-id')}</RequestId>" in x, f"{hd} {x}")


def t_status():
    if MODE == "proxy":
        st, x = anon("GET", "/no-such-bucket-anon/k")
        check("anonymous GET of a missing bucket -> 404 NoSuchBucket",
              st == 404 and b"NoSuchBucket" in x, f"{st} {x}")
        st, x = anon("GET", f"/{B}/no-such-key")
        check("anonymous GET of a missing key -> 404 NoSuchKey",
              st == 404 and b"NoSuchKey" in x, f"{st} {x}")
        st, x = anon("GET", f"/{B}/src")
        check("anonymous GET of an existing key -> 403 AccessDenied",
              st == 403 and b"AccessDenied" in x, f"{st} {x}")
    check("unreadable key name -> 400",
          status_of(s3.get_object, Bucket=B, Key="\xae\x8a-")[0] == 400)


def upload(key, parts):
    u = s3.create_multipart_upload(Bucket=B, Key=key, CacheControl="max-age=5")["UploadId"]
    lst = []
    for i, p in enumerate(parts, 1):
        lst.append({"PartNumber": i, "ETag": s3.upload_part(Bucket=B, Key=key, UploadId=u,
                                                            PartNumber=i, Body=p)["ETag"]})
    return u, lst


def t_multipart():
    p1, p2 = b"1" * (5 * MiB), b"two"
    u, lst = upload("mp", [p1, p2])
    a = s3.complete_multipart_upload(Bucket=B, Key="mp", UploadId=u, MultipartUpload={"Parts": lst})
    st, code = status_of(s3.complete_multipart_upload, Bucket=B, Key="mp", UploadId=u,
                         MultipartUpload={"Parts": lst})
    check("repeated CompleteMultipartUpload succeeds", st == 200, code)
    b = s3.complete_multipart_upload(Bucket=B, Key="mp", UploadId=u, MultipartUpload={"Parts": lst})
    check("repeated CompleteMultipartUpload gives the same ETag", a["ETag"] == b["ETag"])
    check("multipart upload keeps Cache-Control",
          s3.head_object(Bucket=B, Key="mp").get("CacheControl") == "max-age=5")
    h = s3.head_object(Bucket=B, Key="mp", PartNumber=1)
    check("HEAD partNumber=1: that part's length and PartsCount",
          h["ContentLength"] == len(p1) and h.get("PartsCount") == 2, h)
    r = s3.get_object(Bucket=B, Key="mp", PartNumber=2)
    check("GET partNumber=2: that part's bytes, PartsCount, Content-Range",
          r["Body"].read() == p2 and r.get("PartsCount") == 2
          and r.get("ContentRange") == f"bytes {len(p1)}-{len(p1) + 2}/{len(p1) + 3}", r)
    check("GET partNumber past the last part -> 400 InvalidPart",
          status_of(s3.get_object, Bucket=B, Key="mp", PartNumber=3) == (400, "InvalidPart"))
    check("GET partNumber=1 of a simple object: the whole object",
          body_of("hdr", PartNumber=1) == b"hello")
    # A part sent again (same number) replaces the first; a client that
    # lists both copies is not refused.
    u, lst = upload("resend", [b"first"])
    e2 = s3.upload_part(Bucket=B, Key="resend", UploadId=u, PartNumber=1, Body=b"again")["ETag"]
    st, code = status_of(s3.complete_multipart_upload, Bucket=B, Key="resend", UploadId=u,
                         MultipartUpload={"Parts": [lst[0] | {"ETag": e2}, {"PartNumber": 1, "ETag": e2}]})
    check("re-sent part listed twice is accepted", st == 200 and body_of("resend") == b"again", code)


def t_not_implemented():
    calls = [
        ("GetBucketAcl", s3.get_bucket_acl, {"Bucket": B}),
        ("GetBucketPolicy", s3.get_bucket_policy, {"Bucket": B}),
        ("GetBucketEncryption", s3.get_bucket_encryption, {"Bucket": B}),
        ("GetObjectLockConfiguration", s3.get_object_lock_configuration, {"Bucket": B}),
        ("GetBucketLifecycleConfiguration", s3.get_bucket_lifecycle_configuration, {"Bucket": B}),
        ("GetBucketLogging", s3.get_bucket_logging, {"Bucket": B}),
        ("GetBucketTagging", s3.get_bucket_tagging, {"Bucket": B}),
        ("GetBucketCors", s3.get_bucket_cors, {"Bucket": B}),
        ("GetObjectAcl", s3.get_object_acl, {"Bucket": B, "Key": "src"}),
        ("GetObjectTagging", s3.get_object_tagging, {"Bucket": B, "Key": "src"}),
    ]
    bad = [n for n, f, kw in calls if status_of(f, **kw) != (501, "NotImplemented")]
    check("out-of-scope operations answer 501 NotImplemented", not bad, bad)


for name, fn in [("copy", t_copy), ("part copy", t_part_copy), ("versions", t_versions),
                 ("conditional", t_conditional), ("listing", t_listing), ("headers", t_headers),
                 ("status", t_status), ("multipart", t_multipart),
                 ("not implemented", t_not_implemented)]:
    run(name, fn)
sys.exit(1 if fails else 0)
