// SPDX-License-Identifier: MIT
/*
 * The report emitter (emit.h): JSON structure with its commas, and text
 * cells, over a ps_buf.  Formatting only.
 */
#include "emit.h"

#include <stdarg.h>

void ps_emit_init(struct ps_emit *e, struct ps_buf *b, bool json)
{
	e->b = b;
	e->json = json;
	e->depth = 0;
	e->has_member = 0;
}

void ps_emit_continue(struct ps_emit *e, struct ps_buf *b, bool json)
{
	ps_emit_init(e, b, json);
	e->depth = 1;
	e->has_member = 1u << 1;
}

/* The separator and the key of the next member of the open container. */
static void member(struct ps_emit *e, const char *key)
{
	uint32_t bit = 1u << e->depth;

	if (e->has_member & bit)
		ps_buf_putc(e->b, ',');
	e->has_member |= bit;
	if (key) {
		ps_buf_putc(e->b, '"');
		ps_buf_puts(e->b, key);
		ps_buf_puts(e->b, "\":");
	}
}

static void open_container(struct ps_emit *e, const char *key, const char *with)
{
	if (!e->json)
		return;
	if (e->depth > 0)
		member(e, key);
	ps_buf_puts(e->b, with);
	if (e->depth < PS_EMIT_DEPTH - 1)
		e->depth++;
	e->has_member &= ~(1u << e->depth);
}

static void close_container(struct ps_emit *e, char c)
{
	if (!e->json)
		return;
	ps_buf_putc(e->b, c);
	if (e->depth > 0)
		e->depth--;
	/* The document ends its line. */
	if (e->depth == 0)
		ps_buf_putc(e->b, '\n');
}

void ps_emit_object_begin(struct ps_emit *e, const char *key)
{
	open_container(e, key, "{");
}

void ps_emit_object_end(struct ps_emit *e)
{
	close_container(e, '}');
}

void ps_emit_array_begin(struct ps_emit *e, const char *key)
{
	open_container(e, key, "[");
}

void ps_emit_array_end(struct ps_emit *e)
{
	close_container(e, ']');
}

void ps_emit_row_begin(struct ps_emit *e)
{
	open_container(e, NULL, "\n{");
}

void ps_emit_row_end(struct ps_emit *e)
{
	if (e->json)
		close_container(e, '}');
	else
		ps_buf_putc(e->b, '\n');
}

static void value(struct ps_buf *b, enum ps_emit_type type, const void *v, bool json)
{
	const char *s;

	switch (type) {
	case PS_EMIT_U64:
		ps_buf_u64(b, *(const uint64_t *)v);
		break;
	case PS_EMIT_INT:
		ps_buf_i64(b, *(const int *)v);
		break;
	case PS_EMIT_SIZE:
		if (json)
			ps_buf_u64(b, *(const uint64_t *)v);
		else
			ps_buf_size(b, *(const uint64_t *)v);
		break;
	case PS_EMIT_USEC:
		if (json) {
			ps_buf_u64(b, *(const uint64_t *)v);
		} else {
			ps_buf_fixed1(b, *(const uint64_t *)v, 1000000);
			ps_buf_putc(b, 's');
		}
		break;
	case PS_EMIT_STR:
		s = *(const char *const *)v;
		if (!json)
			ps_buf_puts(b, s ? s : "");
		else if (s)
			ps_buf_json_str(b, s);
		else
			ps_buf_puts(b, "null");
		break;
	case PS_EMIT_NAME:
		s = *(const char *const *)v;
		if (json)
			ps_buf_putc(b, '"');
		ps_buf_puts(b, s);
		if (json)
			ps_buf_putc(b, '"');
		break;
	}
}

void ps_emit_kv(struct ps_emit *e, const char *key, enum ps_emit_type type, const void *v)
{
	if (!e->json)
		return;
	member(e, key);
	value(e->b, type, v, true);
}

void ps_emit_pair(struct ps_emit *e, uint64_t a, uint64_t b)
{
	if (!e->json)
		return;
	member(e, NULL);
	ps_buf_putc(e->b, '[');
	ps_buf_u64(e->b, a);
	ps_buf_putc(e->b, ',');
	ps_buf_u64(e->b, b);
	ps_buf_putc(e->b, ']');
}

void ps_emit_cell(struct ps_emit *e, int width, enum ps_emit_type type, const void *v)
{
	char storage[64];
	struct ps_buf cell;

	if (e->json)
		return;
	if (width == 0) {
		value(e->b, type, v, false);
		return;
	}
	ps_buf_init(&cell, storage, sizeof(storage), -1);
	value(&cell, type, v, false);
	ps_buf_pad(e->b, ps_buf_str(&cell), width < 0 ? -width : width, width > 0);
}

void ps_emit_text(struct ps_emit *e, const char *fmt, ...)
{
	va_list ap;

	if (e->json)
		return;
	va_start(ap, fmt);
	ps_buf_vprintf(e->b, fmt, ap);
	va_end(ap);
}

void ps_emit_col(struct ps_emit *e, const char *key, int width, enum ps_emit_type type,
		 const void *v)
{
	if (e->json)
		ps_emit_kv(e, key, type, v);
	else
		ps_emit_cell(e, width, type, v);
}
