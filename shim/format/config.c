// SPDX-License-Identifier: MIT
/*
 * The option table and its parsers.  Every POOLSHIM_* variable is described
 * once, in options[] below: its kind, default, bounds and where it lands in
 * struct ps_config.  Loading walks the table; verbose mode prints it back;
 * poolshim(7) documents the same rows (the README lists the essential ones).
 */
#include "format/config.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "format/compiler.h"
#include "format/fmt.h"
#include "format/sys.h"

struct ps_config ps_cfg;

enum opt_kind { OPT_BOOL, OPT_SIZE, OPT_UINT, OPT_ENUM, OPT_STRING, OPT_SIGNAL, OPT_LIST, OPT_ID };

struct option {
	const char *name;
	enum opt_kind kind;
	size_t offset;             /* into struct ps_config */
	uint64_t def;              /* default for bool/size/uint/enum */
	uint64_t min, max;         /* bounds for size/uint */
	const char *const *choices;   /* enum names, NULL-terminated */
	const char *def_str;       /* default for strings */
	size_t set_offset;         /* bool to raise when given, or SIZE_MAX */
};

static const char *const format_names[] = { "text", "json", NULL };
static const char *const uring_names[] = { "auto", "off", "on", NULL };
#ifdef PS_TEST_HOOKS
static const char *const uring_test_names[] = { "none", "keepfd", "short_submit", "stuck_submit",
						     "ring_dear", "plain_dear", "dear_swap", NULL };
#endif

#define KiB (1024ULL)
#define MiB (1024ULL * KiB)
#define GiB (1024ULL * MiB)
#define OFF(f) offsetof(struct ps_config, f)

static const struct option options[] = {
	{ "POOLSHIM", OPT_BOOL, OFF(enabled), 1, 0, 0, NULL, NULL, SIZE_MAX },
	/* off: the baseline run, counted as with the pool, every block in the program's heap. */
	{ "POOLSHIM_POOL", OPT_BOOL, OFF(pool), 1, 0, 0, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_POOL_MIN", OPT_SIZE, OFF(pool_min), 64 * KiB, 4 * KiB, 1 * GiB, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_POOL_SIZE", OPT_SIZE, OFF(pool_size), 4 * GiB, 2 * MiB, 32 * GiB, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_POOL_RETAIN", OPT_SIZE, OFF(pool_retain), 256 * MiB, 0, 32 * GiB, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_POOL_DECAY_MS", OPT_UINT, OFF(pool_decay_ms), 10000, 0, 3600000, NULL, NULL, SIZE_MAX },
	/* Each CPU's cache of freed pooled blocks (core/tcache.h); 0: none. */
	{ "POOLSHIM_POOL_CACHE", OPT_SIZE, OFF(pool_cache), 32 * MiB, 0, 1 * GiB, NULL, NULL, SIZE_MAX },
	/* A CPU whose frees come further apart than this (us, on average) bypasses its cache; 0: never. */
	{ "POOLSHIM_POOL_CACHE_PACE_US", OPT_UINT, OFF(pool_cache_pace_us), 20, 0, 1000000, NULL, NULL, SIZE_MAX },
	/* A freed block's pages past the first POOLSHIM_POOL_TAIL_KEEP bytes: given back when unwritten (core/blocks.h). */
	{ "POOLSHIM_POOL_TAILS", OPT_ENUM, OFF(pool_tails), PS_TAILS_AUTO, 0, 0, ps_pool_tails_names, NULL, SIZE_MAX },
	{ "POOLSHIM_POOL_TAIL_KEEP", OPT_SIZE, OFF(pool_tail_keep), 1 * MiB, 0, 1 * GiB, NULL, NULL, SIZE_MAX },
	/* Arenas of the page placement (core/blocks.h), each with its own lock; 0: per CPU. */
	{ "POOLSHIM_POOL_ARENAS", OPT_UINT, OFF(pool_arenas), 0, 0, 64, NULL, NULL, SIZE_MAX },
	/* What places blocks in the slabs: the shim's page-exact fit, or jemalloc's size classes. */
	{ "POOLSHIM_POOL_ALLOCATOR", OPT_ENUM, OFF(pool_allocator), PS_POOL_ALLOC_PAGES, 0, 0, ps_pool_allocator_names, NULL, SIZE_MAX },
	{ "POOLSHIM_HUGEPAGES", OPT_ENUM, OFF(hugepages), PS_HUGE_AUTO, 0, 0, ps_hugepage_names, NULL, SIZE_MAX },
	/* Larger slabs get 4 KiB pages: programs touch big tables sparsely (xz -9: 2.0x glibc's RSS on THP). */
	{ "POOLSHIM_HUGEPAGE_MAX", OPT_SIZE, OFF(hugepage_max), 32 * MiB, 2 * MiB, 1 * GiB, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_PREFAULT", OPT_BOOL, OFF(prefault), 0, 0, 0, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_COUNT_SMALL", OPT_BOOL, OFF(count_small), 0, 0, 0, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_STATS", OPT_STRING, OFF(stats), 0, 0, 0, NULL, "stderr", SIZE_MAX },
	{ "POOLSHIM_STATS_FORMAT", OPT_ENUM, OFF(stats_format), PS_FORMAT_TEXT, 0, 0, format_names, NULL, OFF(stats_format_set) },
	{ "POOLSHIM_VERBOSE", OPT_BOOL, OFF(verbose), 0, 0, 0, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_URING", OPT_ENUM, OFF(uring), PS_URING_AUTO, 0, 0, uring_names, NULL, SIZE_MAX },
	{ "POOLSHIM_URING_MIN", OPT_SIZE, OFF(uring_min), 64 * KiB, 512, 1 * GiB, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_URING_CHUNK", OPT_SIZE, OFF(uring_chunk), 2 * MiB, 4 * KiB, 1 * GiB, NULL, NULL, OFF(uring_chunk_set) },
	{ "POOLSHIM_URING_DEPTH", OPT_UINT, OFF(uring_depth), 16, 1, 256, NULL, NULL, SIZE_MAX },
#ifdef PS_TEST_HOOKS
	/* Fault injection for tests/preload/io_uring_*.sh, in the test build only. */
	{ "POOLSHIM_URING_TEST", OPT_ENUM, OFF(uring_test), PS_URING_TEST_NONE, 0, 0, uring_test_names, NULL, SIZE_MAX },
#endif
	{ "POOLSHIM_TIMING", OPT_BOOL, OFF(timing), 1, 0, 0, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_TIMING_SAMPLE", OPT_UINT, OFF(timing_sample), 64, 1, 65536, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_LIVE", OPT_BOOL, OFF(live), 1, 0, 0, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_LIVE_DIR", OPT_STRING, OFF(live_dir), 0, 0, 0, NULL, PS_LIVE_DIR, SIZE_MAX },
	/* Seconds an ended process's record stays before a process of its user removes it (core/sweep.c); 0: kept. */
	{ "POOLSHIM_RECORD_TTL", OPT_UINT, OFF(record_ttl), 60, 0, 604800, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_BACKTRACE", OPT_UINT, OFF(backtrace), 0, 0, 32, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_BACKTRACE_SAMPLE", OPT_SIZE, OFF(backtrace_sample), 512 * KiB, 1, 1 * GiB, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_BACKTRACE_TOP", OPT_UINT, OFF(backtrace_top), 10, 0, 64, NULL, NULL, SIZE_MAX },
	{ "POOLSHIM_DEBUGINFO_PATH", OPT_STRING, OFF(debuginfo_path), 0, 0, 0, NULL, "", SIZE_MAX },
	{ "POOLSHIM_DUMP_SIGNAL", OPT_SIGNAL, OFF(dump_signal), 0, 0, 0, NULL, NULL, SIZE_MAX },
	/* Checked by init.c before anything else (ps_programs_match); kept here to be printed. */
	{ "POOLSHIM_PROGRAMS", OPT_LIST, OFF(programs), 0, 0, 0, NULL, "", SIZE_MAX },
	/* Set by the `poolshim` wrapper: the processes of one run, collected together. */
	{ "POOLSHIM_RUN", OPT_ID, OFF(run), 0, 0, 0, NULL, "", SIZE_MAX },
};

int ps_parse_id(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= PS_ID_MAX)
		return n ? -ERANGE : -EINVAL;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return -EINVAL;
	return 0;
}

static const char *const true_words[] = { "1", "on", "yes", "true", NULL };
static const char *const false_words[] = { "0", "off", "no", "false", NULL };

int ps_parse_bool(const char *s, bool *out)
{
	for (int i = 0; true_words[i]; i++)
		if (strcasecmp(s, true_words[i]) == 0) {
			*out = true;
			return 0;
		}
	for (int i = 0; false_words[i]; i++)
		if (strcasecmp(s, false_words[i]) == 0) {
			*out = false;
			return 0;
		}
	return -EINVAL;
}

static int parse_bounded(const char *s, bool suffix, uint64_t min, uint64_t max, uint64_t *out);

static const struct { const char *name; int num; } signal_names[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "USR1", SIGUSR1 },
	{ "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN },
	{ "TTOU", SIGTTOU }, { "URG", SIGURG }, { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH }, { "IO", SIGIO },
	{ "PWR", SIGPWR }, { "SYS", SIGSYS },
};

static const char *signal_name(int sig)
{
	for (size_t i = 0; i < PS_ARRAY_SIZE(signal_names); i++)
		if (signal_names[i].num == sig)
			return signal_names[i].name;
	return NULL;
}

/*
 * Only a signal whose default is to end the program can carry the dump: the
 * handler that the dump needs would otherwise turn an ignored or job-control
 * signal (CHLD, WINCH, URG, CONT, the stops) into one the program takes, and
 * KILL/STOP never reach a handler.  32 and 33 belong to the C library.
 */
static bool ends_program(int sig)
{
	switch (sig) {
	case SIGKILL: case SIGSTOP: case SIGCHLD: case SIGCONT: case SIGTSTP:
	case SIGTTIN: case SIGTTOU: case SIGURG: case SIGWINCH:
		return false;
	}
	return sig >= 1 && (sig < 32 || (sig >= SIGRTMIN && sig <= SIGRTMAX));
}

int ps_parse_signal(const char *s, int *out)
{
	bool off;

	if (ps_parse_bool(s, &off) == 0 && !off) {
		*out = 0;
		return 0;
	}
	if (strcasecmp(s, "none") == 0) {
		*out = 0;
		return 0;
	}
	if (*s >= '0' && *s <= '9') {
		uint64_t v;
		int r = parse_bounded(s, false, 1, 64, &v);
		if (r == 0 && !ends_program((int)v))
			r = -EINVAL;
		if (r == 0)
			*out = (int)v;
		return r;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < PS_ARRAY_SIZE(signal_names); i++)
		if (strcasecmp(s, signal_names[i].name) == 0) {
			if (!ends_program(signal_names[i].num))
				return -EINVAL;
			*out = signal_names[i].num;
			return 0;
		}
	return -EINVAL;
}

const char *ps_parse_digits(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	for (; *s >= '0' && *s <= '9'; s++) {
		uint64_t d = (uint64_t)(*s - '0');
		if (v > (max - d) / 10 || v * 10 + d > max)
			return NULL;
		v = v * 10 + d;
	}
	*out = v;
	return s;
}

/* Digits, then an optional K/M/G (and optional "iB"/"B"); no sign, no space. */
static int parse_number(const char *s, bool allow_suffix, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	if (!(p = ps_parse_digits(p, UINT64_MAX, &v)))
		return -ERANGE;
	if (*p != '\0') {
		unsigned shift;
		if (!allow_suffix)
			return -EINVAL;
		switch (*p) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -EINVAL;
		}
		p++;
		if (strcasecmp(p, "ib") == 0 || strcasecmp(p, "b") == 0)
			p += strlen(p);
		if (*p != '\0')
			return -EINVAL;
		if (v > (UINT64_MAX >> shift))
			return -ERANGE;
		v <<= shift;
	}
	*out = v;
	return 0;
}

static int parse_bounded(const char *s, bool suffix, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	int r = parse_number(s, suffix, &v);

	if (r < 0)
		return r;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int ps_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	return parse_bounded(s, true, min, max, out);
}

int ps_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	return parse_bounded(s, false, min, max, out);
}

static void *field(struct ps_config *cfg, size_t off)
{
	return (char *)cfg + off;
}

static void set_default(struct ps_config *cfg, const struct option *o)
{
	switch (o->kind) {
	case OPT_BOOL:
		*(bool *)field(cfg, o->offset) = o->def != 0;
		break;
	case OPT_SIZE:
	case OPT_UINT:
		*(uint64_t *)field(cfg, o->offset) = o->def;
		break;
	case OPT_ENUM:
	case OPT_SIGNAL:
		*(int *)field(cfg, o->offset) = (int)o->def;
		break;
	case OPT_STRING:
	case OPT_LIST:
	case OPT_ID:
		strcpy((char *)field(cfg, o->offset), o->def_str);
		break;
	}
	if (o->set_offset != SIZE_MAX)
		*(bool *)field(cfg, o->set_offset) = false;
}

void ps_config_defaults(struct ps_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < PS_ARRAY_SIZE(options); i++)
		set_default(cfg, &options[i]);
}

static void put_choices(struct ps_buf *b, const char *const *choices)
{
	for (int i = 0; choices[i]; i++) {
		if (i)
			ps_buf_putc(b, '|');
		ps_buf_puts(b, choices[i]);
	}
}

/*
 * A size as the parser takes it back, to the byte: the largest of K, M, G
 * that divides it, else bytes (ps_buf_size's 1.5M would not parse, and the
 * live record's copy of the configuration is parsed again by the tools).
 */
static void put_size_exact(struct ps_buf *b, uint64_t v)
{
	static const char units[] = "GMK";

	for (int i = 0; i < 3; i++) {
		uint64_t scale = 1ULL << (10 * (3 - i));
		if (v && v % scale == 0) {
			ps_buf_u64(b, v / scale);
			ps_buf_putc(b, units[i]);
			return;
		}
	}
	ps_buf_u64(b, v);
}

static void put_value(struct ps_buf *b, const struct ps_config *cfg, const struct option *o,
		      bool deflt)
{
	const void *f = (const char *)cfg + o->offset;

	switch (o->kind) {
	case OPT_BOOL:
		ps_buf_puts(b, (deflt ? o->def != 0 : *(const bool *)f) ? "on" : "off");
		break;
	case OPT_SIZE:
		/* Not given, the chunk is each device's largest request (uring.c). */
		if (!deflt && o->offset == OFF(uring_chunk) && !cfg->uring_chunk_set)
			ps_buf_puts(b, "device");
		else
			put_size_exact(b, deflt ? o->def : *(const uint64_t *)f);
		break;
	case OPT_UINT:
		ps_buf_u64(b, deflt ? o->def : *(const uint64_t *)f);
		break;
	case OPT_ENUM:
		ps_buf_puts(b, o->choices[deflt ? (int)o->def : *(const int *)f]);
		break;
	case OPT_STRING:
	case OPT_LIST:
	case OPT_ID:
		ps_buf_puts(b, deflt ? o->def_str : (const char *)f);
		break;
	case OPT_SIGNAL: {
		int sig = deflt ? (int)o->def : *(const int *)f;
		const char *name = signal_name(sig);
		if (sig == 0)
			ps_buf_puts(b, "off");
		else if (name)
			ps_buf_puts(b, name);
		else
			ps_buf_i64(b, sig);
		break;
	}
	}
}

/* What a valid value looks like, for the one-line complaint. */
static void put_accepted(struct ps_buf *b, const struct option *o)
{
	switch (o->kind) {
	case OPT_BOOL:
		ps_buf_puts(b, "1|0|on|off|yes|no|true|false");
		break;
	case OPT_SIZE:
	case OPT_UINT: {
		bool size = o->kind == OPT_SIZE;
		void (*put)(struct ps_buf *, uint64_t) = size ? ps_buf_size : ps_buf_u64;
		ps_buf_puts(b, size ? "a size with optional K/M/G suffix, " : "an integer ");
		put(b, o->min);
		ps_buf_puts(b, "..");
		put(b, o->max);
		break;
	}
	case OPT_ENUM:
		put_choices(b, o->choices);
		break;
	case OPT_STRING:
		ps_buf_puts(b, "stderr|off|a file path (%p = pid, %e = program name)");
		break;
	case OPT_LIST:
		ps_buf_puts(b, "program names separated by commas");
		break;
	case OPT_ID:
		ps_buf_puts(b, "1 to 63 letters, digits, '.', '_' or '-'");
		break;
	case OPT_SIGNAL:
		ps_buf_puts(b, "a signal whose default ends the program: a name such as USR2, SIGUSR2, "
			       "TERM, HUP, INT, QUIT, ALRM; a number 1..31 other than CHLD, CONT, "
			       "STOP, TSTP, TTIN, TTOU, URG, WINCH and KILL, or ");
		ps_buf_i64(b, SIGRTMIN);
		ps_buf_puts(b, "..");
		ps_buf_i64(b, SIGRTMAX);
		ps_buf_puts(b, "; or off");
		break;
	}
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

static void complain(const struct ps_config *cfg, const struct option *o, const char *value,
		     const char *why)
{
	char storage[400];
	struct ps_buf b;

	ps_buf_init(&b, storage, sizeof(storage), -1);
	put_accepted(&b, o);
	ps_buf_puts(&b, "); using the default ");
	/*
	 * The format's default follows the report path (ps_config_load's
	 * cross-option rule; POOLSHIM_STATS comes first in the table): name
	 * the one that will apply, not the table's.
	 */
	if (o->offset == OFF(stats_format) && ends_with(cfg->stats, ".json"))
		ps_buf_puts(&b, "json, as the POOLSHIM_STATS path ends in .json");
	else
		put_value(&b, cfg, o, true);
	ps_log("%s='%s' %s (accepted: %s", o->name, value, why, ps_buf_str(&b));
}

static int apply(struct ps_config *cfg, const struct option *o, const char *v)
{
	uint64_t n;
	bool flag;
	int r = 0;

	switch (o->kind) {
	case OPT_BOOL:
		r = ps_parse_bool(v, &flag);
		if (r == 0)
			*(bool *)field(cfg, o->offset) = flag;
		break;
	case OPT_SIZE:
	case OPT_UINT:
		/* The chunk's "device" (each device's own size) is its default, said as printed. */
		if (o->offset == OFF(uring_chunk) && strcasecmp(v, "device") == 0)
			return 0;
		r = o->kind == OPT_SIZE ? ps_parse_size(v, o->min, o->max, &n)
					: ps_parse_uint(v, o->min, o->max, &n);
		if (r == 0)
			*(uint64_t *)field(cfg, o->offset) = n;
		break;
	case OPT_ENUM:
		r = -EINVAL;
		for (int i = 0; o->choices[i]; i++)
			if (strcasecmp(v, o->choices[i]) == 0) {
				*(int *)field(cfg, o->offset) = i;
				r = 0;
			}
		break;
	case OPT_SIGNAL: {
		int sig;
		r = ps_parse_signal(v, &sig);
		if (r == 0)
			*(int *)field(cfg, o->offset) = sig;
		break;
	}
	case OPT_STRING:
		if (*v == '\0')
			r = -EINVAL;
		else if (strlen(v) >= PS_PATH_MAX)
			r = -ERANGE;
		else
			strcpy((char *)field(cfg, o->offset), v);
		break;
	case OPT_LIST:
		if (strlen(v) >= PS_PATH_MAX)
			r = -ERANGE;
		else
			strcpy((char *)field(cfg, o->offset), v);
		break;
	case OPT_ID:
		r = ps_parse_id(v);
		if (r == 0)
			strcpy((char *)field(cfg, o->offset), v);
		break;
	}
	if (r == 0 && o->set_offset != SIZE_MAX)
		*(bool *)field(cfg, o->set_offset) = true;
	if (r < 0)
		complain(cfg, o, v, r == -ERANGE ? "is out of range" : "is not valid");
	return r;
}

static const struct option *find_option(const char *name, size_t len)
{
	for (size_t i = 0; i < PS_ARRAY_SIZE(options); i++)
		if (strlen(options[i].name) == len && memcmp(options[i].name, name, len) == 0)
			return &options[i];
	return NULL;
}

/* An option whose name differs from name[len] only in case, or NULL. */
static const struct option *find_option_nocase(const char *name, size_t len)
{
	for (size_t i = 0; i < PS_ARRAY_SIZE(options); i++)
		if (strlen(options[i].name) == len && strncasecmp(options[i].name, name, len) == 0)
			return &options[i];
	return NULL;
}

/*
 * Edit distance (optimal string alignment: insert, delete, substitute, swap
 * two neighbours, case ignored) between a[alen] and b, or limit + 1 when it
 * is more than limit.  Two rows on the stack, no allocation: names longer
 * than the rows hold are not compared.
 */
#define NAME_DIST_MAX 64

static int upper(char c)
{
	return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

static size_t name_distance(const char *a, size_t alen, const char *b, size_t limit)
{
	size_t blen = strlen(b);
	size_t prev2[NAME_DIST_MAX + 1], prev[NAME_DIST_MAX + 1], cur[NAME_DIST_MAX + 1];

	if (alen > NAME_DIST_MAX || blen > NAME_DIST_MAX ||
	    (alen > blen ? alen - blen : blen - alen) > limit)
		return limit + 1;
	for (size_t j = 0; j <= blen; j++)
		prev[j] = j;
	for (size_t i = 1; i <= alen; i++) {
		size_t row_min;
		cur[0] = row_min = i;
		for (size_t j = 1; j <= blen; j++) {
			size_t d = prev[j - 1] + (upper(a[i - 1]) != upper(b[j - 1]));
			if (prev[j] + 1 < d)
				d = prev[j] + 1;
			if (cur[j - 1] + 1 < d)
				d = cur[j - 1] + 1;
			if (i > 1 && j > 1 && upper(a[i - 1]) == upper(b[j - 2]) &&
			    upper(a[i - 2]) == upper(b[j - 1]) &&
			    prev2[j - 2] + 1 < d)
				d = prev2[j - 2] + 1;
			cur[j] = d;
			if (d < row_min)
				row_min = d;
		}
		if (row_min > limit)
			return limit + 1;
		memcpy(prev2, prev, sizeof(prev));
		memcpy(prev, cur, sizeof(cur));
	}
	return prev[blen];
}

/*
 * The option a misspelt name most likely meant: the nearest by edit
 * distance, within a quarter of the length of the part after "POOLSHIM_"
 * (at least 1, at most 3), the first in the table on a tie; NULL when none
 * is that near.
 */
static const struct option *find_option_near(const char *name, size_t len)
{
	size_t tail = len > 9 ? (len - 9) / 4 : 0;
	size_t limit = tail < 1 ? 1 : tail > 3 ? 3 : tail, best_d = limit + 1;
	const struct option *best = NULL;

	for (size_t i = 0; i < PS_ARRAY_SIZE(options); i++) {
		size_t d = name_distance(name, len, options[i].name, best_d - 1);
		if (d < best_d) {
			best_d = d;
			best = &options[i];
		}
	}
	return best;
}

int ps_config_load(struct ps_config *cfg, const char *(*get)(const char *name), char *const *envp)
{
	int problems = 0;

	ps_config_defaults(cfg);
	for (size_t i = 0; i < PS_ARRAY_SIZE(options); i++) {
		const char *v = get(options[i].name);
		if (v && apply(cfg, &options[i], v) < 0)
			problems++;
	}

	for (char *const *e = envp; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		if (len < 8 || strncasecmp(*e, "POOLSHIM", 8) != 0)
			continue;
		if (len > 8 && (*e)[8] != '_')
			continue;
		if (strncmp(*e, "POOLSHIM", 8) != 0 || !find_option(*e, len)) {
			/* The environment's names are case-sensitive: poolshim_stats is not read. */
			const struct option *o = find_option_nocase(*e, len);
			if (o) {
				char given[64];   /* as long as the longest option name, or more */
				size_t n = len < sizeof(given) ? len : sizeof(given) - 1;
				memcpy(given, *e, n);
				given[n] = '\0';
				ps_log("%s ignored: names are case-sensitive, the variable is %s",
				       given, o->name);
				problems++;
				continue;
			}
			if (strncmp(*e, "POOLSHIM", 8) != 0)
				continue;
			const struct option *near = find_option_near(*e, len);
			if (near)
				ps_log("unknown variable %s ignored: did you mean %s? (see poolshim(7) "
				       "for the POOLSHIM_* names)", *e, near->name);
			else
				ps_log("unknown variable %s ignored (see poolshim(7) for the "
				       "POOLSHIM_* names)", *e);
			problems++;
		}
	}

	/* Cross-option rules. */
	if (!cfg->stats_format_set && ends_with(cfg->stats, ".json"))
		cfg->stats_format = PS_FORMAT_JSON;
	if (cfg->timing_sample & (cfg->timing_sample - 1)) {
		uint64_t p = 1;
		while (p < cfg->timing_sample)
			p <<= 1;
		ps_log("POOLSHIM_TIMING_SAMPLE=%lu rounded up to %lu (a power of two)",
		       (unsigned long)cfg->timing_sample, (unsigned long)p);
		cfg->timing_sample = p;
	}
	if (cfg->pool_min > cfg->pool_size) {
		char min[24], size[24];
		struct ps_buf mb, sb;
		ps_buf_init(&mb, min, sizeof(min), -1);
		ps_buf_init(&sb, size, sizeof(size), -1);
		put_size_exact(&mb, cfg->pool_min);
		put_size_exact(&sb, cfg->pool_size);
		ps_log("POOLSHIM_POOL_MIN=%s is larger than POOLSHIM_POOL_SIZE=%s, so no "
		       "allocation can use the pool; set POOLSHIM_POOL_MIN to %s or less "
		       "(the smallest buffer to pool), or POOLSHIM_POOL_SIZE to %s or more "
		       "(the most memory the pool may hold)",
		       ps_buf_str(&mb), ps_buf_str(&sb), size, min);
		problems++;
	}
	return problems;
}

void ps_config_print(const struct ps_config *cfg, struct ps_buf *b)
{
	for (size_t i = 0; i < PS_ARRAY_SIZE(options); i++) {
		ps_buf_puts(b, options[i].name);
		ps_buf_putc(b, '=');
		put_value(b, cfg, &options[i], false);
		ps_buf_putc(b, '\n');
	}
}

bool ps_config_option(const struct ps_config *cfg, size_t i, const char **name, struct ps_buf *value)
{
	if (i >= PS_ARRAY_SIZE(options))
		return false;
	*name = options[i].name;
	put_value(value, cfg, &options[i], false);
	return true;
}

/*
 * A byte that may be part of a listed name.  Program names may hold almost
 * anything, but a list holding separators other than ',' or a pattern was
 * meant some other way than it reads, and guessing could shim the wrong
 * program.
 */
static bool name_byte(unsigned char c)
{
	return c > ' ' && c != 0x7f && !strchr(",/;:*?[]=", c);
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

int ps_programs_match(const char *list, const char *name, bool *mentioned, const char **why)
{
	bool match = false;
	size_t nlen = strlen(name);

	*mentioned = false;
	*why = NULL;
	for (const char *p = list;;) {
		const char *end = strchr(p, ',');
		const char *a = p, *z = end ? end : p + strlen(p);
		while (a < z && blank(*a))
			a++;
		while (z > a && blank(z[-1]))
			z--;
		size_t len = (size_t)(z - a);
		const char *bad = NULL;
		for (const char *c = a; c < z && !bad; c++)
			if (!name_byte((unsigned char)*c))
				bad = c;
		if (len == 0)
			*why = *why ? *why : "has an empty name";
		else if (len > 63)
			*why = *why ? *why : "has a name longer than the 63 bytes a report keeps";
		else if (bad && *bad == '/')
			*why = *why ? *why : "has a path where a program name belongs (the report's program field)";
		else if (bad)
			*why = *why ? *why : "has a character that is not part of a program name";
		else if (len == nlen && memcmp(a, name, len) == 0)
			match = true;
		if (!end)
			break;
		p = end + 1;
	}

	/*
	 * A malformed list leaves every program alone: each one hears why, in
	 * one line, as for any bad value.  Telling only the programs the list
	 * seemed to name left a typo such as "ngin*" silent everywhere.
	 */
	*mentioned = *why != NULL;
	if (*why)
		return -EINVAL;
	return match ? 1 : 0;
}
