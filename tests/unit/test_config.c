// SPDX-License-Identifier: MIT
/* Size, number and boolean parsing; the environment loader's messages and defaults. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/config.h"
#include "format/fmt.h"
#include "suites.h"

START_TEST(test_parse_size)
{
	uint64_t v;

	ck_assert_int_eq(ps_parse_size("64K", 0, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 65536);
	ck_assert_int_eq(ps_parse_size("3m", 0, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 3u << 20);
	ck_assert_int_eq(ps_parse_size("2G", 0, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 2ULL << 30);
	ck_assert_int_eq(ps_parse_size("1MiB", 0, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 1u << 20);
	ck_assert_int_eq(ps_parse_size("4096", 0, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(ps_parse_size("", 0, UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(ps_parse_size("K", 0, UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(ps_parse_size("-1", 0, UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(ps_parse_size(" 1", 0, UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(ps_parse_size("1T", 0, UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(ps_parse_size("12KX", 0, UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(ps_parse_size("99999999999999999999", 0, UINT64_MAX, &v), -ERANGE);
	ck_assert_int_eq(ps_parse_size("17179869184G", 0, UINT64_MAX, &v), -ERANGE);
	ck_assert_int_eq(ps_parse_size("1K", 4096, 8192, &v), -ERANGE);
	ck_assert_int_eq(ps_parse_size("9K", 4096, 8192, &v), -ERANGE);
}
END_TEST

START_TEST(test_parse_uint_and_bool)
{
	uint64_t v;
	bool b;

	ck_assert_int_eq(ps_parse_uint("16", 1, 256, &v), 0);
	ck_assert_uint_eq(v, 16);
	ck_assert_int_eq(ps_parse_uint("16K", 1, 1 << 20, &v), -EINVAL);
	ck_assert_int_eq(ps_parse_uint("0", 1, 256, &v), -ERANGE);
	const char *yes[] = { "1", "on", "YES", "true", "On" };
	const char *no[] = { "0", "off", "no", "FALSE" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
		b = false;
		ck_assert_int_eq(ps_parse_bool(yes[i], &b), 0);
		ck_assert(b);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
		b = true;
		ck_assert_int_eq(ps_parse_bool(no[i], &b), 0);
		ck_assert(!b);
	}
	ck_assert_int_eq(ps_parse_bool("maybe", &b), -EINVAL);
	ck_assert_int_eq(ps_parse_bool("", &b), -EINVAL);
}
END_TEST

/* A fake environment for ps_config_load(). */
static const char *const *fake_env;

static const char *fake_get(const char *name)
{
	size_t n = strlen(name);
	for (const char *const *e = fake_env; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* Run the loader with stderr captured into out[cap]; returns problems. */
static int load_captured(struct ps_config *cfg, const char *const *env, char *out, size_t cap)
{
	char path[] = "/tmp/pst-config-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	int saved = dup(2);
	dup2(fd, 2);
	fake_env = env;
	int problems = ps_config_load(cfg, fake_get, (char *const *)env);
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fd, out, cap - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	return problems;
}

START_TEST(test_load_defaults)
{
	struct ps_config cfg;
	char msgs[4096];
	const char *env[] = { "PATH=/bin", NULL };

	ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 0);
	ck_assert_str_eq(msgs, "");
	ck_assert(cfg.enabled);
	ck_assert(cfg.pool);
	ck_assert_uint_eq(cfg.pool_min, 64 << 10);
	ck_assert_uint_eq(cfg.pool_size, 4ULL << 30);
	ck_assert_int_eq(cfg.hugepages, PS_HUGE_AUTO);
	ck_assert_int_eq(cfg.pool_allocator, PS_POOL_ALLOC_PAGES);
	ck_assert(!cfg.prefault);
	ck_assert_str_eq(cfg.stats, "stderr");
	ck_assert_int_eq(cfg.stats_format, PS_FORMAT_TEXT);
	ck_assert(!cfg.verbose);
	ck_assert_int_eq(cfg.uring, PS_URING_AUTO);
	ck_assert(cfg.timing);
	ck_assert_uint_eq(cfg.timing_sample, 64);
}
END_TEST

START_TEST(test_load_values)
{
	struct ps_config cfg;
	char msgs[4096];
	const char *env[] = {
		"POOLSHIM=on", "POOLSHIM_POOL_MIN=1M", "POOLSHIM_POOL_SIZE=256M",
		"POOLSHIM_HUGEPAGES=THP", "POOLSHIM_PREFAULT=yes",
		"POOLSHIM_STATS=/tmp/r-%p.json", "POOLSHIM_VERBOSE=yes",
		"POOLSHIM_URING_DEPTH=32", "POOLSHIM_POOL=off", "POOLSHIM_POOL_ALLOCATOR=jemalloc", NULL,
	};

	ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 0);
	ck_assert_str_eq(msgs, "");
	ck_assert_uint_eq(cfg.pool_min, 1 << 20);
	ck_assert_uint_eq(cfg.pool_size, 256 << 20);
	ck_assert_int_eq(cfg.hugepages, PS_HUGE_THP);
	ck_assert(cfg.prefault);
	ck_assert_str_eq(cfg.stats, "/tmp/r-%p.json");
	/* a .json path implies the JSON format */
	ck_assert_int_eq(cfg.stats_format, PS_FORMAT_JSON);
	ck_assert(cfg.verbose);
	ck_assert_uint_eq(cfg.uring_depth, 32);
	ck_assert(!cfg.pool);
	ck_assert_int_eq(cfg.pool_allocator, PS_POOL_ALLOC_JEMALLOC);
}
END_TEST

START_TEST(test_load_explicit_format_wins)
{
	struct ps_config cfg;
	char msgs[4096];
	const char *env[] = { "POOLSHIM_STATS=/tmp/x.json", "POOLSHIM_STATS_FORMAT=text", NULL };

	ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 0);
	ck_assert_int_eq(cfg.stats_format, PS_FORMAT_TEXT);
}
END_TEST

/* Every bad value: one line naming variable, value and what is accepted; default kept. */
START_TEST(test_load_bad_values)
{
	static const struct { const char *env; const char *accepted; } cases[] = {
		{ "POOLSHIM=maybe", "1|0|on|off" },
		{ "POOLSHIM_POOL=sometimes", "1|0|on|off" },
		{ "POOLSHIM_POOL_MIN=12Q", "K/M/G" },
		{ "POOLSHIM_POOL_MIN=1", "4K..1G" },
		{ "POOLSHIM_POOL_SIZE=-5", "2M..32G" },
		{ "POOLSHIM_POOL_SIZE=99G", "2M..32G" },
		{ "POOLSHIM_HUGEPAGES=giant", "auto|hugetlb|thp|none" },
		{ "POOLSHIM_POOL_ALLOCATOR=bogus", "pages|jemalloc" },
		{ "POOLSHIM_PREFAULT=2", "1|0|on|off" },
		{ "POOLSHIM_STATS=", "stderr|off" },
		{ "POOLSHIM_STATS_FORMAT=xml", "text|json" },
		{ "POOLSHIM_VERBOSE=loud", "1|0|on|off" },
		{ "POOLSHIM_URING=sometimes", "auto|off|on" },
		{ "POOLSHIM_URING_MIN=0", "512..1G" },
		{ "POOLSHIM_URING_CHUNK=1X", "K/M/G" },
		{ "POOLSHIM_URING_DEPTH=1000", "1..256" },
		{ "POOLSHIM_URING_DEPTH=8K", "1..256" },
		{ "POOLSHIM_TIMING=sometimes", "1|0|on|off" },
		{ "POOLSHIM_TIMING_SAMPLE=0", "1..65536" },
	};
	struct ps_config cfg, defaults;

	ps_config_defaults(&defaults);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char msgs[4096];
		const char *env[] = { cases[i].env, NULL };
		char name[64];
		const char *eq = strchr(cases[i].env, '=');
		snprintf(name, sizeof(name), "%.*s='%s'", (int)(eq - cases[i].env), cases[i].env, eq + 1);

		ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 1);
		ck_assert_msg(strstr(msgs, name), "message for %s lacks name/value: %s", cases[i].env, msgs);
		ck_assert_msg(strstr(msgs, cases[i].accepted), "message for %s lacks '%s': %s",
			      cases[i].env, cases[i].accepted, msgs);
		ck_assert_msg(strstr(msgs, "default"), "no default named: %s", msgs);
		ck_assert_msg(strchr(msgs, '\n') == msgs + strlen(msgs) - 1, "not one line: %s", msgs);
		ck_assert_msg(memcmp(&cfg, &defaults, sizeof(cfg)) == 0, "%s changed the config",
			      cases[i].env);
	}
}
END_TEST

START_TEST(test_load_unknown_name)
{
	struct ps_config cfg;
	char msgs[4096];
	const char *env[] = { "POOLSHIM_POOLSIZE=1G", "POOLSHIMMER=1", "XPOOLSHIM_A=1", NULL };

	ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 1);
	ck_assert_ptr_nonnull(strstr(msgs, "unknown variable POOLSHIM_POOLSIZE=1G"));
	ck_assert_ptr_null(strstr(msgs, "POOLSHIMMER"));
	ck_assert_ptr_null(strstr(msgs, "XPOOLSHIM"));
}
END_TEST

/* A misspelt name is answered with the nearest option's name; a far one with none. */
START_TEST(test_load_did_you_mean)
{
	static const struct { const char *env, *meant; } cases[] = {
		{ "POOLSHIM_POOLSIZE=1G", "POOLSHIM_POOL_SIZE" },
		{ "POOLSHIM_POOL_MNI=32K", "POOLSHIM_POOL_MIN" },
		{ "POOLSHIM_HUGEPAGE=thp", "POOLSHIM_HUGEPAGES" },
		{ "POOLSHIM_STAT=/tmp/x", "POOLSHIM_STATS" },
		{ "POOLSHIM_URING_DEPT=4", "POOLSHIM_URING_DEPTH" },
		{ "POOLSHIM_TIMNG_SAMPLE=8", "POOLSHIM_TIMING_SAMPLE" },
	};
	struct ps_config cfg, defaults;

	ps_config_defaults(&defaults);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char msgs[4096], want[128];
		const char *env[] = { cases[i].env, NULL };

		ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 1);
		snprintf(want, sizeof(want), "did you mean %s?", cases[i].meant);
		ck_assert_msg(strstr(msgs, want), "%s: no '%s' in: %s", cases[i].env, want, msgs);
		ck_assert_msg(strchr(msgs, '\n') == msgs + strlen(msgs) - 1, "not one line: %s", msgs);
		ck_assert_msg(memcmp(&cfg, &defaults, sizeof(cfg)) == 0, "%s changed the config",
			      cases[i].env);
	}
	/* Nothing near: no guess (POOL_MAXX is 3 edits from POOL_MIN: too far). */
	const char *far[] = { "POOLSHIM_COMPLETELY_DIFFERENT=1", "POOLSHIM_POOL_MAXX=1", NULL };
	char msgs[4096];
	ck_assert_int_eq(load_captured(&cfg, far, msgs, sizeof(msgs)), 2);
	ck_assert_ptr_nonnull(strstr(msgs, "unknown variable POOLSHIM_COMPLETELY_DIFFERENT=1"));
	ck_assert_ptr_nonnull(strstr(msgs, "unknown variable POOLSHIM_POOL_MAXX=1"));
	ck_assert_ptr_null(strstr(msgs, "did you mean"));
}
END_TEST

START_TEST(test_load_cross_check)
{
	struct ps_config cfg;
	char msgs[4096];
	const char *env[] = { "POOLSHIM_POOL_MIN=512M", "POOLSHIM_POOL_SIZE=64M", NULL };

	ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 1);
	/* the values as the user wrote them, and what to do about it */
	ck_assert_ptr_nonnull(strstr(msgs, "POOLSHIM_POOL_MIN=512M is larger than "
					   "POOLSHIM_POOL_SIZE=64M, so no allocation can use the pool; "
					   "set POOLSHIM_POOL_MIN to 64M or less"));
	ck_assert_ptr_nonnull(strstr(msgs, "or POOLSHIM_POOL_SIZE to 512M or more"));
	ck_assert_msg(strchr(msgs, '\n') == msgs + strlen(msgs) - 1, "not one line: %s", msgs);
}
END_TEST

/* A bad format with a .json report path: the message names the JSON that applies. */
START_TEST(test_load_bad_format_json_path)
{
	struct ps_config cfg;
	char msgs[4096];
	const char *env[] = { "POOLSHIM_STATS=/tmp/r.json", "POOLSHIM_STATS_FORMAT=xml", NULL };

	ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 1);
	ck_assert_int_eq(cfg.stats_format, PS_FORMAT_JSON);
	ck_assert_msg(strstr(msgs, "using the default json, as the POOLSHIM_STATS path ends in .json"),
		      "%s", msgs);
	ck_assert_ptr_null(strstr(msgs, "default text"));

	const char *txt[] = { "POOLSHIM_STATS=/tmp/r.txt", "POOLSHIM_STATS_FORMAT=xml", NULL };
	ck_assert_int_eq(load_captured(&cfg, txt, msgs, sizeof(msgs)), 1);
	ck_assert_int_eq(cfg.stats_format, PS_FORMAT_TEXT);
	ck_assert_ptr_nonnull(strstr(msgs, "using the default text"));
}
END_TEST

/* A POOLSHIM_* name in the wrong case is not read, and one line says the right spelling. */
START_TEST(test_load_wrong_case)
{
	struct ps_config cfg;
	char msgs[4096];
	const char *env[] = { "poolshim_stats=off", "Poolshim_Pool_Min=1M", "poolshimmer=1",
			      "poolshim_nothing=1", NULL };

	ck_assert_int_eq(load_captured(&cfg, env, msgs, sizeof(msgs)), 2);
	ck_assert_str_eq(cfg.stats, "stderr");
	ck_assert_uint_eq(cfg.pool_min, 64 << 10);
	ck_assert_ptr_nonnull(strstr(msgs, "poolshim_stats ignored: names are case-sensitive, "
					   "the variable is POOLSHIM_STATS\n"));
	ck_assert_ptr_nonnull(strstr(msgs, "the variable is POOLSHIM_POOL_MIN\n"));
	ck_assert_ptr_null(strstr(msgs, "poolshimmer"));
	ck_assert_ptr_null(strstr(msgs, "poolshim_nothing"));
}
END_TEST

/* POOLSHIM_PROGRAMS: exact names, blanks trimmed, malformed lists refused. */
START_TEST(test_programs_match)
{
	bool m;
	const char *why;

	ck_assert_int_eq(ps_programs_match("nginx,haproxy", "haproxy", &m, &why), 1);
	ck_assert_int_eq(ps_programs_match(" nginx ,\thaproxy ", "nginx", &m, &why), 1);
	ck_assert_int_eq(ps_programs_match("nginx,haproxy", "cat", &m, &why), 0);
	ck_assert(!m);
	ck_assert_int_eq(ps_programs_match("nginx", "Nginx", &m, &why), 0);
	ck_assert_int_eq(ps_programs_match("nginx", "ngin", &m, &why), 0);
	/* Malformed: refused even where a good name matches; every process hears. */
	ck_assert_int_eq(ps_programs_match("nginx,,haproxy", "nginx", &m, &why), -EINVAL);
	ck_assert(m && strstr(why, "empty"));
	ck_assert_int_eq(ps_programs_match("", "nginx", &m, &why), -EINVAL);
	ck_assert(m);
	ck_assert_int_eq(ps_programs_match("/usr/sbin/nginx", "nginx", &m, &why), -EINVAL);
	ck_assert(m && strstr(why, "path"));
	ck_assert_int_eq(ps_programs_match("nginx;haproxy", "haproxy", &m, &why), -EINVAL);
	ck_assert(m);
	ck_assert_int_eq(ps_programs_match("ngi*", "nginx", &m, &why), -EINVAL);
	ck_assert(m);   /* a pattern that names nobody: still said, as any bad value */
	ck_assert_int_eq(ps_programs_match("my prog", "prog", &m, &why), -EINVAL);
	char longname[80];
	memset(longname, 'a', 64);
	longname[64] = '\0';
	ck_assert_int_eq(ps_programs_match(longname, "a", &m, &why), -EINVAL);
	ck_assert(strstr(why, "63"));
}
END_TEST

/* The report's cleanup of the program name, shared with the log prefix. */
START_TEST(test_program_clean)
{
	char out[8];

	ps_program_clean(out, sizeof(out), "a/b");
	ck_assert_str_eq(out, "a_b");
	ps_program_clean(out, sizeof(out), "longer-than-eight");
	ck_assert_str_eq(out, "longer-");
	ps_program_clean(out, sizeof(out), NULL);
	ck_assert_str_eq(out, "");
}
END_TEST

Suite *suite_config(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_parse_size);
	tcase_add_test(tc, test_parse_uint_and_bool);
	tcase_add_test(tc, test_load_defaults);
	tcase_add_test(tc, test_load_values);
	tcase_add_test(tc, test_load_explicit_format_wins);
	tcase_add_test(tc, test_load_bad_values);
	tcase_add_test(tc, test_load_unknown_name);
	tcase_add_test(tc, test_load_did_you_mean);
	tcase_add_test(tc, test_load_cross_check);
	tcase_add_test(tc, test_load_bad_format_json_path);
	tcase_add_test(tc, test_load_wrong_case);
	tcase_add_test(tc, test_programs_match);
	tcase_add_test(tc, test_program_clean);
	suite_add_tcase(s, tc);
	return s;
}
