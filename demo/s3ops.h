/* SPDX-License-Identifier: MIT */
/*
 * S3 object semantics that storaged and s3proxy both need, written once:
 * which sub-resources the demo leaves out, which key names it cannot read,
 * conditional requests (If-* and x-amz-copy-source-if-*), the copy source
 * header, the headers an object is stored and served with (RFC 2047 for
 * non-ASCII user metadata, response-* overrides), the multipart ETag and
 * the byte range of one part of a multipart object.  Pure functions over
 * the parsed request; nothing here does I/O.
 */
#ifndef DEMO_S3OPS_H
#define DEMO_S3OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "s3.h"
#include "util.h"

/* Whether the query names this parameter. */
bool s3_has_param(const struct s3_query *q, const char *name);
/* The out-of-scope sub-resource the query names (acl, policy, ...), answered
 * with 501 NotImplemented, or NULL. */
const char *s3_unsupported_subresource(const struct s3_query *q);
/*
 * Headers asking for what the demo does not do, which S3 clients must not
 * believe they got: server-side encryption (SSE-S3, SSE-KMS, SSE-C; 501
 * NotImplemented on a write, 400 InvalidRequest on a read or for a copy's
 * source, as no object is encrypted), Object Lock on CreateBucket (501) and
 * retention or legal hold on an object write (400 InvalidRequest, as S3
 * answers for a bucket without Object Lock).  has_key: an object request.
 * Returns 0, or the HTTP status with *code and *msg for the error.
 */
int s3_refused_headers(const struct http_msg *m, bool has_key, const char **code, const char **msg);
/* Whether S3 can parse this key: valid UTF-8 without C1 control characters
 * (S3 answers 400 "Couldn't parse the specified URI" otherwise). */
bool s3_key_readable(const char *k, size_t n);

/*
 * Conditional GET/HEAD (RFC 9110 as S3 applies it) against an object with
 * this ETag (unquoted) and mtime.  prefix is "" for If-*, or
 * "x-amz-copy-source-" for a copy's source.  Returns 0 (go on), 304 (not
 * modified) or 412 (precondition failed).
 */
int s3_check_get_conditions(const struct http_msg *m, const char *prefix, const char *etag,
			    int64_t mtime);
/* Conditional PUT: If-None-Match: * and If-Match against the current object
 * (etag NULL when there is none).  Returns 0, 404 (If-Match on a missing
 * key) or 412. */
int s3_check_put_conditions(const struct http_msg *m, const char *etag);
/* The message of the 412 PreconditionFailed error either leads to. */
#define S3_PRECONDITION_MSG "At least one of the pre-conditions you specified did not hold"

/* The 400 InvalidArgument messages for an x-amz-copy-source-range S3
 * refuses (s3_copy_range_parse's -EINVAL and -ERANGE). */
#define S3_COPY_RANGE_MALFORMED "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"
#define S3_COPY_RANGE_OUTSIDE "Range specified is not valid for the source object's size"
/* x-amz-copy-source: "[/]bucket/key[?versionId=...]", percent-encoded.
 * Returns 0 with src filled (free with s3_target_free), -ENOENT when the
 * header is absent, -EINVAL when malformed. */
int s3_copy_source(const struct http_msg *m, struct s3_target *src);
/* A copy of an object onto itself must change something (S3 refuses it
 * otherwise): true when the request replaces the metadata. */
bool s3_copy_replaces_meta(const struct http_msg *m);
/* CopyObjectResult / CopyPartResult. */
void s3_copy_result_xml(struct sbuf *x, bool part, const char *etag, int64_t mtime);

/* The request headers an object keeps, as "name: value\r\n" lines:
 * Cache-Control, Content-Disposition, Content-Encoding (less aws-chunked),
 * Content-Language, Expires and x-amz-meta-* (names lowercased).  Content-
 * Type goes to ct.  Returns 0 or -E2BIG past max bytes of lines. */
int s3_collect_meta(const struct http_msg *m, struct sbuf *ct, struct sbuf *meta, size_t max);
/* Appends a Content-Encoding value less its aws-chunked token (which
 * describes the request body, not the object) to out: the value exactly as
 * sent when it has no such token, else the other tokens with the client's
 * own separators. */
void s3_content_encoding_unchunked(struct sbuf *out, const char *v, size_t n);
/* Stored lines that are ours, not the object's (never sent to clients). */
#define S3_PARTS_LINE "x-poolshim-parts: "
/*
 * The response headers for an object stored with content type ct and meta
 * lines: the response-* query overrides win, x-amz-meta-* values that are
 * not plain ASCII go out RFC 2047-encoded (=?UTF-8?B?...?=).
 */
void s3_object_headers(struct sbuf *h, const struct s3_query *q, const char *ct, size_t ctl,
		       const char *meta, size_t ml);
/* Decodes one =?UTF-8?B?...?= value back into out (for copying an object's
 * headers from one server to another); other values are copied as given. */
void s3_meta_value_decode(struct sbuf *out, const char *v, size_t n);

/* Checks a body's MD5 against Content-MD5, when the request has one.
 * Returns 0, or -1 with the 400 error's *code and *msg. */
int s3_content_md5_check(const struct http_msg *m, const unsigned char md5[16],
			 const char **code, const char **msg);

/* GetBucketLocation's answer for a server in region. */
void s3_location_xml(struct sbuf *x, const char *region);
/* ListAllMyBucketsResult around the <Bucket> entries. */
#define S3_BUCKETS_HEAD S3_XML_HEAD "<ListAllMyBucketsResult " S3_XMLNS ">" S3_OWNER_XML "<Buckets>"
#define S3_BUCKETS_TAIL "</Buckets></ListAllMyBucketsResult>\n"

/* S3's multipart ETag: MD5 of the parts' binary MD5s, "-" and their count.
 * Every etag must be 32 hex digits. */
void s3_multipart_etag(char out[48], const struct s3_part_ref *p, int n);
/* The stored parts line's value for these part sizes ("s1,s2,..."). */
void s3_parts_line(struct sbuf *meta, const uint64_t *sizes, int n);
/*
 * Part pn of an object of size bytes whose meta lines may hold a parts
 * line.  Sets *count (1 for a simple object) and [*first, *last].  Returns 0,
 * or -1 when there is no such part.
 */
int s3_part_range(const char *meta, size_t ml, uint64_t size, long pn, int *count,
		  uint64_t *first, uint64_t *last);

#endif
