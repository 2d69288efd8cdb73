// SPDX-License-Identifier: MIT
/* The allocation-free formatter: numbers, sizes, padding, JSON escaping, flushing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/fmt.h"
#include "suites.h"

#define BUF(name, n) char name##_s[n]; struct ps_buf name; ps_buf_init(&name, name##_s, n, -1)

START_TEST(test_numbers)
{
	BUF(b, 128);
	ps_buf_u64(&b, 0);
	ps_buf_putc(&b, ' ');
	ps_buf_u64(&b, UINT64_MAX);
	ps_buf_putc(&b, ' ');
	ps_buf_i64(&b, INT64_MIN);
	ps_buf_putc(&b, ' ');
	ps_buf_fixed1(&b, 15, 10);
	ps_buf_putc(&b, ' ');
	ps_buf_fixed1(&b, 1999, 1000);
	ck_assert_str_eq(ps_buf_str(&b), "0 18446744073709551615 -9223372036854775808 1.5 2.0");
}
END_TEST

START_TEST(test_sizes)
{
	static const struct { uint64_t v; const char *s; } cases[] = {
		{ 0, "0" }, { 1023, "1023" }, { 1024, "1K" }, { 1536, "1.5K" },
		{ 65536, "64K" }, { 16ULL << 20, "16M" }, { (3ULL << 30) / 2, "1.5G" },
		{ 4ULL << 40, "4T" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		BUF(b, 32);
		ps_buf_size(&b, cases[i].v);
		ck_assert_str_eq(ps_buf_str(&b), cases[i].s);
	}
}
END_TEST

START_TEST(test_pad_printf)
{
	BUF(b, 128);
	ps_buf_pad(&b, "ab", 4, false);
	ps_buf_putc(&b, '|');
	ps_buf_u64w(&b, 42, 5);
	ps_buf_putc(&b, '|');
	ps_buf_printf(&b, "%s=%d %u %lu %zu %x %c %%", "k", -3, 7u, 8ul, (size_t)9, 255u, 'z');
	ck_assert_str_eq(ps_buf_str(&b), "ab  |   42|k=-3 7 8 9 ff z %");
}
END_TEST

START_TEST(test_json_escape)
{
	BUF(b, 64);
	ps_buf_json_str(&b, "a\"b\\c\n\x01");
	ck_assert_str_eq(ps_buf_str(&b), "\"a\\\"b\\\\c\\n\\u0001\"");
}
END_TEST

START_TEST(test_truncation)
{
	BUF(b, 8);
	ps_buf_puts(&b, "0123456789");
	ck_assert(b.truncated);
	ck_assert_str_eq(ps_buf_str(&b), "0123456");
}
END_TEST

/* A small buffer bound to a descriptor flushes as it fills and loses nothing. */
START_TEST(test_flush_to_fd)
{
	int fds[2];
	char out[512];
	char storage[16];
	struct ps_buf b;

	ck_assert_int_eq(pipe(fds), 0);
	ps_buf_init(&b, storage, sizeof(storage), fds[1]);
	for (int i = 0; i < 20; i++)
		ps_buf_printf(&b, "line %d\n", i);
	ck_assert_int_eq(ps_buf_flush(&b), 0);
	close(fds[1]);
	ssize_t n = read(fds[0], out, sizeof(out) - 1);
	close(fds[0]);
	out[n] = '\0';
	ck_assert_int_eq(n, 10 * 7 + 10 * 8);
	ck_assert_ptr_nonnull(strstr(out, "line 0\nline 1\n"));
	ck_assert_ptr_nonnull(strstr(out, "line 19\n"));
}
END_TEST

START_TEST(test_errno_names)
{
	ck_assert_str_eq(ps_errno_name(EAGAIN), "EAGAIN");
	ck_assert_str_eq(ps_errno_name(EINVAL), "EINVAL");
	/* a symlinked report path fails with ELOOP (O_NOFOLLOW) */
	ck_assert_str_eq(ps_errno_name(ELOOP), "ELOOP");
	ck_assert_ptr_null(ps_errno_name(9999));
}
END_TEST

Suite *suite_fmt(void)
{
	Suite *s = suite_create("fmt");
	TCase *tc = tcase_create("fmt");

	tcase_add_test(tc, test_numbers);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_pad_printf);
	tcase_add_test(tc, test_json_escape);
	tcase_add_test(tc, test_truncation);
	tcase_add_test(tc, test_flush_to_fd);
	tcase_add_test(tc, test_errno_names);
	suite_add_tcase(s, tc);
	return s;
}
