// SPDX-License-Identifier: MIT
/* shm-poll: two processes polling flags in shm_open memory, no system call on the
 * path: the measuring side writes a sequence number, the peer spins until it sees
 * it and writes it back. The name is unlinked as soon as it is mapped; the forked
 * peer inherits the mapping. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "workload.h"

struct poll_shared {
	_Alignas(64) _Atomic uint64_t req;   /* own cache lines: the figure is the two transfers */
	_Alignas(64) _Atomic uint64_t ack;
};

struct poll_state {
	struct poll_shared *sh;
	uint64_t seq;
	struct wl_peer peer;
};

static int peer_loop(struct wl_ctx *c, void *arg)
{
	struct poll_shared *sh = arg;
	uint64_t last = 0, v;   /* req starts at 0; the first request may already be there */

	for (;;) {
		while ((v = atomic_load_explicit(&sh->req, memory_order_acquire)) == last)
			wl_cpu_relax();
		last = v;
		atomic_store_explicit(&sh->ack, v, memory_order_release);
	}
	return 0;
}

static int shmpoll_setup(struct wl_ctx *c)
{
	struct poll_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->sh = wl_map_shared(c, "poll", sizeof(*s->sh));
	if (!s->sh)
		return -errno;
	return wl_peer_start(c, &s->peer, 1, peer_loop, s->sh);
}

static int shmpoll_run(struct wl_ctx *c)
{
	struct poll_state *s = c->priv;
	struct poll_shared *sh = s->sh;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t seq = ++s->seq;
		uint64_t t0 = wl_now();
		atomic_store_explicit(&sh->req, seq, memory_order_release);
		while (atomic_load_explicit(&sh->ack, memory_order_acquire) != seq) {
			if (wl_stop)
				return 0;
			wl_cpu_relax();
		}
		uint64_t t1 = wl_now();
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void shmpoll_teardown(struct wl_ctx *c)
{
	struct poll_state *s = c->priv;

	if (!s)
		return;
	wl_peer_stop(&s->peer);
	if (s->sh)
		munmap(s->sh, sizeof(*s->sh));
	free(s);
	c->priv = NULL;
}

const struct workload wl_shm_poll = {
	.name = "shm-poll",
	.summary = "two forked processes polling a shared-memory flag (shm_open), no system call",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SPINS,
	.setup = shmpoll_setup,
	.run = shmpoll_run,
	.teardown = shmpoll_teardown,
};
