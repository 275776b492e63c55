// SPDX-License-Identifier: MIT
/* POSIX semaphores.
 * sem-threads, sem-procs: ping-pong over two semaphores; the measuring side posts
 *   "request" and waits for "ack", the peer waits for the request and posts the ack.
 *   --mode named: sem_open (report 000); --mode unnamed: sem_init(pshared) in shared
 *   memory. A named semaphore is unlinked right after sem_open: both sides share
 *   the mapping from then on, so nothing is left in /dev/shm even after SIGKILL.
 * sem-wakeup: the wake-up latency of a waiter that is really asleep. The poster
 *   reads the waiter's /proc task state until it sleeps in futex() on the request
 *   semaphore, takes t0 right before sem_post; the waiter takes t1 right after
 *   sem_wait returns. Report 004 slept 50 us instead and got negative latencies. */
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "workload.h"

struct sem_shared {
	sem_t req, ack;              /* the unnamed pair */
	atomic_int stop;
	_Atomic uint64_t t_post;     /* sem-wakeup: the poster's t0 */
};

struct sem_state {
	struct sem_shared *sh;       /* MAP_SHARED: seen by a forked peer */
	sem_t *req, *ack;            /* the pair in use, named or unnamed */
	int named;
	struct wl_peer peer;
	/* sem-wakeup: the waiter's /proc files, kept open and re-read with pread */
	int stat_fd, syscall_fd;
};

/* sem_wait that gives up only when the user asked to stop. */
static int sem_wait_stop(sem_t *s)
{
	while (sem_wait(s)) {
		if (errno != EINTR)
			return -errno;
		if (wl_stop)
			return -EINTR;
	}
	return 0;
}

static int echo_loop(struct wl_ctx *c, void *arg)
{
	struct sem_state *s = arg;

	for (;;) {
		int err = sem_wait_stop(s->req);

		if (err)
			return err;
		if (atomic_load(&s->sh->stop))
			return 0;
		wl_inject_peer(c);   /* --inject-peer-sleep 50: report 004's usleep in the loop */
		if (sem_post(s->ack))
			return -errno;
	}
}

static sem_t *open_named(struct wl_ctx *c, const char *what, int *err)
{
	char name[96];
	sem_t *s;

	wl_posix_name(c, what, name, sizeof(name));
	s = sem_open(name, O_CREAT | O_EXCL, 0600, 0);
	if (s == SEM_FAILED) {
		*err = -errno;
		return NULL;
	}
	sem_unlink(name);
	return s;
}

static int sem_common_setup(struct wl_ctx *c, int procs, int named)
{
	struct sem_state *s = calloc(1, sizeof(*s));
	int err = 0;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->named = named;
	s->stat_fd = s->syscall_fd = -1;
	s->sh = wl_map_shared(c, NULL, sizeof(*s->sh));
	if (!s->sh)
		return -errno;
	if (named) {
		s->req = open_named(c, "sem-req", &err);
		if (s->req)
			s->ack = open_named(c, "sem-ack", &err);
		if (err)
			return err;
	} else {
		if (sem_init(&s->sh->req, procs, 0) || sem_init(&s->sh->ack, procs, 0))
			return -errno;
		s->req = &s->sh->req;
		s->ack = &s->sh->ack;
	}
	return 0;
}

static int pingpong_setup(struct wl_ctx *c, int procs)
{
	const char *mode = c->o->mode ? c->o->mode : "named";
	struct sem_state *s;
	int err;

	snprintf(c->mode_used, sizeof(c->mode_used), "%s", mode);
	err = sem_common_setup(c, procs, strcmp(mode, "named") == 0);
	if (err)
		return err;
	s = c->priv;
	return wl_peer_start(c, &s->peer, procs, echo_loop, s);
}

static int sem_threads_setup(struct wl_ctx *c) { return pingpong_setup(c, 0); }
static int sem_procs_setup(struct wl_ctx *c) { return pingpong_setup(c, 1); }

static int pingpong_run(struct wl_ctx *c)
{
	struct sem_state *s = c->priv;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		if (sem_post(s->req))
			return -errno;
		int err = sem_wait_stop(s->ack);
		uint64_t t1 = wl_now();
		if (err)
			return err == -EINTR ? 0 : err;
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void sem_teardown(struct wl_ctx *c)
{
	struct sem_state *s = c->priv;

	if (!s)
		return;
	if (s->peer.thread_started) {
		/* the peer sleeps in sem_wait on the request: wake it into the stop check */
		atomic_store(&s->sh->stop, 1);
		sem_post(s->req);
		sem_post(s->ack);
	}
	wl_peer_stop(&s->peer);
	if (s->named) {
		if (s->req)
			sem_close(s->req);
		if (s->ack)
			sem_close(s->ack);
	} else if (s->req) {
		sem_destroy(&s->sh->req);
		sem_destroy(&s->sh->ack);
	}
	if (s->stat_fd >= 0)
		close(s->stat_fd);
	if (s->syscall_fd >= 0)
		close(s->syscall_fd);
	if (s->sh)
		munmap(s->sh, sizeof(*s->sh));
	free(s);
	c->priv = NULL;
}

/* sem-wakeup ---------------------------------------------------------------- */

static int read_proc(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

/* Whether the waiter sleeps (state S) inside futex() on the request semaphore's
 * word. Only the poster posts that semaphore, so once seen asleep there it stays
 * asleep until the post. */
static int waiter_asleep(struct sem_state *s)
{
	char buf[512], *p;
	unsigned long long nr, arg0;
	uintptr_t word = (uintptr_t)s->req;

	if (read_proc(s->syscall_fd, buf, sizeof(buf)))
		return 0;
	/* "running", "-1 sp pc" (not in a syscall) or "nr arg0 ... sp pc" */
	if (sscanf(buf, "%llu 0x%llx", &nr, &arg0) != 2 || nr != SYS_futex ||
	    arg0 < word || arg0 >= word + sizeof(sem_t))
		return 0;
	if (read_proc(s->stat_fd, buf, sizeof(buf)))
		return 0;
	p = strrchr(buf, ')');   /* comm may contain spaces and parentheses */
	return p && p[1] == ' ' && p[2] == 'S';
}

static int poster_loop(struct wl_ctx *c, void *arg)
{
	struct sem_state *s = arg;

	for (;;) {
		if (sem_wait_stop(s->ack) || atomic_load(&s->sh->stop))
			return 0;
		while (!waiter_asleep(s))
			if (atomic_load_explicit(&s->sh->stop, memory_order_relaxed))
				return 0;
		atomic_store_explicit(&s->sh->t_post, wl_now(), memory_order_relaxed);
		if (sem_post(s->req))
			return -errno;
	}
}

static int wakeup_setup(struct wl_ctx *c)
{
	struct sem_state *s;
	char path[96];
	pid_t tid = gettid();
	int err = sem_common_setup(c, 0, 0);

	if (err)
		return err;
	s = c->priv;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	s->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	s->syscall_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->stat_fd < 0 || s->syscall_fd < 0)
		return wl_fail(c, "sem-wakeup cannot read %s: %s (it tells when the waiter sleeps)",
			       path, strerror(errno));
	if (read_proc(s->syscall_fd, path, sizeof(path)))
		return wl_fail(c, "sem-wakeup cannot read /proc/self/task/%d/syscall: %s",
			       (int)tid, strerror(errno));
	return wl_peer_start(c, &s->peer, 0, poster_loop, s);
}

static int wakeup_run(struct wl_ctx *c)
{
	struct sem_state *s = c->priv;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		if (sem_post(s->ack))
			return -errno;
		int err = sem_wait_stop(s->req);
		uint64_t t1 = wl_now();
		if (err)
			return err == -EINTR ? 0 : err;
		/* the post that woke us published t_post before it (release/acquire of sem) */
		wl_record(c, 0, i, atomic_load_explicit(&s->sh->t_post, memory_order_relaxed), t1);
	}
	return 0;
}

const struct workload wl_sem_threads = {
	.name = "sem-threads",
	.summary = "POSIX semaphore ping-pong (two semaphores) between two threads",
	.seed = "000_6716c315987b0d95.txt: 3217 ns (named, macOS); "
		"002_460f2a7bc619b165.txt: 1262 ns (one way = rtt/2, macOS)",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.modes = "named,unnamed",
	.mode_help = "named: sem_open semaphores; unnamed: sem_init in shared memory (both rtt)",
	.setup = sem_threads_setup,
	.run = pingpong_run,
	.teardown = sem_teardown,
};

const struct workload wl_sem_procs = {
	.name = "sem-procs",
	.summary = "POSIX semaphore ping-pong (two semaphores) between two forked processes",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.modes = "named,unnamed",
	.mode_help = "named: sem_open semaphores; unnamed: sem_init in shared memory (both rtt)",
	.flags = WL_INJECT,
	.setup = sem_procs_setup,
	.run = pingpong_run,
	.teardown = sem_teardown,
};

const struct workload wl_sem_wakeup = {
	.name = "sem-wakeup",
	.summary = "sem_post to return from sem_wait of a thread confirmed asleep (from /proc)",
	.seed = "004_dc97f491540bbac1.txt: 63.8 us mean with a 50 us usleep in the loop, min -49 us (Linux)",
	.metrics = { "wakeup" },
	.setup = wakeup_setup,
	.run = wakeup_run,
	.teardown = sem_teardown,
};
