// SPDX-License-Identifier: MIT
/* cond: pthread condition-variable ping-pong. One mutex, a turn word and one
 * condition variable per direction; the measuring side hands the turn to the peer
 * and waits until it comes back. --procs: the same objects PTHREAD_PROCESS_SHARED
 * on a MAP_SHARED page, the peer forked. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "workload.h"

struct cond_shared {
	pthread_mutex_t lock;
	pthread_cond_t to_peer, to_me;
	int turn;                     /* 1: the peer's turn */
	int stop;
};

struct cond_state {
	struct cond_shared *sh;
	int inited;
	struct wl_peer peer;
};

static int peer_loop(struct wl_ctx *c, void *arg)
{
	struct cond_shared *sh = arg;

	pthread_mutex_lock(&sh->lock);
	for (;;) {
		while (sh->turn != 1 && !sh->stop)
			pthread_cond_wait(&sh->to_peer, &sh->lock);
		if (sh->stop)
			break;
		sh->turn = 0;
		pthread_cond_signal(&sh->to_me);
	}
	pthread_mutex_unlock(&sh->lock);
	return 0;
}

static int cond_setup(struct wl_ctx *c)
{
	struct cond_state *s = calloc(1, sizeof(*s));
	int pshared = c->o->procs ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE, err;
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->sh = wl_map_shared(c, NULL, sizeof(*s->sh));
	if (!s->sh)
		return -errno;
	pthread_mutexattr_init(&ma);
	pthread_condattr_init(&ca);
	pthread_mutexattr_setpshared(&ma, pshared);
	pthread_condattr_setpshared(&ca, pshared);
	err = -pthread_mutex_init(&s->sh->lock, &ma);
	if (!err)
		err = -pthread_cond_init(&s->sh->to_peer, &ca);
	if (!err)
		err = -pthread_cond_init(&s->sh->to_me, &ca);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_destroy(&ca);
	if (err)
		return err;
	s->inited = 1;
	return wl_peer_start(c, &s->peer, c->o->procs, peer_loop, s->sh);
}

static int cond_run(struct wl_ctx *c)
{
	struct cond_state *s = c->priv;
	struct cond_shared *sh = s->sh;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		pthread_mutex_lock(&sh->lock);
		sh->turn = 1;
		pthread_cond_signal(&sh->to_peer);
		while (sh->turn == 1)
			pthread_cond_wait(&sh->to_me, &sh->lock);
		pthread_mutex_unlock(&sh->lock);
		uint64_t t1 = wl_now();
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void cond_teardown(struct wl_ctx *c)
{
	struct cond_state *s = c->priv;

	if (!s)
		return;
	if (s->peer.thread_started) {
		pthread_mutex_lock(&s->sh->lock);
		s->sh->stop = 1;
		pthread_cond_signal(&s->sh->to_peer);
		pthread_mutex_unlock(&s->sh->lock);
	}
	wl_peer_stop(&s->peer);
	/* after a forked peer was killed inside pthread_cond_wait, destroying the
	 * condition would wait for that waiter forever: the page just goes */
	if (s->inited && !s->peer.pid) {
		pthread_cond_destroy(&s->sh->to_peer);
		pthread_cond_destroy(&s->sh->to_me);
		pthread_mutex_destroy(&s->sh->lock);
	}
	if (s->sh)
		munmap(s->sh, sizeof(*s->sh));
	free(s);
	c->priv = NULL;
}

const struct workload wl_cond = {
	.name = "cond",
	.summary = "pthread condition-variable ping-pong under one mutex (thread, or --procs)",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_PROCS,
	.setup = cond_setup,
	.run = cond_run,
	.teardown = cond_teardown,
};
