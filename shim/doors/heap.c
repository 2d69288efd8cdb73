// SPDX-License-Identifier: MIT
/*
 * The heap's owner (heap.h): the probe that finds it at start, and the
 * other allocator's functions when it is not us.
 */
#include "doors/heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "format/fmt.h"
#include "doors/start.h"
#include "core/posix.h"
#include "doors/real.h"

/*
 * The other allocator's entry points: field, type, the name it is bound
 * by.  malloc comes last: its presence switches the functions below from
 * glibc to the other allocator, so it is bound once the rest are.
 */
#define PS_OTHER_FUNCS(X)                                                          \
	X(free, void (*)(void *), "free")                                          \
	X(calloc, void *(*)(size_t, size_t), "calloc")                             \
	X(realloc, void *(*)(void *, size_t), "realloc")                           \
	X(memalign, void *(*)(size_t, size_t), "memalign")                         \
	X(posix_memalign, int (*)(void **, size_t, size_t), "posix_memalign")      \
	X(aligned_alloc, void *(*)(size_t, size_t), "aligned_alloc")               \
	X(valloc, void *(*)(size_t), "valloc")                                     \
	X(pvalloc, void *(*)(size_t), "pvalloc")                                   \
	X(reallocarray, void *(*)(void *, size_t, size_t), "reallocarray")         \
	X(usable, size_t (*)(void *), "malloc_usable_size")                        \
	X(malloc, void *(*)(size_t), "malloc")

/* A NULL entry is a function the other allocator lacks. */
static struct {
#define PS_OTHER_FIELD(field, type, name) __typeof__(type) field;
	PS_OTHER_FUNCS(PS_OTHER_FIELD)
#undef PS_OTHER_FIELD
} other;

/* Set while we ask the winning malloc for a block at start (see below). */
static __thread bool probing, probe_reached_us;
/* The owner chosen at start; published in ps_heap with the shim's state. */
static int chosen = PS_HEAP_UNDECIDED;

bool ps_heap_mine_slow(void)
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

/*
 * Bind the owner's functions: the allocator whose malloc handle finds.  A
 * name it lacks is found further down the search order (ours, glibc's):
 * only definitions from the owner's own object are taken, the rest left
 * NULL.
 */
static void bind_other(void *handle)
{
	void *m = dlsym(handle, "malloc");
	const void *owner = ps_real_is_ours(m) ? NULL : ps_real_object_of(m);
	if (!owner)
		return;     /* glibc's entry points keep serving */
#define PS_OTHER_BIND(field, type, name)                                           \
	{                                                                          \
		void *fn = ps_real_bind_from(handle, name, owner);                 \
		memcpy(&other.field, &fn, sizeof(fn));                             \
	}
	PS_OTHER_FUNCS(PS_OTHER_BIND)
#undef PS_OTHER_BIND
}

/*
 * The heap belongs to whichever allocator the program's malloc resolves
 * to.  If that is another allocator preloaded ahead of us, it keeps the
 * heap, on or off.  Otherwise, on: we own it; off: the next allocator
 * after us (usually glibc) does.  A wrapper ahead of us that forwards to
 * the next malloc (a tracer) is not an owner: ask the winning malloc for
 * one block and see whether the request reaches us.  Other threads wait
 * for ps_heap_publish(), so none allocates from a pool not yet set up.
 */
void ps_heap_choose(bool on)
{
	void *(*winner)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
	void (*winner_free)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
	bool foreign = false;

	if (winner && winner_free && !ps_real_is_ours((void *)winner)) {
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

bool ps_heap_chosen_mine(void)
{
	return chosen == PS_HEAP_MINE;
}

void ps_heap_publish(void)
{
	__atomic_store_n(&ps_heap, chosen, __ATOMIC_RELEASE);
}

void ps_heap_other_entries(struct ps_heap_entries *e)
{
	e->malloc = other.malloc ? other.malloc : __libc_malloc;
	/* An owner with no calloc of its own gets one built on its malloc. */
	e->calloc = other.calloc ? other.calloc
		    : other.malloc ? ps_heap_other_calloc : __libc_calloc;
	e->realloc = other.realloc ? other.realloc : __libc_realloc;
	e->free = other.free ? other.free : __libc_free;
}

void *ps_heap_other_malloc(size_t size)
{
	return other.malloc ? other.malloc(size) : __libc_malloc(size);
}

void ps_heap_other_free(void *p)
{
	if (other.free)
		other.free(p);
	else
		__libc_free(p);
}

void *ps_heap_other_realloc(void *p, size_t size)
{
	return other.realloc ? other.realloc(p, size) : __libc_realloc(p, size);
}

void *ps_heap_other_calloc(size_t n, size_t size)
{
	size_t total;

	if (other.calloc || !other.malloc)
		return other.calloc ? other.calloc(n, size) : __libc_calloc(n, size);
	if (!ps_posix_array(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = other.malloc(total);
	if (p)
		memset(p, 0, total);
	return p;
}

void *ps_heap_other_reallocarray(void *p, size_t n, size_t size)
{
	size_t total;

	if (other.reallocarray)
		return other.reallocarray(p, n, size);
	if (!ps_posix_array(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return ps_heap_other_realloc(p, total);
}

/* memalign(3) semantics from whatever aligned entry point the owner has. */
void *ps_heap_other_memalign(size_t align, size_t size)
{
	if (other.memalign || !other.malloc)
		return other.memalign ? other.memalign(align, size) : __libc_memalign(align, size);
	if (other.posix_memalign) {
		void *p = NULL;
		int saved_errno = errno;
		if (!ps_posix_align(&align, sizeof(void *))) {
			errno = EINVAL;
			return NULL;
		}
		int r = other.posix_memalign(&p, align, size);
		errno = r ? r : saved_errno;
		return r ? NULL : p;
	}
	errno = ENOMEM;
	return NULL;
}

int ps_heap_other_posix_memalign(void **out, size_t align, size_t size)
{
	if (other.posix_memalign)
		return other.posix_memalign(out, align, size);
	return ps_posix_memalign_via(ps_heap_other_memalign, out, align, size);
}

void *ps_heap_other_aligned_alloc(size_t align, size_t size)
{
	if (other.aligned_alloc)
		return other.aligned_alloc(align, size);
	return ps_heap_other_memalign(align, size);
}

void *ps_heap_other_valloc(size_t size)
{
	if (other.valloc)
		return other.valloc(size);
	return ps_heap_other_memalign(PS_PAGE, size);
}

void *ps_heap_other_pvalloc(size_t size)
{
	size_t rounded;

	if (other.pvalloc)
		return other.pvalloc(size);
	if (!ps_posix_pages(size, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	return ps_heap_other_memalign(PS_PAGE, rounded);
}

size_t ps_heap_other_usable_size(void *p)
{
	return other.usable ? other.usable(p) : 0;
}
