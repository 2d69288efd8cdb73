/* SPDX-License-Identifier: MIT */
/*
 * Slabs: the memory behind pooled allocations.  One virtual range starts
 * at the first slab request and grows as slabs need it (never reserved
 * ahead, so an address-space limit set later still works); slabs are carved from it in address order,
 * each backed with hugetlb pages, else THP, else 4 KiB pages, made
 * resident as the program writes it (POOLSHIM_PREFAULT=on: the part the
 * request at hand needs prefaulted).  A slab's address range stays the
 * pool's, but its free pages go back to the kernel when the pool arena
 * purges them (ps_pool_purge).  Slabs follow one another without a gap
 * wherever they can, and the pool arena merges free extents across them,
 * so a pooled block may span slabs; "is this pointer pooled, and in which
 * slab" is arithmetic plus one table load, and so is "is this range pool
 * memory without a gap" (ps_pool_within_slabs).
 */
#ifndef PS_POOL_H
#define PS_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/config.h"
#include "format/names.h"
#include "format/poolinfo.h"
#include "format/sys.h"

#define PS_UNIT_SHIFT 21                       /* 2 MiB backing units */
#define PS_UNIT ((size_t)1 << PS_UNIT_SHIFT)
#define PS_SLAB_MAX ((size_t)1 << 30)          /* the largest single request pooled */
#define PS_RESERVE_MAX ((size_t)64 << 30)
#define PS_MAX_SLABS 65535

struct ps_slab {
	uintptr_t base;
	size_t len;
	enum ps_backing backing;
	uint16_t run;       /* the first slab of the gapless run that holds this one */
	uint16_t protected; /* the program changed page protection inside it */
};

/*
 * Remember the configuration for a pool of at most cfg->pool_size bytes.
 * No syscall: the range is reserved and the page kinds probed by the first
 * ps_pool_take() or ps_pool_prepare().  Call once, single-threaded.  0.
 */
int ps_pool_init(const struct ps_config *cfg);

/*
 * How many free bytes the pool arena may keep resident: POOLSHIM_POOL_RETAIN,
 * lowered to a sixteenth of the memory cgroup's limit once ps_pool_prepare()
 * has read it.
 */
uint64_t ps_pool_retain(void);

/*
 * Reserve the range, probe the page kinds and read the memory cgroup's
 * limit now, if not done yet (the pool arena's creation, the verbose
 * banner).  Thread-safe.  0 or -errno (the reserve mmap failed: the pool
 * stays empty, nothing is pooled).
 */
int ps_pool_prepare(void);

/*
 * Take a new slab of at least len bytes aligned to align (a power of two),
 * right after the last one where the alignment allows, backed and, with
 * POOLSHIM_PREFAULT=on, prefaulted: the first need bytes (the request that led
 * here), or all of it when need is 0.  Past the cap (what the pool holds
 * resident, measured when the mapped size would pass it) the slab is
 * refused with PS_FAIL_POOL_FULL.  Thread-safe.  Returns its address, or
 * NULL with *why set.  *zeroed tells whether the memory is known zero.
 */
void *ps_pool_take(size_t len, size_t align, size_t need, bool *zeroed, enum ps_pool_fail *why);

/*
 * Where the next slab would start if nothing else takes one first and its
 * alignment allows (the end of the last one; 0 before the first).  A
 * placement with several arenas extends its own last slab only when it
 * is the pool's last.  Takes the pool's lock.
 */
uintptr_t ps_pool_next(void);

/*
 * Set when the range is first reserved, lo before hi; 0 before.  hi grows
 * (only up, lo never moves) as slabs need more of the range; it never
 * passes ps_pool_lo + ps_pool_span.
 */
extern uintptr_t ps_pool_lo, ps_pool_hi;
/* The most the range may span (lo + span: its end when grown whole); set with lo. */
extern uintptr_t ps_pool_span;

/*
 * Whether p points into the pool's reserved range.  Lock-free: hi is read
 * first, so a reader that sees the range also sees its start.
 */
static inline bool ps_pool_contains(const void *p)
{
	uintptr_t hi = __atomic_load_n(&ps_pool_hi, __ATOMIC_ACQUIRE);
	if (hi == 0)
		return false;
	uintptr_t lo = __atomic_load_n(&ps_pool_lo, __ATOMIC_RELAXED);
	return (uintptr_t)p - lo < hi - lo;
}

/* Index of the slab holding p, or -1.  Lock-free. */
int ps_pool_slab_of(const void *p);
/* Copy of slab i; false if i is not a slab. */
bool ps_pool_slab(int i, struct ps_slab *out);
/*
 * The program called mprotect() on [addr, addr + len) with prot: if that is
 * anything but read-write, the slabs it touches are marked protected for
 * good.  A request that io_uring runs in chunks could answer a partly
 * protected buffer differently from one system call, so I/O on buffers
 * that touch those slabs goes through the plain calls, which fault
 * (EFAULT) as the program expects.
 */
void ps_pool_note_mprotect(const void *addr, size_t len, int prot);
/*
 * Whether any slab that [p, p + len) touches (p's alone when len is 0) was
 * marked by ps_pool_note_mprotect().  Lock-free; one load while nothing
 * in the pool was ever protected.
 */
bool ps_pool_range_protected(const void *p, size_t len);

/*
 * Number of slabs so far (numbered 0..n-1, never removed).  A slab taken
 * right after the last one, on the same kind of pages, and not protected
 * (ps_pool_note_mprotect), grows that one rather than taking a number:
 * the table holds runs of like memory, so a small threshold, whose every
 * request may take memory, never runs out of the PS_MAX_SLABS numbers.
 * ps_pool_info.slabs counts the takes.
 */
int ps_pool_nslabs(void);
/*
 * Whether [p, p + len) lies in slabs with no gap between them (p in a slab
 * when len is 0): pool memory the program can be handed, mapped
 * read-write unless it protected it.  A length that wraps is never within.
 * Lock-free: two lookups.
 */
bool ps_pool_within_slabs(const void *p, size_t len);

/*
 * What one lookup tells of [p, p + len) (p's slab alone when len is 0):
 * the slabs that hold its two ends (first, last; -1 when outside), the
 * first one's backing, whether the range is pool memory with no gap
 * (within) and whether the program protected any slab it touches.  The
 * O_DIRECT path asks once and carries the answer (uring.c).
 */
struct ps_pool_range {
	int first, last;
	enum ps_backing backing;
	bool within;
	bool protected;
};
/* Fill *out for [p, p + len); returns out->within.  Lock-free: two slab lookups. */
bool ps_pool_range_of(const void *p, size_t len, struct ps_pool_range *out);

/*
 * A copy of the pool's state.  Safe in a signal handler: if the lock is
 * held (perhaps by the interrupted thread) the copy is taken without it.
 */
void ps_pool_get_info(struct ps_pool_info *info);

/* Called (outside the lock) after each new slab; live.c republishes. */
extern void (*ps_pool_on_change)(void);

/*
 * Give the free pages of [addr, addr + len) (page aligned, inside slabs
 * without a gap between them, free in the pool) back to the kernel:
 * MADV_DONTNEED on 4 KiB units, whole 2 MiB units only on THP ones
 * (purging part of one would split the hugepage), never hugetlb units
 * (their pages come from a pool the administrator reserved; giving one
 * back risks a SIGBUS at the next touch).  0 when all of it was given back
 * (it reads as zeros now), else -EAGAIN with whatever could be given back
 * gone.  Called by blocks.c's purge (no lock held) or the jemalloc arena's
 * purge hook (under jemalloc's locks).  Nothing else holds these
 * pages: io_uring registers no buffers (uring.c), so the program's next
 * I/O on them sees the fresh pages, as it would after its own madvise.
 */
int ps_pool_purge(void *addr, size_t len);

/*
 * ps_pool_purge() of part of a live block, by its owner (a freed block's
 * unwritten tail, blocks.c), not counted among the purges' bytes, and by
 * the page on THP units too (splitting the hugepage: the program wrote a
 * few pages of it): the bytes given back (0 on hugetlb units).
 */
size_t ps_pool_give_back(uintptr_t addr, size_t len);

/*
 * The memory cgroup whose limit is the lowest from the process's cgroup up
 * to the root: its limit (0: none), version (1 or 2, 0: none) and the file
 * that says its usage (v1 memory.usage_in_bytes, v2 memory.current).
 */
struct ps_cgroup {
	uint64_t limit;
	int version;
	char usage_path[PS_PATH_MAX + 64];
};

/*
 * Fill *out for a process whose /proc/PID/cgroup text is self (cut into
 * lines in place), with the cgroup mounts under root ("" for the real
 * ones; unit tests pass a directory of their own).  Reads files only.
 */
void ps_cgroup_find(const char *root, char *self, struct ps_cgroup *out);

/*
 * A cgroup memory file's value: bytes, with "max" (v2) or a v1 number of
 * 2^62 or more (v1's "none") as UINT64_MAX.  false if it is neither.
 */
bool ps_cgroup_parse_value(const char *text, uint64_t *out);

/*
 * What the pool's memory cgroup (the one whose limit it found) uses now,
 * in bytes: one open, read and close.  0 without a limit or when it
 * cannot be read.
 */
uint64_t ps_pool_cgroup_usage(void);

/* One purge round done (for the report). */
void ps_pool_count_purge(void);


/*
 * Fork handlers for the pool's lock: prepare takes it, parent and child
 * release it.  Registered so that they run inside jemalloc's (init.c).
 */
void ps_pool_atfork_prepare(void);
void ps_pool_atfork_parent(void);
void ps_pool_atfork_child(void);

/* Forget everything (unit tests only): unmaps the reserve. */
void ps_pool_reset_for_tests(void);

#endif
