/* SPDX-License-Identifier: MIT */
/*
 * Compiler helpers shared by every file of the shim: export control, branch
 * hints and relaxed counter updates.  Nothing here allocates or calls libc.
 */
#ifndef PS_COMPILER_H
#define PS_COMPILER_H

#include <stdint.h>

/* Symbols a program may bind to; everything else stays hidden. */
#define PS_EXPORT __attribute__((visibility("default")))

/*
 * For an extern declaration of a variable the hot path reads from another
 * file: -fvisibility=hidden covers only definitions, and without this the
 * compiler reaches the variable through the GOT (one more instruction).
 */
#define PS_HIDDEN __attribute__((visibility("hidden")))

#define ps_likely(x)   __builtin_expect(!!(x), 1)
#define ps_unlikely(x) __builtin_expect(!!(x), 0)

/*
 * For the pass-through path's helpers: called as functions, their
 * prologues and argument shuffles cost more than their work.
 */
#define PS_INLINE static inline __attribute__((always_inline))

#define PS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Counters are written by one thread and read by the reporter.  A relaxed
 * store of the incremented value compiles to a plain add on x86 but keeps
 * the data race formally defined (and quiet under TSan).
 */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
/*
 * The same as one add instruction to memory: the atomic store above costs
 * a load, an add and a store (three instructions on the hot path, where
 * every instruction counts).  A naturally aligned 8-byte add is a single
 * access on x86-64, so the reporter never sees a torn value; not atomic
 * against another writer, and there is none.  TSan builds keep the form it
 * can see.
 */
#define PS_ADD(x, v)                                                               \
	__builtin_choose_expr(sizeof(x) == 8,                                       \
		({ __asm__ volatile("addq %1, %0" : "+m"(x) : "er"((unsigned long)(v))); }), \
		({ __asm__ volatile("addl %1, %0" : "+m"(x) : "ir"((unsigned)(v))); }))
#else
#define PS_ADD(x, v) __atomic_store_n(&(x), (x) + (v), __ATOMIC_RELAXED)
#endif
#define PS_LOAD(x)   __atomic_load_n(&(x), __ATOMIC_RELAXED)

/*
 * One step of Marsaglia's xorshift32 (x nonzero): the cheap jitter that
 * sampling gates draw their next gap from.
 */
static inline uint32_t ps_xorshift32(uint32_t x)
{
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

#endif
