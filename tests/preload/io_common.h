/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the I/O preload tests (pio_*): a file pattern whose
 * bytes are a function of their offset (so any range can be checked, and
 * any 8-aligned word names its own offset), scratch files on a filesystem
 * that takes O_DIRECT, and the direct system calls that give the kernel's
 * answer without going through the shim.
 */
#ifndef PIO_COMMON_H
#define PIO_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The 8-byte word at offset 8*i of a pattern file: the low 40 bits hold i. */
uint64_t pio_word(uint64_t i, uint64_t seed);
/* Fill buf with the pattern bytes [off, off+n). */
void pio_fill(void *buf, size_t n, uint64_t off, uint64_t seed);
/* Index of the first byte of buf that differs from the pattern at off, or -1. */
ssize_t pio_diff(const void *buf, size_t n, uint64_t off, uint64_t seed);
/* The file offset a buffer read at an 8-aligned offset came from (from its first word). */
uint64_t pio_origin(const void *buf);

/* A fresh directory for scratch files: under $PST_IO_DIR, else the first of
 * /var/tmp, $TMPDIR, /tmp that takes O_DIRECT, else /tmp.  Returns a static
 * path; pio_cleanup() removes it and what it holds. */
const char *pio_dir(void);
void pio_cleanup(void);
/*
 * main's body, then pio_cleanup() in the process that ran it (a child
 * that returns through it instead of _exit leaves the directory be).
 */
int pio_main(int (*body)(int argc, char **argv), int argc, char **argv);
/* Path of a file named name inside pio_dir() (static buffer, one per call site ok). */
char *pio_path(const char *name);
/* Create path with size bytes of the pattern (buffered writes, fsync). */
void pio_make_file(const char *path, uint64_t size, uint64_t seed);
/* open(path, flags | O_DIRECT); exits 77 when the filesystem refuses O_DIRECT. */
int pio_open_direct(const char *path, int flags);
/* Exit 77 unless a file in pio_dir() can be opened with O_DIRECT. */
void pio_require_direct(void);

/* A multiplier for iteration counts from $PST_IO_SCALE (default 1). */
double pio_scale(void);
/* POOLSHIM_URING_CHUNK as the shim would read it (default 1 MiB). */
size_t pio_chunk(void);

/* Result of a call: its return value and, when it failed, its errno. */
struct pio_res {
	long ret;
	int err;
};
/* The kernel's answer, bypassing any interposer (syscall(2)). */
struct pio_res pio_sys_pread(int fd, void *buf, size_t n, off_t off);
struct pio_res pio_sys_pwrite(int fd, const void *buf, size_t n, off_t off);
struct pio_res pio_sys_read(int fd, void *buf, size_t n);
struct pio_res pio_sys_preadv(int fd, const struct iovec *iov, int cnt, off_t off);
/* Capture a libc call's result: ret, and errno if ret < 0. */
#define PIO_CALL(expr) ({ errno = 0; long r_ = (long)(expr); \
	(struct pio_res){ r_, r_ < 0 ? errno : 0 }; })

/* A buffer of n bytes aligned to 4096 from posix_memalign (the pool for n >= 64K). */
void *pio_alloc(size_t n);

#endif
