/* SPDX-License-Identifier: MIT */
/*
 * Every enumeration the report, the live view and the tools name, each
 * defined once as an X-macro list of (identifier, name): the enum and its
 * name table are both generated from it (names.c), so a value and the
 * word the report prints for it cannot drift apart.  The names are part
 * of the report schema (docs/report-schema.md): change them only with it.
 */
#ifndef PS_NAMES_H
#define PS_NAMES_H

/* The interposed calls that are counted, allocation first. */
#define PS_CALLS(X)                                                        \
	X(MALLOC, "malloc") X(CALLOC, "calloc") X(REALLOC, "realloc")      \
	X(REALLOCARRAY, "reallocarray") X(POSIX_MEMALIGN, "posix_memalign") \
	X(ALIGNED_ALLOC, "aligned_alloc") X(MEMALIGN, "memalign")          \
	X(VALLOC, "valloc") X(PVALLOC, "pvalloc") X(FREE, "free")          \
	X(READ, "read") X(WRITE, "write") X(PREAD, "pread")                \
	X(PWRITE, "pwrite") X(READV, "readv") X(WRITEV, "writev")          \
	X(PREADV, "preadv") X(PWRITEV, "pwritev") X(PREADV2, "preadv2")    \
	X(PWRITEV2, "pwritev2") X(RECV, "recv") X(RECVFROM, "recvfrom")    \
	X(RECVMSG, "recvmsg") X(RECVMMSG, "recvmmsg") X(SEND, "send")      \
	X(SENDTO, "sendto") X(SENDMSG, "sendmsg") X(SENDMMSG, "sendmmsg")  \
	X(SENDFILE, "sendfile") X(SPLICE, "splice")

/* What a descriptor is; allocation calls count under NONE. */
#define PS_FDKINDS(X)                                                      \
	X(NONE, "-")                                                       \
	X(SOCKET, "socket")                                                \
	X(FILE, "file")                                                    \
	X(DIRECT, "direct")        /* regular file opened with O_DIRECT */ \
	X(PIPE, "pipe")                                                    \
	X(OTHER, "other")

/* Why the pool could not give a slab (pool.h), in the report's words. */
#define PS_POOL_FAILS(X)                                                          \
	X(POOL_FULL, "pool_full")          /* POOLSHIM_POOL_SIZE reached */       \
	X(TOO_LARGE, "too_large")          /* larger than a slab may be */        \
	X(NO_MEMORY, "no_memory")          /* the kernel refused to back it */    \
	X(NO_ADDRESS, "no_address_space")  /* no slab address space left */

/*
 * Allocation-side events that are not calls: X for the pool's own (and
 * NAME_estimated, one per allocating call in PS_CALLS's order: that
 * call's calls below POOLSHIM_POOL_MIN/16 whose count is a sampled
 * estimate, alloc.h), FB for
 * the fallbacks to glibc's heap, which are the pool's failures and
 * one more, a large request during start-up, before the pool exists.
 */
#define PS_ALLOC_EVENTS(X, FB)                                             \
	X(POOL_ALLOC, "pool_alloc")                                        \
	X(POOL_FREE, "pool_free")                                          \
	X(POOL_FRESH, "pool_fresh")   /* took the pool past its peak */   \
	X(POOL_CACHED, "pool_cached") /* served from a thread's cache */  \
	X(POOL_PACED, "pool_paced")   /* freed past a slow CPU's cache */ \
	X(POOL_TAIL, "pool_tail")     /* a freed block's unwritten tail given back */ \
	X(MALLOC_ESTIMATED, "malloc_estimated")                            \
	X(CALLOC_ESTIMATED, "calloc_estimated")                            \
	X(REALLOC_ESTIMATED, "realloc_estimated")                          \
	X(REALLOCARRAY_ESTIMATED, "reallocarray_estimated")                \
	X(POSIX_MEMALIGN_ESTIMATED, "posix_memalign_estimated")            \
	X(ALIGNED_ALLOC_ESTIMATED, "aligned_alloc_estimated")              \
	X(MEMALIGN_ESTIMATED, "memalign_estimated")                        \
	X(VALLOC_ESTIMATED, "valloc_estimated")                            \
	X(PVALLOC_ESTIMATED, "pvalloc_estimated")                          \
	PS_POOL_FAILS(FB)                                                  \
	FB(NOT_READY, "not_ready")

/* Why an eligible-looking I/O call went to libc rather than io_uring. */
#define PS_URING_FALLBACKS(X)                                                              \
	X(SETUP, "setup")            /* no ring: io_uring_setup refused */                \
	X(REGISTER, "register")      /* the buffer's slab could not be registered */      \
	X(NOT_POOLED, "not_pooled")  /* O_DIRECT call on a buffer outside the pool */     \
	X(SMALL, "small")            /* below POOLSHIM_URING_MIN */                       \
	X(ERROR, "error")            /* submission failed: redone or finished plainly */  \
	X(PROTECTED, "protected")    /* the program mprotect()ed part of the slab */      \
	X(NESTED, "nested")          /* the ring was in use: a signal handler's call */   \
	X(UNALIGNED, "unaligned")    /* buffer, length or offset not 4 KiB aligned */

/* io_uring's state for the process. */
#define PS_URING_STATES(X)                                                 \
	X(OK, "ok")                    /* available (or not yet tried) */  \
	X(OFF, "off")                  /* POOLSHIM_URING=off */            \
	X(UNAVAILABLE, "unavailable")  /* io_uring_setup refused */

/* POOLSHIM_HUGEPAGES: the page kind asked for. */
#define PS_HUGEPAGE_MODES(X)                                               \
	X(AUTO, "auto") X(HUGETLB, "hugetlb") X(THP, "thp") X(NONE, "none")

/*
 * POOLSHIM_POOL_ALLOCATOR: what places pooled blocks in the slabs: the
 * shim's page-exact first fit (blocks.c) or a private jemalloc arena.
 */
#define PS_POOL_ALLOCATORS(X) X(PAGES, "pages") X(JEMALLOC, "jemalloc")

/*
 * POOLSHIM_POOL_TAILS: what the page placement does with the pages of a
 * freed block past its first POOLSHIM_POOL_TAIL_KEEP bytes: auto (given
 * back while the program is seen to leave them unwritten), keep, trim.
 */
#define PS_POOL_TAILS(X) X(AUTO, "auto") X(KEEP, "keep") X(TRIM, "trim")

/* What a slab is backed by. */
#define PS_BACKINGS(X) X(HUGETLB, "hugetlb") X(THP, "thp") X(4K, "4k")


enum ps_call {
#define PS_X(id, name) PS_CALL_##id,
	PS_CALLS(PS_X)
#undef PS_X
	PS_CALL__COUNT
};

enum ps_fdkind {
#define PS_X(id, name) PS_FD_##id,
	PS_FDKINDS(PS_X)
#undef PS_X
	PS_FD__COUNT
};

/* PS_FAIL_NONE: no failure. */
enum ps_pool_fail {
	PS_FAIL_NONE,
#define PS_X(id, name) PS_FAIL_##id,
	PS_POOL_FAILS(PS_X)
#undef PS_X
	PS_FAIL__COUNT
};

enum ps_alloc_event {
#define PS_X(id, name) PS_EV_##id,
#define PS_FB(id, name) PS_EV_FB_##id,
	PS_ALLOC_EVENTS(PS_X, PS_FB)
#undef PS_FB
#undef PS_X
	PS_EV__COUNT
};

/*
 * The event that counts how many of call's calls are a sampled estimate,
 * or PS_EV__COUNT for a call that is always counted exactly (free, I/O).
 */
_Static_assert(PS_CALL_MALLOC == 0 &&
		       PS_EV_PVALLOC_ESTIMATED - PS_EV_MALLOC_ESTIMATED == PS_CALL_PVALLOC,
	       "the *_ESTIMATED events follow PS_CALLS's allocating calls");
/*
 * Small allocations are counted one in about this many (core/alloc.h says
 * how the sampling works); the renderer scales the estimates by it.
 */
#define PS_ALLOC_SAMPLE 128

static inline enum ps_alloc_event ps_call_estimate_event(enum ps_call call)
{
	return call <= PS_CALL_PVALLOC ? (enum ps_alloc_event)(PS_EV_MALLOC_ESTIMATED + call)
				       : PS_EV__COUNT;
}

enum ps_uring_fb {
#define PS_X(id, name) PS_UFB_##id,
	PS_URING_FALLBACKS(PS_X)
#undef PS_X
	PS_UFB__COUNT
};

enum ps_uring_state {
#define PS_X(id, name) PS_URING_STATE_##id,
	PS_URING_STATES(PS_X)
#undef PS_X
	PS_URING_STATE__COUNT
};

enum ps_hugepages {
#define PS_X(id, name) PS_HUGE_##id,
	PS_HUGEPAGE_MODES(PS_X)
#undef PS_X
	PS_HUGE__COUNT
};

enum ps_pool_allocator {
#define PS_X(id, name) PS_POOL_ALLOC_##id,
	PS_POOL_ALLOCATORS(PS_X)
#undef PS_X
	PS_POOL_ALLOC__COUNT
};

enum ps_pool_tails {
#define PS_X(id, name) PS_TAILS_##id,
	PS_POOL_TAILS(PS_X)
#undef PS_X
	PS_TAILS__COUNT
};

enum ps_backing {
#define PS_X(id, name) PS_BACK_##id,
	PS_BACKINGS(PS_X)
#undef PS_X
	PS_BACK__COUNT
};

/*
 * The fallback event of a pool failure.  PS_FAIL_NONE, the pool saying
 * nothing, is jemalloc failing on its own: no memory.
 */
static inline enum ps_alloc_event ps_pool_fail_event(enum ps_pool_fail why)
{
	return why == PS_FAIL_NONE ? PS_EV_FB_NO_MEMORY
				   : (enum ps_alloc_event)(PS_EV_FB_POOL_FULL + (why - PS_FAIL_POOL_FULL));
}

/* Each value's name; "?" for one out of range.  Pure, async-signal-safe. */
const char *ps_call_name(enum ps_call call);
const char *ps_fdkind_name(enum ps_fdkind kind);
const char *ps_event_name(unsigned e);
const char *ps_uring_fb_name(unsigned r);
const char *ps_uring_state_name(unsigned s);
const char *ps_hugepage_name(unsigned m);
const char *ps_backing_name(enum ps_backing b);
const char *ps_pool_allocator_name(unsigned a);

/* The POOLSHIM_HUGEPAGES choices, NULL-terminated, for the option table. */
extern const char *const ps_hugepage_names[];
/* The POOLSHIM_POOL_ALLOCATOR choices, NULL-terminated. */
extern const char *const ps_pool_allocator_names[];
extern const char *const ps_pool_tails_names[];

#endif
