// SPDX-License-Identifier: MIT
/*
 * poolshim-collect: the reports of processes that ended without writing
 * their own (SIGKILL, the OOM killer, a crash, a stderr pointed elsewhere,
 * an unwritable report path), rendered from the records they left in the
 * live directory and delivered where each process's POOLSHIM_STATS said:
 * text on stdout for "stderr", a path written as the record's owner.
 * `poolshim collect` runs it; collect.c does the work.
 *
 *   poolshim-collect [--live-dir DIR] [--run ID [--user USER]] [--into DIR] [--keep] [PID ...]
 *
 * Exit status: 0 every record looked at collected, 1 nothing to collect,
 * 3 some refused or not delivered (kept), 2 bad usage.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect.h"
#include "format/config.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: poolshim collect [--live-dir DIR] [--run ID [--user USER]] [--into DIR] [--keep]\n"
		   "                        [PID ...]\n"
		   "Writes the reports of processes that ran under libpoolshim.so and have ended\n"
		   "(killed, crashed, or unable to write their own), from the records they left in\n"
		   "the live directory, then removes the records.  Each report goes where the\n"
		   "process's POOLSHIM_STATS said: a path is written as the record's owner (run as\n"
		   "root to collect other users' processes), \"stderr\" is printed here on stdout.\n"
		   "--into DIR writes every report into DIR as PROGRAM-PID.json or .txt instead.\n"
		   "--run ID takes only the processes of that run (POOLSHIM_RUN, set by the\n"
		   "`poolshim` wrapper); PIDs, only those.  With --run, a report for \"stderr\" is\n"
		   "printed only from a record of root, of the user running collect, or of --user\n"
		   "USER (the run's user: a unit's User=); others are refused and kept.  --keep\n"
		   "leaves the records.\n"
		   "--live-dir DIR (default $POOLSHIM_LIVE_DIR, else /dev/shm) is where records are.\n"
		   "Processes still running are left alone; a record that fails its checks is\n"
		   "refused in one line and kept.\n"
		   "Exit status: 0 all collected, 1 nothing to collect, 3 some refused or kept,\n"
		   "2 bad usage.\n");
}

int main(int argc, char **argv)
{
	struct ps_collect_opts o;
	int *pids = calloc((size_t)argc, sizeof(*pids));

	memset(&o, 0, sizeof(o));
	o.out = stdout;
	o.live_dir = getenv("POOLSHIM_LIVE_DIR");
	if (!pids)
		return 2;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--live-dir") && more) {
			o.live_dir = argv[++i];
		} else if (!strcmp(a, "--run") && more) {
			o.run = argv[++i];
			if (ps_parse_id(o.run) < 0) {
				fprintf(stderr, "poolshim collect: --run wants 1 to 63 letters, digits, "
						"'.', '_' or '-', not '%s'\n", o.run);
				return 2;
			}
		} else if (!strcmp(a, "--user") && more) {
			const char *u = argv[++i];
			struct passwd *pw = getpwnam(u);
			char *end;
			errno = 0;
			unsigned long id = strtoul(u, &end, 10);
			if (pw) {
				o.run_user = pw->pw_uid;
			} else if (*u && !*end && !errno && id < (uid_t)-1) {
				o.run_user = (uid_t)id;
			} else {
				fprintf(stderr, "poolshim collect: --user wants a user name or id, not "
						"'%s'\n", u);
				return 2;
			}
			o.run_user_set = true;
		} else if (!strcmp(a, "--into") && more) {
			o.into = argv[++i];
		} else if (!strcmp(a, "--keep")) {
			o.keep = true;
		} else if (!strcmp(a, "--")) {
			continue;
		} else {
			char *end;
			errno = 0;
			long pid = strtol(a, &end, 10);
			if (*a == '-' || *end || errno || pid <= 0 || pid > 1 << 30) {
				fprintf(stderr, "poolshim collect: '%s' is %s\n", a,
					*a == '-' ? "not an option here (or its value is missing)" :
					"not a pid");
				usage(stderr);
				return 2;
			}
			pids[o.npids++] = (int)pid;
		}
	}
	o.pids = pids;
	int r = ps_collect(&o);
	if (r == 1 && !o.npids)
		fprintf(stderr, "poolshim collect: nothing to collect%s%s\n",
			o.run ? " for run " : "", o.run ? o.run : "");
	free(pids);
	return r;
}
