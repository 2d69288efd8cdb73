// SPDX-License-Identifier: MIT
/*
 * The live-stats file.  Created with O_EXCL | O_NOFOLLOW, mode 0600, sized
 * once (sparse: only touched blocks use memory) and mapped shared; counter
 * blocks are handed out from it by an atomic index.  A fork child gets a
 * copy in a file of its own, mapped over the same addresses, so every
 * pointer to a block stays valid and the parent's file is never written by
 * the child.
 */
#include "live.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "alloc.h"
#include "fmt.h"
#include "sys.h"
#include "uring.h"

static struct ps_live_header *hdr;
static size_t map_len;
static int live_pid;

static size_t stride(void)
{
	return (sizeof(struct ps_tstats) + 4095) & ~(size_t)4095;
}

void ps_live_path(char *out, unsigned long cap, int pid)
{
	struct ps_buf b;
	ps_buf_init(&b, out, cap, -1);
	ps_buf_printf(&b, PS_LIVE_DIR "/poolshim-%d.stats", pid);
	ps_buf_str(&b);
}

uint64_t ps_live_starttime(int pid)
{
	char path[64], buf[1024];
	struct ps_buf b;

	ps_buf_init(&b, path, sizeof(path), -1);
	ps_buf_printf(&b, "/proc/%d/stat", pid);
	long fd = ps_sys_openat(AT_FDCWD, ps_buf_str(&b), O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	long n = ps_sys_read((int)fd, buf, sizeof(buf) - 1);
	ps_sys_close((int)fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* Fields after the command name, which may hold spaces and parentheses. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	int field = 2;
	for (p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

static void *take_block(void)
{
	struct ps_live_header *h = hdr;
	if (!h)
		return NULL;
	uint32_t i = __atomic_fetch_add(&h->nblocks, 1, __ATOMIC_RELAXED);
	if (i >= h->max_blocks) {
		__atomic_store_n(&h->nblocks, h->max_blocks, __ATOMIC_RELAXED);
		return NULL;
	}
	return (char *)h + PS_LIVE_HEADER + (size_t)i * h->block_stride;
}

static void copy_reason(char *dst, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= PS_LIVE_REASON)
		n = PS_LIVE_REASON - 1;
	memcpy(dst, src ? src : "", n);
	dst[n] = '\0';
}

/*
 * One publisher at a time.  Slabs are published one after the other (the
 * pool arena's grow lock orders them), but the exit report's publish can
 * meet a thread still adding a slab, and two interleaved copies would leave
 * a header mixing both (found by TSan, tests/tsan).  The one that finds the
 * other in progress skips rather than waits: at exit the two differ by that
 * one slab at most and the file goes right after, and a program exiting
 * from a signal handler may have interrupted the other on this very thread.
 */
static pthread_mutex_t publish_lock = PTHREAD_MUTEX_INITIALIZER;

void ps_live_publish(void)
{
	struct ps_live_header *h = hdr;
	struct ps_pool_info info;

	if (!h || pthread_mutex_trylock(&publish_lock) != 0)
		return;
	ps_pool_get_info(&info);
	h->pool.requested = (int32_t)info.requested;
	h->pool.first_mode = (int32_t)info.first_mode;
	h->pool.slabs = info.slabs;
	h->pool.backed = info.backed;
	h->pool.cap = info.cap;
	h->pool.reserve = info.reserve;
	memcpy(h->pool.backed_by, info.backed_by, sizeof(info.backed_by));
	memcpy(h->pool.failures, info.failures, sizeof(info.failures));
	copy_reason(h->pool.hugetlb_reason, info.hugetlb_reason);
	copy_reason(h->pool.thp_reason, info.thp_reason);
	h->pool_ready = ps_alloc_pool_ready();
	h->uring_state = (int32_t)ps_uring_state();
	h->uring_rings = ps_uring_rings();
	copy_reason(h->uring_reason, ps_uring_reason());
	pthread_mutex_unlock(&publish_lock);
}

/* Create and map PID's file; fill in the identity.  The mapping or NULL. */
static struct ps_live_header *create(int pid, void *at, int *err)
{
	char path[96];
	ps_live_path(path, sizeof(path), pid);

	long fd = ps_sys_openat(AT_FDCWD, path,
				O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -EEXIST) {
		/* Left by a process with our pid: our own image before exec, or a dead one. */
		struct stat st;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == (uid_t)PS_SYSCALL(SYS_geteuid)) {
			unlink(path);
			fd = ps_sys_openat(AT_FDCWD, path,
					   O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		}
	}
	if (fd < 0) {
		*err = (int)fd;
		return NULL;
	}
	if (PS_SYSCALL(SYS_ftruncate, fd, map_len) < 0) {
		*err = -ENOSPC;
		ps_sys_close((int)fd);
		unlink(path);
		return NULL;
	}
	void *p = mmap(at, map_len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | (at ? MAP_FIXED : 0), (int)fd, 0);
	ps_sys_close((int)fd);
	if (p == MAP_FAILED) {
		*err = -errno;
		unlink(path);
		return NULL;
	}
	return p;
}

static void fill_identity(struct ps_live_header *h, int pid)
{
	memcpy(h->magic, PS_LIVE_MAGIC, 8);
	h->version = PS_LIVE_VERSION;
	h->max_blocks = PS_LIVE_BLOCKS;
	h->block_size = sizeof(struct ps_tstats);
	h->block_stride = stride();
	h->pid = pid;
	h->starttime = ps_live_starttime(pid);
	h->exited = 0;
	copy_reason(h->program, program_invocation_short_name);
	for (char *c = h->program; *c; c++)
		if (*c == '/')
			*c = '_';
}

int ps_live_init(const struct ps_config *cfg)
{
	int err = 0;
	int pid = (int)PS_SYSCALL(SYS_getpid);

	map_len = PS_LIVE_HEADER + (size_t)PS_LIVE_BLOCKS * stride();
	struct ps_live_header *h = create(pid, NULL, &err);
	if (!h)
		return err;
	fill_identity(h, pid);
	h->pool_min = cfg->pool_min;
	h->gauges = *ps_gauges;
	__atomic_store_n(&ps_gauges_mirror, &h->gauges, __ATOMIC_RELEASE);
	live_pid = pid;
	__atomic_store_n(&hdr, h, __ATOMIC_RELEASE);
	ps_live_publish();
	ps_stats_block_source = take_block;
	/* Counts made while starting up went to anonymous memory: bring them in. */
	ps_stats_rehome();
	return 0;
}

void ps_live_after_fork_child(void)
{
	struct ps_live_header *h = hdr;

	if (!h)
		return;
	/*
	 * The child keeps its counters in private memory over the same
	 * addresses and publishes no file of its own: children that end with
	 * _exit() (the usual way after fork) would leave one file each in
	 * /dev/shm.  It still writes its report at exit; a child that execs
	 * publishes again from its new image.  Never write the parent's file.
	 */
	size_t used = PS_LIVE_HEADER + (size_t)h->nblocks * h->block_stride;
	if (used > map_len)
		used = map_len;
	void *copy = mmap(NULL, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (copy != MAP_FAILED)
		memcpy(copy, h, used);
	mmap(h, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (copy != MAP_FAILED) {
		memcpy(h, copy, used);
		munmap(copy, used);
	}
	hdr = NULL;
	ps_stats_block_source = NULL;
}

void ps_live_remove(void)
{
	char path[96];

	if (!hdr || live_pid != (int)PS_SYSCALL(SYS_getpid))
		return;
	hdr->exited = 1;
	ps_live_path(path, sizeof(path), live_pid);
	unlink(path);
}
