// SPDX-License-Identifier: MIT
/*
 * Allocation-free formatting.  Everything the shim prints (one-line
 * diagnostics, the exit report, the live view) goes through struct ps_buf,
 * whose storage the caller provides, usually on the stack.  When the buffer
 * fills it is written to its descriptor with a raw write(2), so a report of
 * any length needs only a few KiB of stack.
 */
#include "format/fmt.h"

#include <errno.h>
#include <string.h>

#include "format/compiler.h"
#include "format/sys.h"

void ps_buf_init(struct ps_buf *b, char *storage, size_t cap, int fd)
{
	b->p = storage;
	b->len = 0;
	b->cap = cap;
	b->fd = fd;
	b->truncated = false;
	b->error = 0;
}

int ps_buf_flush(struct ps_buf *b)
{
	if (b->fd < 0 || b->len == 0)
		return b->error;
	if (b->error == 0) {
		int r = ps_sys_write_all(b->fd, b->p, b->len);
		if (r < 0)
			b->error = r;
	}
	b->len = 0;
	return b->error;
}

const char *ps_buf_str(struct ps_buf *b)
{
	/* Keep one byte for the terminator. */
	if (b->len >= b->cap)
		b->len = b->cap - 1;
	b->p[b->len] = '\0';
	return b->p;
}

void ps_buf_put(struct ps_buf *b, const char *s, size_t n)
{
	while (n > 0) {
		/* In-memory buffers reserve a byte for ps_buf_str(). */
		size_t room = b->cap - b->len - (b->fd < 0 ? 1 : 0);
		if (room == 0 || b->cap <= b->len) {
			if (b->fd < 0) {
				b->truncated = true;
				return;
			}
			ps_buf_flush(b);
			continue;
		}
		size_t k = n < room ? n : room;
		memcpy(b->p + b->len, s, k);
		b->len += k;
		s += k;
		n -= k;
	}
}

void ps_buf_putc(struct ps_buf *b, char c)
{
	ps_buf_put(b, &c, 1);
}

void ps_buf_puts(struct ps_buf *b, const char *s)
{
	ps_buf_put(b, s, strlen(s));
}

size_t ps_fmt_u64(char *out, uint64_t v)
{
	char tmp[24];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	out[n] = '\0';
	return n;
}

void ps_buf_u64(struct ps_buf *b, uint64_t v)
{
	char tmp[24];
	ps_buf_put(b, tmp, ps_fmt_u64(tmp, v));
}

void ps_buf_i64(struct ps_buf *b, int64_t v)
{
	if (v < 0) {
		ps_buf_putc(b, '-');
		ps_buf_u64(b, (uint64_t)0 - (uint64_t)v);
	} else {
		ps_buf_u64(b, (uint64_t)v);
	}
}

void ps_buf_fixed1(struct ps_buf *b, uint64_t v, uint64_t scale)
{
	if (scale == 0) {
		ps_buf_puts(b, "inf");
		return;
	}
	/* Round to the nearest tenth. */
	uint64_t tenths = (v * 10 + scale / 2) / scale;
	if (v > UINT64_MAX / 10)
		tenths = v / scale * 10;
	ps_buf_u64(b, tenths / 10);
	ps_buf_putc(b, '.');
	ps_buf_putc(b, (char)('0' + tenths % 10));
}

void ps_buf_size(struct ps_buf *b, uint64_t bytes)
{
	static const char units[] = "KMGTPE";
	uint64_t scale = 1024;
	int u = 0;

	if (bytes < 1024) {
		ps_buf_u64(b, bytes);
		return;
	}
	while (u < 5 && bytes >= scale * 1024) {
		scale *= 1024;
		u++;
	}
	if (bytes % scale == 0)
		ps_buf_u64(b, bytes / scale);
	else
		ps_buf_fixed1(b, bytes, scale);
	ps_buf_putc(b, units[u]);
}

void ps_buf_pad(struct ps_buf *b, const char *s, int width, bool right)
{
	int n = (int)strlen(s);

	if (right)
		for (int i = n; i < width; i++)
			ps_buf_putc(b, ' ');
	ps_buf_put(b, s, (size_t)n);
	if (!right)
		for (int i = n; i < width; i++)
			ps_buf_putc(b, ' ');
}

void ps_buf_u64w(struct ps_buf *b, uint64_t v, int width)
{
	char tmp[24];
	ps_fmt_u64(tmp, v);
	ps_buf_pad(b, tmp, width, true);
}

void ps_buf_json_str(struct ps_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	ps_buf_putc(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '"':  ps_buf_puts(b, "\\\""); break;
		case '\\': ps_buf_puts(b, "\\\\"); break;
		case '\n': ps_buf_puts(b, "\\n"); break;
		case '\t': ps_buf_puts(b, "\\t"); break;
		case '\r': ps_buf_puts(b, "\\r"); break;
		default:
			if (c < 0x20) {
				char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
				ps_buf_put(b, esc, sizeof(esc));
			} else {
				ps_buf_putc(b, (char)c);
			}
		}
	}
	ps_buf_putc(b, '"');
}

void ps_buf_vprintf(struct ps_buf *b, const char *fmt, va_list ap)
{
	for (const char *f = fmt; *f; f++) {
		if (*f != '%') {
			const char *start = f;
			while (f[1] && f[1] != '%')
				f++;
			ps_buf_put(b, start, (size_t)(f - start + 1));
			continue;
		}
		f++;
		int longs = 0;
		bool size_t_arg = false;
		while (*f == 'l') {
			longs++;
			f++;
		}
		if (*f == 'z') {
			size_t_arg = true;
			f++;
		}
		switch (*f) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			ps_buf_puts(b, s ? s : "(null)");
			break;
		}
		case 'c':
			ps_buf_putc(b, (char)va_arg(ap, int));
			break;
		case 'd':
			if (longs)
				ps_buf_i64(b, longs > 1 ? va_arg(ap, long long) : va_arg(ap, long));
			else
				ps_buf_i64(b, va_arg(ap, int));
			break;
		case 'u':
			if (size_t_arg)
				ps_buf_u64(b, va_arg(ap, size_t));
			else if (longs)
				ps_buf_u64(b, longs > 1 ? va_arg(ap, unsigned long long)
						      : va_arg(ap, unsigned long));
			else
				ps_buf_u64(b, va_arg(ap, unsigned int));
			break;
		case 'x': {
			static const char hex[] = "0123456789abcdef";
			uint64_t v = longs ? va_arg(ap, unsigned long) : va_arg(ap, unsigned int);
			char tmp[17];
			int n = 0;
			do {
				tmp[n++] = hex[v & 15];
				v >>= 4;
			} while (v);
			while (n > 0)
				ps_buf_putc(b, tmp[--n]);
			break;
		}
		case '%':
			ps_buf_putc(b, '%');
			break;
		case '\0':
			return;
		default:
			ps_buf_putc(b, '%');
			ps_buf_putc(b, *f);
		}
	}
}

void ps_buf_printf(struct ps_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ps_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

const char *ps_errno_name(int err)
{
	/* The errnos an I/O path can plausibly see; others print as numbers. */
	static const struct { int num; const char *name; } names[] = {
		{ EPERM, "EPERM" }, { ENOENT, "ENOENT" }, { EINTR, "EINTR" },
		{ EIO, "EIO" }, { ENXIO, "ENXIO" }, { E2BIG, "E2BIG" },
		{ EBADF, "EBADF" }, { EAGAIN, "EAGAIN" }, { ENOMEM, "ENOMEM" },
		{ EACCES, "EACCES" }, { EFAULT, "EFAULT" }, { EBUSY, "EBUSY" },
		{ EEXIST, "EEXIST" }, { EXDEV, "EXDEV" }, { ENODEV, "ENODEV" },
		{ ENOTDIR, "ENOTDIR" }, { EISDIR, "EISDIR" }, { EINVAL, "EINVAL" },
		{ ENFILE, "ENFILE" }, { EMFILE, "EMFILE" }, { ENOTTY, "ENOTTY" },
		{ EFBIG, "EFBIG" }, { ENOSPC, "ENOSPC" }, { ESPIPE, "ESPIPE" },
		{ EROFS, "EROFS" }, { EPIPE, "EPIPE" }, { ERANGE, "ERANGE" },
		{ ENOSYS, "ENOSYS" }, { ENOTSOCK, "ENOTSOCK" }, { EDESTADDRREQ, "EDESTADDRREQ" },
		{ EMSGSIZE, "EMSGSIZE" }, { EOPNOTSUPP, "EOPNOTSUPP" },
		{ ENETDOWN, "ENETDOWN" }, { ENETUNREACH, "ENETUNREACH" },
		{ ECONNABORTED, "ECONNABORTED" }, { ECONNRESET, "ECONNRESET" },
		{ ENOBUFS, "ENOBUFS" }, { EISCONN, "EISCONN" }, { ENOTCONN, "ENOTCONN" },
		{ ETIMEDOUT, "ETIMEDOUT" }, { ECONNREFUSED, "ECONNREFUSED" },
		{ EHOSTUNREACH, "EHOSTUNREACH" }, { EALREADY, "EALREADY" },
		{ EINPROGRESS, "EINPROGRESS" }, { ECANCELED, "ECANCELED" },
		{ EOVERFLOW, "EOVERFLOW" }, { EDQUOT, "EDQUOT" },
		/* A report path that is a symbolic link: opened with O_NOFOLLOW. */
		{ ELOOP, "ELOOP" }, { ENAMETOOLONG, "ENAMETOOLONG" },
	};
	for (size_t i = 0; i < PS_ARRAY_SIZE(names); i++)
		if (names[i].num == err)
			return names[i].name;
	return NULL;
}

#define PS_LOG_MAX_LINES 64

int (*ps_log_fd)(void);
char ps_program[64];
static __thread int log_depth;

void ps_program_clean(char *out, size_t cap, const char *name)
{
	size_t k = 0;

	/* A slash would make %e in a report path a directory. */
	for (; name && name[k] && k + 1 < cap; k++)
		out[k] = name[k] == '/' ? '_' : name[k];
	if (cap)
		out[k] = '\0';
}

void ps_buf_log_prefix(struct ps_buf *b)
{
	/* Asked each time: right in fork, vfork and clone children alike. */
	ps_buf_puts(b, "poolshim[");
	ps_buf_u64(b, (uint64_t)PS_SYSCALL(SYS_getpid));
	ps_buf_putc(b, ']');
	if (ps_program[0]) {
		ps_buf_putc(b, ' ');
		ps_buf_puts(b, ps_program);
	}
	ps_buf_puts(b, ": ");
}

size_t ps_log_line(char *storage, size_t cap, const char *fmt, va_list ap)
{
	struct ps_buf b;

	ps_buf_init(&b, storage, cap, -1);
	ps_buf_log_prefix(&b);
	ps_buf_vprintf(&b, fmt, ap);
	/* A cut line still ends in a newline. */
	if (b.len >= cap - 2)
		b.len = cap - 2;
	b.p[b.len++] = '\n';
	return b.len;
}

static int log_lines;

void ps_log(const char *fmt, ...)
{
	char storage[512];
	va_list ap;

	if (log_depth > 0)
		return;
	if (__atomic_add_fetch(&log_lines, 1, __ATOMIC_RELAXED) > PS_LOG_MAX_LINES)
		return;
	log_depth++;
	va_start(ap, fmt);
	size_t n = ps_log_line(storage, sizeof(storage), fmt, ap);
	va_end(ap);
	int (*where)(void) = __atomic_load_n(&ps_log_fd, __ATOMIC_ACQUIRE);
	int fd = where ? where() : 2;
	if (fd >= 0)
		ps_sys_write_all(fd, storage, n);
	log_depth--;
}
