// SPDX-License-Identifier: MIT
/*
 * ThreadSanitizer stress of the shim's core (built with --enable-tsan).
 *
 * TSan's runtime replaces malloc itself, so it cannot run under the
 * preloaded library.  This program links a copy of the core compiled with
 * -fsanitize=thread and calls it the way the interposers do, from many
 * threads at once:
 *
 *   alloc workers   ps_malloc/calloc/realloc/posix_memalign/aligned_alloc/
 *                   free on sizes either side of POOLSHIM_POOL_MIN, some
 *                   buffers handed to another thread to be checked and freed
 *   I/O workers     O_DIRECT pwrite/pread/pwritev/preadv of pooled buffers
 *                   through the per-thread io_uring rings (as io.c does),
 *                   chunks split and submitted together, data read back
 *   thread storms   waves of short-lived threads that count, allocate and
 *                   do one ring's worth of I/O, then exit (counter blocks,
 *                   rings and caches of pooled blocks released and reused)
 *   reporter        merges the counters, renders the report and the call
 *                   sites, republishes the live file and reads the pool,
 *                   as the dump signal and the exit report do, all along,
 *                   and calls malloc_trim now and then (the pool purges)
 *
 * while call-site capture samples one in 32 large allocations and I/O calls.
 * The CPUs' caches of pooled blocks are on (POOLSHIM_POOL_CACHE's
 * default): blocks handed to another thread are freed into the cache of
 * the CPU it runs on, threads of one CPU share its cache, the reporter's
 * malloc_trim flushes every cache while the workers fill them.
 * TSan reports any race (exit status 66).  Besides that the program checks
 * what a race could break: no count lost, every pooled buffer freed back
 * to a zero gauge and, the caches flushed, to the placement, and every
 * byte written read back unchanged.
 *
 *   stress [DIR]     DIR: where the O_DIRECT file goes (must support it)
 *   PS_TSAN_SCALE    multiplies the amount of work (default 1)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/blocks.h"
#include "core/callsite.h"
#include "format/config.h"
#include "core/fdinfo.h"
#include "format/fmt.h"
#include "format/livefmt.h"
#include "core/live.h"
#include "core/pool.h"
#include "core/report_out.h"
#include "core/tcache.h"
#include "format/stats.h"
#include "core/uring.h"

#define ALLOC_THREADS 3
#define IO_THREADS 2
#define STORM_THREADS 6
#define SLOTS 12
#define IO_REGION ((off_t)8 << 20)     /* file bytes per I/O thread */
#define IO_MAX ((size_t)512 << 10)

static int scale = 1;
static int fails;
static bool done;                      /* workers finished: the reporter stops */
static int io_fd = -1;
static char io_path[4096];
static bool live_on;

/* What the threads did, added up at their end and compared with the counters. */
static uint64_t n_malloc, n_calloc, n_realloc, n_memalign, n_aligned, n_free;
static uint64_t n_pwrite, n_pread, n_pwritev, n_preadv, io_bytes_w, io_bytes_r;
static uint64_t n_uring_calls, n_plain_calls;

struct tally {
	uint64_t malloc_, calloc_, realloc_, memalign, aligned, free_;
	uint64_t pwrite, pread, pwritev, preadv, bytes_w, bytes_r, uring, plain;
};

static void tally_add(const struct tally *t)
{
	__atomic_add_fetch(&n_malloc, t->malloc_, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_calloc, t->calloc_, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_realloc, t->realloc_, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_memalign, t->memalign, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_aligned, t->aligned, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_free, t->free_, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_pwrite, t->pwrite, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_pread, t->pread, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_pwritev, t->pwritev, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_preadv, t->preadv, __ATOMIC_RELAXED);
	__atomic_add_fetch(&io_bytes_w, t->bytes_w, __ATOMIC_RELAXED);
	__atomic_add_fetch(&io_bytes_r, t->bytes_r, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_uring_calls, t->uring, __ATOMIC_RELAXED);
	__atomic_add_fetch(&n_plain_calls, t->plain, __ATOMIC_RELAXED);
}

#define FAIL(...)                                                          \
	do {                                                               \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                     \
		fputc('\n', stderr);                                       \
		__atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);           \
	} while (0)

static uint32_t rnd(uint64_t *s)
{
	/* xorshift64*: cheap, and each thread has its own state */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (uint32_t)((*s * 0x2545F4914F6CDD1DULL) >> 32);
}

/* Either side of the 64K threshold, with the threshold itself now and then. */
static size_t pick_size(uint64_t *s)
{
	switch (rnd(s) % 8) {
	case 0:
		return 65536;
	case 1:
	case 2:
	case 3:
		return 16 + rnd(s) % 60000;
	default:
		return 65536 + rnd(s) % (2u << 20);
	}
}

/*
 * Buffers carry their owner's tag in the first and last 64 bytes and at
 * every 64 KiB: enough to catch a buffer handed out twice, cheap enough
 * under TSan's instrumented memset.
 */
static void mark(unsigned char *p, size_t n, unsigned char tag)
{
	size_t edge = n < 64 ? n : 64;
	memset(p, tag, edge);
	memset(p + n - edge, tag, edge);
	for (size_t off = 65536; off < n; off += 65536)
		p[off] = tag;
}

static bool marked(const unsigned char *p, size_t n, unsigned char tag)
{
	size_t edge = n < 64 ? n : 64;
	for (size_t i = 0; i < edge; i++)
		if (p[i] != tag || p[n - 1 - i] != tag)
			return false;
	for (size_t off = 65536; off < n; off += 65536)
		if (p[off] != tag)
			return false;
	return true;
}

/* A few buffers in flight between threads (freed by whoever takes them). */
static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handoff {
	unsigned char *p;
	size_t n;
	unsigned char tag;
} handoff[32];
static int handoff_n;

static bool handoff_put(unsigned char *p, size_t n, unsigned char tag)
{
	bool ok = false;
	pthread_mutex_lock(&handoff_lock);
	if (handoff_n < (int)(sizeof(handoff) / sizeof(*handoff))) {
		handoff[handoff_n++] = (struct handoff){ p, n, tag };
		ok = true;
	}
	pthread_mutex_unlock(&handoff_lock);
	return ok;
}

static bool handoff_take(struct handoff *out)
{
	bool ok = false;
	pthread_mutex_lock(&handoff_lock);
	if (handoff_n > 0) {
		*out = handoff[--handoff_n];
		ok = true;
	}
	pthread_mutex_unlock(&handoff_lock);
	return ok;
}

static void take_one_handoff(struct tally *t)
{
	struct handoff h;
	if (!handoff_take(&h))
		return;
	if (!marked(h.p, h.n, h.tag))
		FAIL("a buffer of %zu bytes handed between threads lost its contents", h.n);
	ps_free(h.p);
	t->free_++;
}

/* Allocation workers and the storm threads' allocations. */
static void alloc_round(uint64_t *seed, unsigned char base_tag, int iters, struct tally *t)
{
	struct {
		unsigned char *p;
		size_t n;
		unsigned char tag;
	} slot[SLOTS] = { { 0 } };

	for (int i = 0; i < iters; i++) {
		int k = (int)(rnd(seed) % SLOTS);
		unsigned char tag = (unsigned char)(base_tag + i);
		if (slot[k].p) {
			if (!marked(slot[k].p, slot[k].n, slot[k].tag))
				FAIL("buffer of %zu bytes changed under its owner", slot[k].n);
			switch (rnd(seed) % 4) {
			case 0: {
				size_t n = pick_size(seed);
				unsigned char *q = ps_realloc(slot[k].p, n);
				t->realloc_++;
				if (!q) {
					FAIL("realloc to %zu failed", n);
					break;
				}
				/* The marks that survive: the head, and the old tail when growing. */
				size_t head = n < slot[k].n ? n : slot[k].n;
				head = head < 64 ? head : 64;
				bool kept = n < slot[k].n || q[slot[k].n - 1] == slot[k].tag;
				for (size_t b = 0; b < head; b++)
					kept &= q[b] == slot[k].tag;
				if (!kept)
					FAIL("realloc %zu -> %zu lost the contents", slot[k].n, n);
				mark(q, n, tag);
				slot[k].p = q;
				slot[k].n = n;
				slot[k].tag = tag;
				continue;
			}
			case 1:
				if (handoff_put(slot[k].p, slot[k].n, slot[k].tag)) {
					slot[k].p = NULL;
					continue;
				}
				break;
			default:
				break;
			}
			ps_free(slot[k].p);
			t->free_++;
			slot[k].p = NULL;
			take_one_handoff(t);
			continue;
		}
		size_t n = pick_size(seed);
		unsigned char *p = NULL;
		switch (rnd(seed) % 5) {
		case 0:
			p = ps_calloc(1, n);
			t->calloc_++;
			if (p && (p[0] || p[n - 1] || p[n / 2]))
				FAIL("calloc(%zu) returned memory that is not zero", n);
			break;
		case 1: {
			void *v = NULL;
			size_t align = (size_t)4096 << (rnd(seed) % 6);
			if (ps_posix_memalign(&v, align, n) == 0) {
				p = v;
				if ((uintptr_t)p % align)
					FAIL("posix_memalign(%zu) misaligned", align);
			}
			t->memalign++;
			break;
		}
		case 2:
			p = ps_aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
			n = (n + 4095) & ~(size_t)4095;
			t->aligned++;
			break;
		default:
			p = ps_malloc(n);
			t->malloc_++;
			break;
		}
		if (!p) {
			FAIL("allocation of %zu bytes failed", n);
			continue;
		}
		mark(p, n, tag);
		slot[k].p = p;
		slot[k].n = n;
		slot[k].tag = tag;
	}
	for (int k = 0; k < SLOTS; k++)
		if (slot[k].p) {
			if (!marked(slot[k].p, slot[k].n, slot[k].tag))
				FAIL("buffer of %zu bytes changed under its owner", slot[k].n);
			ps_free(slot[k].p);
			t->free_++;
		}
}

/*
 * Threads that capture call sites never exit: libunwind keeps a per-thread
 * cache for unw_backtrace whose destructor re-arms itself to run last at
 * thread exit, after TSan has detached from the thread, and its mutex call
 * then crashes TSan's runtime (a clash of the two libraries, nothing the
 * shim does).  So the long-lived workers park when done and the process
 * exits under them, and the short-lived storm threads hold captures
 * (ps_callsite_hold): they never unwind.  Calls are sampled by bytes, on
 * average one capture per SITE_SAMPLE bytes.
 */
#define SITE_SAMPLE (1u << 20)
#define STORM_ITERS 24
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static int parked;

static void park(void)
{
	pthread_mutex_lock(&park_lock);
	parked++;
	pthread_cond_broadcast(&park_cond);
	for (;;)
		pthread_cond_wait(&park_cond, &park_lock);
}

static void wait_parked(int n)
{
	pthread_mutex_lock(&park_lock);
	while (parked < n)
		pthread_cond_wait(&park_cond, &park_lock);
	pthread_mutex_unlock(&park_lock);
}

static void *alloc_worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
	struct tally t = { 0 };

	alloc_round(&seed, (unsigned char)(id * 40), 3000 * scale, &t);
	tally_add(&t);
	park();
	return NULL;
}

/*
 * One positional call the way io.c routes it: io_uring when the buffer and
 * the descriptor qualify, else the plain call; then the counters and the
 * call-site sample.  Returns what pread/pwrite would.
 */
static ssize_t do_rw(enum ps_call call, void *buf, size_t len, off_t off, bool write,
		     struct tally *t)
{
	ssize_t r = -2;
	uint64_t t0 = ps_ticks();

	if (ps_fd_kind(io_fd) == PS_FD_DIRECT && ps_uring_eligible(buf, len, off, true) &&
	    ps_fd_is_direct_now(io_fd, write))
		r = ps_uring_rw(io_fd, buf, len, off, write, 0);
	if (r == -2) {
		r = write ? pwrite(io_fd, buf, len, off) : pread(io_fd, buf, len, off);
		t->plain++;
	} else {
		t->uring++;
	}
	int err = errno;
	uint64_t ns = ps_ticks_to_ns(ps_ticks() - t0);
	ps_stats_io_slow(call, ps_fd_kind(io_fd), len, r, err, ns ? ns : 1);
	ps_callsite_record(PS_SITE_IO, call, r > 0 ? (uint64_t)r : 0, ns);
	return r;
}

static ssize_t do_rwv(enum ps_call call, struct iovec *iov, int n, off_t off, bool write,
		      struct tally *t)
{
	ssize_t r = -2;
	size_t len = 0;

	if (ps_fd_kind(io_fd) == PS_FD_DIRECT &&
	    ps_uring_eligible(iov[0].iov_base, iov[0].iov_len, off, true) &&
	    ps_fd_is_direct_now(io_fd, write))
		r = ps_uring_rwv(io_fd, iov, n, off, write);

	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	if (r == -2) {
		r = write ? pwritev(io_fd, iov, n, off) : preadv(io_fd, iov, n, off);
		t->plain++;
	} else {
		t->uring++;
	}
	ps_stats_io_slow(call, ps_fd_kind(io_fd), len, r, errno, 0);
	return r;
}

/* Fill with bytes that depend on the file offset, so a misplaced chunk shows. */
static void fill(unsigned char *p, size_t n, off_t off, unsigned salt)
{
	for (size_t i = 0; i < n; i += 512) {
		uint64_t w = ((uint64_t)(off + (off_t)i) << 8) ^ salt;
		memcpy(p + i, &w, sizeof(w));
		memset(p + i + 8, (int)(salt + i / 512), 504);
	}
}

/*
 * liburing maps and unmaps its rings with raw system calls, out of TSan's
 * sight, so a ring created where an exited thread's ring was looks to TSan
 * like memory shared by two threads.  Ring creation (a thread's first
 * io_uring call) and teardown (thread exit) take this lock: it gives TSan
 * the order the kernel already enforces.  Rings in use are not covered by
 * it, so two threads ever touching the same ring would still be reported.
 */
static pthread_mutex_t ring_life = PTHREAD_MUTEX_INITIALIZER;

/* Write a pooled buffer to this thread's region and read it back. */
static void io_round(int id, uint64_t *seed, int iters, struct tally *t)
{
	static __thread bool have_ring;

	if (!have_ring)
		pthread_mutex_lock(&ring_life);
	for (int i = 0; i < iters; i++) {
		if (i == 1 && !have_ring) {
			have_ring = true;
			pthread_mutex_unlock(&ring_life);
		}
		size_t len = (size_t)65536 * (1 + rnd(seed) % (IO_MAX / 65536));
		off_t off = (off_t)id * IO_REGION +
			    (off_t)(rnd(seed) % (uint32_t)((IO_REGION - (off_t)IO_MAX) / 4096)) * 4096;
		void *w = NULL, *r = NULL;
		if (ps_posix_memalign(&w, 4096, len) != 0 || ps_posix_memalign(&r, 4096, len) != 0) {
			FAIL("posix_memalign(4096, %zu) failed", len);
			ps_free(w);
			t->free_++;
			t->memalign += 2;
			break;
		}
		t->memalign += 2;
		unsigned salt = (unsigned)(id * 1000 + i);
		fill(w, len, off, salt);
		bool vectored = i % 4 == 3;
		ssize_t got;
		if (vectored) {
			size_t half = len / 2 & ~(size_t)4095;     /* len >= 64K: never 0 */
			struct iovec iov[2] = { { w, half }, { (char *)w + half, len - half } };
			got = do_rwv(PS_CALL_PWRITEV, iov, 2, off, true, t);
			t->pwritev++;
		} else {
			got = do_rw(PS_CALL_PWRITE, w, len, off, true, t);
			t->pwrite++;
		}
		if (got != (ssize_t)len)
			FAIL("write of %zu at %lld returned %zd (%s)", len, (long long)off, got,
			     strerror(errno));
		else
			t->bytes_w += len;
		memset(r, 0xee, len);
		if (vectored) {
			struct iovec iov[2] = { { r, 65536 }, { (char *)r + 65536, len - 65536 } };
			got = do_rwv(PS_CALL_PREADV, iov, len > 65536 ? 2 : 1, off, false, t);
			t->preadv++;
		} else {
			got = do_rw(PS_CALL_PREAD, r, len, off, false, t);
			t->pread++;
		}
		if (got != (ssize_t)len)
			FAIL("read of %zu at %lld returned %zd (%s)", len, (long long)off, got,
			     strerror(errno));
		else if (memcmp(w, r, len) != 0)
			FAIL("read back of %zu bytes at %lld differs from what was written", len,
			     (long long)off);
		else
			t->bytes_r += len;
		ps_free(w);
		ps_free(r);
		t->free_ += 2;
	}
	if (!have_ring) {
		have_ring = true;
		pthread_mutex_unlock(&ring_life);
	}
}

static void *io_worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t seed = 0xd1b54a32d192ed03ULL * (uint64_t)(id + 7);
	struct tally t = { 0 };

	io_round(id, &seed, 60 * scale, &t);
	tally_add(&t);
	park();
	return NULL;
}

/* A short-lived thread: claims a counter block and a ring, then exits. */
static void *storm_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t seed = 0xbf58476d1ce4e5b9ULL * (uint64_t)(id + 3);
	struct tally t = { 0 };

	ps_callsite_hold(true);
	alloc_round(&seed, (unsigned char)id, STORM_ITERS, &t);
	io_round(IO_THREADS + id % STORM_THREADS, &seed, 1, &t);
	tally_add(&t);
	ps_callsite_hold(false);
	return NULL;
}

static struct ps_tstats *map_block(void)
{
	void *p = mmap(NULL, sizeof(struct ps_tstats), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(99);
	}
	return p;
}

/* What the dump signal and the exit report do while the program runs. */
static void *reporter(void *arg)
{
	static char out[1 << 18];
	struct ps_tstats *sum = map_block(), *scratch = map_block();
	uint64_t last_calls = 0;
	unsigned rounds = 0;

	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		struct ps_buf b;
		struct ps_report_data d;
		struct ps_pool_info info;

		/* Counts never go down, whichever thread exits or reuses a block. */
		ps_stats_merge(sum, NULL);
		uint64_t calls = sum->c[PS_CALL_MALLOC][PS_FD_NONE].calls +
				 sum->c[PS_CALL_POSIX_MEMALIGN][PS_FD_NONE].calls +
				 sum->c[PS_CALL_FREE][PS_FD_NONE].calls;
		if (calls < last_calls)
			FAIL("merged counters went down: %llu after %llu",
			     (unsigned long long)calls, (unsigned long long)last_calls);
		last_calls = calls;

		ps_report_gather(&d, scratch, true);
		ps_buf_init(&b, out, sizeof(out), -1);
		ps_report_render(&b, &d, rounds % 2 ? PS_FORMAT_JSON : PS_FORMAT_TEXT);
		ps_callsite_render(&b, rounds % 2, false);
		ps_pool_get_info(&info);
		(void)ps_callsite_captures();
		(void)ps_uring_rings();
		if (live_on)
			ps_live_publish();
		/*
		 * Every fourth round a malloc_trim: the pool gives its free
		 * blocks back while the workers take and free theirs (the
		 * blocks being purged are out of reach until it is done).
		 */
		if (rounds % 4 == 3)
			ps_alloc_trim(0);
		rounds++;
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	}
	munmap(sum, sizeof(*sum));
	munmap(scratch, sizeof(*scratch));
	printf("reporter: %u reports rendered while the workers ran\n", rounds);
	return NULL;
}

/* Thread exit as init.c arranges it: close the ring, give the block back. */
static pthread_key_t exit_key;

static void on_thread_exit(void *block)
{
	pthread_mutex_lock(&ring_life);
	ps_uring_thread_exit();
	pthread_mutex_unlock(&ring_life);
	ps_stats_release(block);
}

static void on_claim(void *block)
{
	pthread_setspecific(exit_key, block);
}

static void start(pthread_t *th, void *(*fn)(void *), intptr_t arg)
{
	int e = pthread_create(th, NULL, fn, (void *)arg);
	if (e) {
		fprintf(stderr, "pthread_create: %s\n", strerror(e));
		exit(99);
	}
}

static void check_eq(const char *what, uint64_t got, uint64_t want)
{
	if (got != want)
		FAIL("%s: the counters say %llu, the threads did %llu", what,
		     (unsigned long long)got, (unsigned long long)want);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : ".";
	const char *sc = getenv("PS_TSAN_SCALE");
	struct ps_config cfg;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* stress.sh removes the live file (named by pid) if this run crashes. */
	printf("stress pid %d\n", (int)getpid());
	if (sc && atoi(sc) > 0)
		scale = atoi(sc);

	snprintf(io_path, sizeof(io_path), "%s/ps-tsan.%d", dir, (int)getpid());
	io_fd = open(io_path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (io_fd < 0) {
		printf("SKIP: cannot create an O_DIRECT file in %s (%s)\n", dir, strerror(errno));
		return 77;
	}
	unlink(io_path);
	if (ftruncate(io_fd, (IO_THREADS + STORM_THREADS) * IO_REGION) != 0) {
		perror("ftruncate");
		return 99;
	}

	/* The shim's start-up (init.c), with settings that exercise more paths. */
	ps_config_defaults(&cfg);
	cfg.pool_size = (uint64_t)512 << 20;
	cfg.hugepages = PS_HUGE_THP;
	cfg.uring_chunk = 128 << 10;     /* split most requests into chunks */
	cfg.uring_depth = 2;             /* and submit them in several waves */
	cfg.backtrace = 8;
	cfg.backtrace_sample = SITE_SAMPLE;
	ps_cfg = cfg;
	if (pthread_key_create(&exit_key, on_thread_exit) != 0)
		return 99;
	ps_stats_on_claim = on_claim;
	ps_clock_init();
	int r = ps_alloc_init(&cfg);
	if (r < 0) {
		fprintf(stderr, "ps_alloc_init: %s\n", strerror(-r));
		return 99;
	}
	ps_report_keep_name();
	ps_uring_init(&cfg);
	r = ps_live_init(&cfg);
	if (r == 0) {
		live_on = true;
		ps_pool_on_change = ps_live_publish;
	} else {
		printf("note: no live file (%s); the live publication is not exercised\n",
		       strerror(-r));
	}
	ps_callsite_init(&cfg);

	pthread_t rep, alloc_th[ALLOC_THREADS], io_th[IO_THREADS];
	start(&rep, reporter, 0);
	for (int i = 0; i < ALLOC_THREADS; i++)
		start(&alloc_th[i], alloc_worker, i);
	for (int i = 0; i < IO_THREADS; i++)
		start(&io_th[i], io_worker, i);

	/* Storms while the workers run: blocks and rings come and go. */
	int waves = 6 * scale;
	for (int w = 0; w < waves; w++) {
		pthread_t st[STORM_THREADS];
		for (int i = 0; i < STORM_THREADS; i++)
			start(&st[i], storm_thread, w * STORM_THREADS + i);
		for (int i = 0; i < STORM_THREADS; i++)
			pthread_join(st[i], NULL);
	}
	/* The program mprotect()s a pooled page while others do I/O. */
	void *prot = ps_malloc(1 << 20);
	ps_pool_note_mprotect(prot, 4096, PROT_READ);

	wait_parked(ALLOC_THREADS + IO_THREADS);
	__atomic_store_n(&done, true, __ATOMIC_RELEASE);
	pthread_join(rep, NULL);

	struct tally t = { .malloc_ = 1, .free_ = 1 };     /* prot */
	while (handoff_n > 0)
		take_one_handoff(&t);
	ps_free(prot);
	tally_add(&t);

	/* Nothing lost, nothing left over. */
	struct ps_tstats *sum = map_block();
	ps_stats_merge(sum, NULL);
#define CALLS(call, kind) (sum->c[call][kind].calls)
	check_eq("malloc calls", CALLS(PS_CALL_MALLOC, PS_FD_NONE), n_malloc);
	check_eq("calloc calls", CALLS(PS_CALL_CALLOC, PS_FD_NONE), n_calloc);
	check_eq("realloc calls", CALLS(PS_CALL_REALLOC, PS_FD_NONE), n_realloc);
	check_eq("posix_memalign calls", CALLS(PS_CALL_POSIX_MEMALIGN, PS_FD_NONE), n_memalign);
	check_eq("aligned_alloc calls", CALLS(PS_CALL_ALIGNED_ALLOC, PS_FD_NONE), n_aligned);
	check_eq("free calls", CALLS(PS_CALL_FREE, PS_FD_NONE), n_free);
	check_eq("pwrite calls", CALLS(PS_CALL_PWRITE, PS_FD_DIRECT), n_pwrite);
	check_eq("pread calls", CALLS(PS_CALL_PREAD, PS_FD_DIRECT), n_pread);
	check_eq("pwritev calls", CALLS(PS_CALL_PWRITEV, PS_FD_DIRECT), n_pwritev);
	check_eq("preadv calls", CALLS(PS_CALL_PREADV, PS_FD_DIRECT), n_preadv);
	check_eq("bytes written",
		 sum->c[PS_CALL_PWRITE][PS_FD_DIRECT].bytes + sum->c[PS_CALL_PWRITEV][PS_FD_DIRECT].bytes,
		 io_bytes_w);
	check_eq("bytes read",
		 sum->c[PS_CALL_PREAD][PS_FD_DIRECT].bytes + sum->c[PS_CALL_PREADV][PS_FD_DIRECT].bytes,
		 io_bytes_r);
	check_eq("pooled allocations freed", sum->events[PS_EV_POOL_FREE],
		 sum->events[PS_EV_POOL_ALLOC]);
	/* The threads' CPUs add their counts in batches: first what is pending, as a report does. */
	ps_alloc_counts_sync();
	check_eq("pooled bytes in use at the end", __atomic_load_n(&ps_gauges->pool_in_use,
								   __ATOMIC_RELAXED), 0);
	if (sum->events[PS_EV_POOL_ALLOC] == 0)
		FAIL("nothing was served from the pool");
	if (ps_uring_state() == PS_URING_STATE_OK && sum->uring.sqes == 0)
		FAIL("io_uring is available but no SQE was submitted");
	if (ps_callsite_captures() == 0)
		FAIL("no call site was captured");
	struct ps_pool_info pinfo;
	ps_pool_get_info(&pinfo);
	if (pinfo.purges == 0)
		FAIL("malloc_trim never purged the pool");
	if (sum->events[PS_EV_POOL_CACHED] == 0)
		FAIL("no pooled block was served from a CPU's cache");
	/* Every CPU's cache goes back, storm threads' frees among them. */
	ps_tcache_flush_all();
	if (ps_tcache_cached_bytes() != 0)
		FAIL("%llu bytes still cached after every cache was flushed",
		     (unsigned long long)ps_tcache_cached_bytes());
	/* Every block back, and the trees whole after all that. */
	if (ps_blocks_check() != 0)
		FAIL("the pool's block trees are damaged");
	struct ps_blocks_info binfo;
	ps_blocks_get_info(&binfo);
	if (binfo.live != 0)
		FAIL("%llu pooled blocks still live after every buffer was freed",
		     (unsigned long long)binfo.live);

	printf("threads: %d counter blocks; pool: %llu allocations; io: %llu calls through "
	       "io_uring (%llu SQEs, %llu rings), %llu plain; call sites: %llu captures\n",
	       ps_stats_blocks(), (unsigned long long)sum->events[PS_EV_POOL_ALLOC],
	       (unsigned long long)n_uring_calls, (unsigned long long)sum->uring.sqes,
	       (unsigned long long)ps_uring_rings(), (unsigned long long)n_plain_calls,
	       (unsigned long long)ps_callsite_captures());
	if (ps_uring_state() != PS_URING_STATE_OK)
		printf("note: io_uring %s: the ring path was not exercised\n",
		       ps_uring_reason() ? ps_uring_reason() : "unavailable");
	if (live_on)
		ps_live_remove();
	close(io_fd);
	return fails ? 1 : 0;
}
