/* SPDX-License-Identifier: MIT */
/*
 * Formatting that never allocates: a caller-provided buffer that flushes to
 * a descriptor when full (or, with fd < 0, simply truncates).  Used for
 * diagnostics and reports, which must work inside malloc and at exit.
 */
#ifndef PS_FMT_H
#define PS_FMT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ps_buf {
	char *p;
	size_t len;
	size_t cap;
	int fd;            /* flush target, or -1 to keep in memory */
	bool truncated;    /* memory buffer ran out of room */
	int error;         /* first write error (-errno), 0 if none */
};

/* Start a buffer over storage[cap]; fd < 0 keeps everything in memory. */
void ps_buf_init(struct ps_buf *b, char *storage, size_t cap, int fd);
/* Write out what is buffered (no-op for in-memory buffers): 0 or -errno. */
int ps_buf_flush(struct ps_buf *b);
/* NUL-terminate an in-memory buffer and return its text. */
const char *ps_buf_str(struct ps_buf *b);

void ps_buf_putc(struct ps_buf *b, char c);
void ps_buf_put(struct ps_buf *b, const char *s, size_t n);
void ps_buf_puts(struct ps_buf *b, const char *s);
void ps_buf_u64(struct ps_buf *b, uint64_t v);
void ps_buf_i64(struct ps_buf *b, int64_t v);
/* v/scale with one decimal, e.g. 15 / 10 -> "1.5". */
void ps_buf_fixed1(struct ps_buf *b, uint64_t v, uint64_t scale);
/* A byte count the way a person reads it: 512, 64K, 1.5M, 2.0G. */
void ps_buf_size(struct ps_buf *b, uint64_t bytes);
/* s padded with spaces to width, left- or right-aligned. */
void ps_buf_pad(struct ps_buf *b, const char *s, int width, bool right);
/* Unsigned number right-aligned in width. */
void ps_buf_u64w(struct ps_buf *b, uint64_t v, int width);
/* A JSON string literal, quotes included. */
void ps_buf_json_str(struct ps_buf *b, const char *s);
/* Minimal printf: %s %d %u %ld %lu %zu %llu %x %c %%; no floats. */
void ps_buf_vprintf(struct ps_buf *b, const char *fmt, va_list ap);
void ps_buf_printf(struct ps_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Decimal text of v into out[24]; returns its length. */
size_t ps_fmt_u64(char *out, uint64_t v);

/* Name of an errno value ("EAGAIN"), or NULL when unknown. */
const char *ps_errno_name(int err);

/*
 * One diagnostic line on stderr, prefixed "poolshim[PID] PROGRAM: ", written with a raw
 * write(2).  Guarded against recursion and capped in count so a broken
 * environment cannot flood the host program's stderr.
 */
void ps_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Where ps_log() writes: the descriptor to use, or -1 for nowhere.  NULL
 * (the default, until start-up has looked at stderr) means fd 2.  Set once
 * by init.c to the report's check, so a message never lands in a file or
 * socket the program has put at descriptor 2.
 */
extern int (*ps_log_fd)(void);

/*
 * The program's name as reports and log lines give it (argv[0]'s last part,
 * cut to 63 bytes, '/' made '_'), filled at start-up; "" until then.
 */
extern char ps_program[64];
/* That cleanup of name into out[cap]; name may be NULL.  Pure. */
void ps_program_clean(char *out, size_t cap, const char *name);
/* "poolshim[PID] PROGRAM: ", the head of every diagnostic line (raw getpid). */
void ps_buf_log_prefix(struct ps_buf *b);
/*
 * A whole diagnostic line, that head, fmt and a newline, into storage[cap]
 * (cap > 2; a line too long is cut, its newline kept).  Its length.
 */
size_t ps_log_line(char *storage, size_t cap, const char *fmt, va_list ap);

#endif
