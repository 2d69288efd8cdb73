// SPDX-License-Identifier: MIT
/* The poolshim_* functions exported next to the interposers. */
#include "poolshim.h"

#include <errno.h>

#include "compiler.h"
#include "fmt.h"
#include "init.h"
#include "pool.h"
#include "report.h"

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
	struct ps_report_data d;
	char storage[4096];
	struct ps_buf b;

	if (!ps_enabled())
		return -ENOTSUP;
	int saved_errno = errno;
	struct ps_tstats *scratch = ps_report_scratch_get();
	if (!scratch)
		return -ENOMEM;
	ps_report_gather(&d, scratch);
	ps_buf_init(&b, storage, sizeof(storage), fd);
	ps_report_render(&b, &d, json ? PS_FORMAT_JSON : PS_FORMAT_TEXT);
	int r = ps_buf_flush(&b);
	ps_report_scratch_put(scratch);
	errno = saved_errno;
	return r;
}
