// SPDX-License-Identifier: MIT
/* sched-yield: two threads on one CPU yielding to each other: the cost of a
 * context switch. The measuring thread yields until it sees that the peer ran
 * (its counter moved), so one iteration is two switches; one_way is one switch. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "workload.h"

struct yield_state {
	_Alignas(64) _Atomic uint64_t peer_runs;
	_Alignas(64) atomic_int stop;
	struct wl_peer peer;
};

static int peer_loop(struct wl_ctx *c, void *arg)
{
	struct yield_state *s = arg;

	while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&s->peer_runs, 1, memory_order_relaxed);
		sched_yield();
	}
	return 0;
}

static int yield_setup(struct wl_ctx *c)
{
	struct yield_state *s = aligned_alloc(64, sizeof(struct yield_state));

	if (!s)
		return -ENOMEM;
	*s = (struct yield_state){ 0 };
	c->priv = s;
	if (c->o->cpu[0] < 0 || c->o->cpu[0] != c->o->cpu[1])
		snprintf(c->warning, sizeof(c->warning),
			 "sched-yield on two CPUs (or unpinned) switches nothing: the figure is sched_yield() alone");
	return wl_peer_start(c, &s->peer, 0, peer_loop, s);
}

static int yield_run(struct wl_ctx *c)
{
	struct yield_state *s = c->priv;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t before = atomic_load_explicit(&s->peer_runs, memory_order_relaxed);
		uint64_t t0 = wl_now();
		do
			sched_yield();
		while (atomic_load_explicit(&s->peer_runs, memory_order_relaxed) == before && !wl_stop);
		uint64_t t1 = wl_now();
		if (atomic_load_explicit(&s->peer_runs, memory_order_relaxed) == before)
			return 0;   /* interrupted before the peer ran */
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void yield_teardown(struct wl_ctx *c)
{
	struct yield_state *s = c->priv;

	if (!s)
		return;
	atomic_store(&s->stop, 1);
	wl_peer_stop(&s->peer);
	free(s);
	c->priv = NULL;
}

const struct workload wl_sched_yield = {
	.name = "sched-yield",
	.summary = "two threads on one CPU yielding to each other: two context switches per round",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SAME_CPU_DEF,
	.setup = yield_setup,
	.run = yield_run,
	.teardown = yield_teardown,
};
