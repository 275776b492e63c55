// SPDX-License-Identifier: MIT
/*
 * ipcbench: the workload driver. `list` prints the case table as JSON, `run`
 * measures one workload into DIR/iterations.bin and DIR/workload.json,
 * `selftest` runs the driver's unit tests. Interfaces: docs/DESIGN.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "container.h"
#include "driver.h"
#include "json.h"
#include "outfile.h"

#define PROG "ipcbench"

static const char usage_text[] =
	"usage: " PROG " list\n"
	"       " PROG " run NAME --out DIR [--iterations N] [--warmup N] [--runs R] [--size B]\n"
	"                [--cpus A,B | --same-cpu | --cross-cpu | --no-pin] [--mode M]\n"
	"                [--procs] [--fresh] [--containers] [--progress FILE] [--owner UID:GID]\n"
	"                [--inject-peer-spin NS] [--inject-peer-syscalls N]\n"
	"                [--inject-peer-sleep US] [--inject-measuring-spin NS] [--inject-every K]\n"
	"       " PROG " selftest\n"
	"Known costs at known places, for validating the breakdown (workloads with the\n"
	"flag \"inject\" in `" PROG " list`: the two-sided ping-pongs):\n"
	"  --inject-peer-spin NS      the peer spins NS ns in user space (clock reads, no\n"
	"                             syscall) after receiving, before replying\n"
	"  --inject-peer-syscalls N   the peer makes N null syscalls (getppid) before replying\n"
	"  --inject-peer-sleep US     the peer sleeps US us (clock_nanosleep, timer slack\n"
	"                             1 ns) before replying\n"
	"  --inject-measuring-spin NS the measuring side spins NS ns in user space right\n"
	"                             after sending, before it waits for the reply\n"
	"  --inject-every K           only into every K-th message of each side, counted\n"
	"                             from the first (warm-up included): message m gets it\n"
	"                             when m mod K = K - 1 (baseline and injection in one run)\n"
	"Every run first times 200 getppid() calls on the measuring thread (workload.json\n"
	"entry_calibration), for the analysis of traced runs.\n"
	"--owner UID:GID: every file and directory made (DIR, its files, a new --progress FILE)\n"
	"is given to UID:GID as it is made (a workload that runs as root, for a sudo user).\n"
	"Warnings go to DIR/workload.json, not to stderr, which carries only the error line.\n";

static void die_usage(const char *msg)
{
	/* The message quotes arguments as given: a newline in one must not make a second line. */
	fputs(PROG ": ", stderr);
	for (; *msg; msg++)
		fputc((unsigned char)*msg < 0x20 ? '?' : *msg, stderr);
	fputc('\n', stderr);
	exit(WL_FAIL_USAGE);
}

/* ---- run ---- */

static void add_warning(struct run_outcome *out, const char *w)
{
	if (w && *w && out->nwarnings < 3)
		snprintf(out->warnings[out->nwarnings++], sizeof(out->warnings[0]), "%s", w);
}

/* the copy-cost estimate for traced runs whose copy routines cannot be probed */
static struct copy_cal copy_cal;
static int have_copy_cal;
/* the entry-path calibration: timed null syscalls of the measuring thread */
static struct entry_cal entry_cal;
static int have_entry_cal;

/* A stop signal that lands between a loop's wl_stop check and its blocking call
 * would go unnoticed; SIGALRM every 50 ms after it interrupts such a call too. */
#define STOP_NUDGE_US 50000

static void on_stop_signal(int sig)
{
	struct itimerval nudge = { { 0, STOP_NUDGE_US }, { 0, STOP_NUDGE_US } };

	drv_signal = sig;
	wl_stop = 1;
	setitimer(ITIMER_REAL, &nudge, NULL);
}

static void on_nudge(int sig)
{
}

static void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;   /* no SA_RESTART: a blocked read returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_nudge;
	sigaction(SIGALRM, &sa, NULL);
	/* a peer that died must show up as EPIPE, not kill the measuring side */
	signal(SIGPIPE, SIG_IGN);
}

static void stop_nudging(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &off, NULL);
}

static const struct workload *closest(const char *name)
{
	const struct workload *best = NULL;
	size_t best_d = (size_t)-1;

	for (const struct workload *const *w = workloads; *w; w++) {
		const char *t = (*w)->name;
		size_t n = strlen(name), m = strlen(t), row[64], prev, d;

		if (n >= 63 || m >= 63)
			continue;
		for (size_t j = 0; j <= m; j++)
			row[j] = j;
		for (size_t i = 1; i <= n; i++) {
			prev = row[0];
			row[0] = i;
			for (size_t j = 1; j <= m; j++) {
				size_t cur = row[j];

				d = prev + (name[i - 1] != t[j - 1]);
				if (row[j] + 1 < d)
					d = row[j] + 1;
				if (row[j - 1] + 1 < d)
					d = row[j - 1] + 1;
				row[j] = d;
				prev = cur;
			}
		}
		if (row[m] < best_d) {
			best_d = row[m];
			best = *w;
		}
	}
	return best;
}

/*
 * --progress PATH: an existing file is opened as it is (the front end's DIR/.progress, made
 * O_EXCL | O_NOFOLLOW, passed as /proc/self/fd/N or /dev/fd/N of a descriptor we inherit);
 * one that does not exist is made anew (O_EXCL | O_NOFOLLOW) and given to --owner. A regular
 * file only: a FIFO or a device planted there is refused.
 */
static volatile uint64_t *map_progress(const char *path, char *err, size_t len)
{
	struct stat st;
	void *p;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && errno == ENOENT)
		fd = outfile_create_final_rw(AT_FDCWD, path);
	if (fd >= 0 && !fstat(fd, &st) && !S_ISREG(st.st_mode)) {
		close(fd);
		fd = -1;
		errno = EINVAL;
		snprintf(err, len, "cannot use --progress %s: not a regular file", path);
		return NULL;
	}
	if (fd < 0 || fstat(fd, &st) || (st.st_size < 8 && ftruncate(fd, 8))) {
		snprintf(err, len, "cannot use --progress %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(err, len, "cannot map --progress %s: %s", path, strerror(errno));
		return NULL;
	}
	*(volatile uint64_t *)p = 0;
	return p;
}

/* The output directory may exist (the front end creates it and marks it INCOMPLETE; under
 * sudo it passes /proc/self/fd/N of the directory it opened) but must not hold an earlier
 * measurement. Every file is made through the descriptor *dirfd opened here (loaders/outfile.h):
 * a directory made here and every file is --owner's at once. */
static int prepare_out(const char *dir, int *created, int *dirfd, char *err, size_t len)
{
	struct stat st;

	*created = 0;
	*dirfd = -1;
	if (strlen(dir) > 3000) {
		snprintf(err, len, "--out path is too long");
		return WL_FAIL_USAGE;
	}
	if (mkdir(dir, 0755) == 0)
		*created = 1;
	else if (errno != EEXIST) {
		snprintf(err, len, "cannot create --out %s: %s", dir, strerror(errno));
		return WL_FAIL_USAGE;
	}
	*dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd < 0 || fstat(*dirfd, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, len, "--out %s is not a directory", dir);
		return WL_FAIL_USAGE;
	}
	if (*created && outfile_give_dir(*dirfd)) {
		snprintf(err, len, "cannot give --out %s to --owner: %s", dir, strerror(errno));
		return WL_FAIL_USAGE;
	}
	if (access(dir, W_OK | X_OK)) {
		snprintf(err, len, "cannot write into --out %s: %s", dir, strerror(errno));
		return WL_FAIL_USAGE;
	}
	if (fstatat(*dirfd, "iterations.bin", &st, AT_SYMLINK_NOFOLLOW) == 0) {
		snprintf(err, len, "--out %s already holds a measurement (iterations.bin)", dir);
		return WL_FAIL_USAGE;
	}
	return 0;
}

/* What a failed start made: the files (those of this run only: made with O_EXCL), and the
 * directory if it was made here. */
static void remove_out(const char *dir, int dirfd, int created)
{
	if (dirfd >= 0) {
		unlinkat(dirfd, "iterations.bin", 0);
		unlinkat(dirfd, "workload.json", 0);
	}
	if (created)
		rmdir(dir);
}

/* MemAvailable (what can be had without swapping), or all memory on kernels without it. */
static uint64_t available_memory(void)
{
	unsigned long long kib = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	if (kib)
		return (uint64_t)kib << 10;
	return (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
}

static int cmd_run(int argc, char **argv)
{
	struct run_args a;
	struct wl_opts o;
	struct wl_ctx c;
	struct run_outcome out;
	struct iterfile itf = { .fd = -1 };
	const struct workload *w;
	cpu_set_t usable;
	char err[512], warn[256], tag[32], privdir[128];
	unsigned nm;
	int rc = 0, created, r, outfd = -1;
	uint64_t mem = available_memory();

	if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (drv_parse_run(argc, argv, &a, err, sizeof(err)))
		die_usage(err);
	w = drv_find(a.name);
	if (!w) {
		const struct workload *near = closest(a.name);

		snprintf(err, sizeof(err), "unknown workload '%s'%s%s%s (see `" PROG " list`)", a.name,
			 near ? " (closest: '" : "", near ? near->name : "", near ? "')" : "");
		die_usage(err);
	}
	if (drv_check_run(w, &a, mem, err, sizeof(err)))
		die_usage(err);
	memset(&o, 0, sizeof(o));
	o.iterations = a.iterations;
	o.warmup = a.warmup;
	o.runs = (uint32_t)a.runs;
	o.size = a.size;
	o.mode = a.mode;
	o.procs = a.procs;
	o.fresh = a.fresh;
	o.containers = a.containers;
	o.inject = a.inject;
	o.interval_ns = a.interval_us * 1000;
	o.duration_ns = a.duration_s * 1000000000ull;
	o.break_ns = a.break_us * 1000;
	if ((r = drv_usable_cpus(&usable))) {
		snprintf(err, sizeof(err), "cannot read the CPU affinity mask: %s", strerror(-r));
		die_usage(err);
	}
	if (drv_place(w, &a, &usable, &o, warn, sizeof(warn), err, sizeof(err)))
		die_usage(err);
	if ((w->flags & WL_NEEDS_ROOT) && geteuid() != 0) {
		snprintf(err, sizeof(err), "%s needs root (run it with sudo)", w->name);
		die_usage(err);
	}

	memset(&c, 0, sizeof(c));
	memset(&out, 0, sizeof(out));
	c.o = &o;
	c.w = w;
	nm = drv_nmetrics(w);
	add_warning(&out, warn);
	if (a.owner_given)   /* every file made from here on is theirs at once (loaders/outfile.h) */
		outfile_set_owner((uid_t)a.owner_uid, (gid_t)a.owner_gid);
	if (a.progress && !(c.progress = map_progress(a.progress, err, sizeof(err))))
		die_usage(err);
	if (prepare_out(a.out, &created, &outfd, err, sizeof(err))) {
		remove_out(a.out, -1, created);
		die_usage(err);
	}
	if ((r = iterfile_create(&itf, outfd, "iterations.bin", nm))) {
		remove_out(a.out, outfd, created);
		snprintf(err, sizeof(err), "cannot create %.300s/iterations.bin: %s", a.out, strerror(-r));
		die_usage(err);
	}
	if (drv_map_arrays(&c, nm, o.iterations)) {
		remove_out(a.out, outfd, created);
		snprintf(err, sizeof(err), "cannot allocate the timestamp arrays for %llu iterations",
			 (unsigned long long)o.iterations);
		die_usage(err);
	}
	drv_make_tag(tag, sizeof(tag));
	o.tag = tag;
	drv_privdir_path(privdir, sizeof(privdir), tag);
	o.privdir = privdir;
	install_signals();

	if (a.priority) {
		/* threads and peers started from here on inherit the policy */
		struct sched_param sp = { .sched_priority = (int)a.priority };

		if (sched_setscheduler(0, SCHED_FIFO, &sp)) {
			int e = errno;

			remove_out(a.out, outfd, created);
			snprintf(err, sizeof(err), "--priority %llu: cannot run under SCHED_FIFO: %s (it needs root, "
				 "or RLIMIT_RTPRIO of at least that priority)", (unsigned long long)a.priority, strerror(e));
			die_usage(err);
		}
	}

	if ((r = wl_pin(&c, 0, "measuring"))) {
		snprintf(out.error, sizeof(out.error), "cannot pin the measuring thread to CPU %d: %s",
			 o.cpu[0], strerror(-r));
		rc = WL_FAIL_USAGE;
	} else {
		/* on the measuring CPU, before the peer exists: nothing else competes */
		have_copy_cal = copy_calibrate(&copy_cal) == 0;
		/* in this thread, the measuring one, pinned as it measures; traced if the
		 * run is (the loader attached before it started us) */
		have_entry_cal = entry_calibrate(&entry_cal) == 0;
		drv_clear_error();
		r = w->setup(&c);
		if (r == WL_FAIL_USAGE) {
			snprintf(out.error, sizeof(out.error), "%s", *drv_error() ? drv_error() : "setup refused");
			rc = WL_FAIL_USAGE;
		} else if (r && !wl_stop) {
			snprintf(out.error, sizeof(out.error), "%s: setup failed: %s", w->name,
				 *drv_error() ? drv_error() : strerror(r < 0 ? -r : EIO));
			rc = 1;
		}
		for (uint32_t run = 0; !rc && !wl_stop && run < o.runs; run++) {
			uint64_t written, unrecorded;
			int e;

			if (drv_clear_arrays(&c, nm, o.iterations))
				break;
			c.run = run;
			c.done = 0;
			drv_clear_error();
			r = w->run(&c);
			e = iterfile_append_run(&itf, &c, nm, &written, &unrecorded);
			out.iterations_completed += c.done;
			if (e) {
				snprintf(out.error, sizeof(out.error), "cannot write %.200s/iterations.bin: %s", a.out,
					 strerror(-e));
				rc = 1;
			} else if (unrecorded) {
				snprintf(warn, sizeof(warn), "run %u: %llu timed slots were never recorded", run,
					 (unsigned long long)unrecorded);
				add_warning(&out, warn);
			}
			if (!rc && r && !wl_stop) {
				char death[96];

				drv_peer_death(death, sizeof(death));
				snprintf(out.error, sizeof(out.error), "%s: run %u failed after %llu iterations: %s%s%s",
					 w->name, run, (unsigned long long)c.done,
					 *drv_error() ? drv_error() : strerror(r < 0 ? -r : EIO),
					 *death ? "; " : "", death);
				rc = 1;
			}
			if (!rc && (!wl_stop || (wl_ended && !drv_signal)))
				out.runs_completed++;
			if (wl_ended && !c.break_iteration && !drv_signal && run + 1 < o.runs) {
				/* --duration ended this run: the next gets its time too */
				wl_ended = 0;
				wl_stop = 0;
			}
		}
		w->teardown(&c);
	}
	stop_nudging();
	add_warning(&out, c.warning);
	if (c.mode_used[0] == 0 && w->modes) {
		if (a.mode)
			snprintf(c.mode_used, sizeof(c.mode_used), "%s", a.mode);
		else
			snprintf(c.mode_used, sizeof(c.mode_used), "%.*s", (int)strcspn(w->modes, ","), w->modes);
	}
	drv_privdir_remove(privdir);
	iterfile_close(&itf);
	drv_unmap_arrays(&c, nm, o.iterations);

	if (rc == WL_FAIL_USAGE) {
		remove_out(a.out, outfd, created);
		die_usage(out.error);
	}
	if (wl_ended && !drv_signal)
		wl_stop = 0;  /* ended by --duration or --break-at, not interrupted */
	out.status = rc ? "failed" : wl_stop ? "interrupted" : c.break_iteration ? "stopped" : "complete";
	r = write_workload_json(outfd, &c, &a, &out, have_copy_cal ? &copy_cal : NULL,
				have_entry_cal ? &entry_cal : NULL);
	close(outfd);
	if (r) {
		fprintf(stderr, PROG ": cannot write %s/workload.json: %s\n", a.out, strerror(-r));
		return 1;
	}
	if (rc) {
		fprintf(stderr, PROG ": %s\n", out.error);
		return rc;
	}
	if (wl_stop)
		return 128 + (drv_signal ? drv_signal : SIGINT);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		die_usage("no command given (list, run, selftest; --help shows the usage)");
	if (!strcmp(argv[1], "list") && argc == 2)
		return list_json();
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "selftest") && argc == 2)
		return drv_selftest() ? 1 : 0;
	if (!strcmp(argv[1], "peer"))   /* not in the usage: the container's entry point */
		return zmq_container_peer(argc - 2, argv + 2);
	if (!strcmp(argv[1], "hog"))    /* not in the usage: the front end's CPU hog */
		return drv_hog(argc - 2, argv + 2);
	if (!strcmp(argv[1], "exec"))   /* not in the usage: ipctrace trace's start of a program */
		return drv_exec(argc - 2, argv + 2);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "list") || !strcmp(argv[1], "selftest"))
		fprintf(stderr, PROG ": %s takes no arguments\n", argv[1]);
	else
		fprintf(stderr, PROG ": unknown command '%s' (commands: list, run, selftest)\n", argv[1]);
	return WL_FAIL_USAGE;
}
