// SPDX-License-Identifier: MIT
/*
 * Finding the memory cgroup's limit and usage file (pool.c) over a cgroup
 * tree made in a temporary directory: v1 and v2, "max", v1's "no limit"
 * number, nested cgroups where a parent limits more than the child, and
 * the values of the files themselves.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/pool.h"
#include "suites.h"

static char root[64];

/* Write text to root/rel, making the directories on the way. */
static void put(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(path, 0700);
		*s = '/';
	}
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void find(const char *self, struct ps_cgroup *out)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", self);
	ps_cgroup_find(root, buf, out);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/pst_cgroup.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_parse_value)
{
	uint64_t v = 0;

	ck_assert(ps_cgroup_parse_value("167772160\n", &v));
	ck_assert_uint_eq(v, 167772160);
	ck_assert(ps_cgroup_parse_value("max\n", &v));
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert(ps_cgroup_parse_value("max", &v));
	ck_assert(ps_cgroup_parse_value("9223372036854771712\n", &v));   /* v1: no limit */
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert(!ps_cgroup_parse_value("", &v));
	ck_assert(!ps_cgroup_parse_value("\n", &v));
	ck_assert(!ps_cgroup_parse_value("12x\n", &v));
	ck_assert(!ps_cgroup_parse_value("maximum\n", &v));
	ck_assert(!ps_cgroup_parse_value("-1\n", &v));
}
END_TEST

/* v2: the child says max, its parent limits; usage is the parent's. */
START_TEST(test_v2_nested)
{
	struct ps_cgroup cg;
	char want[512];

	put("sys/fs/cgroup/a/b/memory.max", "max\n");
	put("sys/fs/cgroup/a/b/memory.current", "1000\n");
	put("sys/fs/cgroup/a/memory.max", "167772160\n");
	put("sys/fs/cgroup/a/memory.current", "2000\n");
	put("sys/fs/cgroup/memory.max", "max\n");
	find("0::/a/b\n", &cg);
	ck_assert_uint_eq(cg.limit, 167772160);
	ck_assert_int_eq(cg.version, 2);
	snprintf(want, sizeof(want), "%s/sys/fs/cgroup/a/memory.current", root);
	ck_assert_str_eq(cg.usage_path, want);

	/* A deeper, lower limit wins; a trailing slash changes nothing. */
	put("sys/fs/cgroup/a/b/memory.max", "104857600\n");
	find("0::/a/b/\n", &cg);
	ck_assert_uint_eq(cg.limit, 104857600);
	snprintf(want, sizeof(want), "%s/sys/fs/cgroup/a/b/memory.current", root);
	ck_assert_str_eq(cg.usage_path, want);
}
END_TEST

/* "max" all the way up, or no file at all: no limit. */
START_TEST(test_v2_max)
{
	struct ps_cgroup cg;

	put("sys/fs/cgroup/a/memory.max", "max\n");
	put("sys/fs/cgroup/memory.max", "max\n");
	find("0::/a\n", &cg);
	ck_assert_uint_eq(cg.limit, 0);
	ck_assert_int_eq(cg.version, 0);
	find("0::/nowhere\n", &cg);
	ck_assert_uint_eq(cg.limit, 0);
}
END_TEST

/* v1: the memory line among others, v1's "no limit", the limit at the mount's root. */
START_TEST(test_v1)
{
	struct ps_cgroup cg;
	char want[512];

	put("sys/fs/cgroup/memory/x/y/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/x/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n");
	put("sys/fs/cgroup/memory/memory.usage_in_bytes", "3000\n");
	find("12:cpu,cpuacct:/other\n11:memory:/x/y\n1:name=systemd:/z\n0::/z\n", &cg);
	ck_assert_uint_eq(cg.limit, 536870912);
	ck_assert_int_eq(cg.version, 1);
	snprintf(want, sizeof(want), "%s/sys/fs/cgroup/memory/memory.usage_in_bytes", root);
	ck_assert_str_eq(cg.usage_path, want);

	/* v1 limits first: a v2 limit of the same process is not read. */
	put("sys/fs/cgroup/z/memory.max", "1048576\n");
	find("11:memory:/x/y\n0::/z\n", &cg);
	ck_assert_uint_eq(cg.limit, 536870912);
	/* Without a v1 memory line, v2's. */
	find("0::/z\n", &cg);
	ck_assert_uint_eq(cg.limit, 1048576);
	ck_assert_int_eq(cg.version, 2);
}
END_TEST

Suite *suite_cgroup(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = tcase_create("find");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_parse_value);
	tcase_add_test(tc, test_v2_nested);
	tcase_add_test(tc, test_v2_max);
	tcase_add_test(tc, test_v1);
	suite_add_tcase(s, tc);
	return s;
}
