// SPDX-License-Identifier: MIT
/*
 * ipctrace-broker FRONTEND ARGV...: under sudo, the one process of ipctrace that keeps root.
 *
 * The launcher (./ipctrace) execs it as root when SUDO_UID names another user. It starts the
 * front end (FRONTEND ARGV..., the Python command line) as that user — every uid and gid
 * theirs, their groups, no capabilities, its environment built here — and then only answers
 * the front end's requests on a socket (IPCTRACE_BROKER_FD) until the front end exits, whose
 * exit status it returns. A request is one SOCK_SEQPACKET message:
 *
 *     KIND \0 RTPRIO \0 FD-NUMBERS \0 ARG \0 ARG ...     with descriptors (SCM_RIGHTS):
 *     [reply socket, stdin, stdout, stderr, extra...]
 *
 * KIND is one of the fixed programs below; the arguments are checked against what that
 * program may be asked (tracer: the loader's options, the bounds of a sudo user, --user,
 * --owner and --only-uid forced to the user; driver: a workload that needs root, --owner the
 * user; hog: a CPU and a nice value; doctor; tracefs; clean). The extra descriptors (the
 * results directory, the user's binaries, all opened by the user's process) are given to the
 * program at the numbers FD-NUMBERS lists, so that paths the front end writes as
 * /proc/self/fd/N resolve to what the user opened. Nothing is opened by a path a user chose.
 * On the reply socket: "E<one line>" (refused) or "P<pid>" then "X<wait status>" at its end;
 * the front end writes "S<signal>" (to the program) or "G<signal>" (its process group) there. A reply socket
 * closed early (the front end died) ends its program: SIGTERM, and SIGKILL at our exit.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "broker.h"

#define MAX_JOBS 16
#define MAX_FDS 16
#define MAX_ARGS 256
#define MSG_BYTES 65536

struct job {
	pid_t pid;       /* 0: free */
	int ctl;         /* reply socket */
	int slot_fd;     /* a tracer's hold on one of the user's slots, -1 */
	bool orphaned;   /* its reply socket closed: SIGTERM sent */
	time_t deadline; /* a tracer's end (CLOCK_MONOTONIC s): SUDO_MAX_DURATION_S, then SIGTERM */
};

static uid_t user_uid;
static gid_t user_gid;
static struct passwd user_pw;
static char outdir[PATH_MAX];   /* where this binary, the loader and the driver live */
static char loader[PATH_MAX + 32], driver[PATH_MAX + 32];
static struct job jobs[MAX_JOBS];
static char **user_env;
static char **root_env;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("ipctrace: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static bool parse_id(const char *text, unsigned long *out)
{
	char *end;

	if (!text || !*text || !isdigit((unsigned char)*text))
		return false;
	errno = 0;
	*out = strtoul(text, &end, 10);
	return !errno && !*end && *out < UINT_MAX;
}

/* The environment of what runs as the user and of what runs as root: a few harmless names
 * from sudo's (already reset) environment, the user's own HOME, USER, LOGNAME and SHELL.
 * No LD_*, PYTHON* or IPCTRACE_* setting of anyone's reaches a root program. */
static const char *const kept[] = { "PATH", "TERM", "LANG", "LANGUAGE", "TZ", "COLORTERM", "NO_COLOR",
				    "COLUMNS", "LINES", "DISPLAY", NULL };

static char **make_env(bool front)
{
	extern char **environ;
	char **env = calloc(64, sizeof(*env));
	int n = 0;
	char *s;

	if (!env)
		die("out of memory");
	for (char **e = environ; *e && n < 48; e++) {
		size_t len = strcspn(*e, "=");
		bool keep = !strncmp(*e, "LC_", 3);

		for (int i = 0; kept[i] && !keep; i++)
			keep = strlen(kept[i]) == len && !strncmp(*e, kept[i], len);
		/* The front end may be pointed at a sanitized build (make SANITIZE=1 test). */
		if (front && !strncmp(*e, "IPCTRACE_", 9))
			keep = true;
		if (keep)
			env[n++] = *e;
	}
	if (asprintf(&s, "HOME=%s", user_pw.pw_dir) < 0 || !(env[n++] = s) ||
	    asprintf(&s, "USER=%s", user_pw.pw_name) < 0 || !(env[n++] = s) ||
	    asprintf(&s, "LOGNAME=%s", user_pw.pw_name) < 0 || !(env[n++] = s) ||
	    asprintf(&s, "SHELL=%s", user_pw.pw_shell) < 0 || !(env[n++] = s))
		die("out of memory");
	if (!getenv("PATH"))
		env[n++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	return env;
}

/* All of the user's ids, their groups, and no way back (checked). */
static int become_user(void)
{
	uid_t r, e, s;

	if (initgroups(user_pw.pw_name, user_gid) && setgroups(1, &user_gid))
		return -1;
	if (setresgid(user_gid, user_gid, user_gid) || setresuid(user_uid, user_uid, user_uid))
		return -1;
	if (getresuid(&r, &e, &s) || r != user_uid || e != user_uid || s != user_uid)
		return -1;
	if (user_uid != 0 && setuid(0) == 0)
		return -1;
	return 0;
}

static void reset_signals(void)
{
	sigset_t none;

	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* --- checks of the requests ------------------------------------------------------------ */

static bool is_uint(const char *s, unsigned long max)
{
	unsigned long v;

	return parse_id(s, &v) && v <= max;
}

static bool is_seconds(const char *s, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	return !errno && end != s && !*end && v > 0 && v <= max;
}

/* "/proc/self/fd/N" (or with :FUNCTION after it, for a uprobe) where N is an extra descriptor. */
static bool is_passed_fd(const char *s, const int *targets, int ntargets, bool function)
{
	const char *p = NULL;
	char *end;
	long n;

	if (!strncmp(s, "/proc/self/fd/", 14))
		p = s + 14;
	else if (!strncmp(s, "/dev/fd/", 8))
		p = s + 8;
	if (!p || !isdigit((unsigned char)*p))
		return false;
	n = strtol(p, &end, 10);
	if (function ? (*end != ':' || !end[1] || strchr(end + 1, '/')) : *end)
		return false;
	for (int i = 0; i < ntargets; i++)
		if (targets[i] == n)
			return true;
	return false;
}

/* Every --pid is a process of the user's (all its uids theirs, read from /proc/PID/status). */
static bool users_process(const char *list, char *why, size_t len)
{
	char buf[1024], *save = NULL, *tok;

	if (strlen(list) >= sizeof(buf)) {
		snprintf(why, len, "--pid: too long a list");
		return false;
	}
	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char path[64], line[256];
		unsigned long pid;
		bool ok = false;
		FILE *f;

		if (!parse_id(tok, &pid) || !pid) {
			snprintf(why, len, "--pid %s: not a process id", tok);
			return false;
		}
		snprintf(path, sizeof(path), "/proc/%lu/status", pid);
		f = fopen(path, "re");
		if (!f) {
			snprintf(why, len, "pid %lu does not exist", pid);
			return false;
		}
		while (fgets(line, sizeof(line), f)) {
			unsigned int r, e, s, fs;

			if (sscanf(line, "Uid: %u %u %u %u", &r, &e, &s, &fs) == 4) {
				ok = r == user_uid && e == user_uid && s == user_uid && fs == user_uid;
				break;
			}
		}
		fclose(f);
		if (!ok) {
			snprintf(why, len, "pid %lu is not yours: under sudo ipctrace traces only your own processes", pid);
			return false;
		}
	}
	return true;
}

struct request {
	char kind[16];
	long rtprio;
	int targets[MAX_FDS];
	int ntargets;
	char *argv[MAX_ARGS + 16];
	int argc;
	char *own[8];   /* strings made here, freed after the start */
	int nown;
	bool as_user;   /* started with all of the user's ids (after RLIMIT_RTPRIO is raised) */
};

static int add(struct request *rq, char *arg)
{
	if (rq->argc >= MAX_ARGS + 14)
		return -1;
	rq->argv[rq->argc++] = arg;
	rq->argv[rq->argc] = NULL;
	return 0;
}

static char *own(struct request *rq, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *own(struct request *rq, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (s && rq->nown < 8)
		rq->own[rq->nown++] = s;
	return s;
}

/* The workloads that need root (WL_NEEDS_ROOT in workloads/cases/); a test checks this list
 * against `ipcbench list --json`. Their files are the user's from their creation (--owner). */
static const char *const root_workloads[] = { SUDO_ROOT_WORKLOADS, NULL };

/* args[at] is `run` and args[at + 1] a workload that needs root */
static bool is_root_workload(char **args, int at, int nargs)
{
	if (at + 1 >= nargs || strcmp(args[at], "run"))
		return false;
	for (int i = 0; root_workloads[i]; i++)
		if (!strcmp(args[at + 1], root_workloads[i]))
			return true;
	return false;
}

static bool check_driver(struct request *rq, char **args, int nargs, char *why, size_t len);

/*
 * The tracer's options a front end may ask for (loaders/loader.c), checked one by one;
 * --user, --owner, --comm-uid and --only-uid are ours to set. After "--", the command runs
 * as the user (--user), so it is theirs to choose.
 */
static bool check_tracer(struct request *rq, char **args, int nargs, char *why, size_t len)
{
	bool command = false, comm = false;
	int i;

	add(rq, loader);
	for (i = 0; i < nargs; i++) {
		const char *a = args[i], *v = i + 1 < nargs ? args[i + 1] : NULL;

		if (!strcmp(a, "--")) {
			command = true;
			break;
		}
		if (!strcmp(a, "--messages") || !strcmp(a, "--live-names") || !strcmp(a, "--all-cpus") || !strcmp(a, "--close-fds") ||
		    !strcmp(a, "--floor") || !strcmp(a, "--floor=clock") || !strcmp(a, "-v")) {
			add(rq, args[i]);
			continue;
		}
		if (!v) {
			snprintf(why, len, "tracer option %.40s: not one a front end may give", a);
			return false;
		}
		if (!strcmp(a, "--out")) {
			if (!is_passed_fd(v, rq->targets, rq->ntargets, false)) {
				snprintf(why, len, "--out must be a directory the user opened");
				return false;
			}
		} else if (!strcmp(a, "--usdt") || !strcmp(a, "--uprobe")) {
			if (!is_passed_fd(v, rq->targets, rq->ntargets, a[2] == 'u' && a[3] == 'p')) {
				snprintf(why, len, "%s must name a binary the user opened", a);
				return false;
			}
		} else if (!strcmp(a, "--calibrate")) {
			if (strcmp(v, driver)) {
				snprintf(why, len, "--calibrate takes only ipctrace's driver");
				return false;
			}
		} else if (!strcmp(a, "--ringbuf-mb")) {
			char *end;
			double mb = strtod(v, &end);

			if (*end || end == v || !(mb > 0) || mb > SUDO_MAX_RINGBUF_MB) {
				snprintf(why, len, "--ringbuf-mb %.20s: under sudo at most %d MiB a trace", v,
					 SUDO_MAX_RINGBUF_MB);
				return false;
			}
		} else if (!strcmp(a, "--duration")) {
			if (!is_seconds(v, SUDO_MAX_DURATION_S)) {
				snprintf(why, len, "--duration %.20s: under sudo at most %d s a trace", v,
					 SUDO_MAX_DURATION_S);
				return false;
			}
		} else if (!strcmp(a, "--sample-hz")) {
			if (!is_uint(v, 100000)) {
				snprintf(why, len, "--sample-hz %.20s: 1 to 100000", v);
				return false;
			}
		} else if (!strcmp(a, "--pid")) {
			if (!users_process(v, why, len))
				return false;
		} else if (!strcmp(a, "--comm")) {
			comm = true;
		} else if (!strcmp(a, "--exclude-pid") || !strcmp(a, "--inherit-fd")) {
			if (!is_uint(v, INT_MAX)) {
				snprintf(why, len, "%s %.20s: not a number", a, v);
				return false;
			}
		} else if (!strcmp(a, "--syscalls") || !strcmp(a, "--attach")) {
			/* the loader checks their values; they choose only what is recorded */
		} else {
			snprintf(why, len, "tracer option %.40s: not one a front end may give", a);
			return false;
		}
		add(rq, args[i]);
		add(rq, args[++i]);
	}
	add(rq, "--owner");
	add(rq, own(rq, "%u:%u", user_uid, user_gid));
	if (comm) {
		add(rq, "--comm-uid");
		add(rq, own(rq, "%u", user_uid));
	}
	/* `run` of a workload that needs root, traced: our driver, as root, and only its tasks */
	if (command && i + 2 < nargs && !strcmp(args[i + 1], driver) && is_root_workload(args, i + 2, nargs)) {
		add(rq, "--");
		return check_driver(rq, args + i + 2, nargs - i - 2, why, len);
	}
	add(rq, "--only-uid");
	add(rq, own(rq, "%u", user_uid));
	if (command) {
		add(rq, "--user");
		add(rq, own(rq, "%u:%u", user_uid, user_gid));
		for (; i < nargs; i++)
			if (add(rq, args[i])) {
				snprintf(why, len, "too many arguments");
				return false;
			}
	}
	return true;
}


static bool check_driver(struct request *rq, char **args, int nargs, char *why, size_t len)
{
	if (nargs < 2 || strcmp(args[0], "run")) {
		snprintf(why, len, "the driver is started here only to run a workload");
		return false;
	}
	/* any other workload runs as the user: asked here only for --priority's RLIMIT_RTPRIO */
	rq->as_user = !is_root_workload(args, 0, nargs);
	add(rq, driver);
	for (int i = 0; i < nargs; i++) {
		const char *a = args[i];

		if ((!strcmp(a, "--out") || !strcmp(a, "--progress")) &&
		    (i + 1 >= nargs || !is_passed_fd(args[i + 1], rq->targets, rq->ntargets, false))) {
			snprintf(why, len, "%s must be a file or directory the user opened", a);
			return false;
		}
		if (!strcmp(a, "--owner") || !strncmp(a, "--owner=", 8)) {
			snprintf(why, len, "--owner is the broker's to set");
			return false;
		}
		if (add(rq, args[i])) {
			snprintf(why, len, "too many arguments");
			return false;
		}
	}
	if (!rq->as_user) {
		add(rq, "--owner");
		add(rq, own(rq, "%u:%u", user_uid, user_gid));
	}
	return true;
}

/* ipcbench hog --cpu N [--nice N]: a busy loop of the labs and of validate, at a nice value
 * below 0 (root's to give). */
static bool check_hog(struct request *rq, char **args, int nargs, char *why, size_t len)
{
	if (!(nargs == 3 || nargs == 5) || strcmp(args[0], "hog") || strcmp(args[1], "--cpu") || !is_uint(args[2], 4095) ||
	    (nargs == 5 && (strcmp(args[3], "--nice") || !(is_uint(args[4], 19) ||
							   (args[4][0] == '-' && is_uint(args[4] + 1, 20)))))) {
		snprintf(why, len, "hog takes --cpu N [--nice N] only");
		return false;
	}
	add(rq, driver);
	for (int i = 0; i < nargs; i++)
		add(rq, args[i]);
	return true;
}

/* --- the user's tracer slots: SUDO_MAX_TRACES at once, across all of their brokers ----- */

static int take_slot(char *why, size_t len)
{
	char path[PATH_MAX];

	if (mkdir("/run/ipctrace", 0700) && errno != EEXIST)
		goto none;
	if (mkdir(SLOTS_DIR, 0700) && errno != EEXIST)
		goto none;
	for (int i = 0; i < SUDO_MAX_TRACES; i++) {
		int fd;

		snprintf(path, sizeof(path), SLOTS_DIR "/%u.%d", user_uid, i);
		fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			continue;
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return fd;
		close(fd);
	}
	snprintf(why, len, "you already run %d traces at once (the bound for a sudo user); wait for one to end",
		 SUDO_MAX_TRACES);
	return -1;
none:
	snprintf(why, len, "cannot keep the count of traces in " SLOTS_DIR ": %s", strerror(errno));
	return -1;
}

/* --- requests without a program ---------------------------------------------------------- */

/* tracefs at its place if it is not mounted (bench reads the syscall tracepoints' ids). */
static void do_tracefs(int ctl)
{
	char reply[256];
	struct stat st;

	if (!stat("/sys/kernel/tracing/events", &st) ||
	    !mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL))
		snprintf(reply, sizeof(reply), "X0");
	else
		snprintf(reply, sizeof(reply), "Ecannot mount tracefs on /sys/kernel/tracing: %s", strerror(errno));
	send(ctl, reply, strlen(reply), MSG_NOSIGNAL);
}

static bool dead_tag(const char *name, pid_t *pid)
{
	unsigned long p;
	char *end;
	int hex = 0;

	if (strncmp(name, "ipctrace-", 9))
		return false;
	errno = 0;
	p = strtoul(name + 9, &end, 10);
	if (errno || end == name + 9 || *end != '-' || !p || p > INT_MAX)
		return false;
	for (end++; isxdigit((unsigned char)*end) && !isupper((unsigned char)*end); end++)
		hex++;
	if (hex != 8 || (*end && *end != '-'))
		return false;
	*pid = (pid_t)p;
	return kill(*pid, 0) && errno == ESRCH;
}

static int remove_tree(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *e;

	if (fd < 0)
		return unlinkat(parent, name, 0);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			remove_tree(dirfd(d), e->d_name);
	closedir(d);
	return unlinkat(parent, name, AT_REMOVEDIR);
}

/*
 * What root's workloads of dead runs left: objects named by a run's tag (workloads/driver.c)
 * whose process is gone, owned by root (the user removes their own) — never another user's.
 * One line per object on the reply socket ("Rremoved PATH" / "Fcannot remove PATH: why").
 */
static void do_clean(int ctl)
{
	static const char *const places[] = { "/dev/shm", "/dev/mqueue", "/tmp", "/run", NULL };
	char line[PATH_MAX + 64];

	for (int i = 0; places[i]; i++) {
		int dfd = open(places[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct dirent *e;
		DIR *d;

		if (dfd < 0)
			continue;
		d = fdopendir(dfd);
		if (!d) {
			close(dfd);
			continue;
		}
		while ((e = readdir(d))) {
			struct stat st;
			pid_t pid;

			if (!dead_tag(e->d_name, &pid) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
			    st.st_uid != 0)
				continue;
			if (remove_tree(dirfd(d), e->d_name) && errno != ENOENT)
				snprintf(line, sizeof(line), "Fcannot remove %s/%s: %s", places[i], e->d_name,
					 strerror(errno));
			else
				snprintf(line, sizeof(line), "Rremoved %s/%s", places[i], e->d_name);
			send(ctl, line, strlen(line), MSG_NOSIGNAL);
		}
		closedir(d);
	}
	send(ctl, "X0", 2, MSG_NOSIGNAL);
}

/* --- starting a program ------------------------------------------------------------------ */

static struct job *free_job(void)
{
	for (int i = 0; i < MAX_JOBS; i++)
		if (!jobs[i].pid)
			return &jobs[i];
	return NULL;
}

/* In the child: stdio and the extra descriptors at their numbers, nothing else open. */
static void place_fds(const int *fds, int nfds, const struct request *rq)
{
	int high[MAX_FDS];

	for (int i = 1; i < nfds; i++) {
		high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 1000);
		if (high[i] < 0)
			_exit(126);
	}
	for (int i = 1; i < 4 && i < nfds; i++)
		if (dup2(high[i], i - 1) < 0)
			_exit(126);
	for (int i = 4; i < nfds; i++)
		if (dup2(high[i], rq->targets[i - 4]) < 0)
			_exit(126);
	for (int fd = 3; fd < 1000; fd++) {
		bool keep = false;

		for (int i = 0; i < rq->ntargets; i++)
			keep |= rq->targets[i] == fd;
		if (!keep)
			close(fd);
	}
	close_range(1000, ~0U, 0);
}

static void start(struct request *rq, const int *fds, int nfds, int slot)
{
	struct job *job = free_job();
	char reply[64];
	pid_t pid;

	if (!job) {
		send(fds[0], "Etoo many programs at once", 26, MSG_NOSIGNAL);
		return;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(reply, sizeof(reply), "Ecannot start: %s", strerror(errno));
		send(fds[0], reply, strlen(reply), MSG_NOSIGNAL);
		return;
	}
	if (pid == 0) {
		/* its own process group: a terminal's Ctrl-C reaches the front end, which passes it on */
		setpgid(0, 0);
		reset_signals();
		if (rq->rtprio > 0) {
			struct rlimit rl = { (rlim_t)rq->rtprio, (rlim_t)rq->rtprio };
			struct rlimit old;

			if (!getrlimit(RLIMIT_RTPRIO, &old) && old.rlim_cur > rl.rlim_cur)
				rl = old;
			setrlimit(RLIMIT_RTPRIO, &rl);
		}
		place_fds(fds, nfds, rq);
		if (rq->as_user && become_user())
			_exit(126);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execve(rq->argv[0], rq->argv, rq->as_user ? user_env : root_env);
		fprintf(stderr, "ipctrace: cannot run %s: %s\n", rq->argv[0], strerror(errno));
		_exit(127);
	}
	job->pid = pid;
	job->ctl = dup(fds[0]);
	job->slot_fd = slot;
	job->orphaned = false;
	job->deadline = 0;
	if (slot >= 0) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		job->deadline = now.tv_sec + SUDO_MAX_DURATION_S + 5;
	}
	snprintf(reply, sizeof(reply), "P%d", (int)pid);
	send(job->ctl, reply, strlen(reply), MSG_NOSIGNAL);
}

static void handle_request(int sock)
{
	static char buf[MSG_BYTES];
	char cbuf[CMSG_SPACE(sizeof(int) * MAX_FDS)], why[512] = "";
	struct iovec iov = { buf, sizeof(buf) - 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct request rq = { .argc = 0 };
	int fds[MAX_FDS], nfds = 0, slot = -1;
	char *fields[MAX_ARGS + 4], *p, *end;
	int nfields = 0;
	ssize_t n;
	bool ok = false;

	n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int i = 0; i < k && nfds < MAX_FDS; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	if (nfds < 1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		goto out;   /* no reply socket: nobody to answer */
	buf[n] = 0;
	for (p = buf; p <= buf + n && nfields < MAX_ARGS + 3; p += strlen(p) + 1)
		fields[nfields++] = p;
	if (nfields < 3 || p <= buf + n) {
		snprintf(why, sizeof(why), nfields < 3 ? "malformed request" : "too many arguments");
		goto refuse;
	}
	snprintf(rq.kind, sizeof(rq.kind), "%s", fields[0]);
	rq.rtprio = strtol(fields[1], &end, 10);
	if (*end || rq.rtprio < 0 || rq.rtprio > 99) {
		snprintf(why, sizeof(why), "malformed request");
		goto refuse;
	}
	for (p = fields[2]; *p && rq.ntargets < MAX_FDS;) {
		long t = strtol(p, &end, 10);

		if (end == p || t < 3 || t >= 1000 || (*end && *end != ','))
			break;
		rq.targets[rq.ntargets++] = (int)t;
		p = *end ? end + 1 : end;
	}
	if (*p || (nfds > 1 && nfds != 4 + rq.ntargets) || (nfds == 1 && rq.ntargets)) {
		snprintf(why, sizeof(why), "malformed request: descriptors and their numbers disagree");
		goto refuse;
	}
	if (!strcmp(rq.kind, "tracefs")) {
		do_tracefs(fds[0]);
		goto out;
	}
	if (!strcmp(rq.kind, "clean")) {
		do_clean(fds[0]);
		goto out;
	}
	if (nfds < 4) {
		snprintf(why, sizeof(why), "a program needs its stdin, stdout and stderr");
		goto refuse;
	}
	if (!strcmp(rq.kind, "tracer"))
		ok = check_tracer(&rq, fields + 3, nfields - 3, why, sizeof(why)) &&
		     (slot = take_slot(why, sizeof(why))) >= 0;
	else if (!strcmp(rq.kind, "doctor") && nfields != 3)
		snprintf(why, sizeof(why), "doctor takes no arguments");
	else if (!strcmp(rq.kind, "doctor"))
		ok = !add(&rq, loader) && !add(&rq, "--doctor");
	else if (!strcmp(rq.kind, "driver"))
		ok = check_driver(&rq, fields + 3, nfields - 3, why, sizeof(why));
	else if (!strcmp(rq.kind, "hog"))
		ok = check_hog(&rq, fields + 3, nfields - 3, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "no request '%.15s'", rq.kind);
	if (ok) {
		start(&rq, fds, nfds, slot);
		goto out;
	}
	if (slot >= 0)
		close(slot);
refuse:
	if (!why[0])
		snprintf(why, sizeof(why), "request refused");
	{
		char reply[600];

		snprintf(reply, sizeof(reply), "E%s", why);
		send(fds[0], reply, strlen(reply), MSG_NOSIGNAL);
	}
out:
	for (int i = 0; i < rq.nown; i++)
		free(rq.own[i]);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

static void end_job(struct job *job, int status)
{
	char reply[32];

	snprintf(reply, sizeof(reply), "X%d", status);
	send(job->ctl, reply, strlen(reply), MSG_NOSIGNAL);
	close(job->ctl);
	if (job->slot_fd >= 0)
		close(job->slot_fd);
	memset(job, 0, sizeof(*job));
	job->ctl = job->slot_fd = -1;
}

/* "S<signal>" from the front end: to the program, "G<signal>": to its process group; only the
 * signals that stop a program. */
static void handle_ctl(struct job *job)
{
	char buf[32];
	ssize_t n = recv(job->ctl, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	long sig;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		/* the front end is gone or gave up on it: it ends */
		if (!job->orphaned)
			kill(-job->pid, SIGTERM);
		job->orphaned = true;
		return;
	}
	if (n <= 1 || (buf[0] != 'S' && buf[0] != 'G'))
		return;
	buf[n] = 0;
	sig = strtol(buf + 1, NULL, 10);
	if (sig == SIGINT || sig == SIGTERM || sig == SIGKILL || sig == SIGHUP || sig == SIGQUIT)
		kill(buf[0] == 'G' ? -job->pid : job->pid, (int)sig);
}

static pid_t start_front_end(char **argv, int sock)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid)
		return pid;
	{
		char num[16];
		sigset_t set;
		int fd = dup2(sock, BROKER_FD);

		if (fd < 0 || become_user()) {
			fprintf(stderr, "ipctrace: cannot become uid %u: %s\n", (unsigned)user_uid, strerror(errno));
			_exit(2);
		}
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		/* SIGINT and SIGTERM stay blocked until the front end has its handlers (analysis/__init__.py) */
		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigprocmask(SIG_SETMASK, &set, NULL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		snprintf(num, sizeof(num), "%d", BROKER_FD);
		close_range(3, BROKER_FD - 1, 0);
		close_range(BROKER_FD + 1, ~0U, 0);
		{
			char **env = user_env, *var;
			int n = 0;

			while (env[n])
				n++;
			if (asprintf(&var, "IPCTRACE_BROKER_FD=%s", num) < 0)
				_exit(2);
			env[n] = var;   /* make_env leaves room */
			execve(argv[0], argv, env);
		}
		fprintf(stderr, "ipctrace: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
}

int main(int argc, char **argv)
{
	char self[PATH_MAX], *slash;
	unsigned long uid, gid;
	struct passwd *pw;
	int sv[2], sfd, front_status = -1;
	struct timespec ended = { 0, 0 };
	pid_t front;
	sigset_t set;
	ssize_t n;

	if (argc < 2)
		die("usage: ipctrace-broker FRONTEND ARGS... (as root, with SUDO_UID and SUDO_GID)");
	if (geteuid() != 0)
		die("ipctrace-broker runs as root for a sudo user");
	if (!parse_id(getenv("SUDO_UID"), &uid) || !parse_id(getenv("SUDO_GID") ?: getenv("SUDO_UID"), &gid))
		die("SUDO_UID='%s', SUDO_GID='%s': not numeric user and group ids", getenv("SUDO_UID") ?: "",
		    getenv("SUDO_GID") ?: "");
	user_uid = (uid_t)uid;
	user_gid = (gid_t)gid;
	pw = getpwuid(user_uid);
	user_pw.pw_name = strdup(pw ? pw->pw_name : "nobody");
	user_pw.pw_dir = strdup(pw ? pw->pw_dir : "/");
	user_pw.pw_shell = strdup(pw ? pw->pw_shell : "/bin/sh");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		die("cannot read /proc/self/exe: %s", strerror(errno));
	self[n] = 0;
	slash = strrchr(self, '/');
	*slash = 0;
	snprintf(outdir, sizeof(outdir), "%s", self);
	snprintf(loader, sizeof(loader), "%s/ipctrace-loader", outdir);
	snprintf(driver, sizeof(driver), "%s/ipcbench", outdir);
	for (int i = 0; i < MAX_JOBS; i++)
		jobs[i].ctl = jobs[i].slot_fd = -1;
	user_env = make_env(true);
	root_env = make_env(false);

	/* Signals come through signalfd; a terminal's SIGINT reaches the front end itself. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		die("cannot set up: %s", strerror(errno));
	front = start_front_end(argv + 1, sv[1]);
	close(sv[1]);

	for (;;) {
		struct pollfd pfd[2 + MAX_JOBS];
		struct job *polled[MAX_JOBS];
		int np = 0, nj = 0;

		pfd[np++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		pfd[np++] = (struct pollfd){ .fd = front_status < 0 ? sv[0] : -1, .events = POLLIN };
		for (int i = 0; i < MAX_JOBS; i++)
			if (jobs[i].pid && !jobs[i].orphaned) {
				polled[nj++] = &jobs[i];
				pfd[np++] = (struct pollfd){ .fd = jobs[i].ctl, .events = POLLIN };
			}
		if (front_status >= 0 && !nj) {
			bool left = false;

			for (int i = 0; i < MAX_JOBS; i++)
				left |= jobs[i].pid != 0;
			if (!left)
				break;
		}
		{
			struct timespec now;

			clock_gettime(CLOCK_MONOTONIC, &now);
			for (int i = 0; i < MAX_JOBS; i++) {
				if (!jobs[i].pid)
					continue;
				if (front_status >= 0 && now.tv_sec - ended.tv_sec > 5)
					kill(-jobs[i].pid, SIGKILL);
				/* a trace of a sudo user lasts SUDO_MAX_DURATION_S at most: stopped as by
				 * a Ctrl-C, it writes what it traced */
				if (jobs[i].deadline && now.tv_sec > jobs[i].deadline) {
					kill(jobs[i].pid, SIGTERM);
					jobs[i].deadline = 0;
				}
			}
		}
		if (poll(pfd, (nfds_t)np, front_status >= 0 || nj ? 1000 : -1) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo != SIGCHLD) {
					/* a signal from a process (kill, a relaying sudo) goes on to the front
					 * end; one from the terminal has reached it already */
					if (si.ssi_code != SI_KERNEL && front_status < 0)
						kill(front, (int)si.ssi_signo);
					continue;
				}
			}
			for (;;) {
				int status;
				pid_t pid = waitpid(-1, &status, WNOHANG);

				if (pid <= 0)
					break;
				if (pid == front) {
					front_status = status;
					clock_gettime(CLOCK_MONOTONIC, &ended);
					/* what the front end started and left is ended now */
					for (int i = 0; i < MAX_JOBS; i++)
						if (jobs[i].pid && !jobs[i].orphaned) {
							kill(-jobs[i].pid, SIGTERM);
							jobs[i].orphaned = true;
						}
					continue;
				}
				for (int i = 0; i < MAX_JOBS; i++)
					if (jobs[i].pid == pid)
						end_job(&jobs[i], status);
			}
		}
		if (pfd[1].revents & POLLIN)
			handle_request(sv[0]);
		else if (pfd[1].revents & (POLLHUP | POLLERR))
			close(sv[0]), sv[0] = -1;
		for (int i = 0; i < nj; i++)
			if (pfd[2 + i].revents)
				handle_ctl(polled[i]);
	}
	if (WIFSIGNALED(front_status))
		return 128 + WTERMSIG(front_status);
	return WEXITSTATUS(front_status);
}
