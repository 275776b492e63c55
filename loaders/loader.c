// SPDX-License-Identifier: MIT
/*
 * ipctrace-loader --out DIR [--ringbuf-mb N] [--floor[=clock]] [--user UID:GID] [--attach MODE]
 *                 [--sample-hz N] [--duration S] [--comm NAME]... [--usdt BINARY]...
 *                 [--uprobe BINARY:FUNCTION]... [--calibrate BINARY] [--messages] [--live-names] [--only-uid UID] [-v]
 *                 (-- CMD ARGS... | --pid PID[,PID...] | --comm NAME)
 * ipctrace-loader --doctor
 *
 * -- CMD: starts CMD held on a pipe, loads and attaches every probe with CMD's pid as
 * the root of the followed tasks, releases CMD, copies the ring buffer to
 * DIR/events.bin until CMD exits (a reader thread at SCHED_IDLE, loaders/reader.c),
 * then writes DIR/trace.json and exits with CMD's exit status (128 + signal if
 * it was killed). --duration S sends CMD SIGINT after S seconds (SIGKILL 2 s later).
 * --pid: follows running processes instead (every thread of each and of its
 * descendants, marked once every probe is attached), until all of them have exited,
 * --duration S has passed or SIGINT/SIGTERM (exit 0, or 128 + the signal).
 * --comm NAME (up to 4): also follows the processes of that name, running or to come
 * (exec, rename); alone, until --duration or a signal.
 * --usdt BINARY: records ipctrace:iteration_begin/iteration_end (examples/ipctrace_marker.h);
 * --uprobe BINARY:FUNCTION: FUNCTION's entry and return as iteration begin and end.
 * --live-names (ipctrace watch): the tasks the programs name, appended to DIR/tasks.bin once a
 * second as they come (loaders/livenames.h).
 * --calibrate BINARY: the same programs attached to ipcbench's empty calibration windows
 * (workloads/probecal.c), which `ipcbench exec` runs before it becomes CMD.
 * --all-cpus: every task on the machine (system-wide), but this tracer's threads and those of
 * each --exclude-pid PID (the front end), and their children; alone, until --duration or a signal.
 * --syscalls NR[,NR...]: only these system calls' entries and exits are recorded.
 * --only-uid UID (the broker passes it for a sudo user): only tasks whose real, effective,
 * saved and file-system uids are all UID are recorded; a followed task that takes another
 * user's rights (a setuid exec, setuid() and the like) is followed no more, said on stderr
 * and in trace.json "left_trace".
 * Nothing is pinned: every BPF object dies with this process, however it ends.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <linux/close_range.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
#include "doctor.h"
#include "sink.h"
#include "tracejson.h"
#include "marks.h"
#include "follow.h"
#include "livenames.h"

#define MAX_CPUS       IPT_MAX_CPUS

struct opts {
	const char *out;
	double ringbuf_mb;
	bool floor, floor_clock, doctor, verbose;
	bool messages;              /* --messages: MSG records (what each message carries) */
	bool live_names;            /* --live-names: DIR/tasks.bin as the tasks map grows (livenames.h) */
	const char *attach;         /* --attach MODE: the tracepoint mode to use, NULL = the best */
	unsigned int sample_hz;     /* stack sampler (loaders/sample.c), 0 = off */
	bool as_user;               /* --user: CMD runs as this uid/gid, the loader stays root */
	uid_t uid;
	gid_t gid;
	bool close_fds;             /* --close-fds: CMD inherits only 0-2 and the --inherit-fd ones */
	int inherit[8];             /* --inherit-fd N */
	int ninherit;
	long comm_uid;              /* --comm-uid UID: --comm follows only this user's tasks, -1 = any */
	long only_uid;              /* --only-uid UID: only this user's tasks are recorded, -1 = any */
	char **cmd;                 /* -- CMD, or NULL */
	pid_t pids[64];             /* --pid */
	int npids;
	char comms[FOLLOW_COMM_MAX][16];    /* --comm */
	int ncomms;
	double duration;            /* --duration S, 0 = none */
	bool all;                   /* --all-cpus: every task but the tracer's */
	pid_t exclude[8];           /* --exclude-pid: the front end's processes, not followed with --all-cpus */
	int nexclude;
	bool syscall_filter;        /* --syscalls */
	__u64 syscall_mask[SYSCALL_MASK_WORDS];
	struct marks marks;         /* --usdt, --uprobe */
};

extern char **environ;

static volatile sig_atomic_t child_exited, stop_signal;
static int stop_fd = -1;                /* eventfd: a stop signal came (the watch's wake-up) */
static pid_t child = -1;
static pid_t root = -1;                 /* CMD, the first --pid, or none (--comm alone) */
static struct marks *attached_marks;    /* detached by fail_setup */
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
	uint64_t one = 1;
	int saved = errno;

	stop_signal = sig;
	if (child > 0 && si && si->si_code == SI_USER)
		kill(child, sig);
	if (stop_fd >= 0)
		(void)!write(stop_fd, &one, sizeof(one));
	errno = saved;
}

static void on_child(int sig)
{
	child_exited = 1;
}

/* "UID:GID" -> 0, or -1 */
static int parse_ids(const char *text, uid_t *uid, gid_t *gid)
{
	unsigned long u, g = ULONG_MAX;
	char *colon, *end = NULL;

	errno = 0;
	u = strtoul(text, &colon, 10);
	if (*colon == ':')
		g = strtoul(colon + 1, &end, 10);
	if (errno || colon == text || *colon != ':' || end == colon + 1 || *end || u >= UINT_MAX || g >= UINT_MAX)
		return -1;
	*uid = u;
	*gid = g;
	return 0;
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
		{ "pid", required_argument, NULL, 'p' },
		{ "comm", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'D' },
		{ "usdt", required_argument, NULL, 'U' },
		{ "uprobe", required_argument, NULL, 'P' },
		{ "calibrate", required_argument, NULL, 'C' },
		{ "owner", required_argument, NULL, 'O' },
		{ "close-fds", no_argument, NULL, 'X' },
		{ "inherit-fd", required_argument, NULL, 'I' },
		{ "comm-uid", required_argument, NULL, 'K' },
		{ "only-uid", required_argument, NULL, 'Q' },
		{ "messages", no_argument, NULL, 'M' },
		{ "live-names", no_argument, NULL, 'L' },
		{ "all-cpus", no_argument, NULL, 'A' },
		{ "exclude-pid", required_argument, NULL, 'E' },
		{ "syscalls", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	o->ringbuf_mb = 64;
	o->comm_uid = -1;
	o->only_uid = -1;
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
		case 'M': o->messages = true; break;
		case 'L': o->live_names = true; break;
		case 'A': o->all = true; break;
		case 'E': {
			long pid;

			errno = 0;
			pid = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || pid < 1 || pid >= (1L << 22))
				die_usage("--exclude-pid wants a process id, not '%s'", optarg);
			if (o->nexclude == (int)(sizeof(o->exclude) / sizeof(o->exclude[0])))
				die_usage("at most %d --exclude-pid", o->nexclude);
			o->exclude[o->nexclude++] = pid;
			break;
		}
		case 'S': {   /* --syscalls NR[,NR...]: numbers (the front end resolves names) */
			char *p = optarg;

			do {
				long nr;

				errno = 0;
				nr = strtol(p, &end, 10);
				if (errno || end == p || (*end && *end != ',') || nr < 0 || nr >= SYSCALL_MASK_WORDS * 64)
					die_usage("--syscalls wants system call numbers, NR[,NR...] below %d, not '%s'",
						  SYSCALL_MASK_WORDS * 64, optarg);
				o->syscall_mask[nr / 64] |= 1ull << (nr % 64);
				p = end + 1;
			} while (*end);
			o->syscall_filter = true;
			break;
		}
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
		case 'u':
			if (parse_ids(optarg, &o->uid, &o->gid))
				die_usage("--user wants UID:GID, not '%s'", optarg);
			o->as_user = true;
			break;
		case 'O': {   /* --owner UID:GID: every file made is given to them at once */
			uid_t ouid;
			gid_t ogid;

			if (parse_ids(optarg, &ouid, &ogid))
				die_usage("--owner wants UID:GID, not '%s'", optarg);
			outfile_set_owner(ouid, ogid);
			break;
		}
		case 'X': o->close_fds = true; break;
		case 'I':
			errno = 0;
			if (o->ninherit == (int)(sizeof(o->inherit) / sizeof(o->inherit[0])))
				die_usage("at most 8 --inherit-fd");
			o->inherit[o->ninherit] = (int)strtol(optarg, &end, 10);
			if (errno || *end || o->inherit[o->ninherit] < 3)
				die_usage("--inherit-fd wants a descriptor above 2, not '%s'", optarg);
			o->ninherit++;
			break;
		case 'K':
			errno = 0;
			o->comm_uid = strtol(optarg, &end, 10);
			if (errno || *end || o->comm_uid < 0 || o->comm_uid >= UINT_MAX)
				die_usage("--comm-uid wants a user id, not '%s'", optarg);
			break;
		case 'Q':
			errno = 0;
			o->only_uid = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || o->only_uid < 0 || o->only_uid >= ONLY_UID_NONE)
				die_usage("--only-uid wants a user id, not '%s'", optarg);
			break;
		case 'p': {   /* --pid PID[,PID...], repeatable */
			char *p = optarg;

			do {
				long pid;

				errno = 0;
				pid = strtol(p, &end, 10);
				if (errno || end == p || (*end && *end != ',') || pid < 1 || pid >= (1L << 22))
					die_usage("--pid wants process ids, PID[,PID...], not '%s'", optarg);
				if (o->npids == (int)(sizeof(o->pids) / sizeof(o->pids[0])))
					die_usage("at most %d --pid processes", o->npids);
				o->pids[o->npids++] = pid;
				p = end + 1;
			} while (*end);
			break;
		}
		case 'c':   /* --comm NAME: the kernel keeps 15 characters of a name */
			if (!optarg[0])
				die_usage("--comm wants a command name, not ''");
			if (o->ncomms == FOLLOW_COMM_MAX)
				die_usage("at most %d --comm", FOLLOW_COMM_MAX);
			snprintf(o->comms[o->ncomms++], sizeof(o->comms[0]), "%s", optarg);
			break;
		case 'D':
			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->duration > 0) || o->duration > 1e7)
				die_usage("--duration wants seconds, more than 0, not '%s'", optarg);
			break;
		case 'U':
		case 'P': {
			char err[PATH_MAX + 100];

			if (marks_add(&o->marks, c == 'U', optarg, err, sizeof(err)))
				die_usage("%s", err);
			break;
		}
		case 'C':   /* --calibrate BINARY: ipcbench, whose `exec` runs the probe calibration */
			if (!optarg[0])
				die_usage("--calibrate wants a BINARY, not ''");
			o->marks.calibrate = optarg;
			break;
		default:
			die_usage("%s '%s'; usage: ipctrace-loader --out DIR [--ringbuf-mb N] [--floor[=clock]] [--sample-hz N] [--user UID:GID] [--attach MODE] [--duration S] [--messages] [--live-names] [--comm NAME]... [--usdt BINARY]... [--uprobe BINARY:FUNCTION]... [--calibrate BINARY] [--syscalls NR[,NR...]] [--exclude-pid PID]... [--only-uid UID] [-v] (-- CMD ARGS... | --pid PID[,PID...] | --comm NAME | --all-cpus) | --doctor",
				  optopt && strchr("orsuapcDUPCESQ", optopt) ? "missing value of" : "unknown option", argv[optind - 1]);
		}
	}
	if (o->doctor)
		return;
	if (!o->out)
		die_usage("--out DIR is required");
	if (optind < argc)
		o->cmd = argv + optind;
	if (!o->cmd && !o->npids && !o->ncomms && !o->all)
		die_usage("no command to trace (ipctrace-loader --out DIR -- CMD ARGS..., --pid PID, --comm NAME or --all-cpus)");
	if (o->all && (o->npids || o->ncomms))
		die_usage("--all-cpus follows every task: no --pid or --comm with it");
	if (!o->cmd && o->as_user)
		die_usage("--user is for -- CMD (it runs CMD as that user)");
	if (o->only_uid >= 0 && o->as_user && (long)o->uid != o->only_uid)
		die_usage("--only-uid %ld and --user %u: CMD would run as a user whose tasks are not recorded",
			  o->only_uid, (unsigned)o->uid);
}

/*
 * --only-uid: the system calls that change a task's uids or capabilities, after whose exit the
 * programs check its credentials again; by this architecture's numbers, from the kernel's UAPI
 * headers that tools/gen-syscalls reads for analysis/store/syscalls.py (trace.json
 * "only_uid.calls" names them, and a test compares the two).
 */
static const struct cred_call cred_calls[] = {
	{ "setuid", __NR_setuid }, { "setgid", __NR_setgid }, { "setreuid", __NR_setreuid },
	{ "setregid", __NR_setregid }, { "setresuid", __NR_setresuid }, { "setresgid", __NR_setresgid },
	{ "setfsuid", __NR_setfsuid }, { "setfsgid", __NR_setfsgid }, { "capset", __NR_capset },
};

/* --pid: every process there before anything is loaded. */
static void check_pids(const struct opts *o)
{
	for (int i = 0; i < o->npids; i++)
		if (kill(o->pids[i], 0) && errno == ESRCH)
			die_usage("pid %d does not exist", (int)o->pids[i]);
}

/* --all-cpus: every thread of this process and of each --exclude-pid marked as the tracer's;
 * each CPU's task followed from now on unless it is one of them (or idle). */
static void exclude_tracer(struct trace_bpf *skel, const struct opts *o)
{
	size_t limit = sizeof(skel->bss->followed);

	follow_mark_threads(skel, getpid(), FOLLOW_EXCLUDED);
	for (int i = 0; i < o->nexclude; i++)
		follow_mark_threads(skel, o->exclude[i], FOLLOW_EXCLUDED);
	for (int i = 0; i < MAX_CPUS; i++) {
		__u32 tid = (__u32)skel->bss->cur[i].id;
		__u8 mark = tid < limit ? skel->bss->followed[tid] : FOLLOW_EXCLUDED;

		/* --only-uid: the tasks follow_scan_uid found to be the user's only */
		if (tid && mark != FOLLOW_EXCLUDED && (o->only_uid < 0 || mark == FOLLOW_YES))
			skel->bss->cur[i].followed = 1;
	}
}

/* --only-uid: the tasks that took another user's rights (the programs' left map), in time
 * order, each said on stderr once the trace is over; n of them into *out (malloc'd). */
static int cmp_left(const void *a, const void *b)
{
	__u64 x = ((const struct left_entry *)a)->l.ts, y = ((const struct left_entry *)b)->l.ts;

	return x < y ? -1 : x > y;
}

static struct left_entry *read_left(const struct trace_bpf *skel, int *n)
{
	int fd = bpf_map__fd(skel->maps.left);
	struct left_entry *all = calloc(LEFT_MAX, sizeof(*all));
	__u32 key, next;
	bool started = false;

	*n = 0;
	while (all && *n < LEFT_MAX && !bpf_map_get_next_key(fd, started ? &key : NULL, &next)) {
		started = true;
		key = next;
		if (!bpf_map_lookup_elem(fd, &key, &all[*n].l))
			all[(*n)++].tid = key;
	}
	if (*n)
		qsort(all, *n, sizeof(*all), cmp_left);
	return all;
}

static void say_left(const struct left_entry *left, int n, __u64 total)
{
	for (int i = 0; i < n; i++) {
		char comm[sizeof(left[i].l.comm) + 1] = "";
		char thread[32] = "";

		memcpy(comm, left[i].l.comm, sizeof(left[i].l.comm));
		for (char *c = comm; *c; c++)      /* one line whatever the name holds */
			if ((unsigned char)*c < 0x20)
				*c = '?';
		if (left[i].tid != left[i].l.pid)
			snprintf(thread, sizeof(thread), " thread %u", left[i].tid);
		fprintf(stderr, "ipctrace-loader: pid %u%s (%s) took another user's rights (%s) and is no longer traced\n",
			left[i].l.pid, thread, comm, left_why_name(left[i].l.why));
	}
	if (total > (__u64)n)
		fprintf(stderr, "ipctrace-loader: and %llu more times a task took another user's rights\n",
			(unsigned long long)(total - n));
}

/* Once a second while tracing: the records lost so far into events.bin's header, where the
 * front end's live line reads them (the count is written at the end), and with --live-names
 * the tasks named since into tasks.bin. */
struct live_drops {
	int fd, ncpus;
	const struct trace_bpf *skel;
	struct live_names *names;       /* or NULL */
};

static void write_live_drops(void *arg)
{
	const struct live_drops *l = arg;
	__u64 drops = 0;

	for (int i = 0; i < l->ncpus && i < MAX_CPUS; i++)
		drops += __atomic_load_n(&l->skel->bss->drops[i], __ATOMIC_RELAXED);
	(void)!pwrite(l->fd, &drops, sizeof(drops), offsetof(struct events_file_header, drops));
	if (l->names)
		live_names_tick(l->names);
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
	int p[2], ready[2];
	pid_t pid;
	char go;

	if (pipe2(p, O_CLOEXEC) || pipe2(ready, O_CLOEXEC))
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
		/* the ids are CMD's now: the probes (--only-uid's credential checks) come after */
		close(ready[0]);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		close(ready[1]);
		close(p[1]);
		if (read(p[0], &go, 1) != 1)
			_exit(2);
		/* nothing of ipctrace's own settings (IPCTRACE_BTF_PATH...: ours, read above) */
		for (char **e = environ; *e;) {
			if (!strncmp(*e, "IPCTRACE_", 9)) {
				char name[128];

				snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
				unsetenv(name);
			} else {
				e++;
			}
		}
		/* a traced command of the user's gets none of our descriptors (the results
		 * directory, the user's binaries): only 0-2 and what --inherit-fd names */
		if (o->close_fds) {
			if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC))
				_exit(2);
			for (int i = 0; i < o->ninherit; i++)
				fcntl(o->inherit[i], F_SETFD, 0);
		}
		execvp(cmd[0], cmd);
		fprintf(stderr, "ipctrace-loader: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(2);
	}
	close(p[0]);
	close(ready[1]);
	/* EOF: the child is gone (it said why), which the run finds when it releases it */
	while (read(ready[0], &go, 1) < 0 && errno == EINTR)
		;
	close(ready[0]);
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
	if (attached_marks)
		marks_detach(attached_marks);
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
	/* no root (--comm alone): a tid no task has */
	skel->rodata->root_tgid = root > 0 ? (__u32)root : ~0u;
	for (int i = 0; i < o->ncomms; i++)
		memcpy((char *)skel->rodata->follow_comm[i], o->comms[i], sizeof(o->comms[i]));
	skel->rodata->follow_comms = o->ncomms;
	skel->rodata->follow_comm_uid = o->comm_uid < 0 ? (__u32)-1 : (__u32)o->comm_uid;
	skel->rodata->floor_only = o->floor;
	skel->rodata->floor_clock = o->floor_clock;
	skel->rodata->record_msgs = o->messages;
	skel->rodata->follow_all = o->all;
	if (o->only_uid >= 0) {
		skel->rodata->only_uid = (__u32)o->only_uid;
		for (size_t i = 0; i < sizeof(cred_calls) / sizeof(cred_calls[0]); i++) {
			long nr = cred_calls[i].nr;

			if (nr >= 0 && nr < SYSCALL_MASK_WORDS * 64)
				((__u64 *)skel->rodata->cred_syscalls)[nr / 64] |= 1ull << (nr % 64);
		}
	}
	skel->rodata->syscall_filter = o->syscall_filter;
	memcpy((void *)skel->rodata->syscall_mask, o->syscall_mask, sizeof(o->syscall_mask));
	/* the main thread's wake-up: past half, it raises the reader (loaders/reader.h) */
	skel->rodata->wakeup_bytes = rb_bytes / 2;
	skel->rodata->steal_source = steal_off ? STEAL_NONE : ft->steal;
	if (bpf_map__set_max_entries(skel->maps.rb, rb_bytes))
		fail_setup(skel, NULL, "failed to size the ring buffer to %u bytes: %s", rb_bytes, strerror(errno));
	if (probes_choose(ps, skel, ft, btf, funcs_off, err, sizeof(err)))
		fail_setup(skel, NULL, "%s", err);
	marks_choose(&o->marks, skel);
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
	int release_fd = -1, status = 0, code, ncpus, i, rc, outfd;
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
	struct follow follow = {};
	struct watch watch = {};
	struct live_drops live_drops;
	struct live_names live_names = { .fd = -1 };
	struct left_entry *left = NULL;  /* --only-uid */
	const char *mode;

	parse(argc, argv, &o);
	check_pids(&o);
	if (marks_check(&o.marks, err, sizeof(err)))
		die_usage("%s", err);
	mode = o.all ? "all" : o.cmd ? "command" : o.npids ? "pid" : "comm";
	follow.roots = o.pids;
	follow.nroots = o.npids;
	follow.ncomms = o.ncomms;
	follow.comm_uid = o.comm_uid;
	follow.only_uid = o.only_uid;
	memcpy(follow.comms, o.comms, sizeof(follow.comms));
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
	sink.buf = malloc(SINK_BUF_BYTES);
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

	stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sa.sa_handler = on_child;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = NULL;
	sa.sa_sigaction = on_stop;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (o.cmd)
		root = child = start_held(&o, o.cmd, &release_fd);
	else if (o.npids)
		root = o.pids[0];

	rb_bytes = ringbuf_bytes(o.ringbuf_mb);
	btf = btf__load_vmlinux_btf();
	skel = load_with_fallbacks(&o, &ft, btf, rb_bytes, &ps, &steal_off, steal_why, sizeof(steal_why));
	btf__free(btf);
	if (!skel)
		fail_setup(NULL, NULL, "failed to load the BPF programs: %s%s", strerror(errno),
			   verbose ? "" : " (-v shows the verifier log)");
	rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), sink_on_sample, &sink, NULL);
	if (!rb)
		fail_setup(skel, NULL, "failed to open the ring buffer: %s", strerror(errno));
	if (ring_buffer__add(rb, bpf_map__fd(skel->maps.lost_rb), sink_on_lost, &sink))
		fail_setup(skel, NULL, "failed to open the ring buffer of lost spans: %s", strerror(errno));
	/* The reader runs (and has its name) before any probe sees it. */
	if (reader_start(&reader, rb, bpf_map__fd(skel->maps.rb), rb_bytes, err, sizeof(err)))
		fail_setup(skel, NULL, "%s", err);
	running_reader = &reader;
	if (steal_begin(&steal, skel, &ft, steal_off, ncpus))
		fail_setup(skel, NULL, "out of memory");
	/* --all-cpus: the tracer's own tasks are left out, marked before the probes attach and
	 * again after (a thread started in between); from then on the fork probe marks theirs. */
	if (o.all)
		exclude_tracer(skel, &o);
	/* The markers first: a function that is not there ends the run before the rest attaches. */
	attached_marks = &o.marks;
	if (marks_attach(&o.marks, skel, err, sizeof(err)))
		fail_setup(skel, NULL, "%s", err);
	if (probes_attach(&ps, err, sizeof(err)))
		fail_setup(skel, &ps, "%s", err);
	if (probes_check_silent(&ps, err, sizeof(err)))
		fail_setup(skel, &ps, "%s", err);
	/* Stack sampler (loaders/sample.c): attached before the driver runs, like the probes. */
	if (o.sample_hz && !(smp = sampler_start(root, o.sample_hz, ft.f[F_TP_BTF].ok,
							       o.only_uid < 0 ? ONLY_UID_NONE : (unsigned)o.only_uid,
							       err, sizeof(err))))
		fail_setup(skel, &ps, "%s", err);
	/* --pid, --comm: the tasks already running, once every probe is attached; then again for
	 * those that forked between the first look and the fork tracepoint's first run. */
	if (o.npids || o.ncomms) {
		for (i = 0, rc = 0; i < 2 && !rc; i++)
			rc = follow_scan(&follow, skel, smp);
		if (rc)
			fail_setup(skel, &ps, "cannot read /proc: %s", strerror(-rc));
	}
	/* --all-cpus --only-uid: whose each running task is, read once every probe is attached (from
	 * then on the fork, exec and credential probes keep it), then again for those forked
	 * between the first look and the fork tracepoint's first run. */
	if (o.all && o.only_uid >= 0) {
		for (i = 0, rc = 0; i < 2 && !rc; i++)
			rc = follow_scan_uid(skel, o.only_uid);
		if (rc)
			fail_setup(skel, &ps, "cannot read /proc: %s", strerror(-rc));
	}
	if (o.all)
		exclude_tracer(skel, &o);
	if (stop_signal && o.cmd) {
		/* Ctrl-C before the workload started: nothing was measured, the usual exit of a signal. */
		stop_child();
		sampler_destroy(smp);
		reader_stop(&reader);
		probes_detach(&ps);
		marks_detach(&o.marks);
		trace_bpf__destroy(skel);
		fprintf(stderr, "ipctrace-loader: interrupted before %s started\n", o.cmd[0]);
		return 128 + stop_signal;
	}

	if (o.cmd) {
		if (write(release_fd, "g", 1) != 1)
			fail_setup(skel, &ps, "failed to release %s: %s", o.cmd[0], strerror(errno));
		close(release_fd);
	}

	/* Until the driver exits (or the --pid processes, --duration, a signal): the reader
	 * consumes, this thread raises it when needed. */
	watch.child = child;
	watch.child_exited = &child_exited;
	watch.roots = o.pids;
	watch.nroots = o.npids;
	watch.duration = o.duration;
	watch.stop_fd = stop_fd;
	live_drops = (struct live_drops){ sink.fd, ncpus, skel, NULL };
	if (o.live_names) {
		rc = live_names_open(&live_names, outfd, bpf_map__fd(skel->maps.tasks),
				     bpf_map__fd(skel->maps.tasks_news), &skel->bss->tasks_news_lost,
				     bpf_map__max_entries(skel->maps.tasks));
		if (rc)
			fprintf(stderr, "ipctrace-loader: cannot create %s/tasks.bin: %s (tasks are named at the end)\n",
				o.out, strerror(-rc));
		else
			live_drops.names = &live_names;
	}
	watch.tick = write_live_drops;
	watch.tick_arg = &live_drops;
	rc = reader_watch(&reader, &watch);
	status = watch.status;
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
	marks_detach(&o.marks);
	live_names_tick(&live_names);   /* the last ones, as trace.json names them */
	live_names_close(&live_names);
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
	if ((i = sink_drain_batches(skel, &sink, ncpus))) {
		fprintf(stderr, "ipctrace-loader: reading the staged records failed: %s\n", strerror(-i));
		lost_records = true;
	}
	if (sink_flush(&sink) || sink.write_errno) {
		fprintf(stderr, "ipctrace-loader: writing %s/events.bin failed: %s\n", o.out, strerror(sink.write_errno));
		if (!first_err[0])
			snprintf(first_err, sizeof(first_err), "writing %s/events.bin failed: %s", o.out,
				 strerror(sink.write_errno));
		lost_records = true;
	}
	ring_buffer__free(rb);

	if (o.cmd)
		code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	else
		code = watch.stopped_by == STOPPED_BY_SIGNAL && stop_signal ? 128 + stop_signal : 0;
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
	static const char *const stopped_names[] = { "exit", "duration", "signal" };
	struct trace_facts facts = { o.floor, o.floor_clock, rb_bytes, mode, stopped_names[watch.stopped_by],
				     follow.procs, follow.nprocs, &o.marks, .only_uid = o.only_uid,
				     .cred_calls = cred_calls, .ncred_calls = sizeof(cred_calls) / sizeof(cred_calls[0]) };

	if (o.only_uid >= 0) {      /* the tasks that took another user's rights: one line each */
		facts.left = left = read_left(skel, &facts.nleft);
		facts.left_total = skel->bss->left_total;
		say_left(facts.left, facts.nleft, facts.left_total);
	}

	if ((i = write_trace_json(&facts, outfd, &ft, &ps, skel, &sink, drops, misses, ncpus, root,
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
	follow_free(&follow);
	free(left);
	marks_free(&o.marks);
	free(sink.buf);
	free(sink.pids);
	free(sink.spans);
	return code;
}
