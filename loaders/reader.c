// SPDX-License-Identifier: MIT
/*
 * The ring buffer's consumer thread at SCHED_IDLE, and the main thread's watch
 * that raises it while the buffer is more than half full (see reader.h).
 *
 * The watch sleeps in epoll on three things: the child's pidfd (it exited), the
 * ring buffer's map fd, edge-triggered (the programs wake it only past half),
 * and an eventfd the reader writes when it lowered itself or failed. Once it
 * has raised the reader it stops listening to the ring buffer (the programs
 * wake it for every batch while past half) until the reader says it is low.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "reader.h"

#define POLL_MS 20              /* the reader's timer: it takes what came in since */

enum { W_CHILD = 1, W_RING, W_READER, W_STOP };

size_t reader_fill(const struct reader *r)
{
	unsigned long cons = __atomic_load_n(&r->pos[0], __ATOMIC_ACQUIRE);
	unsigned long prod = __atomic_load_n(&r->pos[r->page / sizeof(long)], __ATOMIC_ACQUIRE);

	return prod - cons;
}

static int set_policy(pid_t tid, int policy)
{
	struct sched_param sp = { 0 };

	return sched_setscheduler(tid, policy, &sp) ? -errno : 0;
}

static void notify(struct reader *r)
{
	uint64_t one = 1;

	/* cannot fail: the counter is read long before it could overflow */
	(void)!write(r->notify_fd, &one, sizeof(one));
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	sigset_t sigs;
	int rc;

	/* The loader's signals are the main thread's. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	/* Named before any probe is attached: the tasks map takes it under this name. */
	prctl(PR_SET_NAME, "ipctrace-reader");
	rc = set_policy(0, SCHED_IDLE);
	pthread_mutex_lock(&r->lock);
	r->tid = syscall(SYS_gettid);
	r->idle = !rc;
	if (rc)
		snprintf(r->idle_error, sizeof(r->idle_error), "SCHED_IDLE refused: %s", strerror(-rc));
	r->started = true;
	pthread_cond_signal(&r->started_cond);
	pthread_mutex_unlock(&r->lock);

	while (!atomic_load(&r->stop)) {
		rc = ring_buffer__poll(r->rb, POLL_MS);
		if (rc >= 0 || rc == -EINTR)
			rc = ring_buffer__consume(r->rb);
		if (rc < 0 && rc != -EINTR) {
			__atomic_store_n(&r->err, rc, __ATOMIC_RELEASE);
			notify(r);
			break;
		}
		if (__atomic_load_n(&r->raised, __ATOMIC_RELAXED) && reader_fill(r) < r->bytes / 8) {
			pthread_mutex_lock(&r->lock);
			if (r->raised && r->idle && !set_policy(0, SCHED_IDLE)) {
				r->raised = false;
				notify(r);
			}
			pthread_mutex_unlock(&r->lock);
		}
	}
	return NULL;
}

int reader_start(struct reader *r, struct ring_buffer *rb, int map_fd, size_t bytes,
		 char *err, size_t errlen)
{
	int e;

	memset(r, 0, sizeof(*r));
	r->rb = rb;
	r->map_fd = map_fd;
	r->bytes = bytes;
	r->page = getpagesize();
	/* The consumer and producer pages, read-only (kernel/bpf/ringbuf.c allows it). */
	r->pos = mmap(NULL, 2 * r->page, PROT_READ, MAP_SHARED, map_fd, 0);
	if (r->pos == MAP_FAILED) {
		snprintf(err, errlen, "failed to map the ring buffer's positions: %s", strerror(errno));
		return -1;
	}
	r->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->notify_fd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		munmap((void *)r->pos, 2 * r->page);
		return -1;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->started_cond, NULL);
	atomic_init(&r->stop, false);
	if ((e = pthread_create(&r->thread, NULL, reader_main, r))) {
		snprintf(err, errlen, "failed to start the reader thread: %s", strerror(e));
		close(r->notify_fd);
		munmap((void *)r->pos, 2 * r->page);
		return -1;
	}
	pthread_mutex_lock(&r->lock);
	while (!r->started)
		pthread_cond_wait(&r->started_cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static void raise_reader(struct reader *r)
{
	pthread_mutex_lock(&r->lock);
	if (r->idle && !r->raised && !set_policy(r->tid, SCHED_OTHER)) {
		r->raised = true;
		r->raises++;
	}
	pthread_mutex_unlock(&r->lock);
}

static int watch_ring(int epfd, struct reader *r, int op)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = W_RING };

	return epoll_ctl(epfd, op, r->map_fd, op == EPOLL_CTL_DEL ? NULL : &ev);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Roots still running: each pidfd polled (readable once the process has exited, zombie or
 * not), or without one kill(pid, 0). */
static int roots_alive(const struct watch *w, const int *pidfds)
{
	int i, alive = 0;

	for (i = 0; i < w->nroots; i++) {
		if (pidfds[i] >= 0) {
			struct pollfd p = { .fd = pidfds[i], .events = POLLIN };

			alive += poll(&p, 1, 0) == 0;
		} else if (pidfds[i] == -2) {
			alive += kill(w->roots[i], 0) == 0 || errno == EPERM;
		}
	}
	return alive;
}

int reader_watch(struct reader *r, struct watch *w)
{
	struct epoll_event ev, evs[8];
	int epfd, pidfd = -1, n, i, rc = 0, timeout, *rootfds = NULL;
	bool ring_watched, polled = false, stopping = false;
	double deadline = w->duration > 0 ? now_s() + w->duration : 0, kill_at = 0;
	double next_tick = now_s() + 1;
	pid_t child = w->child;
	uint64_t count;

	w->stopped_by = STOPPED_BY_EXIT;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (child > 0)
		pidfd = syscall(SYS_pidfd_open, child, 0);     /* 5.3; without it the wait is a 20 ms poll */
	if (child > 0 && (epfd < 0 || pidfd < 0))
		polled = true;
	if (epfd >= 0 && pidfd >= 0) {
		ev = (struct epoll_event){ .events = EPOLLIN, .data.u32 = W_CHILD };
		epoll_ctl(epfd, EPOLL_CTL_ADD, pidfd, &ev);
	}
	if (w->nroots && !(rootfds = malloc(w->nroots * sizeof(*rootfds))))
		polled = true;
	for (i = 0; rootfds && i < w->nroots; i++) {
		/* -1: gone already; -2: no pidfd, kill(pid, 0) every POLL_MS */
		rootfds[i] = syscall(SYS_pidfd_open, w->roots[i], 0);
		if (rootfds[i] < 0)
			rootfds[i] = errno == ESRCH ? -1 : -2;
		ev = (struct epoll_event){ .events = EPOLLIN, .data.u32 = W_CHILD };
		if (rootfds[i] >= 0 && (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, rootfds[i], &ev)))
			polled = true;
		if (rootfds[i] == -2)
			polled = true;
	}
	if (epfd >= 0) {
		ev = (struct epoll_event){ .events = EPOLLIN, .data.u32 = W_READER };
		epoll_ctl(epfd, EPOLL_CTL_ADD, r->notify_fd, &ev);
		ev = (struct epoll_event){ .events = EPOLLIN, .data.u32 = W_STOP };
		if (w->stop_fd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, w->stop_fd, &ev))
			polled = true;
	}
	ring_watched = epfd >= 0 && r->idle && !watch_ring(epfd, r, EPOLL_CTL_ADD);

	for (;;) {
		double next = kill_at ? kill_at : deadline;

		timeout = polled || epfd < 0 ? POLL_MS : -1;
		if (w->tick) {
			double left_ms = (next_tick - now_s()) * 1000;
			int ms = left_ms <= 0 ? 0 : (int)left_ms + 1;

			timeout = timeout < 0 || ms < timeout ? ms : timeout;
		}
		if (next) {
			double left_ms = (next - now_s()) * 1000;
			int ms = left_ms <= 0 ? 0 : left_ms > 1e6 ? 1000000 : (int)left_ms + 1;

			timeout = timeout < 0 || ms < timeout ? ms : timeout;
		}
		if (epfd >= 0)
			n = epoll_wait(epfd, evs, 8, timeout);
		else
			n = usleep(timeout * 1000);
		for (i = 0; i < n && epfd >= 0; i++) {
			if (evs[i].data.u32 == W_RING && reader_fill(r) >= r->bytes / 2) {
				raise_reader(r);
				if (ring_watched && !watch_ring(epfd, r, EPOLL_CTL_DEL))
					ring_watched = false;
			} else if (evs[i].data.u32 == W_READER) {
				if (read(r->notify_fd, &count, sizeof(count)) < 0)
					count = 0;
				/* lowered: listen again (at most one event at once, for data already there) */
				if (!ring_watched && r->idle)
					ring_watched = !watch_ring(epfd, r, EPOLL_CTL_ADD);
			} else if (evs[i].data.u32 == W_STOP) {
				if (read(w->stop_fd, &count, sizeof(count)) < 0)
					count = 0;
				stopping = true;
			}
		}
		if (w->tick && now_s() >= next_tick) {
			w->tick(w->tick_arg);
			next_tick = now_s() + 1;
		}
		if (w->stop_fd >= 0 && !stopping && polled && read(w->stop_fd, &count, sizeof(count)) == sizeof(count))
			stopping = true;
		if ((rc = __atomic_load_n(&r->err, __ATOMIC_ACQUIRE))) {
			if (child > 0) {
				kill(child, SIGTERM);
				waitpid(child, &w->status, 0);
			}
			break;
		}
		if (stopping && w->stopped_by != STOPPED_BY_DURATION)
			w->stopped_by = STOPPED_BY_SIGNAL;
		if (child > 0) {
			/* The signal went on to CMD (or came from the terminal): it decides when to stop. */
			if ((*w->child_exited || pidfd >= 0 || polled) && waitpid(child, &w->status, WNOHANG) == child)
				break;
			if (kill_at && now_s() >= kill_at) {
				kill(child, SIGKILL);
				kill_at = 0;
			} else if (deadline && now_s() >= deadline) {
				if (w->stopped_by == STOPPED_BY_EXIT)
					w->stopped_by = STOPPED_BY_DURATION;
				kill(child, SIGINT);
				deadline = 0;
				kill_at = now_s() + 2;
			}
			continue;
		}
		if (stopping)
			break;
		if (w->nroots && (!rootfds || !roots_alive(w, rootfds)))
			break;
		if (deadline && now_s() >= deadline) {
			w->stopped_by = STOPPED_BY_DURATION;
			break;
		}
	}
	for (i = 0; rootfds && i < w->nroots; i++)
		if (rootfds[i] >= 0)
			close(rootfds[i]);
	free(rootfds);
	if (pidfd >= 0)
		close(pidfd);
	if (epfd >= 0)
		close(epfd);
	return rc;
}

void reader_stop(struct reader *r)
{
	pthread_mutex_lock(&r->lock);
	if (r->idle && !r->raised)
		set_policy(r->tid, SCHED_OTHER);
	pthread_mutex_unlock(&r->lock);
	atomic_store(&r->stop, true);
	pthread_join(r->thread, NULL);
	close(r->notify_fd);
	munmap((void *)r->pos, 2 * r->page);
}
