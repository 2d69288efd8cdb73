// SPDX-License-Identifier: MIT
/*
 * Where live-stats files are and who they belong to: the directory, the
 * file name of a process, its pid namespace and start time.  Shared by the
 * shim, which writes the files (live.c), and `poolshim stat`, which reads
 * them; no allocation, no libc I/O (raw system calls), errno kept.
 */
#include "format/livefmt.h"

#include <errno.h>
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

void ps_live_path(char *out, unsigned long cap, int pid, uint64_t ns)
{
	struct ps_buf b;
	ps_buf_init(&b, out, cap, -1);
	ps_buf_printf(&b, "%s/poolshim-%d-%lu.stats", live_dir, pid, (unsigned long)ns);
	ps_buf_str(&b);
}

void ps_live_path_new(char *out, unsigned long cap, int pid, uint64_t ns)
{
	struct ps_buf b;
	ps_buf_init(&b, out, cap, -1);
	ps_buf_printf(&b, "%s/.poolshim-%d-%lu.stats.new", live_dir, pid, (unsigned long)ns);
	ps_buf_str(&b);
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
