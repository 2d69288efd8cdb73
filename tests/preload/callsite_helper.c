// SPDX-License-Identifier: MIT
/*
 * For callsite.sh: two allocation sites and two I/O sites with distinct,
 * exported (-rdynamic), never-inlined function names and known totals:
 * site_small_buffers mallocs 40 x 256 KiB, site_big_buffers 10 x 4 MiB;
 * site_read_file preads 30 x 128 KiB, site_write_file pwrites 20 x 256 KiB.
 * Arguments: ROUNDS (1), and "kill" to end by SIGKILL after the work, for
 * tests/tools/collect_sites.sh (the same sites, no exit); with
 * CALLSITE_PLUGIN set, that library is opened after the work and its
 * plugin_buffers called 5 times before the end; with CALLSITE_FORK set,
 * a fork child calls site_big_buffers 7 more times and exits first.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#define NOINLINE __attribute__((noinline, visibility("default")))

void *site_small_buffers(int i);
void *site_big_buffers(int i);
long site_read_file(int fd, void *buf);
long site_write_file(int fd, const void *buf);

NOINLINE void *site_small_buffers(int i)
{
	void *p = malloc(256 << 10);
	memset(p, i, 4096);
	return p;
}

NOINLINE void *site_big_buffers(int i)
{
	void *p = malloc(4 << 20);
	memset(p, i, 4096);
	return p;
}

NOINLINE long site_read_file(int fd, void *buf)
{
	return pread(fd, buf, 128 << 10, 0);
}

NOINLINE long site_write_file(int fd, const void *buf)
{
	return pwrite(fd, buf, 256 << 10, 0);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	char path[] = "/tmp/pst-callsite-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	unlink(path);
	char *buf = calloc(1, 256 << 10);
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < 40; i++)
			free(site_small_buffers(i));
		for (int i = 0; i < 10; i++)
			free(site_big_buffers(i));
		for (int i = 0; i < 20; i++)
			if (site_write_file(fd, buf) != 256 << 10)
				return 1;
		for (int i = 0; i < 30; i++)
			if (site_read_file(fd, buf) != 128 << 10)
				return 1;
	}
	const char *plugin = getenv("CALLSITE_PLUGIN");
	if (plugin) {
		void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
		void *(*fn)(int) = h ? (void *(*)(int))dlsym(h, "plugin_buffers") : NULL;
		if (!fn)
			return 1;
		for (int i = 0; i < 5; i++)
			free(fn(i));
	}
	if (getenv("CALLSITE_FORK")) {
		pid_t c = fork();
		if (c == 0) {
			for (int i = 0; i < 7; i++)
				free(site_big_buffers(i));
			_exit(0);
		}
		int st;
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 1;
	}
	if (argc > 2 && strcmp(argv[2], "kill") == 0)
		kill(getpid(), SIGKILL);
	free(buf);
	close(fd);
	printf("callsite helper ok\n");
	return 0;
}
