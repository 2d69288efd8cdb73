// SPDX-License-Identifier: MIT
/*
 * The malloc-family interposers.  Each one is a thin door: on, it calls the
 * core allocator (alloc.c); when we do not own the heap (POOLSHIM=off, or
 * another allocator preloaded ahead of us), the allocator that does, so the
 * program's heap is never split between two allocators.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "alloc.h"
#include "compiler.h"
#include "fmt.h"
#include "init.h"
#include "pool.h"

/* glibc's allocator, reachable whatever the symbol search order says. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/* Gone from glibc's headers, still reachable by old binaries. */
void cfree(void *p);

/*
 * The allocator that owns the heap when we do not (POOLSHIM=off: the next
 * one after us, usually glibc; another allocator preloaded ahead of us: that
 * one).  A NULL entry is a function it lacks (jemalloc has no pvalloc or
 * reallocarray): those are built from the ones it has, never from ours or
 * glibc's, so no block crosses allocators.  Until it is bound (the first
 * calls, during our own start-up with POOLSHIM=off) glibc serves.
 */
static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*memalign)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	size_t (*usable)(void *);
} other;

/* Set while we ask the winning malloc for a block at start (see below). */
static __thread bool probing, probe_reached_us;
/* The owner chosen at start; published in ps_heap with the shim's state. */
static int chosen = PS_HEAP_UNDECIDED;

static bool heap_mine_slow(void)
{
	if (probing)
		probe_reached_us = true;
	bool on = ps_enabled();   /* other threads wait here until start-up ends */
	int h = __atomic_load_n(&ps_heap, __ATOMIC_ACQUIRE);
	if (h != PS_HEAP_UNDECIDED)
		return h == PS_HEAP_MINE;
	/* Re-entered from our own start-up: the owner if chosen, else on/off. */
	if (chosen != PS_HEAP_UNDECIDED)
		return chosen == PS_HEAP_MINE;
	return on;
}

static inline bool heap_mine(void)
{
	int h = __atomic_load_n(&ps_heap, __ATOMIC_ACQUIRE);
	if (ps_likely(h == PS_HEAP_MINE))
		return true;
	if (h == PS_HEAP_OTHER)
		return false;
	return heap_mine_slow();
}

static void *other_malloc(size_t size)
{
	return other.malloc ? other.malloc(size) : __libc_malloc(size);
}

static void other_free(void *p)
{
	if (other.free)
		other.free(p);
	else
		__libc_free(p);
}

static void *other_realloc(void *p, size_t size)
{
	return other.realloc ? other.realloc(p, size) : __libc_realloc(p, size);
}

static void *other_calloc(size_t n, size_t size)
{
	size_t total;

	if (other.calloc || !other.malloc)
		return other.calloc ? other.calloc(n, size) : __libc_calloc(n, size);
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = other.malloc(total);
	if (p)
		memset(p, 0, total);
	return p;
}

/* memalign(3) semantics from whatever aligned entry point the owner has. */
static void *other_memalign(size_t align, size_t size)
{
	if (other.memalign || !other.malloc)
		return other.memalign ? other.memalign(align, size) : __libc_memalign(align, size);
	if (other.posix_memalign) {
		void *p = NULL;
		int saved_errno = errno;
		/* memalign rounds an odd alignment up to a power of two. */
		if (align < sizeof(void *))
			align = sizeof(void *);
		if (align & (align - 1))
			align = (size_t)1 << (64 - __builtin_clzl(align));
		int r = other.posix_memalign(&p, align, size);
		errno = r ? r : saved_errno;
		return r ? NULL : p;
	}
	errno = ENOMEM;
	return NULL;
}

static size_t page_size(void)
{
	static size_t page;

	if (!page)
		page = (size_t)sysconf(_SC_PAGESIZE);
	return page;
}

PS_EXPORT void *malloc(size_t size)
{
	if (ps_likely(heap_mine()))
		return ps_malloc(size);
	return other_malloc(size);
}

PS_EXPORT void free(void *p)
{
	if (ps_likely(heap_mine()))
		ps_free(p);
	else
		other_free(p);
}

PS_EXPORT void cfree(void *p)
{
	free(p);
}

PS_EXPORT void *calloc(size_t n, size_t size)
{
	if (ps_likely(heap_mine()))
		return ps_calloc(n, size);
	return other_calloc(n, size);
}

PS_EXPORT void *realloc(void *p, size_t size)
{
	if (ps_likely(heap_mine()))
		return ps_realloc(p, size);
	return other_realloc(p, size);
}

PS_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (ps_likely(heap_mine()))
		return ps_reallocarray(p, n, size);
	if (other.reallocarray)
		return other.reallocarray(p, n, size);
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return other_realloc(p, total);
}

PS_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (ps_likely(heap_mine()))
		return ps_posix_memalign(out, align, size);
	if (other.posix_memalign)
		return other.posix_memalign(out, align, size);
	if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *) != 0)
		return EINVAL;
	int saved_errno = errno;
	void *p = other_memalign(align, size);
	errno = saved_errno;
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

PS_EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (ps_likely(heap_mine()))
		return ps_aligned_alloc(align, size);
	if (other.aligned_alloc)
		return other.aligned_alloc(align, size);
	return other_memalign(align, size);
}

PS_EXPORT void *memalign(size_t align, size_t size)
{
	if (ps_likely(heap_mine()))
		return ps_memalign(align, size);
	return other_memalign(align, size);
}

PS_EXPORT void *valloc(size_t size)
{
	if (ps_likely(heap_mine()))
		return ps_valloc(size);
	if (other.valloc)
		return other.valloc(size);
	return other_memalign(page_size(), size);
}

PS_EXPORT void *pvalloc(size_t size)
{
	size_t page = page_size(), rounded;

	if (ps_likely(heap_mine()))
		return ps_pvalloc(size);
	if (other.pvalloc)
		return other.pvalloc(size);
	if (__builtin_add_overflow(size ? size : 1, page - 1, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	return other_memalign(page, rounded & ~(page - 1));
}

PS_EXPORT size_t malloc_usable_size(void *p)
{
	if (ps_likely(heap_mine()))
		return ps_usable_size(p);
	return other.usable ? other.usable(p) : 0;
}

/* The load address of the object that defines fn, or NULL. */
static void *object_of(void *fn)
{
	Dl_info info;

	return fn && dladdr(fn, &info) ? info.dli_fbase : NULL;
}

/* Whether fn is defined in this library (a lookup found our interposer). */
static bool is_ours(void *fn)
{
	void *self = object_of((void *)is_ours);
	return self && object_of(fn) == self;
}

/*
 * Bind the owner's functions: the allocator whose malloc handle finds.  A
 * name it lacks is found further down the search order (ours, glibc's): only
 * definitions from the owner's own object are taken, the rest left NULL.
 */
static void bind_other(void *handle)
{
	void *m = dlsym(handle, "malloc");
	void *owner = is_ours(m) ? NULL : object_of(m);
	if (!owner)
		return;     /* glibc's entry points keep serving */
#define BIND(field, name) do { \
		void *fn = dlsym(handle, name); \
		if (fn && object_of(fn) == owner) \
			memcpy(&other.field, &fn, sizeof(fn)); \
	} while (0)
	BIND(free, "free");
	BIND(calloc, "calloc");
	BIND(realloc, "realloc");
	BIND(memalign, "memalign");
	BIND(posix_memalign, "posix_memalign");
	BIND(aligned_alloc, "aligned_alloc");
	BIND(valloc, "valloc");
	BIND(pvalloc, "pvalloc");
	BIND(reallocarray, "reallocarray");
	BIND(usable, "malloc_usable_size");
	/* Last: its presence switches the helpers above from glibc to it. */
	BIND(malloc, "malloc");
#undef BIND
}

/*
 * Called once from start-up; ps_malloc_publish_heap() makes the choice
 * visible to other threads as the shim leaves its starting state (until
 * then they wait, so none allocates from a pool not yet fully set up).
 * The heap belongs to whichever allocator the program's malloc resolves to.
 * If that is another allocator preloaded ahead of us, it keeps the heap,
 * on or off.  Otherwise, on: we own it; off: the next allocator after us
 * (usually glibc) does.  A wrapper ahead of us that forwards to the next
 * malloc (a tracer) is not an owner: ask the winning malloc for one block
 * and see whether the request reaches us.
 */
void ps_malloc_choose_heap(bool on)
{
	void *(*winner)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
	void (*winner_free)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
	bool foreign = false;

	if (winner && winner_free && !is_ours((void *)winner)) {
		probing = true;
		probe_reached_us = false;
		void *p = winner(64);
		probing = false;
		winner_free(p);
		foreign = !probe_reached_us;
	}
	if (!foreign) {
		if (!on)
			bind_other(RTLD_NEXT);
		chosen = on ? PS_HEAP_MINE : PS_HEAP_OTHER;
		return;
	}
	bind_other(RTLD_DEFAULT);
	chosen = PS_HEAP_OTHER;
	if (!on)
		return;
	Dl_info info;
	ps_heap_owner = dladdr((void *)winner, &info) && info.dli_fname ? info.dli_fname : "?";
	ps_log("malloc comes from %s, preloaded ahead of libpoolshim.so: large buffers are "
	       "not pooled (put libpoolshim.so first in LD_PRELOAD); I/O is still counted",
	       ps_heap_owner);
}

/*
 * Page protection the program puts on pooled memory must keep working for
 * I/O: remember it, so such buffers stay off the fixed-buffer path.
 */
PS_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	static int (*real_mprotect)(void *, size_t, int);

	if (!real_mprotect)
		real_mprotect = (int (*)(void *, size_t, int))dlsym(RTLD_NEXT, "mprotect");
	if (!real_mprotect) {
		errno = ENOSYS;
		return -1;
	}
	int r = real_mprotect(addr, len, prot);
	if (r == 0)
		ps_pool_note_mprotect(addr, len, prot);
	return r;
}

PS_EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	static int (*real_pkey_mprotect)(void *, size_t, int, int);

	if (!real_pkey_mprotect)
		real_pkey_mprotect = (int (*)(void *, size_t, int, int))dlsym(RTLD_NEXT, "pkey_mprotect");
	if (!real_pkey_mprotect) {
		errno = ENOSYS;
		return -1;
	}
	int r = real_pkey_mprotect(addr, len, prot, pkey);
	if (r == 0)
		/* A protection key can take access away whatever prot says. */
		ps_pool_note_mprotect(addr, len, pkey == -1 ? prot : PROT_NONE);
	return r;
}

void ps_malloc_publish_heap(void)
{
	__atomic_store_n(&ps_heap, chosen, __ATOMIC_RELEASE);
}
