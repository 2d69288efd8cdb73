/* SPDX-License-Identifier: MIT */
/*
 * S3 protocol pieces shared by storaged, s3proxy and loadgen: request paths
 * and query strings, list parameters and the ListBucketResult document,
 * Range, the small XML documents S3 clients send (CompleteMultipartUpload,
 * Delete), and error XML.  All parsers here are pure functions over counted
 * strings; the fuzz targets in tests/demo/fuzz call them directly.
 */
#ifndef DEMO_S3_H
#define DEMO_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

#define S3_MAX_KEY 1024
#define S3_MAX_QUERY_PARAMS 64

/* Standard XML prologue, and the namespace of every S3 result document. */
#define S3_XML_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define S3_XMLNS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""
/* The one owner the demo knows. */
#define S3_OWNER_XML "<Owner><ID>poolshim</ID><DisplayName>poolshim</DisplayName></Owner>"

struct s3_param {
	char *name, *value;     /* decoded, NUL-terminated */
	size_t nlen, vlen;
	bool has_value;
};

struct s3_query {
	struct s3_param p[S3_MAX_QUERY_PARAMS];
	int n;
	char *store;
};

/* Splits and decodes a query string (without '?').  Returns 0 or -EINVAL
 * (bad escape, too many params) or -ENOMEM.  Free with s3_query_free. */
int s3_query_parse(const char *q, size_t n, struct s3_query *out);
void s3_query_free(struct s3_query *q);
/* Value of the first param with that name ("" when it has no '='), or NULL. */
const char *s3_query_get(const struct s3_query *q, const char *name, size_t *vlen);

/* A request target split into bucket and key (both decoded). */
struct s3_target {
	char bucket[256];
	char *key;              /* malloc'd, may contain any byte */
	size_t key_len;
	bool has_key;           /* "/bucket/" has an empty key: treated as none */
	const char *raw_path, *raw_query;
	size_t raw_path_len, raw_query_len;
};

/* Parses "/bucket/key?query".  Returns 0, -EINVAL (malformed), -ENAMETOOLONG
 * (key over S3_MAX_KEY) or -ENOMEM. */
int s3_target_parse(const char *url, size_t n, struct s3_target *t);
void s3_target_free(struct s3_target *t);

/* S3's bucket naming rules (3-63 of [a-z0-9.-], no "..", not an IP). */
bool s3_bucket_name_ok(const char *b);

struct s3_list_params {
	int version;            /* 1, 2, or 3 for ListObjectVersions */
	const char *prefix, *delimiter;
	size_t prefix_len, delimiter_len;
	int max_keys;
	/* Resume strictly after this name (marker, start-after or token). */
	char *after;
	size_t after_len;
	bool url_encode;
	bool fetch_owner;
	const char *marker_raw;    /* v1 marker / v2 start-after as given */
	size_t marker_raw_len;
	const char *token_raw;     /* v2 continuation-token as given */
	size_t token_raw_len;
};

/* Reads ListObjects parameters from q.  Returns 0 or -EINVAL with *code and
 * *msg describing the S3 error.  Free with s3_list_params_free. */
int s3_list_params_parse(const struct s3_query *q, struct s3_list_params *lp,
			 const char **code, const char **msg);
void s3_list_params_free(struct s3_list_params *lp);
/* The continuation token we hand out: the hex of the last name returned. */
void s3_list_token(struct sbuf *out, const char *name, size_t n);

/*
 * ListBucketResult, v1 or v2 as lp asks, written alike by storaged (over its
 * index) and s3proxy (over the merged backend listings).  The caller walks
 * its names in order and adds each with s3_list_add_key or
 * s3_list_add_prefix to an entries buffer, then wraps them with
 * s3_list_result_xml.  Names are url-encoded under encoding-type=url and
 * XML-escaped otherwise.
 */
struct s3_list_result {
	const char *bucket;
	int count;                 /* names returned (v2 KeyCount) */
	bool truncated;            /* IsTruncated */
	/* The last name returned, for NextMarker / NextContinuationToken;
	 * NULL writes neither. */
	const char *next;
	size_t next_len;
	const struct sbuf *entries;
};
/* <Contents><Key>name</Key>fields</Contents>: fields are the object's other
 * elements, already XML. */
void s3_list_add_key(struct sbuf *entries, const struct s3_list_params *lp,
		     const char *name, size_t n, const char *fields, size_t flen);
/* <CommonPrefixes><Prefix>name</Prefix></CommonPrefixes>. */
void s3_list_add_prefix(struct sbuf *entries, const struct s3_list_params *lp,
			const char *name, size_t n);
/* Appends the whole document (prologue to the closing tag and newline). */
void s3_list_result_xml(struct sbuf *x, const struct s3_list_params *lp,
			const struct s3_list_result *res);

/*
 * Parses a Range header against an object of size bytes.  Returns 0 when
 * there is no usable single range (serve everything), 1 with [*first, *last]
 * set, -1 when the range is not satisfiable (416 InvalidRange).
 */
int s3_range_parse(const char *v, size_t n, uint64_t size, uint64_t *first, uint64_t *last);

/*
 * Parses x-amz-copy-source-range as S3 reads it, which is stricter than
 * Range: exactly "bytes=FIRST-LAST" with FIRST <= LAST, and LAST inside a
 * source of size bytes (UINT64_MAX checks the form alone).  Returns 0 with
 * [*first, *last] set, -EINVAL when malformed, -ERANGE when the range does
 * not lie inside the source.  Both are 400 InvalidArgument in S3.
 */
int s3_copy_range_parse(const char *v, size_t n, uint64_t size, uint64_t *first, uint64_t *last);

/* One <Part> of a CompleteMultipartUpload. */
struct s3_part_ref {
	int number;
	char etag[72];          /* without quotes */
};

/* Parses a CompleteMultipartUpload body.  Returns the number of parts (>0)
 * in *parts (malloc'd), or -EINVAL (MalformedXML), -ENOMEM. */
int s3_parse_complete(const char *x, size_t n, struct s3_part_ref **parts);

struct s3_delete_key {
	char *key;
	size_t len;
};
/* Parses a Delete body.  Returns the number of keys (>= 0) or -EINVAL,
 * -ENOMEM; *quiet set from <Quiet>. */
int s3_parse_delete(const char *x, size_t n, struct s3_delete_key **keys, bool *quiet);
void s3_delete_keys_free(struct s3_delete_key *k, int n);

/* XML helpers: finds <tag>...</tag> at or after *pos; returns 1 with the
 * raw inner text, 0 when none.  Moves *pos past it. */
int xml_find(const char *x, size_t n, size_t *pos, const char *tag,
	     const char **val, size_t *vlen);
/* Decodes XML entities into out (cap bytes incl. NUL).  Returns the length
 * or -1 when malformed or too long. */
ssize_t xml_unescape(char *out, size_t cap, const char *in, size_t n);

/* Builds the error document. */
void s3_error_xml(struct sbuf *b, const char *code, const char *msg,
		  const char *resource, const char *request_id);

/* Unquoted lowercase-hex ETag check (32 hex digits, optional -N). */
bool s3_etag_ok(const char *e);

#endif
