/* SPDX-License-Identifier: MIT */
/*
 * storaged's storage layer: the data directory, one file per object named
 * by the SHA-256 of its key (the key itself lives in a 4 KiB header block
 * in front of the data, which keeps the data block-aligned for O_DIRECT),
 * crash-safe writes (temporary file, fsync, rename), O_DIRECT I/O with a
 * counted buffered fallback, and the in-memory sorted index of every
 * bucket.  Nothing here knows about HTTP.
 *
 * Layout under the data directory:
 *   tmp/                      files being written
 *   buckets/NAME/HASH.obj     objects
 *   uploads/ID/info, part.N   multipart uploads in progress
 *   storaged.lock             held while a storaged serves the directory
 */
#ifndef DEMO_OBJSTORE_H
#define DEMO_OBJSTORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BLK 4096
#define HDR_SIZE 4096
#define MAX_META 2048
#define MAX_CT 256
#define IO_CHUNK (16u << 20)
#define OBJ_MAGIC "PSOBJ01\n"

/* The header block in front of every object and part file. */
struct obj_hdr {
	char magic[8];
	uint64_t size;
	int64_t mtime;
	uint32_t klen;
	uint16_t ctlen;
	uint16_t metalen;
	char etag[48];
	/* key, content type, metadata lines follow */
};

struct obj {
	char *key;
	uint32_t klen;
	uint64_t size;
	int64_t mtime;
	char etag[48];
};

struct bucket {
	char name[256];
	int64_t ctime;
	pthread_rwlock_t lock;
	struct obj *v;          /* sorted by key */
	size_t n, cap;
	bool deleted;
	struct bucket *next;
};

/* The open data directory. */
struct store {
	const char *dir;
	bool fsync;
	int dfd;                /* the directory itself */
	int bfd;                /* buckets/ */
	int tfd;                /* tmp/ */
	int ufd;                /* uploads/ */
	int lockfd;
};
extern struct store store;

/* Opens (creating as needed) and locks dir, removes leftover temporary
 * files and loads the index.  Prints what went wrong on stderr and returns
 * -errno on failure. */
int store_open(const char *dir, bool use_fsync);
/* Closes the directory; frees the index when no request can still use it. */
void store_close(bool free_index);
/* How many times O_DIRECT was refused and buffered I/O used instead. */
uint64_t store_direct_fallbacks(void);

/* Key order: bytewise, then shorter first. */
int store_key_cmp(const char *a, size_t al, const char *b, size_t bl);

/* Index lookups and updates; callers hold b->lock (read or write). */
size_t idx_lower(const struct bucket *b, const char *k, size_t kl);
struct obj *idx_find(struct bucket *b, const char *k, size_t kl);
/* Inserts or replaces; write lock.  Returns 0 or -ENOMEM. */
int idx_put(struct bucket *b, const char *k, size_t kl, uint64_t size, int64_t mtime,
	    const char *etag);
void idx_del(struct bucket *b, const char *k, size_t kl);

/* The live bucket with that name or NULL.  Buckets are never freed while
 * the process serves, so the pointer stays valid; check b->deleted under
 * b->lock before changing it. */
struct bucket *bucket_get(const char *name);
/* Returns 0, -EEXIST or -errno. */
int bucket_create(const char *name, int64_t ctime);
/* Removes an empty bucket and every multipart upload of it (the index is
 * locked meanwhile; uploads are initiated under the bucket's lock, which
 * keeps them from racing this).  Returns 0, -ENOENT, -ENOTEMPTY or -errno. */
int bucket_remove(const char *name);
/* Removes upload directory id and everything in it. */
void upload_remove(const char *id);
/* A malloc'd snapshot of the buckets sorted by name (*n of them), or NULL
 * when out of memory. */
struct bucket **bucket_list(size_t *n);

/* File name (64 hex digits + ".obj") for a key. */
void obj_name(char out[72], const char *key, size_t kl);
/* openat with O_DIRECT, or without where the filesystem refuses it.
 * Returns the fd or -1 with errno set. */
int open_data(int dirfd, const char *name, int flags, mode_t mode);
/* Full positional reads and writes on O_DIRECT descriptors (falling back
 * to buffered I/O on EINVAL).  pread_full returns the bytes read (short
 * only at EOF) or -errno; pwrite_full 0 or -errno. */
ssize_t pread_full(int fd, void *buf, size_t n, off_t off);
int pwrite_full(int fd, const void *buf, size_t n, off_t off);
/* fsync of a directory (a no-op with fsync off).  Returns 0 or -errno. */
int fsync_dir(int dfd);

/* Temporary files in tmp/: create (returns the fd or -errno, name in
 * name), commit (fsync, rename to dirfd/final; returns 0 or -errno and
 * removes the file on failure), abort (close and remove). */
int tmp_create(char name[64]);
int tmp_commit(int fd, const char *tname, int dirfd, const char *final);
void tmp_abort(int fd, const char *tname);
/* Writes buf (HDR_SIZE header + size data bytes, with room to pad to a
 * block) to a new temporary file; returns the open fd or -errno. */
int write_new_file(void *buf, uint64_t size, char tname[64]);

size_t round_up(size_t n);
/* Fills / checks a header block.  fill_hdr returns 0 or -EOVERFLOW,
 * check_hdr 0 or -EIO. */
int fill_hdr(void *buf, const char *key, size_t kl, uint64_t size, int64_t mtime,
	     const char *etag, const char *ct, size_t ctl, const char *meta, size_t ml);
int check_hdr(const void *buf, size_t n);
const char *hdr_key(const struct obj_hdr *h);

#endif
