/* SPDX-License-Identifier: MIT */
/*
 * One walk, two renderings: an emitter over a ps_buf that a report walks
 * once, writing either the JSON document or the text table (the idea of
 * jemalloc's emitter.h).  Three kinds of call:
 *   - structure and members (object, array, row, kv, pair): the JSON, and
 *     nothing in text, except that a row ends a text line;
 *   - cells and text: the text table, and nothing in JSON;
 *   - col and line: both, a member "key":value in JSON and a cell, or the
 *     line as it reads, in text.
 * Members get their commas from the emitter.  Nesting deeper than
 * PS_EMIT_DEPTH is not supported (the report goes four deep).  Never
 * allocates.
 */
#ifndef PS_EMIT_H
#define PS_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/fmt.h"

#define PS_EMIT_DEPTH 16

struct ps_emit {
	struct ps_buf *b;
	bool json;
	int depth;                  /* open objects and arrays */
	uint32_t has_member;        /* bit d: the one open at depth d has a member */
};

/* What a value points to, and how it is written. */
enum ps_emit_type {
	PS_EMIT_U64,      /* uint64_t: decimal */
	PS_EMIT_INT,      /* int: decimal */
	PS_EMIT_STR,      /* const char *: a JSON string (null for NULL); text as is */
	PS_EMIT_SIZE,     /* uint64_t: decimal in JSON, 64K / 1.5M in text */
	PS_EMIT_USEC,     /* uint64_t microseconds: decimal in JSON, 1.5s in text */
	PS_EMIT_NAME,     /* const char *: in JSON quoted without escaping (a name
			   * from the program's own tables); text as is */
};

/* Start e over b, writing JSON when json, else text. */
void ps_emit_init(struct ps_emit *e, struct ps_buf *b, bool json);

/*
 * Start e over b to carry on inside an object that already has members: a
 * section written on its own (its first member starts with a comma).
 */
void ps_emit_continue(struct ps_emit *e, struct ps_buf *b, bool json);

/*
 * JSON: open an object or array as the next member, "key":{ or, with key
 * NULL (the document, or an array's element), {.  Text: nothing.
 */
void ps_emit_object_begin(struct ps_emit *e, const char *key);
/* Closing the document (depth 0 again) also ends its line. */
void ps_emit_object_end(struct ps_emit *e);
void ps_emit_array_begin(struct ps_emit *e, const char *key);
void ps_emit_array_end(struct ps_emit *e);
/* A table row: JSON an array element object on a line of its own ("\n{"),
 * text nothing; its end closes the object, or ends the text line. */
void ps_emit_row_begin(struct ps_emit *e);
void ps_emit_row_end(struct ps_emit *e);

/* JSON: "key":value as the next member (value as type says).  Text: nothing. */
void ps_emit_kv(struct ps_emit *e, const char *key, enum ps_emit_type type, const void *value);
/* JSON: [a,b] as the next array element (a histogram bucket).  Text: nothing. */
void ps_emit_pair(struct ps_emit *e, uint64_t a, uint64_t b);

/*
 * Text: value padded with spaces to |width| (right-aligned, or left-aligned
 * for a negative width; 0 for no padding).  JSON: nothing.
 */
void ps_emit_cell(struct ps_emit *e, int width, enum ps_emit_type type, const void *value);
/* Text: printf-style (ps_buf_printf's subset).  JSON: nothing. */
void ps_emit_text(struct ps_emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Both: a member in JSON, a cell in text. */
void ps_emit_col(struct ps_emit *e, const char *key, int width, enum ps_emit_type type,
		 const void *value);

/*
 * A line given the way it reads in text, with its members marked in it:
 * "%{key}T" is a value of type T, u (uint64_t), d (int), z (uint64_t as a
 * size), t (uint64_t microseconds), s (a string, NULL for null) or n (a
 * name), taken from the arguments in order.  Text: the line with the values
 * written in; JSON: only the members, "key":value.  There is no format
 * check by the compiler: each value must be of the type its letter says.
 */
void ps_emit_line(struct ps_emit *e, const char *line, ...);

#endif
