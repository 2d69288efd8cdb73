// SPDX-License-Identifier: MIT
/*
 * Where live-stats files are and who they belong to: the directory, the
 * file name of a process, its pid namespace and start time.  Shared by the
 * shim, which writes the files (live.c), and `poolshim stat`, which reads
 * them; no allocation, no libc I/O (raw system calls), errno kept.
 */
#include "format/livefmt.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "format/config.h"
#include "format/fmt.h"
#include "format/sys.h"

static char live_dir[PS_LIVE_DIR_MAX + 1] = PS_LIVE_DIR;

/*
 * Only an absolute path to an existing directory: a relative one would
 * follow the program's working directory, and a file the program cannot
 * create there is better said once here than failed on silently later.
 */
int ps_live_set_dir(const char *dir)
{
	struct stat st;
	size_t n = strlen(dir);

	if (dir[0] != '/' || n > PS_LIVE_DIR_MAX)
		return -EINVAL;
	if (stat(dir, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	while (n > 1 && dir[n - 1] == '/')
		n--;
	memcpy(live_dir, dir, n);
	live_dir[n] = '\0';
	return 0;
}

const char *ps_live_dir(void)
{
	return live_dir;
}

/* ".TAG": 16 lower-case hex digits, whatever the tag (ps_buf_printf has no widths). */
static void put_tag(struct ps_buf *b, uint64_t tag)
{
	char t[18];

	t[0] = '.';
	for (int i = 0; i < 16; i++)
		t[1 + i] = "0123456789abcdef"[(tag >> (60 - 4 * i)) & 15];
	t[17] = '\0';
	ps_buf_puts(b, t);
}

void ps_live_path(char *out, unsigned long cap, int pid, uint64_t ns)
{
	ps_live_path_tagged(out, cap, pid, ns, 0);
}

void ps_live_path_tagged(char *out, unsigned long cap, int pid, uint64_t ns, uint64_t tag)
{
	struct ps_buf b;
	ps_buf_init(&b, out, cap, -1);
	ps_buf_printf(&b, "%s/poolshim-%d-%lu", live_dir, pid, (unsigned long)ns);
	if (tag)
		put_tag(&b, tag);
	ps_buf_puts(&b, ".stats");
	ps_buf_str(&b);
}

void ps_live_path_new(char *out, unsigned long cap, int pid, uint64_t ns, uint64_t tag)
{
	struct ps_buf b;
	ps_buf_init(&b, out, cap, -1);
	ps_buf_printf(&b, "%s/.poolshim-%d-%lu", live_dir, pid, (unsigned long)ns);
	put_tag(&b, tag);
	ps_buf_puts(&b, ".stats.new");
	ps_buf_str(&b);
}

/* A decimal number at *s, at most max, ending at a non-digit: advances *s. */
static bool number(const char **s, uint64_t max, uint64_t *v)
{
	const char *p = *s;
	uint64_t n = 0;

	if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9'))
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (max - (uint64_t)(*p - '0')) / 10)
			return false;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	*v = n;
	*s = p;
	return true;
}

/* Exactly 16 lower-case hex digits at *s (the tag, never 0): advances *s. */
static bool hex_tag(const char **s, uint64_t *tag)
{
	uint64_t t = 0;
	const char *p = *s;

	for (int i = 0; i < 16; i++, p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			return false;
		t = t << 4 | (uint64_t)d;
	}
	if (!t)
		return false;
	*tag = t;
	*s = p;
	return true;
}

int ps_live_parse_name(const char *name, int *pid, uint64_t *ns, uint64_t *tag)
{
	bool hidden = name[0] == '.';
	const char *s = name + hidden;
	uint64_t p;

	*tag = 0;
	if (strncmp(s, "poolshim-", 9) != 0)
		return 0;
	s += 9;
	if (!number(&s, 0x7fffffff, &p) || p == 0 || *s++ != '-' || !number(&s, UINT64_MAX, ns))
		return 0;
	*pid = (int)p;
	/* ".TAG" (hidden names of older builds had none: .poolshim-PID-NS.stats.new). */
	if (s[0] == '.' && s[1] != 's') {
		s++;
		if (!hex_tag(&s, tag))
			return 0;
	}
	if (strcmp(s, hidden ? ".stats.new" : ".stats") != 0)
		return 0;
	return hidden ? 2 : 1;
}

uint64_t ps_live_pidns(void)
{
	struct stat st;
	int saved = errno;
	int r = stat("/proc/self/ns/pid", &st);
	errno = saved;
	return r == 0 ? (uint64_t)st.st_ino : 0;
}

int ps_proc_stat(int pid, const int *fields, uint64_t *out, int n)
{
	char path[64], buf[1024];
	struct ps_buf b;

	/* /proc/self, not /proc/PID: under a /proc of another pid namespace PID is someone else. */
	ps_buf_init(&b, path, sizeof(path), -1);
	if (pid)
		ps_buf_printf(&b, "/proc/%d/stat", pid);
	else
		ps_buf_puts(&b, "/proc/self/stat");
	long fd = ps_sys_openat(AT_FDCWD, ps_buf_str(&b), O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return (int)fd;
	long len = ps_sys_read((int)fd, buf, sizeof(buf) - 1);
	ps_sys_close((int)fd);
	if (len <= 0)
		return len < 0 ? (int)len : -EIO;
	buf[len] = '\0';
	/* Fields after the command name (field 2), which may hold spaces and parentheses. */
	const char *p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	int field = 2, got = 0;
	for (p++; *p && got < n; p++) {
		if (*p != ' ')
			continue;
		field++;
		for (int i = 0; i < n; i++) {
			if (fields[i] != field)
				continue;
			if (ps_parse_digits(p + 1, UINT64_MAX, &out[i]))
				got++;
		}
	}
	return got == n ? 0 : -EIO;
}

uint64_t ps_live_starttime(int pid)
{
	static const int starttime_field[] = { 22 };
	uint64_t v = 0;

	return ps_proc_stat(pid, starttime_field, &v, 1) == 0 ? v : 0;
}
