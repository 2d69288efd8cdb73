// SPDX-License-Identifier: MIT
/* The poolshim_* functions exported next to the interposers. */
#include "poolshim.h"

#include <errno.h>

#include "format/compiler.h"
#include "doors/start.h"
#include "core/pool.h"
#include "core/report_out.h"

PS_EXPORT int poolshim_is_pooled(const void *p)
{
	return ps_enabled() && ps_pool_slab_of(p) >= 0;
}

PS_EXPORT const char *poolshim_version(void)
{
	return PACKAGE_VERSION;
}

PS_EXPORT int poolshim_report_fd(int fd, int json)
{
	if (!ps_enabled())
		return -ENOTSUP;
	return ps_report_write(fd, json ? PS_FORMAT_JSON : PS_FORMAT_TEXT, 0);
}
