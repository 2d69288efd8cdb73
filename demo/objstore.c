/* SPDX-License-Identifier: MIT */
/*
 * storaged's storage layer (see objstore.h): files, O_DIRECT I/O, crash-safe
 * writes and the in-memory index.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "objstore.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "s3.h"
#include "util.h"

struct store store = { .fsync = true, .dfd = -1, .bfd = -1, .tfd = -1, .ufd = -1, .lockfd = -1 };

static pthread_rwlock_t buckets_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct bucket *buckets, *graveyard;
static atomic_uint_fast64_t direct_fallbacks;
static atomic_uint_fast64_t tmp_counter;


/* ---------------------------------------------------------------------- */
/* Index                                                                    */

int store_key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	if (c)
		return c;
	return (al > bl) - (al < bl);
}

/* First index with key >= k.  Caller holds the bucket lock. */
size_t idx_lower(const struct bucket *b, const char *k, size_t kl)
{
	size_t lo = 0, hi = b->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (store_key_cmp(b->v[mid].key, b->v[mid].klen, k, kl) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct obj *idx_find(struct bucket *b, const char *k, size_t kl)
{
	size_t i = idx_lower(b, k, kl);
	if (i < b->n && !store_key_cmp(b->v[i].key, b->v[i].klen, k, kl))
		return &b->v[i];
	return NULL;
}

/* Inserts or replaces.  Caller holds the write lock.  Returns 0 or -ENOMEM. */
int idx_put(struct bucket *b, const char *k, size_t kl, uint64_t size,
		   int64_t mtime, const char *etag)
{
	size_t i = idx_lower(b, k, kl);
	struct obj *o;

	if (i < b->n && !store_key_cmp(b->v[i].key, b->v[i].klen, k, kl)) {
		o = &b->v[i];
	} else {
		if (b->n == b->cap) {
			size_t cap = b->cap ? b->cap * 2 : 64;
			struct obj *nv = realloc(b->v, cap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			b->v = nv;
			b->cap = cap;
		}
		char *kc = malloc(kl + 1);
		if (!kc)
			return -ENOMEM;
		memcpy(kc, k, kl);
		kc[kl] = 0;
		memmove(&b->v[i + 1], &b->v[i], (b->n - i) * sizeof(*b->v));
		b->n++;
		o = &b->v[i];
		o->key = kc;
		o->klen = kl;
	}
	o->size = size;
	o->mtime = mtime;
	snprintf(o->etag, sizeof(o->etag), "%s", etag);
	return 0;
}

void idx_del(struct bucket *b, const char *k, size_t kl)
{
	size_t i = idx_lower(b, k, kl);
	if (i < b->n && !store_key_cmp(b->v[i].key, b->v[i].klen, k, kl)) {
		free(b->v[i].key);
		memmove(&b->v[i], &b->v[i + 1], (b->n - i - 1) * sizeof(*b->v));
		b->n--;
	}
}

static int obj_sort_cmp(const void *x, const void *y)
{
	const struct obj *a = x, *b = y;
	return store_key_cmp(a->key, a->klen, b->key, b->klen);
}

/* Returns the live bucket with that name (locks nothing once returned:
 * buckets are never freed while the process runs). */
struct bucket *bucket_get(const char *name)
{
	struct bucket *b;
	pthread_rwlock_rdlock(&buckets_lock);
	for (b = buckets; b; b = b->next)
		if (!strcmp(b->name, name))
			break;
	pthread_rwlock_unlock(&buckets_lock);
	return b;
}

static struct bucket *bucket_new(const char *name, int64_t ctime)
{
	struct bucket *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->ctime = ctime;
	pthread_rwlock_init(&b->lock, NULL);
	return b;
}

static void bucket_free(struct bucket *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->v[i].key);
	free(b->v);
	pthread_rwlock_destroy(&b->lock);
	free(b);
}

/* ---------------------------------------------------------------------- */
/* Files                                                                    */

void obj_name(char out[72], const char *key, size_t kl)
{
	unsigned char h[32];
	SHA256((const unsigned char *)key, kl, h);
	hex_encode(out, h, 32);
	strcat(out, ".obj");
}

/* Opens with O_DIRECT, falling back to buffered I/O where the filesystem
 * refuses it (tmpfs, some overlay setups); the fallback is counted. */
int open_data(int dirfd, const char *name, int flags, mode_t mode)
{
	int fd = openat(dirfd, name, flags | O_DIRECT | O_CLOEXEC, mode);
	if (fd < 0 && errno == EINVAL) {
		if (atomic_fetch_add(&direct_fallbacks, 1) == 0)
			logmsg("O_DIRECT refused by the filesystem under %s; using buffered I/O", store.dir);
		fd = openat(dirfd, name, flags | O_CLOEXEC, mode);
	}
	return fd;
}

/* O_DIRECT rejected at I/O time: drop it on this descriptor and retry. */
static bool drop_direct(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || !(fl & O_DIRECT))
		return false;
	if (atomic_fetch_add(&direct_fallbacks, 1) == 0)
		logmsg("O_DIRECT I/O refused under %s; using buffered I/O", store.dir);
	return fcntl(fd, F_SETFL, fl & ~O_DIRECT) == 0;
}

ssize_t pread_full(int fd, void *buf, size_t n, off_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, off + got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EINVAL && drop_direct(fd))
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += r;
		/* A short O_DIRECT read that is not block-aligned is EOF. */
		if (r % BLK)
			break;
	}
	return got;
}

int pwrite_full(int fd, const void *buf, size_t n, off_t off)
{
	size_t done = 0;
	while (done < n) {
		ssize_t w = pwrite(fd, (const char *)buf + done, n - done, off + done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EINVAL && drop_direct(fd))
			continue;
		if (w < 0)
			return -errno;
		done += w;
	}
	return 0;
}

int fsync_dir(int dfd)
{
	if (!store.fsync)
		return 0;
	return fsync(dfd) ? -errno : 0;
}

static void tmp_name(char out[64])
{
	snprintf(out, 64, "t.%d.%llu", (int)getpid(),
		 (unsigned long long)atomic_fetch_add(&tmp_counter, 1));
}

/* Creates a temporary file for writing.  Returns the fd or -errno. */
int tmp_create(char name[64])
{
	tmp_name(name);
	int fd = open_data(store.tfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
	return fd < 0 ? -errno : fd;
}

/* Makes a written temporary file durable and moves it to dirfd/final. */
int tmp_commit(int fd, const char *tname, int dirfd, const char *final)
{
	if (store.fsync && fsync(fd)) {
		int e = -errno;
		close(fd);
		unlinkat(store.tfd, tname, 0);
		return e;
	}
	close(fd);
	if (renameat(store.tfd, tname, dirfd, final)) {
		int e = -errno;
		unlinkat(store.tfd, tname, 0);
		return e;
	}
	return 0;
}

void tmp_abort(int fd, const char *tname)
{
	close(fd);
	unlinkat(store.tfd, tname, 0);
}

size_t round_up(size_t n)
{
	return (n + BLK - 1) & ~(size_t)(BLK - 1);
}

/* Fills the header block at the front of buf. */
int fill_hdr(void *buf, const char *key, size_t kl, uint64_t size, int64_t mtime,
		    const char *etag, const char *ct, size_t ctl, const char *meta, size_t ml)
{
	struct obj_hdr *h = buf;
	if (sizeof(*h) + kl + ctl + ml > HDR_SIZE)
		return -EOVERFLOW;
	memset(buf, 0, HDR_SIZE);
	memcpy(h->magic, OBJ_MAGIC, 8);
	h->size = size;
	h->mtime = mtime;
	h->klen = kl;
	h->ctlen = ctl;
	h->metalen = ml;
	snprintf(h->etag, sizeof(h->etag), "%s", etag);
	char *p = (char *)buf + sizeof(*h);
	memcpy(p, key, kl);
	memcpy(p + kl, ct, ctl);
	memcpy(p + kl + ctl, meta, ml);
	return 0;
}

/* Validates a header block read from disk.  Returns 0 or -EIO. */
int check_hdr(const void *buf, size_t n)
{
	const struct obj_hdr *h = buf;
	if (n < HDR_SIZE || memcmp(h->magic, OBJ_MAGIC, 8) ||
	    h->klen > S3_MAX_KEY || h->ctlen > MAX_CT || h->metalen > MAX_META ||
	    !memchr(h->etag, 0, sizeof(h->etag)))
		return -EIO;
	return 0;
}

const char *hdr_key(const struct obj_hdr *h)
{
	return (const char *)(h + 1);
}

/*
 * Writes header+data (buf holds HDR_SIZE + round_up(size) bytes, data at
 * HDR_SIZE) to a new temporary file.  Returns the fd (still open, not yet
 * synced) or -errno; *tname receives its name.
 */
int write_new_file(void *buf, uint64_t size, char tname[64])
{
	int fd = tmp_create(tname);
	if (fd < 0)
		return fd;
	size_t total = HDR_SIZE + size;
	size_t padded = round_up(total);
	memset((char *)buf + total, 0, padded - total);
	int rc = pwrite_full(fd, buf, padded, 0);
	if (!rc && padded != total && ftruncate(fd, total))
		rc = -errno;
	if (rc) {
		tmp_abort(fd, tname);
		return rc;
	}
	return fd;
}


int bucket_create(const char *name, int64_t ctime)
{
	pthread_rwlock_wrlock(&buckets_lock);
	for (struct bucket *b = buckets; b; b = b->next) {
		if (!strcmp(b->name, name)) {
			pthread_rwlock_unlock(&buckets_lock);
			return -EEXIST;
		}
	}
	struct bucket *b = bucket_new(name, ctime);
	if (!b || (mkdirat(store.bfd, name, 0755) && errno != EEXIST)) {
		int e = b ? -errno : -ENOMEM;
		pthread_rwlock_unlock(&buckets_lock);
		free(b);
		return e;
	}
	fsync_dir(store.bfd);
	b->next = buckets;
	buckets = b;
	pthread_rwlock_unlock(&buckets_lock);
	return 0;
}

void upload_remove(const char *id)
{
	/* The info file first: from then on the upload is gone for every
	 * request.  A part committed while the rest is removed makes the
	 * directory non-empty again; once the directory is gone, no part can
	 * land (a rename into a removed directory fails). */
	for (int tries = 0; tries < 4; tries++) {
		int udfd = openat(store.ufd, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (udfd < 0)
			return;
		unlinkat(udfd, "info", 0);
		DIR *d = fdopendir(udfd);
		if (!d) {
			close(udfd);
			return;
		}
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				unlinkat(dirfd(d), e->d_name, 0);
		closedir(d);
		if (!unlinkat(store.ufd, id, AT_REMOVEDIR) || errno != ENOTEMPTY)
			return;
	}
}

/* Whether upload directory id's info file names bucket (its key is
 * "bucket/key").  hb: one aligned block to read it into. */
static bool upload_of(const char *id, const char *bucket, void *hb)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/info", id);
	int fd = open_data(store.ufd, path, O_RDONLY, 0);
	if (fd < 0)
		return false;
	ssize_t n = pread_full(fd, hb, HDR_SIZE, 0);
	close(fd);
	const struct obj_hdr *h = hb;
	size_t bl = strlen(bucket);
	return n >= 0 && !check_hdr(hb, n) && h->klen > bl && !memcmp(hdr_key(h), bucket, bl) &&
	       hdr_key(h)[bl] == '/';
}

/* Removes every multipart upload of bucket.  Returns how many, or -errno
 * when the uploads directory cannot be read. */
static int remove_uploads_of(const char *bucket)
{
	void *hb;
	int fd = dup(store.ufd), n = 0;
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (posix_memalign(&hb, BLK, HDR_SIZE)) {
		closedir(d);
		return -ENOMEM;
	}
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !upload_of(e->d_name, bucket, hb))
			continue;
		upload_remove(e->d_name);
		n++;
	}
	free(hb);
	closedir(d);
	if (n)
		fsync_dir(store.ufd);
	return n;
}

int bucket_remove(const char *name)
{
	int rc = 0;

	pthread_rwlock_wrlock(&buckets_lock);
	struct bucket **pp = &buckets, *b;
	for (; (b = *pp); pp = &b->next)
		if (!strcmp(b->name, name))
			break;
	if (!b) {
		pthread_rwlock_unlock(&buckets_lock);
		return -ENOENT;
	}
	pthread_rwlock_wrlock(&b->lock);
	if (b->n)
		rc = -ENOTEMPTY;
	else if (unlinkat(store.bfd, b->name, AT_REMOVEDIR) && errno != ENOENT)
		rc = -errno;
	if (!rc) {
		/* Requests may still hold the pointer: park it until exit. */
		b->deleted = true;
		*pp = b->next;
		b->next = graveyard;
		graveyard = b;
		/* Its multipart uploads go with it, as in S3, while both locks
		 * keep a new upload of this bucket (initiated under b->lock) and
		 * a new bucket of the same name (buckets_lock) out. */
		int k = remove_uploads_of(name);
		if (k < 0)
			logmsg("bucket %s removed, but its uploads could not be: %s", name, strerror(-k));
	}
	pthread_rwlock_unlock(&b->lock);
	pthread_rwlock_unlock(&buckets_lock);
	if (!rc)
		fsync_dir(store.bfd);
	return rc;
}

static int cmp_bucket_name(const void *x, const void *y)
{
	return strcmp((*(struct bucket *const *)x)->name, (*(struct bucket *const *)y)->name);
}

struct bucket **bucket_list(size_t *n)
{
	pthread_rwlock_rdlock(&buckets_lock);
	size_t k = 0;
	for (struct bucket *b = buckets; b; b = b->next)
		k++;
	struct bucket **v = calloc(k ? k : 1, sizeof(*v));
	if (v) {
		k = 0;
		for (struct bucket *b = buckets; b; b = b->next)
			v[k++] = b;
	}
	pthread_rwlock_unlock(&buckets_lock);
	if (v && k)
		qsort(v, k, sizeof(*v), cmp_bucket_name);
	*n = k;
	return v;
}

uint64_t store_direct_fallbacks(void)
{
	return atomic_load(&direct_fallbacks);
}

/* ---------------------------------------------------------------------- */
/* Opening the directory                                                    */

static int open_subdir(const char *name)
{
	if (mkdirat(store.dfd, name, 0755) && errno != EEXIST)
		return -1;
	return openat(store.dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* Drops temporary files a crash left behind: they were never visible. */
static void clean_tmp(void)
{
	int fd = dup(store.tfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	int n = 0;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && !unlinkat(store.tfd, e->d_name, 0))
			n++;
	closedir(d);
	if (n)
		logmsg("removed %d unfinished temporary file(s)", n);
}

static int load_bucket(const char *name)
{
	struct stat st;
	if (fstatat(store.bfd, name, &st, 0) || !S_ISDIR(st.st_mode))
		return 0;
	if (!s3_bucket_name_ok(name)) {
		logmsg("ignoring %s/buckets/%s: not a valid bucket name", store.dir, name);
		return 0;
	}
	struct bucket *b = bucket_new(name, st.st_mtime);
	if (!b)
		return -ENOMEM;
	int fd = openat(store.bfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		bucket_free(b);
		return -errno;
	}
	char hb[HDR_SIZE];
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t nl = strlen(e->d_name);
		if (nl != 68 || strcmp(e->d_name + 64, ".obj"))
			continue;
		int ofd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
		if (ofd < 0)
			continue;
		ssize_t n = pread(ofd, hb, sizeof(hb), 0);
		close(ofd);
		const struct obj_hdr *h = (const void *)hb;
		char want[72];
		if (n != HDR_SIZE || check_hdr(hb, n))
			goto bad;
		obj_name(want, hdr_key(h), h->klen);
		if (strcmp(want, e->d_name))
			goto bad;
		if (b->n == b->cap) {
			size_t cap = b->cap ? b->cap * 2 : 64;
			struct obj *nv = realloc(b->v, cap * sizeof(*nv));
			if (!nv)
				break;
			b->v = nv;
			b->cap = cap;
		}
		struct obj *o = &b->v[b->n];
		o->key = malloc(h->klen + 1);
		if (!o->key)
			break;
		memcpy(o->key, hdr_key(h), h->klen);
		o->key[h->klen] = 0;
		o->klen = h->klen;
		o->size = h->size;
		o->mtime = h->mtime;
		memcpy(o->etag, h->etag, sizeof(o->etag));
		b->n++;
		continue;
bad:
		logmsg("ignoring damaged object file buckets/%s/%s", name, e->d_name);
	}
	closedir(d);
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), obj_sort_cmp);
	b->next = buckets;
	buckets = b;
	return 0;
}

static int load_all(void)
{
	int fd = dup(store.bfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	int nb = 0;
	size_t no = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		int rc = load_bucket(e->d_name);
		if (rc) {
			closedir(d);
			return rc;
		}
	}
	closedir(d);
	for (struct bucket *b = buckets; b; b = b->next) {
		nb++;
		no += b->n;
	}
	logmsg("data in %s: %d bucket(s), %zu object(s)", store.dir, nb, no);
	return 0;
}

int store_open(const char *dir, bool use_fsync)
{
	store.dir = dir;
	store.fsync = use_fsync;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		int e = -errno;
		fprintf(stderr, "storaged: cannot create %s: %s\n", dir, strerror(-e));
		return e;
	}
	store.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (store.dfd < 0) {
		int e = -errno;
		fprintf(stderr, "storaged: cannot open %s: %s\n", dir, strerror(-e));
		return e;
	}
	/* One storaged per directory: a second one would delete the first
	 * one's temporary files at start. */
	store.lockfd = openat(store.dfd, "storaged.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (store.lockfd < 0 || flock(store.lockfd, LOCK_EX | LOCK_NB)) {
		int e = store.lockfd < 0 ? -errno : -EBUSY;
		fprintf(stderr, "storaged: %s is %s\n", dir,
			store.lockfd < 0 ? strerror(-e) : "in use by another storaged");
		return e;
	}
	if ((store.bfd = open_subdir("buckets")) < 0 || (store.tfd = open_subdir("tmp")) < 0 ||
	    (store.ufd = open_subdir("uploads")) < 0) {
		int e = -errno;
		fprintf(stderr, "storaged: cannot use data directory %s: %s\n", dir, strerror(-e));
		return e;
	}
	clean_tmp();
	int rc = load_all();
	if (rc)
		fprintf(stderr, "storaged: cannot read %s: %s\n", dir, strerror(-rc));
	return rc;
}

void store_close(bool free_index)
{
	if (free_index) {
		while (buckets) {
			struct bucket *b = buckets;
			buckets = b->next;
			bucket_free(b);
		}
		while (graveyard) {
			struct bucket *b = graveyard;
			graveyard = b->next;
			bucket_free(b);
		}
	}
	int *fds[] = { &store.bfd, &store.tfd, &store.ufd, &store.dfd, &store.lockfd };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}
