// SPDX-License-Identifier: MIT
/*
 * ipctrace-loader --out DIR [--ringbuf-mb N] [--floor[=clock]] [--user UID:GID] [--attach MODE] [-v] -- CMD ARGS...
 * ipctrace-loader --doctor
 *
 * Starts CMD held on a pipe, loads and attaches every probe with CMD's pid as
 * the root of the followed tasks, releases CMD, copies the ring buffer to
 * DIR/events.bin until CMD exits (a reader thread at SCHED_IDLE, loaders/reader.c),
 * then writes DIR/trace.json and exits with CMD's exit status (128 + signal if
 * it was killed). Nothing is pinned: every BPF object dies with this process,
 * however it ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "ipctrace.h"
#include "features.h"
#include "probes.h"
#include "reader.h"
#include "steal.h"
#include "trace.skel.h"
#include "sampler.h"
#include "outfile.h"

#define OUTBUF_BYTES   (1 << 20)
#define MAX_CPUS       IPT_MAX_CPUS

#define REC_NAME(e, name) [REC_##e] = #name,
static const char *const rec_names[REC_TYPE_MAX] = { IPT_REC_TYPES(REC_NAME) };
#undef REC_NAME

struct opts {
	const char *out;
	double ringbuf_mb;
	bool floor, floor_clock, doctor, verbose;
	const char *attach;         /* --attach MODE: the tracepoint mode to use, NULL = the best */
	unsigned int sample_hz;     /* stack sampler (loaders/sample.c), 0 = off */
	bool as_user;               /* --user: CMD runs as this uid/gid, the loader stays root */
	uid_t uid;
	gid_t gid;
	char **cmd;
};

struct sink {                       /* events.bin writer, fed by the ring buffer callback */
	int fd;
	char *buf;
	size_t used;
	__u64 count, per_type[REC_TYPE_MAX], unknown;
	int write_errno;
	__u32 *pids;                    /* child process ids seen in fork records */
	size_t npids, cap;
	struct lost_span *spans;        /* when records were lost (lost_rb) */
	size_t nspans, spans_cap;
};

static volatile sig_atomic_t child_exited, stop_signal;
static pid_t child = -1;
static bool verbose;
static struct reader *running_reader;   /* stopped before the BPF objects go */

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* The message quotes arguments as given: a newline in one must not make a second line. */
	for (char *c = msg; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = '?';
	fprintf(stderr, "ipctrace-loader: %s\n", msg);
	exit(2);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* Signals sent by a process (the front end) go on to the driver, which decides
 * how to stop; a terminal's Ctrl-C reaches the driver by itself. */
static void on_stop(int sig, siginfo_t *si, void *uc)
{
	stop_signal = sig;
	if (child > 0 && si && si->si_code == SI_USER)
		kill(child, sig);
}

static void on_child(int sig)
{
	child_exited = 1;
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "ringbuf-mb", required_argument, NULL, 'r' },
		{ "floor", optional_argument, NULL, 'f' },
		{ "doctor", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "attach", required_argument, NULL, 'a' },
		{ "sample-hz", required_argument, NULL, 's' },
		{ "user", required_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	o->ringbuf_mb = 64;
	opterr = 0;     /* our one line below says what is wrong, getopt's would be a second */
	while ((c = getopt_long(argc, argv, "+o:r:fdvs:u:a:", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': o->out = optarg; break;
		case 'r':
			errno = 0;
			o->ringbuf_mb = strtod(optarg, &end);
			if (errno || *end || !(o->ringbuf_mb > 0) || o->ringbuf_mb > 4096)
				die_usage("--ringbuf-mb wants a size in MiB, more than 0 and at most 4096, not '%s'", optarg);
			break;
		case 'f':   /* --floor: the probe-effect floor; --floor=clock: programs read the clock */
			if (optarg && strcmp(optarg, "clock"))
				die_usage("--floor takes no value or 'clock', not '%s'", optarg);
			o->floor = true;
			o->floor_clock = optarg != NULL;
			break;
		case 'd': o->doctor = true; break;
		case 'v': o->verbose = true; break;
		case 'a':
			if (strcmp(optarg, "tp_btf") && strcmp(optarg, "raw_tp") && strcmp(optarg, "tracepoint"))
				die_usage("--attach wants tp_btf, raw_tp or tracepoint, not '%s'", optarg);
			o->attach = optarg;
			break;
		case 's':   /* stack sampler, see loaders/sampler.h */
			errno = 0;
			o->sample_hz = strtoul(optarg, &end, 10);
			if (errno || *end || o->sample_hz < 1 || o->sample_hz > 100000)
				die_usage("--sample-hz wants samples per second, 1 to 100000, not '%s'", optarg);
			break;
		case 'u': {
			unsigned long uid, gid;
			char *colon;

			errno = 0;
			uid = strtoul(optarg, &colon, 10);
			gid = *colon == ':' ? strtoul(colon + 1, &end, 10) : ULONG_MAX;
			if (errno || colon == optarg || *colon != ':' || end == colon + 1 || *end ||
			    uid >= UINT_MAX || gid >= UINT_MAX)
				die_usage("--user wants UID:GID, not '%s'", optarg);
			o->as_user = true;
			o->uid = uid;
			o->gid = gid;
			break;
		}
		default:
			die_usage("%s '%s'; usage: ipctrace-loader --out DIR [--ringbuf-mb N] [--floor[=clock]] [--sample-hz N] [--user UID:GID] [--attach MODE] [-v] -- CMD ARGS... | --doctor",
				  optopt && strchr("orsua", optopt) ? "missing value of" : "unknown option", argv[optind - 1]);
		}
	}
	if (o->doctor)
		return;
	if (!o->out)
		die_usage("--out DIR is required");
	if (optind >= argc)
		die_usage("no command to trace (ipctrace-loader --out DIR -- CMD ARGS...)");
	o->cmd = argv + optind;
}

/* Ring buffer sizes are a power-of-two number of pages. */
static __u32 ringbuf_bytes(double mb)
{
	double want = mb * (1 << 20);
	__u32 size = getpagesize();

	while (size < want && size < (1u << 31))
		size <<= 1;
	return size;
}

static int flush(struct sink *s)
{
	size_t off = 0;

	while (off < s->used) {
		ssize_t n = write(s->fd, s->buf + off, s->used - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			s->write_errno = errno;
			return -1;
		}
		off += n;
	}
	s->used = 0;
	return 0;
}

static int add_record(struct sink *s, const struct rec *r)
{
	if (s->used + sizeof(*r) > OUTBUF_BYTES && flush(s))
		return -EIO;
	memcpy(s->buf + s->used, r, sizeof(*r));
	s->used += sizeof(*r);
	s->count++;
	if (r->type < REC_TYPE_MAX && rec_names[r->type])
		s->per_type[r->type]++;
	else
		s->unknown++;
	if (r->type == REC_FORK && r->a0 >> 32) {
		if (s->npids == s->cap) {
			__u32 *more = realloc(s->pids, (s->cap ? s->cap * 2 : 64) * sizeof(*more));

			if (!more)
				return -ENOMEM;
			s->pids = more;
			s->cap = s->cap ? s->cap * 2 : 64;
		}
		s->pids[s->npids++] = r->a0 >> 32;
	}
	return 0;
}

/* A ring-buffer sample is one record or a full batch of them. */
static int on_sample(void *ctx, void *data, size_t size)
{
	struct sink *s = ctx;
	size_t i;
	int err;

	if (size % sizeof(struct rec)) {
		s->unknown++;
		return 0;
	}
	for (i = 0; i < size / sizeof(struct rec); i++)
		if ((err = add_record(s, (const struct rec *)data + i)))
			return err;
	return 0;
}

static int add_span(struct sink *s, const struct lost_span *span)
{
	if (s->nspans == s->spans_cap) {
		size_t cap = s->spans_cap ? s->spans_cap * 2 : 64;
		struct lost_span *more = realloc(s->spans, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		s->spans = more;
		s->spans_cap = cap;
	}
	s->spans[s->nspans++] = *span;
	return 0;
}

static int on_lost(void *ctx, void *data, size_t size)
{
	if (size != sizeof(struct lost_span))
		return 0;
	return add_span(ctx, data);
}

static int cmp_span(const void *a, const void *b)
{
	__u64 x = ((const struct lost_span *)a)->start, y = ((const struct lost_span *)b)->start;

	return x < y ? -1 : x > y;
}

/* "lost_spans": [[start, end, records], ...], overlapping spans merged, by time. */
static void write_spans(FILE *f, struct sink *s)
{
	size_t i, k = 0;

	if (s->nspans)          /* qsort(NULL, 0, ...) is undefined */
		qsort(s->spans, s->nspans, sizeof(*s->spans), cmp_span);
	for (i = 1; i < s->nspans; i++) {
		if (s->spans[i].start <= s->spans[k].end) {
			if (s->spans[i].end > s->spans[k].end)
				s->spans[k].end = s->spans[i].end;
			s->spans[k].n += s->spans[i].n;
		} else {
			s->spans[++k] = s->spans[i];
		}
	}
	fprintf(f, "\"lost_spans\": [");
	for (i = 0; s->nspans && i <= k; i++)
		fprintf(f, "%s[%llu, %llu, %llu]", i ? ", " : "", (unsigned long long)s->spans[i].start,
			(unsigned long long)s->spans[i].end, (unsigned long long)s->spans[i].n);
	fprintf(f, "]");
}

/* What is still staged per CPU once the programs are detached: records, and the
 * lost spans a CPU had open (their records are in drops, so they must be in lost_spans). */
static int drain_batches(struct trace_bpf *skel, struct sink *s, int ncpus)
{
	struct rec_batch *b = calloc(ncpus, sizeof(*b));
	__u32 zero = 0, i, k;
	int err = 0;

	if (!b)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.batches), &zero, b))
		err = -errno;
	for (i = 0; !err && i < (__u32)ncpus; i++) {
		for (k = 0; !err && k < b[i].n && k < REC_BATCH; k++)
			err = add_record(s, &b[i].recs[k]);
		if (!err && b[i].open.n)
			err = add_span(s, &b[i].open);
		if (!err && b[i].direct.n)
			err = add_span(s, &b[i].direct);
	}
	free(b);
	return err;
}

/* Give up root in the child: the invoking user's groups, gid and uid, in that order. */
static int become(const struct opts *o)
{
	struct passwd *pw = getpwuid(o->uid);

	if (pw ? initgroups(pw->pw_name, o->gid) : setgroups(1, &o->gid))
		return -1;
	if (setgid(o->gid) || setuid(o->uid))
		return -1;
	return 0;
}

/* The child waits until every probe is attached; EOF on the pipe means the loader gave up. */
static pid_t start_held(const struct opts *o, char **cmd, int *release_fd)
{
	int p[2];
	pid_t pid;
	char go;

	if (pipe2(p, O_CLOEXEC))
		die_usage("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die_usage("fork: %s", strerror(errno));
	if (pid == 0) {
		pid_t parent = getppid();

		if (o->as_user && become(o)) {
			fprintf(stderr, "ipctrace-loader: cannot run %s as uid %u gid %u: %s\n",
				cmd[0], (unsigned)o->uid, (unsigned)o->gid, strerror(errno));
			_exit(2);
		}
		/* after the change of user, which clears it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(2);
		close(p[1]);
		if (read(p[0], &go, 1) != 1)
			_exit(2);
		execvp(cmd[0], cmd);
		fprintf(stderr, "ipctrace-loader: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(2);
	}
	close(p[0]);
	*release_fd = p[1];
	return pid;
}

static void stop_child(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
}

static void fail_setup(struct trace_bpf *skel, struct probe_set *ps, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
static void fail_setup(struct trace_bpf *skel, struct probe_set *ps, const char *fmt, ...)
{
	va_list ap;

	stop_child();
	if (running_reader)
		reader_stop(running_reader);
	if (ps)
		probes_detach(ps);
	trace_bpf__destroy(skel);
	fputs("ipctrace-loader: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static int mkdirs(const char *dir)
{
	char path[PATH_MAX], *p;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

/* Followed tids from the kernel's table; process ids from the fork records; both with the root. */
static void write_ids(FILE *f, const struct trace_bpf *skel, pid_t root, struct sink *s)
{
	const __u8 *fl = skel->bss->followed;
	size_t n = sizeof(skel->bss->followed), i;

	fprintf(f, "\"tids\": [%d", root);
	for (i = 1; i < n; i++)
		if (fl[i] && (pid_t)i != root)
			fprintf(f, ", %zu", i);
	fprintf(f, "], \"pids\": [%d", root);
	if (s->npids)
		qsort(s->pids, s->npids, sizeof(*s->pids), cmp_u32);
	for (i = 0; i < s->npids; i++)
		if (s->pids[i] != (__u32)root && (i == 0 || s->pids[i] != s->pids[i - 1]))
			fprintf(f, ", %u", s->pids[i]);
	fprintf(f, "]");
}

/* The loader's own threads (trace.json "tracer"): when the analysis finds one of them on
 * the workload's CPU, that is the probe effect. */
#define TRACER_TIDS_MAX 32

struct tracer_threads {
	pid_t tids[TRACER_TIDS_MAX];
	int n;
};

static void tracer_threads(struct tracer_threads *t)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	t->n = 0;
	while (d && (e = readdir(d)) && t->n < TRACER_TIDS_MAX)
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
			t->tids[t->n++] = atoi(e->d_name);
	if (d)
		closedir(d);
	if (!t->n)
		t->tids[t->n++] = getpid();
}

/* A comm as a JSON string: valid UTF-8 kept, any other byte as U+FFFD (a name cut at
 * 15 bytes may end inside a character), control characters escaped. */
static void json_comm(FILE *f, const char *comm, size_t max)
{
	const unsigned char *c = (const unsigned char *)comm, *end = c + strnlen(comm, max);

	fputc('"', f);
	while (c < end) {
		int len = *c < 0x80 ? 1 : *c >= 0xc2 && *c <= 0xdf ? 2 : *c >= 0xe0 && *c <= 0xef ? 3 :
			  *c >= 0xf0 && *c <= 0xf4 ? 4 : 0;
		/* the second byte's range excludes overlong forms and surrogates */
		unsigned char lo = *c == 0xe0 ? 0xa0 : *c == 0xf0 ? 0x90 : 0x80;
		unsigned char hi = *c == 0xed ? 0x9f : *c == 0xf4 ? 0x8f : 0xbf;
		int k;

		if (len == 1) {
			if (*c == '"' || *c == '\\')
				fprintf(f, "\\%c", *c);
			else if (*c < 0x20 || *c == 0x7f)
				fprintf(f, "\\u%04x", *c);
			else
				fputc(*c, f);
			c++;
			continue;
		}
		for (k = 1; len && k < len; k++)
			if (c + k >= end || c[k] < (k == 1 ? lo : 0x80) || c[k] > (k == 1 ? hi : 0xbf))
				len = 0;
		if (!len) {
			fputs("\\ufffd", f);
			c++;
			continue;
		}
		fwrite(c, 1, len, f);
		c += len;
	}
	fputc('"', f);
}

struct named_task {
	__u32 tid;
	struct task_name n;
};

static int cmp_named(const void *a, const void *b)
{
	__u32 x = ((const struct named_task *)a)->tid, y = ((const struct named_task *)b)->tid;

	return x < y ? -1 : x > y;
}

/* "tasks": {"<tid>": {"comm": "...", "pid": N}, ...} by tid, from the programs' tasks map. */
static void write_tasks(FILE *f, const struct trace_bpf *skel)
{
	int fd = bpf_map__fd(skel->maps.tasks);
	size_t n = 0, cap = bpf_map__max_entries(skel->maps.tasks), i;
	struct named_task *all = calloc(cap, sizeof(*all));
	__u32 key, next;
	bool started = false;

	while (all && n < cap && !bpf_map_get_next_key(fd, started ? &key : NULL, &next)) {
		started = true;
		key = next;
		if (!bpf_map_lookup_elem(fd, &key, &all[n].n))
			all[n++].tid = key;
	}
	if (n)
		qsort(all, n, sizeof(*all), cmp_named);
	fprintf(f, "\"tasks\": {");
	for (i = 0; i < n; i++) {
		fprintf(f, "%s\"%u\": {\"comm\": ", i ? ", " : "", all[i].tid);
		json_comm(f, all[i].n.comm, sizeof(all[i].n.comm));
		fprintf(f, ", \"pid\": %u}", all[i].n.pid);
	}
	fprintf(f, "}");
	free(all);
}

static const char *status_of(int code)
{
	if (code == 0)
		return "complete";
	if (code == 130 || code == 143)
		return "interrupted";
	return "failed";
}

/*
 * Runs of our programs the kernel skipped because one was already running on that
 * CPU (bpf_prog_info.recursion_misses): each may have been a record, at a time
 * nobody knows. -errno if a program could not be asked.
 */
static int recursion_misses(const struct trace_bpf *skel, __u64 *n)
{
	struct bpf_program *prog;

	*n = 0;
	bpf_object__for_each_program(prog, skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0)     /* not loaded: the probe set chose another attach mode */
			continue;
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			return -errno;
		*n += info.recursion_misses;
	}
	return 0;
}

/*
 * "drops": what the kernel lost. As trace.bpf.c guarantees, total equals the
 * records of lost_spans plus spans_unrecorded (one record each); recursion_misses
 * are runs that never got as far as taking a record, and switches_missed context
 * switches the probe did not see (each a span of 0 records in lost_spans, or
 * counted in gaps_unrecorded), counted apart; switches_missed_other those between
 * two tasks not followed (no span).
 */
static int write_trace_json(const struct opts *o, int outfd, const struct features *ft,
			    const struct probe_set *ps, const struct trace_bpf *skel,
			    struct sink *s, __u64 drops, __u64 misses, int ncpus, pid_t root, int code,
			    const struct steal *steal, const struct tracer_threads *tracer,
			    const struct reader *reader)
{
	char tmp[64], buf[16384];
	FILE *f;
	int i;

	f = outfile_create(outfd, "trace.json", tmp, sizeof(tmp));
	if (!f)
		return -errno;
	fprintf(f, "{\"drops\": {\"total\": %llu, \"per_cpu\": [", (unsigned long long)drops);
	for (i = 0; i < ncpus && i < MAX_CPUS; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)skel->bss->drops[i]);
	fprintf(f, "], ");
	write_spans(f, s);
	fprintf(f, ", \"spans_unrecorded\": %llu, \"recursion_misses\": %llu, \"switches_missed\": %llu,"
		" \"switches_missed_other\": %llu, \"gaps_unrecorded\": %llu},\n \"events\": {",
		(unsigned long long)skel->bss->spans_unrecorded, (unsigned long long)misses,
		(unsigned long long)skel->bss->switches_missed,
		(unsigned long long)skel->bss->switches_missed_other, (unsigned long long)skel->bss->gaps_unrecorded);
	for (i = 1; i < REC_TYPE_MAX; i++)
		fprintf(f, "%s\"%s\": %llu", i > 1 ? ", " : "", rec_names[i], (unsigned long long)s->per_type[i]);
	fprintf(f, "},\n \"records\": %llu, \"unknown_records\": %llu,\n", (unsigned long long)s->count,
		(unsigned long long)s->unknown);
	probes_json(ps, buf, sizeof(buf));
	fprintf(f, " \"attach\": %s,\n ", buf);
	write_ids(f, skel, root, s);
	fprintf(f, ",\n \"tracer\": {\"pid\": %d, \"tids\": [", (int)getpid());
	for (i = 0; i < tracer->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", (int)tracer->tids[i]);
	fprintf(f, "], \"reader_tid\": %d, \"reader_policy\": \"%s\", \"reader_raised\": %lu},\n ",
		(int)reader->tid, reader->idle ? "SCHED_IDLE" : reader->idle_error, reader->raises);
	write_tasks(f, skel);
	fprintf(f, ", \"tasks_unnamed\": %llu,\n ", (unsigned long long)skel->bss->tasks_unnamed);
	steal_json(steal, f);
	features_json(ft, buf, sizeof(buf));
	fprintf(f, ",\n \"features\": %s,\n", buf);
	fprintf(f, " \"floor\": %s, \"floor_clock\": %s, \"ringbuf_bytes\": %u, \"root_pid\": %d, \"exit_code\": %d,"
		" \"status\": \"%s\", \"clock\": \"CLOCK_MONOTONIC\"}\n",
		o->floor ? "true" : "false", o->floor_clock ? "true" : "false", ringbuf_bytes(o->ringbuf_mb),
		root, code, status_of(code));
	return outfile_commit(outfd, f, tmp, "trace.json");
}

static int doctor(const struct features *ft)
{
	struct probe_set ps;
	struct btf *btf = btf__load_vmlinux_btf();
	char err[256] = "", buf[16384];
	int rc;

	rc = probes_choose(&ps, NULL, ft, btf, NULL, err, sizeof(err));
	btf__free(btf);
	features_json(ft, buf, sizeof(buf));
	printf("{\"features\": %s,\n \"attach\": ", buf);
	probes_json(&ps, buf, sizeof(buf));
	printf("%s,\n \"possible\": %s, \"why_impossible\": \"", buf,
	       !ft->why_impossible[0] && !rc ? "true" : "false");
	for (const char *m = ft->why_impossible[0] ? ft->why_impossible : err; *m; m++)
		putchar(*m == '"' ? '\'' : *m);
	printf("\"}\n");
	return !ft->why_impossible[0] && !rc ? 0 : 2;
}

/* Open the skeleton, configure it for this run and load it; NULL with errno set.
 * Failures other than the load itself end the loader here. */
static struct trace_bpf *open_and_load(const struct opts *o, const struct features *ft,
				       const struct btf *btf, __u32 rb_bytes, struct probe_set *ps,
				       const char *funcs_off, bool steal_off)
{
	struct trace_bpf *skel = trace_bpf__open();
	char err[512];
	int saved;

	if (!skel)
		fail_setup(NULL, NULL, "failed to open the BPF object: %s", strerror(errno));
	skel->rodata->root_tgid = child;
	skel->rodata->floor_only = o->floor;
	skel->rodata->floor_clock = o->floor_clock;
	/* the main thread's wake-up: past half, it raises the reader (loaders/reader.h) */
	skel->rodata->wakeup_bytes = rb_bytes / 2;
	skel->rodata->steal_source = steal_off ? STEAL_NONE : ft->steal;
	if (bpf_map__set_max_entries(skel->maps.rb, rb_bytes))
		fail_setup(skel, NULL, "failed to size the ring buffer to %u bytes: %s", rb_bytes, strerror(errno));
	if (probes_choose(ps, skel, ft, btf, funcs_off, err, sizeof(err)))
		fail_setup(skel, NULL, "%s", err);
	bpf_program__set_autoload(skel->progs.steal_snapshot, skel->rodata->steal_source != STEAL_NONE);
	if (trace_bpf__load(skel)) {
		saved = errno;
		trace_bpf__destroy(skel);
		errno = saved;
		return NULL;
	}
	return skel;
}

/*
 * Load with every program chosen; if that fails, without the parts kernels
 * disagree on, the newest first: the steal count's readers (the run queue's
 * fields, a task iterator), then the function probes, then both. *steal_off
 * says why the steal count went (why[] holds the text), NULL when it stayed.
 */
static struct trace_bpf *load_with_fallbacks(const struct opts *o, const struct features *ft,
					     const struct btf *btf, __u32 rb_bytes, struct probe_set *ps,
					     const char **steal_off, char *why, size_t whylen)
{
	char funcs_off[200];
	struct trace_bpf *skel;
	bool steal = ft->steal != STEAL_NONE, funcs;

	*steal_off = NULL;
	skel = open_and_load(o, ft, btf, rb_bytes, ps, NULL, false);
	if (skel)
		return skel;
	funcs = probes_any_function(ps);
	snprintf(why, whylen, "the programs reading it failed to load (%s)", strerror(errno));
	snprintf(funcs_off, sizeof(funcs_off), "the programs with function probes failed to load (%s)",
		 strerror(errno));
	if (steal && (skel = open_and_load(o, ft, btf, rb_bytes, ps, NULL, true))) {
		*steal_off = why;
		return skel;
	}
	if (funcs && (skel = open_and_load(o, ft, btf, rb_bytes, ps, funcs_off, false)))
		return skel;
	if (funcs && steal && (skel = open_and_load(o, ft, btf, rb_bytes, ps, funcs_off, true)))
		*steal_off = why;
	return skel;
}

/* --attach: the better tracepoint modes count as absent, so the fallbacks can be compared. */
static void prefer_mode(struct features *ft, const char *mode)
{
	static const enum feature order[] = { F_TP_BTF, F_RAW_TP, F_TRACEPOINT };
	unsigned i;

	for (i = 0; i < 3 && strcmp(feature_names[order[i]], mode); i++) {
		ft->f[order[i]].ok = false;
		snprintf(ft->f[order[i]].detail, sizeof(ft->f[order[i]].detail), "not used: --attach %s", mode);
	}
	if (!ft->f[order[i]].ok)
		die_usage("--attach %s: not available here (%s)", mode, ft->f[order[i]].detail);
}

int main(int argc, char **argv)
{
	struct opts o = {};
	struct features ft;
	struct probe_set ps;
	struct trace_bpf *skel = NULL;
	struct ring_buffer *rb;
	struct sink sink = {};
	struct events_file_header hdr = {};
	struct sigaction sa = {};
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct btf *btf;
	char err[512] = "", first_err[300] = "";
	int release_fd, status = 0, code, ncpus, i, rc, outfd;
	__u64 drops = 0, misses;
	__u32 rb_bytes;
	bool lost_records = false;      /* records that were taken but not written: a failed measurement */
	struct sampler *smp = NULL;     /* --sample-hz */
	int code_sampler = 0;
	struct reader reader;
	struct steal steal;
	const char *steal_off = NULL;   /* why the programs go without the steal count */
	char steal_why[300];
	struct tracer_threads tracer = {};

	parse(argc, argv, &o);
	verbose = o.verbose;
	libbpf_set_print(libbpf_print);
	/* Killing the front end kills the tracer, which kills the driver. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);

	features_probe(&ft);
	if (o.attach)
		prefer_mode(&ft, o.attach);
	if (o.verbose)
		features_print_json(&ft, stderr);
	if (o.doctor)
		return doctor(&ft);
	if (ft.why_impossible[0])
		die_usage("%s", ft.why_impossible);
	setrlimit(RLIMIT_MEMLOCK, &unlimited);   /* kernels before 5.11 charge BPF memory here */

	rc = mkdirs(o.out);
	if (rc)
		die_usage("cannot create %s: %s", o.out, strerror(-rc));
	/* Opened once: every file goes through this descriptor (loaders/outfile.h). */
	outfd = open(o.out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (outfd < 0)
		die_usage("cannot open %s: %s", o.out, strerror(errno));
	sink.fd = outfile_create_final(outfd, "events.bin");
	if (sink.fd < 0)
		die_usage("cannot create %s/events.bin: %s", o.out, strerror(errno));
	sink.buf = malloc(OUTBUF_BYTES);
	if (!sink.buf)
		die_usage("out of memory");
	ncpus = libbpf_num_possible_cpus();
	memcpy(hdr.magic, EVENTS_FILE_MAGIC, sizeof(hdr.magic));
	hdr.version = EVENTS_FILE_VERSION;
	hdr.rec_size = sizeof(struct rec);
	hdr.ncpus = ncpus > 0 ? ncpus : 0;
	hdr.floor = o.floor;
	if (write(sink.fd, &hdr, sizeof(hdr)) != sizeof(hdr))
		die_usage("cannot write %s/events.bin: %s", o.out, strerror(errno));

	sa.sa_handler = on_child;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = NULL;
	sa.sa_sigaction = on_stop;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	child = start_held(&o, o.cmd, &release_fd);

	rb_bytes = ringbuf_bytes(o.ringbuf_mb);
	btf = btf__load_vmlinux_btf();
	skel = load_with_fallbacks(&o, &ft, btf, rb_bytes, &ps, &steal_off, steal_why, sizeof(steal_why));
	btf__free(btf);
	if (!skel)
		fail_setup(NULL, NULL, "failed to load the BPF programs: %s%s", strerror(errno),
			   verbose ? "" : " (-v shows the verifier log)");
	rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), on_sample, &sink, NULL);
	if (!rb)
		fail_setup(skel, NULL, "failed to open the ring buffer: %s", strerror(errno));
	if (ring_buffer__add(rb, bpf_map__fd(skel->maps.lost_rb), on_lost, &sink))
		fail_setup(skel, NULL, "failed to open the ring buffer of lost spans: %s", strerror(errno));
	/* The reader runs (and has its name) before any probe sees it. */
	if (reader_start(&reader, rb, bpf_map__fd(skel->maps.rb), rb_bytes, err, sizeof(err)))
		fail_setup(skel, NULL, "%s", err);
	running_reader = &reader;
	if (steal_begin(&steal, skel, &ft, steal_off, ncpus))
		fail_setup(skel, NULL, "out of memory");
	if (probes_attach(&ps, err, sizeof(err)))
		fail_setup(skel, &ps, "%s", err);
	/* Stack sampler (loaders/sample.c): attached before the driver runs, like the probes. */
	if (o.sample_hz && !(smp = sampler_start(child, o.sample_hz, ft.f[F_TP_BTF].ok, err, sizeof(err))))
		fail_setup(skel, &ps, "%s", err);
	if (stop_signal) {
		/* Ctrl-C before the workload started: nothing was measured, the usual exit of a signal. */
		stop_child();
		sampler_destroy(smp);
		reader_stop(&reader);
		probes_detach(&ps);
		trace_bpf__destroy(skel);
		fprintf(stderr, "ipctrace-loader: interrupted before %s started\n", o.cmd[0]);
		return 128 + stop_signal;
	}

	if (write(release_fd, "g", 1) != 1)
		fail_setup(skel, &ps, "failed to release %s: %s", o.cmd[0], strerror(errno));
	close(release_fd);

	/* Until the driver exits: the reader consumes, this thread raises it when needed. */
	rc = reader_watch(&reader, child, &child_exited, &status);
	if (rc) {
		if (sink.write_errno)
			snprintf(first_err, sizeof(first_err), "writing %s/events.bin failed: %s", o.out,
				 strerror(sink.write_errno));
		else
			snprintf(first_err, sizeof(first_err), "reading the ring buffer failed: %s", strerror(-rc));
		fprintf(stderr, "ipctrace-loader: %s\n", first_err);
	}
	child = -1;
	tracer_threads(&tracer);
	reader_stop(&reader);
	running_reader = NULL;
	/* The driver is gone: detach, then take what is still in the buffer. */
	probes_detach(&ps);
	steal_end(&steal, skel);
	if (smp && sampler_finish(smp, outfd, err, sizeof(err))) {   /* stack sampler: samples.json */
		fprintf(stderr, "ipctrace-loader: %s\n", err);
		if (!first_err[0])
			snprintf(first_err, sizeof(first_err), "%s", err);
		code_sampler = 1;
	}
	sampler_destroy(smp);
	while ((i = ring_buffer__consume(rb)) > 0)
		;
	if ((i = drain_batches(skel, &sink, ncpus))) {
		fprintf(stderr, "ipctrace-loader: reading the staged records failed: %s\n", strerror(-i));
		lost_records = true;
	}
	if (flush(&sink) || sink.write_errno) {
		fprintf(stderr, "ipctrace-loader: writing %s/events.bin failed: %s\n", o.out, strerror(sink.write_errno));
		if (!first_err[0])
			snprintf(first_err, sizeof(first_err), "writing %s/events.bin failed: %s", o.out,
				 strerror(sink.write_errno));
		lost_records = true;
	}
	ring_buffer__free(rb);

	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (rc || code_sampler || lost_records)
		code = code ? code : 1;
	for (i = 0; i < ncpus && i < MAX_CPUS; i++)
		drops += skel->bss->drops[i];
	if ((i = recursion_misses(skel, &misses))) {
		fprintf(stderr, "ipctrace-loader: cannot read the probes' skipped runs: %s\n", strerror(-i));
		code = code ? code : 1;
	}
	hdr.count = sink.count;
	hdr.drops = drops;
	if (pwrite(sink.fd, &hdr, sizeof(hdr), 0) != sizeof(hdr) || close(sink.fd)) {
		fprintf(stderr, "ipctrace-loader: writing %s/events.bin failed: %s\n", o.out, strerror(errno));
		if (!first_err[0])
			snprintf(first_err, sizeof(first_err), "writing %s/events.bin failed: %s", o.out, strerror(errno));
		code = code ? code : 1;
	}
	if ((i = write_trace_json(&o, outfd, &ft, &ps, skel, &sink, drops, misses, ncpus, skel->rodata->root_tgid,
				  code, &steal, &tracer, &reader))) {
		fprintf(stderr, "ipctrace-loader: writing %s/trace.json failed: %s\n", o.out, strerror(-i));
		if (!first_err[0])
			snprintf(first_err, sizeof(first_err), "writing %s/trace.json failed: %s", o.out, strerror(-i));
		code = code ? code : 1;
	}
	close(outfd);
	/* The first failure is what stopped the tracer: said last, where the front end looks. */
	if (first_err[0])
		fprintf(stderr, "ipctrace-loader: %s\n", first_err);
	if (drops)
		fprintf(stderr, "ipctrace-loader: lost %llu events (ring buffer full; try --ringbuf-mb)\n",
			(unsigned long long)drops);
	trace_bpf__destroy(skel);
	steal_free(&steal);
	free(sink.buf);
	free(sink.pids);
	free(sink.spans);
	return code;
}
