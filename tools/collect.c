// SPDX-License-Identifier: MIT
/*
 * `poolshim collect` and the wrapper's last step: the records of processes
 * that have ended, rendered into their reports and delivered.  For each
 * record in the live directory (hidden, half-made ones aside):
 *   - still running (judged as `poolshim stat` judges), or another pid
 *     namespace's: left alone;
 *   - report delivered by the process, or none wanted: removed quietly;
 *   - a fork child's record that did no work (ps_stats_worked, the
 *     shim's own rule): removed without a report;
 *   - a report the process rendered and kept (PS_REC_KEPT): delivered as
 *     it is, after an "ended" line when it is text;
 *   - otherwise: rendered from the counters, in the format it asked for,
 *     saying how it ended.
 * Where a report goes: --into DIR when given (written by the caller),
 * else the record's destination: "stderr" is o->out, a path is written as
 * the record's owner (root forks a child that becomes that user first;
 * anyone else writes only their own), opened without following a link
 * anywhere along it and under the shim's own rules for report files.
 * Whatever cannot be done is said in one line and the record is kept.
 *
 * Messages name what came from a record only after replacing its control
 * characters: a record may be written to attack the terminal of whoever
 * collects it.  Allocates freely (a tool, not the shim).
 */
#include "collect.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdarg.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include "format/fmt.h"
#include "format/livefmt.h"
#include "record.h"
#include "format/report.h"
#include "format/stats.h"

/* The most a report rendered here may be (call sites are never in a record). */
#define REPORT_MAX (8u << 20)
/*
 * What the whole collection may wait, in all, for FIFO readers to make
 * room: a report that does not fit in a FIFO whose reader never reads is
 * refused (record kept) once this is spent.
 */
#define FIFO_BUDGET_MS 500
static int fifo_budget_ms = FIFO_BUDGET_MS;

static const char *who;

/* s made safe for a terminal (record.h's ps_term_clean), into out[cap]. */
static const char *clean(char *out, size_t cap, const char *s)
{
	return ps_term_clean(out, cap, s, SIZE_MAX, false);
}

/* A program name for a file name: [A-Za-z0-9._+-] kept, the rest '_', never empty or dots only. */
static void file_part(char *out, size_t cap, const char *s)
{
	size_t i = 0;
	bool dots = true;

	for (; *s && i + 1 < cap; s++) {
		char c = *s;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '.' || c == '_' || c == '+' || c == '-';
		out[i++] = ok ? c : '_';
		dots &= c == '.';
	}
	out[i] = '\0';
	if (i == 0 || dots)
		snprintf(out, cap, "unknown");
}

/*
 * All of p[len] to fd.  A FIFO (non-blocking) may wait for its reader
 * *budget_ms in all, spent here (a reader that never reads costs the
 * collection that much, once: FIFO_BUDGET_MS for the whole run).
 */
static int write_all(int fd, const char *p, size_t len, int *budget_ms)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && *budget_ms > 0) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			int step = *budget_ms < 50 ? *budget_ms : 50;
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			poll(&pfd, 1, step);
			clock_gettime(CLOCK_MONOTONIC, &b);
			int spent = (int)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000);
			*budget_ms -= spent > 0 ? spent : 1;
			continue;
		}
		return n < 0 ? (errno == EAGAIN ? -ETIMEDOUT : -errno) : -EIO;
	}
	return 0;
}

int ps_collect_open_no_links(int dir, const char *path, int flags, mode_t mode, bool walk)
{
#ifdef SYS_openat2
	if (!walk) {
		struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW), .mode = mode,
					.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
		long fd = syscall(SYS_openat2, dir, path, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		/* EPERM: a seccomp filter that refuses the call it does not know. */
		if (errno != ENOSYS && errno != EPERM)
			return -errno;
	}
#endif
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	int cur = *path == '/' ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC) :
		  dir == AT_FDCWD ? open(".", O_PATH | O_DIRECTORY | O_CLOEXEC) :
		  fcntl(dir, F_DUPFD_CLOEXEC, 0);
	int r = cur < 0 ? -errno : 0;
	char *save = NULL, *last = strrchr(copy, '/');
	if (last) {
		*last = '\0';
		for (char *part = strtok_r(copy, "/", &save); r == 0 && part;
		     part = strtok_r(NULL, "/", &save)) {
			int next = openat(cur, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (next < 0)
				r = -errno;
			close(cur);
			cur = next;
		}
		last++;
	} else {
		last = copy;
	}
	if (r == 0) {
		int f = openat(cur, last, flags | O_NOFOLLOW, mode);
		r = f < 0 ? -errno : f;
	}
	if (cur >= 0)
		close(cur);
	free(copy);
	return r;
}

/* The start of an earlier report of this pid (the shim's own rule, report_out.c). */
static bool earlier_report(int fd, int pid)
{
	char head[128], text[64], json[64];
	ssize_t n = pread(fd, head, sizeof(head) - 1, 0);

	if (n <= 0)
		return false;
	head[n] = '\0';
	snprintf(text, sizeof(text), "==== poolshim report: pid %d (", pid);
	if (strncmp(head, text, strlen(text)) == 0)
		return true;
	snprintf(json, sizeof(json), ",\"pid\":%d,", pid);
	return strncmp(head, "{\"schema\":\"poolshim-report\",\"version\":", 38) == 0 &&
	       strstr(head, json) != NULL;
}

/*
 * Write the report data[len] at path (under dir) as the calling user,
 * under the rules the shim's open_report() keeps: no link anywhere along
 * the path, no blocking; a regular file owned by this user with no other
 * hard link, or (not per_process) a FIFO of this user's with a reader,
 * waited for at most *budget_ms (what is left of it comes back); a
 * per-process path (%p) made new or holding an earlier report of pid.
 * 0, or -errno with *why saying what was wrong when errno alone would not.
 */
static int write_report(int dir, const char *path, bool per_process, int pid, const char *data,
			size_t len, const char **why, int *budget_ms)
{
	const int how = O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat st;
	bool fresh = false, fifo = false;
	int fd, r = 0;

	*why = NULL;
	if (per_process) {
		fd = ps_collect_open_no_links(dir, path, O_WRONLY | O_CREAT | O_EXCL | how, 0600, false);
		fresh = fd >= 0;
		if (fd == -EEXIST)
			fd = ps_collect_open_no_links(dir, path, O_RDWR | how, 0, false);
	} else {
		fd = ps_collect_open_no_links(dir, path, O_WRONLY | O_CREAT | how, 0600, false);
	}
	if (fd < 0) {
		if (fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV)
			*why = "a symbolic link on the way";
		else if (fd == -ENXIO)
			*why = "a FIFO with no reader";
		return fd;
	}
	if (fstat(fd, &st) < 0) {
		r = -EIO;
	} else if (st.st_uid != geteuid()) {
		r = -EPERM;
		*why = "not owned by the process's user";
	} else if (S_ISFIFO(st.st_mode) && !per_process) {
		fifo = true;
	} else if (!S_ISREG(st.st_mode)) {
		r = -EPERM;
		*why = "not a regular file";
	} else if (st.st_nlink != 1) {
		r = -EPERM;
		*why = "a file with other hard links";
	} else if (per_process && !fresh && !earlier_report(fd, pid)) {
		r = -EEXIST;
		*why = "someone else's file";
	}
	if (r == 0 && !fifo) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		if (!fresh && ftruncate(fd, 0) < 0)
			r = -errno;
	}
	if (r == 0) {
		/* A FIFO's reader that went away must not end us with SIGPIPE. */
		void (*was)(int) = signal(SIGPIPE, SIG_IGN);
		r = write_all(fd, data, len, budget_ms);
		signal(SIGPIPE, was);
		if (r == -ETIMEDOUT)
			*why = "its reader did not make room within the 500 ms a collection "
			       "gives FIFOs in all";
	}
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

/*
 * write_report() as user uid: a child becomes that user for good
 * (ps_record_become) and writes; what it spent of the FIFO budget comes
 * back with its result.
 */
static int write_as(uid_t uid, const char *path, bool per_process, int pid, const char *data,
		    size_t len, char *why, size_t why_cap)
{
	int p[2];

	why[0] = '\0';
	pid_t c = ps_record_fork_piped(p);
	if (c < 0)
		return (int)c;
	if (c == 0) {
		const char *w = NULL;
		int r = 0, budget = fifo_budget_ms;
		close(p[0]);
		if ((r = ps_record_become(uid)) < 0)
			w = "cannot become the record's owner";
		else
			r = write_report(AT_FDCWD, path, per_process, pid, data, len, &w, &budget);
		char msg[160];
		int n = snprintf(msg, sizeof(msg), "%d %d %s", -r, budget, w ? w : "");
		if (write(p[1], msg, (size_t)n) < 0)
			_exit(2);
		_exit(r == 0 ? 0 : 1);
	}
	close(p[1]);
	char msg[160];
	ssize_t n = read(p[0], msg, sizeof(msg) - 1);
	close(p[0]);
	int status;
	while (waitpid(c, &status, 0) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return -ECHILD;
	msg[n] = '\0';
	int e = 0, left = 0, at = 0;
	if (sscanf(msg, "%d %d %n", &e, &left, &at) < 2)
		return -ECHILD;
	if (left < fifo_budget_ms)
		fifo_budget_ms = left > 0 ? left : 0;
	snprintf(why, why_cap, "%s", msg + at);
	return e > 0 ? -e : (WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD);
}

static const char *err_name(int r)
{
	const char *n = ps_errno_name(-r);
	return n ? n : strerror(-r);
}

struct tally {
	int done, refused, others;
};

/* One line about the record in r, prefixed with who and the process. */
static void say(const struct ps_record *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const struct ps_record *r, const char *fmt, ...)
{
	char prog[80], line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (r->hdr && r->hdr->magic[0] == 'P')
		fprintf(stderr, "%s: pid %d (%s): %s\n", who, r->pid,
			clean(prog, sizeof(prog), r->hdr->program), line);
	else
		fprintf(stderr, "%s: %s: %s\n", who, r->path, line);
}

/* How the process ended, into d: from the caller's wait status for its child, else the record. */
static void fill_end(const struct ps_collect_opts *o, const struct ps_record *r,
		     struct ps_report_data *d)
{
	const struct ps_live_header *h = r->hdr;

	d->end_usage_time = -1;
	if (o->known_pid > 0 && r->pid == o->known_pid) {
		int st = o->known_status;
		if (WIFSIGNALED(st)) {
			d->ended = PS_ENDED_SIGNAL;
			d->end_status = WTERMSIG(st);
			d->end_core = WCOREDUMP(st);
		} else {
			d->ended = PS_ENDED_EXIT;
			d->end_status = WEXITSTATUS(st);
		}
		d->end_known = true;
		if (o->known_rusage) {
			const struct rusage *ru = o->known_rusage;
			d->minflt = (uint64_t)ru->ru_minflt;
			d->majflt = (uint64_t)ru->ru_majflt;
			d->utime_us = (uint64_t)ru->ru_utime.tv_sec * 1000000 + (uint64_t)ru->ru_utime.tv_usec;
			d->stime_us = (uint64_t)ru->ru_stime.tv_sec * 1000000 + (uint64_t)ru->ru_stime.tv_usec;
		}
		return;
	}
	switch (h->end) {
	case PS_END_EXIT:
		d->ended = PS_ENDED_EXIT;
		d->end_known = (h->flags & PS_REC_STATUS_KNOWN) != 0;
		d->end_status = h->exit_status;
		break;
	case PS_END_SIGNAL:
		d->ended = PS_ENDED_SIGNAL;
		d->end_known = true;
		d->end_status = h->exit_status;
		break;
	default:
		d->ended = PS_ENDED_UNSEEN;
		d->end_usage_time = h->usage_time >= 0 ? h->usage_time : -1;
		break;
	}
}

/*
 * The report's bytes into *out (malloc'd): the kept report (text: after
 * the "ended" line), or one rendered from the counters.  0 or -errno.
 */
struct rendering {
	const struct ps_report_data *d;
	enum ps_stats_format format;
};

static void render(struct ps_buf *b, void *arg)
{
	const struct rendering *job = arg;
	ps_report_render(b, job->d, job->format);
}

static int make_report(struct ps_record *r, const struct ps_report_data *d, char **out,
		       size_t *len)
{
	const struct ps_live_header *h = r->hdr;
	struct ps_buf b;
	/* The kept report's own size and room for a line, else the most a rendering takes. */
	size_t cap = h->report == PS_REC_KEPT ? h->blob_len + 4096 : REPORT_MAX;
	char *mem = malloc(cap);

	if (!mem)
		return -ENOMEM;
	ps_buf_init(&b, mem, cap, -1);
	if (h->report == PS_REC_KEPT) {
		static const char title[] = "==== poolshim report: ";
		char *blob;
		size_t n, head = 0;
		int e = ps_record_blob(r, &blob, &n);
		if (e < 0) {
			free(mem);
			return e;
		}
		/*
		 * Text: the "ended" line where a rendered report has it, under
		 * the title (so the file still opens as a report of its pid);
		 * before everything when the kept text does not open so.
		 */
		if (h->stats_format == PS_FORMAT_TEXT) {
			const char *nl = memchr(blob, '\n', n);
			if (n > sizeof(title) && !memcmp(blob, title, sizeof(title) - 1) && nl)
				head = (size_t)(nl - blob) + 1;
			ps_buf_put(&b, blob, head);
			ps_report_render_end(&b, d);
		}
		ps_buf_put(&b, blob + head, n - head);
		free(blob);
	} else {
		/* Rendered from the counters: call sites are named away from us (record.h). */
		struct rendering job = { d, (enum ps_stats_format)h->stats_format };
		const char *note;
		free(mem);
		int e = ps_record_render(r, render, &job, cap, out, len, &note);
		if (note)
			say(r, "%s", note);
		return e;
	}
	if (b.truncated) {
		free(mem);
		return -EFBIG;
	}
	*out = mem;
	*len = b.len;
	return 0;
}

/* Why the process could not deliver its report itself, for the line about it; or "". */
static const char *itself(const struct ps_record *r)
{
	static char line[PS_LIVE_REASON + 64];
	char err[PS_LIVE_REASON];

	if (r->hdr->report != PS_REC_KEPT || !r->hdr->report_error[0])
		return "";
	snprintf(line, sizeof(line), " (the process could not: %s)",
		 clean(err, sizeof(err), r->hdr->report_error));
	return line;
}

/* Deliver the report; 0, or -1 having said why (the record is then kept). */
static int deliver(const struct ps_collect_opts *o, const struct ps_record *r, int into_fd,
		   const char *data, size_t len)
{
	const struct ps_live_header *h = r->hdr;
	char shown[PS_LIVE_STATS + 8], why[160];
	const char *w = NULL;
	int e;

	if (o->into) {
		char prog[64], name[128];
		file_part(prog, sizeof(prog), h->program);
		snprintf(name, sizeof(name), "%s-%d.%s", prog, r->pid,
			 h->stats_format == PS_FORMAT_JSON ? "json" : "txt");
		e = write_report(into_fd, name, true, r->pid, data, len, &w, &fifo_budget_ms);
		if (e < 0) {
			say(r, "cannot write the report to %s/%s: %s%s%s%s; record kept", o->into,
			    name, err_name(e), w ? " (" : "", w ? w : "", w ? ")" : "");
			return -1;
		}
		say(r, "report written to %s/%s%s", o->into, name, itself(r));
		return 0;
	}
	if (strcmp(h->stats, "stderr") == 0) {
		/*
		 * Printed into the run's output (a unit's journal): only a
		 * record of the run's own user or root may speak there; anyone
		 * can name a unit's run in a record of their own.  A wrapper's
		 * run id cannot be guessed, so its records speak whoever owns
		 * them (nginx's workers as www-data).
		 */
		if (o->run && !o->run_secret && r->owner != 0 && r->owner != geteuid() &&
		    !(o->run_user_set && r->owner == o->run_user)) {
			say(r, "a report for stderr in a record of user %u, not the run's: not printed; "
			       "record kept", (unsigned)r->owner);
			return -1;
		}
		if (ps_term_put(o->out ? o->out : stdout, data, len) < 0) {
			say(r, "cannot print the report; record kept");
			return -1;
		}
		return 0;
	}
	clean(shown, sizeof(shown), h->stats);
	if (h->stats[0] != '/') {
		say(r, "its report path %s is relative to a working directory not known here: "
		       "--into DIR writes it; record kept", shown);
		return -1;
	}
	bool per_process = !r->cfg_known || ps_report_path_names_pid(r->cfg.stats);
	uid_t me = geteuid();
	if (me != 0 && r->owner != me) {
		say(r, "the record belongs to user %u: run as root to write its report to %s as "
		       "that user, or give --into DIR; record kept", (unsigned)r->owner, shown);
		return -1;
	}
	why[0] = '\0';
	if (me == 0 && r->owner != 0) {
		e = write_as(r->owner, h->stats, per_process, r->pid, data, len, why, sizeof(why));
	} else {
		e = write_report(AT_FDCWD, h->stats, per_process, r->pid, data, len, &w,
				 &fifo_budget_ms);
		snprintf(why, sizeof(why), "%s", w ? w : "");
	}
	if (e < 0) {
		say(r, "cannot write the report to %s as user %u: %s%s%s%s; record kept "
		       "(--into DIR writes it elsewhere)%s", shown, (unsigned)r->owner, err_name(e),
		    why[0] ? " (" : "", why, why[0] ? ")" : "", itself(r));
		return -1;
	}
	say(r, "report written to %s%s", shown, itself(r));
	return 0;
}

static void forget(const struct ps_collect_opts *o, const struct ps_record *r)
{
	if (o->keep)
		return;
	int e = ps_record_remove(r);
	if (e < 0 && e != -ENOENT)
		say(r, "report made, but the record could not be removed: %s", err_name(e));
}

/* The initial pid namespace's inode (PROC_PID_INIT_INO): every process of every namespace is in its /proc. */
#define INIT_PIDNS 0xEFFFFFFCu

/* Process n's pid in its own (innermost) namespace, from NSpid, when that is not ours; else 0. */
static int inner_pid(const char *n)
{
	char path[300], buf[4096];
	snprintf(path, sizeof(path), "/proc/%s/status", n);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	char *line = strstr(buf, "\nNSpid:");
	if (!line)
		return 0;
	line += 7;
	int last = 0, count = 0;
	for (char *p = line; *p && *p != '\n';) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		last = (int)v;
		count++;
		p = end;
	}
	return count >= 2 ? last : 0;
}

bool ps_collect_foreign_ended(int pid, uint64_t starttime, uint64_t my_ns)
{
	if (my_ns != INIT_PIDNS || starttime == 0 || pid <= 0)
		return false;
	DIR *d = opendir("/proc");
	if (!d)
		return false;
	bool ended = true;
	struct dirent *e;
	while (ended && (e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || inner_pid(e->d_name) != pid)
			continue;
		/* That pid, in some namespace: the same process if it started when the record's did. */
		if (ps_live_starttime(atoi(e->d_name)) == starttime)
			ended = false;
	}
	closedir(d);
	return ended;
}

static bool wanted_pid(const struct ps_collect_opts *o, int pid)
{
	for (int i = 0; i < o->npids; i++)
		if (o->pids[i] == pid)
			return true;
	return o->npids == 0;
}

static void collect_one(const struct ps_collect_opts *o, const struct ps_record_id *id,
			uint64_t my_ns, int into_fd, struct tally *t)
{
	struct ps_record r;
	const char *why;
	bool named = o->npids > 0;

	/*
	 * Collecting one run (the wrapper, a unit's ExecStopPost=): a record
	 * that cannot be read cannot be shown to be the run's, so it is none
	 * of this collection's business (another build's, another user's).
	 */
	bool quiet = o->run && !named;

	if (ps_record_open(&r, id, &why) < 0) {
		if (quiet) {
			/* Not the run's business: see above. */
		} else if (r.fd < 0 && errno == ENOENT) {
			/* Gone since the scan (collected by someone else). */
		} else if (r.fd < 0 && errno == EACCES && geteuid() != 0 && !named && !o->into) {
			t->others++;
		} else {
			say(&r, "refused: %s%s; record kept", why,
			    r.fd < 0 && errno == EACCES && geteuid() != 0 ?
			    " (another user's record: root writes its report as its owner)" : "");
			t->refused++;
		}
		ps_record_close(&r);
		return;
	}
	if ((why = ps_record_read(&r)) != NULL) {
		/* r.hdr may hold anything: say it by path. */
		r.hdr->magic[0] = 0;
		if (!quiet) {
			say(&r, "damaged record: %s; refused and kept", why);
			t->refused++;
		}
		ps_record_close(&r);
		return;
	}
	ps_record_judge(&r, my_ns);
	/* Another namespace's, seen from the initial one: ended if no process is it. */
	if (r.foreign_ns && ps_collect_foreign_ended(r.pid, r.hdr->starttime, my_ns)) {
		r.foreign_ns = false;
		r.dead = true;
	}
	const struct ps_live_header *h = r.hdr;
	if (o->run && strcmp(h->run, o->run) != 0)
		goto out;
	if (r.foreign_ns || !r.dead) {
		if (named)
			say(&r, r.foreign_ns ? "another pid namespace's record: left alone" :
					       "still running: nothing to collect yet");
		goto out;
	}
	if (geteuid() != 0 && r.owner != geteuid() && !o->into && !named) {
		t->others++;
		goto out;
	}
	if (h->report == PS_REC_DELIVERED || h->report == PS_REC_NONE ||
	    (strcmp(h->stats, "off") == 0 && !o->into)) {
		forget(o, &r);
		t->done++;
		goto out;
	}
	struct ps_tstats *tot = calloc(1, sizeof(*tot)), *tmp = calloc(1, sizeof(*tmp));
	if (!tot || !tmp) {
		say(&r, "out of memory; record kept");
		t->refused++;
		free(tot);
		free(tmp);
		goto out;
	}
	why = ps_record_totals(&r, tot, tmp);
	free(tmp);
	if (why) {
		say(&r, "damaged record: %s; refused and kept", why);
		t->refused++;
		free(tot);
		goto out;
	}
	if (h->report == PS_REC_PENDING && (h->flags & PS_REC_CHILD) &&
	    !ps_stats_worked(tot, NULL, r.cfg_known && !r.cfg.pool ? r.cfg.pool_min : 0)) {
		/* A fork child with no work of its own: the shim's rule, no report. */
		forget(o, &r);
		free(tot);
		t->done++;
		goto out;
	}
	struct ps_report_data d;
	if (h->report != PS_REC_KEPT)
		ps_record_sites(&r);
	ps_record_data(&r, &d, tot);
	d.rendered_by = h->report == PS_REC_KEPT ? "the process itself" : who;
	fill_end(o, &r, &d);
	if (r.sites_why && h->report != PS_REC_KEPT)
		say(&r, "call sites refused: %s; the report has none", r.sites_why);
	char *data = NULL;
	size_t len = 0;
	int e = make_report(&r, &d, &data, &len);
	free(tot);
	if (e < 0) {
		say(&r, "its report could not be made: %s; record kept", err_name(e));
		t->refused++;
		goto out;
	}
	if (deliver(o, &r, into_fd, data, len) == 0) {
		forget(o, &r);
		t->done++;
	} else {
		t->refused++;
	}
	free(data);
out:
	ps_record_close(&r);
}

/* A record the shim makes is renamed into place within microseconds. */
#define HALF_MADE_AGE 60

/*
 * Hidden records, .poolshim-PID-NS.TAG.stats.new, that are a minute old: their
 * process died (SIGKILL, the OOM killer) between creating its record and
 * renaming it into place, and only a later process with the same pid would
 * clear the name.  Regular files only, the caller's own (any, as root:
 * their owners may remove them from a sticky directory too), never
 * through a link.  How many were removed.
 */
static int remove_half_made(void)
{
	DIR *dir = opendir(ps_live_dir());
	struct dirent *e;
	uid_t me = geteuid();
	time_t now = time(NULL);
	int removed = 0;

	if (!dir)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		int pid;
		uint64_t ns, tag;
		struct stat st;
		if (ps_live_parse_name(e->d_name, &pid, &ns, &tag) != 2)
			continue;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || (me != 0 && st.st_uid != me) ||
		    now - st.st_mtime < HALF_MADE_AGE)
			continue;
		if (unlinkat(dirfd(dir), e->d_name, 0) == 0)
			removed++;
	}
	closedir(dir);
	return removed;
}

static int by_pid(const void *a, const void *b)
{
	const struct ps_record_id *x = a, *y = b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

int ps_collect(const struct ps_collect_opts *o)
{
	struct tally t = { 0, 0, 0 };
	struct ps_record_id *ids = NULL;
	int into_fd = -1;

	who = o->who ? o->who : "poolshim collect";
	if (o->live_dir && *o->live_dir) {
		int e = ps_live_set_dir(o->live_dir);
		if (e < 0) {
			fprintf(stderr, "%s: live directory %s: %s\n", who, o->live_dir,
				e == -EINVAL ? "not an absolute path of at most 160 characters" :
				strerror(-e));
			return 2;
		}
	}
	if (o->into) {
		into_fd = open(o->into, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (into_fd < 0) {
			fprintf(stderr, "%s: --into %s: %s\n", who, o->into, strerror(errno));
			return 2;
		}
	}
	uint64_t my_ns = ps_live_pidns();
	int n = ps_record_scan(&ids);
	if (n < 0) {
		fprintf(stderr, "%s: live directory %s: %s\n", who, ps_live_dir(), strerror(-n));
		free(ids);
		if (into_fd >= 0)
			close(into_fd);
		return 2;
	}
	/* In pid order: a run's processes mostly in the order they started. */
	qsort(ids, (size_t)n, sizeof(*ids), by_pid);
	for (int i = 0; i < n; i++) {
		if (!wanted_pid(o, ids[i].pid) || (o->npids && ids[i].ns != my_ns))
			continue;
		collect_one(o, &ids[i], my_ns, into_fd, &t);
	}
	for (int k = 0; k < o->npids; k++) {
		bool seen = false;
		for (int i = 0; i < n && !seen; i++)
			seen = ids[i].pid == o->pids[k] && ids[i].ns == my_ns;
		if (!seen)
			fprintf(stderr, "%s: %d: no record in %s\n", who, o->pids[k], ps_live_dir());
	}
	free(ids);
	if (into_fd >= 0)
		close(into_fd);
	if (!o->npids && !o->keep) {
		int k = remove_half_made();
		if (k)
			fprintf(stderr, "%s: removed %d half-made record%s (%s)\n", who, k,
				k == 1 ? "" : "s", k == 1 ? "its process died while making it" :
				"their processes died while making them");
	}
	if (t.others)
		fprintf(stderr, "%s: %d records of other users left (root writes their reports as "
				"their owners)\n", who, t.others);
	if (t.refused)
		return 3;
	return t.done ? 0 : 1;
}
