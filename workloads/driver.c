// SPDX-License-Identifier: MIT
/* What workload.h promises the cases, plus the driver's own plumbing: timestamp
 * arrays, names and the private directory (the iterations.bin writer: iterfile.c). */
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver.h"

volatile sig_atomic_t wl_stop;
volatile sig_atomic_t wl_ended;
volatile sig_atomic_t drv_signal;

static char error_line[256];

/* Forked peers, so that a failed run can say which one died, and of what. */
static pid_t peers[WL_MAX_THREADS];
static int npeers;

/* gettid() is a syscall; the timed loop's bookkeeping must not add one per iteration. */
static __thread uint32_t cached_tid;

static uint32_t self_tid(void)
{
	if (!cached_tid)
		cached_tid = (uint32_t)gettid();
	return cached_tid;
}

void wl_record(struct wl_ctx *c, unsigned m, uint64_t i, uint64_t t0, uint64_t t1)
{
	uint64_t n = c->o->iterations, k;
	int cpu;

	if (m == c->primary && c->o->interval_ns) {
		/* --interval: the CPUs may go idle between iterations, as a real request stream lets them */
		struct timespec pause = { (time_t)(c->o->interval_ns / 1000000000ull),
					  (long)(c->o->interval_ns % 1000000000ull) };
		while (nanosleep(&pause, &pause) && errno == EINTR && !wl_stop)
			;
	}
	/* the arrays hold only the workload's own metrics */
	if (i < c->o->warmup || m >= WL_MAX_METRICS || !c->w->metrics[m])
		return;
	k = i - c->o->warmup;
	if (m == c->primary) {
		if (k == 0)
			c->timed_start = t0;
		if (c->o->break_ns && t1 - t0 > c->o->break_ns && !c->break_iteration) {
			c->break_iteration = k + 1;
			c->break_run = c->run;
			c->break_latency = t1 - t0;
			wl_ended = 1;
			wl_stop = 1;
		} else if (c->o->duration_ns && t1 - c->timed_start >= c->o->duration_ns) {
			wl_ended = 1;
			wl_stop = 1;
		}
	}
	if (k >= n)
		return;
	cpu = sched_getcpu();
	c->t0[m * n + k] = t0;
	c->t1[m * n + k] = t1;
	c->cpu[m * n + k] = cpu < 0 ? UINT16_MAX : (uint16_t)cpu;
	c->tid[m * n + k] = self_tid();
	if (m == c->primary) {
		c->done = k + 1;
		if (c->progress)
			*c->progress = (uint64_t)c->run * n + k + 1;
	}
}

static void add_thread(struct wl_ctx *c, const char *role, pid_t pid, pid_t tid, int cpu)
{
	struct wl_thread *t = NULL;

	for (int i = 0; i < c->nthreads; i++)
		if (c->threads[i].tid == tid)
			t = &c->threads[i];
	if (!t) {
		if (c->nthreads >= WL_MAX_THREADS)
			return;
		t = &c->threads[c->nthreads++];
	}
	snprintf(t->role, sizeof(t->role), "%s", role);
	t->pid = pid;
	t->tid = tid;
	t->cpu = cpu;
}

static int pin_tid(pid_t tid, int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(tid, sizeof(set), &set) ? -errno : 0;
}

int wl_pin(struct wl_ctx *c, int side, const char *role)
{
	int cpu = c->o->cpu[side ? 1 : 0];
	int err = pin_tid(0, cpu);

	if (err)
		return err;
	add_thread(c, role, getpid(), (pid_t)self_tid(), cpu);
	return 0;
}

/* What every peer does first, on its own CPU: an injected sleep must last what was
 * asked, not up to the default 50 us of timer slack more. */
static void peer_begin(const struct wl_ctx *c)
{
	if (c->o->inject.peer_sleep_us)
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

/* Busy in user space for ns: clock reads only (vDSO), no system call. */
static void spin_ns(uint64_t ns)
{
	uint64_t end = wl_now() + ns;

	while (wl_now() < end)
		;
}

/* Whether this message gets the injection (--inject-every): count, one per side. */
static int injected_now(const struct wl_inject *in, uint64_t *count)
{
	return in->every <= 1 || (*count)++ % in->every == in->every - 1;
}

void wl_inject_peer_work(const struct wl_inject *in)
{
	static uint64_t messages;

	if (!injected_now(in, &messages))
		return;
	if (in->peer_spin_ns)
		spin_ns(in->peer_spin_ns);
	for (uint64_t k = 0; k < in->peer_syscalls; k++)
		wl_bare_getppid();
	if (in->peer_sleep_us) {
		uint64_t until = wl_now() + in->peer_sleep_us * 1000;
		struct timespec ts = { .tv_sec = (time_t)(until / 1000000000u),
				       .tv_nsec = (long)(until % 1000000000u) };

		/* absolute: a signal that interrupts it does not lengthen it */
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
}

void wl_inject_measuring_work(const struct wl_inject *in)
{
	static uint64_t messages;

	if (!injected_now(in, &messages))
		return;
	spin_ns(in->measuring_spin_ns);
}

pid_t wl_fork_peer(struct wl_ctx *c, int (*fn)(struct wl_ctx *c, void *arg), void *arg)
{
	pid_t parent = getpid(), pid;
	int go[2], err;
	char b = 0;

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(go[0]);
		close(go[1]);
		return err;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		cached_tid = 0;
		close(go[1]);
		/* wait until the parent has pinned us, so no work runs on the wrong CPU */
		if (read(go[0], &b, 1) != 1)
			_exit(1);
		close(go[0]);
		peer_begin(c);
		_exit(fn(c, arg) ? 1 : 0);
	}
	close(go[0]);
	err = pin_tid(pid, c->o->cpu[1]);
	if (err) {
		close(go[1]);
		wl_reap(pid);
		return err;
	}
	add_thread(c, "peer", pid, pid, c->o->cpu[1]);
	if (npeers < WL_MAX_THREADS)
		peers[npeers++] = pid;
	if (write(go[1], &b, 1) != 1) {
		err = -errno;
		close(go[1]);
		wl_reap(pid);
		return err;
	}
	close(go[1]);
	return pid;
}

struct thread_start {
	int (*fn)(struct wl_ctx *c, void *arg);
	struct wl_ctx *c;
	void *arg;
	volatile pid_t *tid_slot;
};

static void *thread_trampoline(void *p)
{
	struct thread_start s = *(struct thread_start *)p;

	free(p);
	*s.tid_slot = (pid_t)self_tid();
	peer_begin(s.c);
	s.fn(s.c, s.arg);
	return NULL;
}

int wl_start_thread(struct wl_ctx *c, int (*fn)(struct wl_ctx *c, void *arg), void *arg, pthread_t *tid_out)
{
	struct thread_start *s;
	pthread_attr_t attr;
	cpu_set_t set;
	sigset_t stop_sigs, old_sigs;
	int cpu = c->o->cpu[1], err, slot;

	if (c->nthreads >= WL_MAX_THREADS)
		return -ENOSPC;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	slot = c->nthreads++;
	snprintf(c->threads[slot].role, sizeof(c->threads[slot].role), "peer");
	c->threads[slot].pid = getpid();
	c->threads[slot].tid = 0;
	c->threads[slot].cpu = cpu;
	*s = (struct thread_start){ fn, c, arg, &c->threads[slot].tid };

	pthread_attr_init(&attr);
	if (cpu >= 0) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	/* the peer starts with SIGINT/SIGTERM (and the SIGALRM nudges that follow them)
	 * blocked: they must interrupt the measuring thread's blocking call, not end a
	 * peer the measuring thread then waits for */
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &stop_sigs, &old_sigs);
	err = pthread_create(tid_out, &attr, thread_trampoline, s);
	pthread_sigmask(SIG_SETMASK, &old_sigs, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		free(s);
		c->nthreads--;
		return -err;
	}
	return 0;
}

void wl_reap(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int wl_peer_start(struct wl_ctx *c, struct wl_peer *p, int procs,
		  int (*fn)(struct wl_ctx *c, void *arg), void *arg)
{
	int err;

	if (procs) {
		p->pid = wl_fork_peer(c, fn, arg);
		return p->pid < 0 ? p->pid : 0;
	}
	err = wl_start_thread(c, fn, arg, &p->thread);
	if (!err)
		p->thread_started = 1;
	return err;
}

void wl_peer_stop(struct wl_peer *p)
{
	if (p->thread_started)
		pthread_join(p->thread, NULL);
	wl_reap(p->pid);
}

void wl_peer_cancel(struct wl_peer *p)
{
	if (p->thread_started)
		pthread_cancel(p->thread);
	wl_peer_stop(p);
}

void wl_posix_name(const struct wl_ctx *c, const char *what, char *buf, size_t len)
{
	snprintf(buf, len, "/ipctrace-%s-%s", c->o->tag, what);
}

void *wl_map_shared(const struct wl_ctx *c, const char *shm_what, size_t bytes)
{
	char name[96];
	void *p;
	int fd, err;

	if (!shm_what) {
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	wl_posix_name(c, shm_what, name, sizeof(name));
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return NULL;
	p = ftruncate(fd, (off_t)bytes) ? MAP_FAILED
		: mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = errno;   /* the caller reports why the mapping failed, not the clean-up */
	shm_unlink(name);
	close(fd);
	if (p == MAP_FAILED) {
		errno = err;
		return NULL;
	}
	return p;
}

/* The private directory is made on first use, so that workloads without files
 * leave nothing behind even when the driver is killed. */
void wl_path(const struct wl_ctx *c, const char *what, char *buf, size_t len)
{
	const char *dir = c->o->privdir;
	struct stat st;

	if (mkdir(dir, 0700) && errno != EEXIST)
		snprintf(error_line, sizeof(error_line), "cannot create %s: %s", dir, strerror(errno));
	else if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		snprintf(error_line, sizeof(error_line), "%s exists but is not a private directory of this user", dir);
	snprintf(buf, len, "%s/%s", dir, what);
}

int wl_fail(struct wl_ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(error_line, sizeof(error_line), fmt, ap);
	va_end(ap);
	return WL_FAIL_USAGE;
}

void drv_peer_death(char *buf, size_t len)
{
	siginfo_t si;

	buf[0] = 0;
	/* A dead peer's pipes close before it can be waited for: give it 200 ms. */
	for (int tries = 0; tries < 20 && !buf[0]; tries++) {
		for (int i = 0; i < npeers && !buf[0]; i++) {
			si.si_pid = 0;
			/* WNOWAIT: the workload's teardown still reaps it. */
			if (waitid(P_PID, peers[i], &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid != peers[i])
				continue;
			if (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED)
				snprintf(buf, len, "peer process %d was killed by SIG%s", peers[i], sigabbrev_np(si.si_status));
			else if (si.si_status)
				snprintf(buf, len, "peer process %d exited with status %d", peers[i], si.si_status);
		}
		if (!buf[0])
			usleep(10000);
	}
}

const char *drv_error(void)
{
	return error_line;
}

void drv_clear_error(void)
{
	error_line[0] = 0;
}

/* EINTR is retried unless the user asked to stop: then the loop must see it. */
int wl_write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t r = write(fd, p, n);

		if (r < 0) {
			if (errno == EINTR && !wl_stop)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int wl_read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0) {
			if (errno == EINTR && !wl_stop)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

void wl_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

static void *map_shared(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int drv_map_arrays(struct wl_ctx *c, unsigned nmetrics, uint64_t iterations)
{
	size_t n = (size_t)nmetrics * iterations;

	c->t0 = map_shared(n * sizeof(*c->t0));
	c->t1 = map_shared(n * sizeof(*c->t1));
	c->cpu = map_shared(n * sizeof(*c->cpu));
	c->tid = map_shared(n * sizeof(*c->tid));
	if (!c->t0 || !c->t1 || !c->cpu || !c->tid) {
		drv_unmap_arrays(c, nmetrics, iterations);
		return -ENOMEM;
	}
	return 0;
}

/* Zero a region in slices so that a stop signal is not held up by gigabytes. */
static int clear_slices(void *p, size_t bytes)
{
	const size_t slice = 16u << 20;

	for (size_t off = 0; off < bytes; off += slice) {
		if (wl_stop)
			return -EINTR;
		memset((char *)p + off, 0, bytes - off < slice ? bytes - off : slice);
	}
	return 0;
}

/* memset pre-touches every page, so the timed loop takes no page faults; t1 == 0
 * afterwards marks a slot as not recorded. -EINTR if a stop signal came first:
 * the arrays then hold stale slots and must not be appended. */
int drv_clear_arrays(struct wl_ctx *c, unsigned nmetrics, uint64_t iterations)
{
	size_t n = (size_t)nmetrics * iterations;

	if (clear_slices(c->t0, n * sizeof(*c->t0)) || clear_slices(c->t1, n * sizeof(*c->t1)) ||
	    clear_slices(c->cpu, n * sizeof(*c->cpu)) || clear_slices(c->tid, n * sizeof(*c->tid)))
		return -EINTR;
	return 0;
}

void drv_unmap_arrays(struct wl_ctx *c, unsigned nmetrics, uint64_t iterations)
{
	size_t n = (size_t)nmetrics * iterations;

	if (c->t0)
		munmap(c->t0, n * sizeof(*c->t0));
	if (c->t1)
		munmap(c->t1, n * sizeof(*c->t1));
	if (c->cpu)
		munmap(c->cpu, n * sizeof(*c->cpu));
	if (c->tid)
		munmap(c->tid, n * sizeof(*c->tid));
	c->t0 = c->t1 = NULL;
	c->cpu = NULL;
	c->tid = NULL;
}

void drv_make_tag(char *buf, size_t len)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint32_t)wl_now();
	snprintf(buf, len, "%d-%08x", (int)getpid(), r);
}

void drv_privdir_path(char *buf, size_t len, const char *tag)
{
	const char *tmp = getenv("TMPDIR");

	/* socket paths are limited to 108 bytes: keep the directory short */
	if (!tmp || !*tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(buf, len, "%s/ipctrace-%s", tmp, tag);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void drv_privdir_remove(const char *path)
{
	if (path && *path)
		nftw(path, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}
