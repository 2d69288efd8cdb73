// SPDX-License-Identifier: MIT
/*
 * The report emitter (emit.h): JSON structure with its commas, and text
 * cells, over a ps_buf.  Formatting only.
 */
#include "format/emit.h"

#include <stdarg.h>
#include <string.h>

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

/* The type a letter of ps_emit_line() stands for. */
static enum ps_emit_type type_of(char letter)
{
	switch (letter) {
	case 'd': return PS_EMIT_INT;
	case 'z': return PS_EMIT_SIZE;
	case 't': return PS_EMIT_USEC;
	case 's': return PS_EMIT_STR;
	case 'n': return PS_EMIT_NAME;
	default: return PS_EMIT_U64;
	}
}

void ps_emit_line(struct ps_emit *e, const char *line, ...)
{
	va_list ap;

	va_start(ap, line);
	for (const char *s = line; *s; s++) {
		if (s[0] != '%' || s[1] != '{') {
			if (!e->json)
				ps_buf_putc(e->b, *s);
			continue;
		}
		const char *key = s + 2, *end = key;
		while (*end && *end != '}')
			end++;
		if (!*end || !end[1])
			break;
		char name[48];
		size_t n = (size_t)(end - key) < sizeof(name) - 1 ? (size_t)(end - key) : sizeof(name) - 1;
		memcpy(name, key, n);
		name[n] = '\0';
		enum ps_emit_type type = type_of(end[1]);
		union { uint64_t u; int d; const char *s; } v;
		if (type == PS_EMIT_INT)
			v.d = va_arg(ap, int);
		else if (type == PS_EMIT_STR || type == PS_EMIT_NAME)
			v.s = va_arg(ap, const char *);
		else
			v.u = va_arg(ap, uint64_t);
		ps_emit_col(e, name, 0, type, &v);
		s = end + 1;
	}
	va_end(ap);
}
