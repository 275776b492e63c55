// SPDX-License-Identifier: MIT
/* futex: raw FUTEX_WAIT/FUTEX_WAKE ping-pong on two shared words, no library in
 * between. The measuring side publishes a sequence number in "req" and wakes the
 * peer, the peer copies it to "ack" and wakes back. Threads use private futexes;
 * --procs forks the peer and uses shared futexes on a MAP_SHARED page. */
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "workload.h"

struct futex_shared {
	_Alignas(64) atomic_uint req;
	_Alignas(64) atomic_uint ack;
	_Alignas(64) atomic_int stop;
};

struct futex_state {
	struct futex_shared *sh;
	int priv;                     /* FUTEX_PRIVATE_FLAG for threads, 0 across processes */
	unsigned seq;
	struct wl_peer peer;
};

static long futex_op(atomic_uint *word, int op, unsigned val)
{
	return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

static int peer_loop(struct wl_ctx *c, void *arg)
{
	struct futex_state *s = arg;
	struct futex_shared *sh = s->sh;
	unsigned last = 0, v;   /* req starts at 0; the first request may already be there */

	for (;;) {
		while ((v = atomic_load_explicit(&sh->req, memory_order_acquire)) == last) {
			if (atomic_load(&sh->stop))
				return 0;
			if (futex_op(&sh->req, FUTEX_WAIT | s->priv, last) && errno != EAGAIN && errno != EINTR)
				return -errno;
		}
		last = v;
		if (atomic_load(&sh->stop))
			return 0;
		wl_inject_peer(c);
		atomic_store_explicit(&sh->ack, v, memory_order_release);
		if (futex_op(&sh->ack, FUTEX_WAKE | s->priv, 1) < 0)
			return -errno;
	}
}

static int futex_setup(struct wl_ctx *c)
{
	struct futex_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->priv = c->o->procs ? 0 : FUTEX_PRIVATE_FLAG;
	s->sh = wl_map_shared(c, NULL, sizeof(*s->sh));
	if (!s->sh)
		return -errno;
	return wl_peer_start(c, &s->peer, c->o->procs, peer_loop, s);
}

static int futex_run(struct wl_ctx *c)
{
	struct futex_state *s = c->priv;
	struct futex_shared *sh = s->sh;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		unsigned seq = ++s->seq, a;
		uint64_t t0 = wl_now();
		atomic_store_explicit(&sh->req, seq, memory_order_release);
		if (futex_op(&sh->req, FUTEX_WAKE | s->priv, 1) < 0)
			return -errno;
		wl_inject_measuring(c);
		while ((a = atomic_load_explicit(&sh->ack, memory_order_acquire)) != seq) {
			if (futex_op(&sh->ack, FUTEX_WAIT | s->priv, a) && errno != EAGAIN) {
				if (errno != EINTR)
					return -errno;
				if (wl_stop)
					return 0;
			}
		}
		uint64_t t1 = wl_now();
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void futex_teardown(struct wl_ctx *c)
{
	struct futex_state *s = c->priv;

	if (!s)
		return;
	if (s->peer.thread_started) {
		atomic_store(&s->sh->stop, 1);
		atomic_fetch_add(&s->sh->req, 1);
		futex_op(&s->sh->req, FUTEX_WAKE | s->priv, 1);
	}
	wl_peer_stop(&s->peer);
	if (s->sh)
		munmap(s->sh, sizeof(*s->sh));
	free(s);
	c->priv = NULL;
}

const struct workload wl_futex = {
	.name = "futex",
	.summary = "raw FUTEX_WAIT/FUTEX_WAKE ping-pong on two shared words (thread, or --procs)",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_PROCS | WL_INJECT,
	.setup = futex_setup,
	.run = futex_run,
	.teardown = futex_teardown,
};
