// SPDX-License-Identifier: MIT
/* Binding the real libc functions (real.h). */
#include "doors/real.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "format/fmt.h"

#define PS_REAL_DEFINE(ret, name, params) ret(*real_##name) params;
PS_REAL_FUNCS(PS_REAL_DEFINE)
#undef PS_REAL_DEFINE

/*
 * What a function libc lacks is bound to.  Every real function returns -1
 * (or SIG_ERR, which is -1 too) for failure in a register wide enough for
 * a long, so one stub serves them all.
 */
static long missing(void)
{
	errno = ENOSYS;
	return -1;
}

static bool bind_one(void **slot, const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);
	bool found = f != NULL;
	if (!found)
		f = (void *)(void (*)(void))missing;
	__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	return found;
}

void *ps_real_bind(void **slot, const char *name)
{
	bind_one(slot, name);
	return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
}

void ps_real_init(void)
{
	const char *absent = NULL;

#define PS_REAL_BIND(ret, name, params)                                           \
	if (!bind_one((void **)&real_##name, #name) && !absent)                   \
		absent = #name;
	PS_REAL_FUNCS(PS_REAL_BIND)
#undef PS_REAL_BIND
	if (absent)
		ps_log("libc has no %s (nor, perhaps, some others): calls to it fail with ENOSYS",
		       absent);
}

const void *ps_real_object_of(const void *fn)
{
	Dl_info info;

	return fn && dladdr(fn, &info) ? info.dli_fbase : NULL;
}

bool ps_real_is_ours(const void *fn)
{
	const void *self = ps_real_object_of((const void *)ps_real_is_ours);
	return self && ps_real_object_of(fn) == self;
}

void *ps_real_bind_from(void *handle, const char *name, const void *owner)
{
	void *fn = dlsym(handle, name);
	return fn && ps_real_object_of(fn) == owner ? fn : NULL;
}
