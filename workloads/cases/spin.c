// SPDX-License-Identifier: MIT
/* Spinlocks built on C11 atomics, the experiments of reports 000-002.
 *   --mode lock     both sides take and release the lock in a loop; the measuring
 *                   side times each lock+unlock pair while the peer contends (000, 001).
 *   --mode handoff  the measuring side sets a flag under the lock, the peer clears it
 *                   under the lock; one round lasts until the measuring side sees the
 *                   flag cleared (002).
 * spin-tas-*: atomic_flag test-and-set, spinning on the exchange itself.
 * spin-ttas-threads: test-and-test-and-set, spinning on a plain load with the CPU's
 * pause hint, so the waiter does not steal the line from the owner on every try. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "workload.h"

enum spin_kind { SPIN_TAS, SPIN_TTAS };
enum spin_mode { MODE_LOCK, MODE_HANDOFF };

/* One cache line each: the lock, the flag it protects, and the control words, so
 * the figure is the lock's traffic and not false sharing with the stop flag. */
struct spin_shared {
	_Alignas(64) atomic_flag tas;
	_Alignas(64) atomic_bool ttas;
	_Alignas(64) volatile int flag;
	_Alignas(64) atomic_int stop;
	atomic_int ready;
};

/* Each workload lists the metric of its default mode first; c->primary picks the
 * one the chosen mode records. */
struct spin_state {
	struct spin_shared *sh;
	enum spin_kind kind;
	enum spin_mode mode;
	struct wl_peer peer;
};

static inline void spin_lock(struct spin_shared *sh, enum spin_kind kind)
{
	if (kind == SPIN_TAS) {
		while (atomic_flag_test_and_set_explicit(&sh->tas, memory_order_acquire))
			;
		return;
	}
	for (;;) {
		if (!atomic_exchange_explicit(&sh->ttas, 1, memory_order_acquire))
			return;
		while (atomic_load_explicit(&sh->ttas, memory_order_relaxed))
			wl_cpu_relax();
	}
}

static inline void spin_unlock(struct spin_shared *sh, enum spin_kind kind)
{
	if (kind == SPIN_TAS)
		atomic_flag_clear_explicit(&sh->tas, memory_order_release);
	else
		atomic_store_explicit(&sh->ttas, 0, memory_order_release);
}

static int peer_loop(struct wl_ctx *c, void *arg)
{
	struct spin_state *s = arg;
	struct spin_shared *sh = s->sh;

	atomic_store(&sh->ready, 1);
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		spin_lock(sh, s->kind);
		if (s->mode == MODE_HANDOFF && sh->flag)
			sh->flag = 0;
		spin_unlock(sh, s->kind);
	}
	return 0;
}

static int spin_setup_kind(struct wl_ctx *c, enum spin_kind kind, int procs)
{
	struct spin_state *s = calloc(1, sizeof(*s));
	const char *mode = c->o->mode ? c->o->mode : strtok(strdupa(c->w->modes), ",");
	int err;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->kind = kind;
	s->mode = strcmp(mode, "handoff") == 0 ? MODE_HANDOFF : MODE_LOCK;
	c->primary = strcmp(c->w->metrics[0], s->mode == MODE_HANDOFF ? "rtt" : "lock_unlock") != 0;
	snprintf(c->mode_used, sizeof(c->mode_used), "%s", mode);

	if (procs) {
		/* shm_open + mmap as in report 000 */
		s->sh = wl_map_shared(c, "spin", sizeof(*s->sh));
	} else {
		s->sh = mmap(NULL, sizeof(*s->sh), PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (s->sh == MAP_FAILED)
			s->sh = NULL;
	}
	if (!s->sh)
		return -errno;
	atomic_flag_clear(&s->sh->tas);

	err = wl_peer_start(c, &s->peer, procs, peer_loop, s);
	if (err)
		return err;
	while (!atomic_load(&s->sh->ready) && !wl_stop)
		sched_yield();
	return 0;
}

static int spin_run(struct wl_ctx *c)
{
	struct spin_state *s = c->priv;
	struct spin_shared *sh = s->sh;
	enum spin_kind kind = s->kind;
	uint64_t total = wl_total(c);

	if (s->mode == MODE_LOCK) {
		for (uint64_t i = 0; i < total && !wl_stop; i++) {
			uint64_t t0 = wl_now();
			spin_lock(sh, kind);
			spin_unlock(sh, kind);
			uint64_t t1 = wl_now();
			wl_record(c, c->primary, i, t0, t1);
		}
		return 0;
	}
	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		int seen;
		uint64_t t0 = wl_now();
		spin_lock(sh, kind);
		sh->flag = 1;
		spin_unlock(sh, kind);
		do {
			spin_lock(sh, kind);
			seen = sh->flag;
			spin_unlock(sh, kind);
		} while (seen && !wl_stop);
		uint64_t t1 = wl_now();
		if (seen)
			break;   /* interrupted mid-round: that round did not complete */
		wl_record(c, c->primary, i, t0, t1);
	}
	return 0;
}

static void spin_teardown(struct wl_ctx *c)
{
	struct spin_state *s = c->priv;

	if (!s)
		return;
	if (s->sh)
		atomic_store(&s->sh->stop, 1);
	wl_peer_stop(&s->peer);
	if (s->sh)
		munmap(s->sh, sizeof(*s->sh));
	free(s);
	c->priv = NULL;
}

static int tas_threads_setup(struct wl_ctx *c) { return spin_setup_kind(c, SPIN_TAS, 0); }
static int tas_procs_setup(struct wl_ctx *c) { return spin_setup_kind(c, SPIN_TAS, 1); }
static int ttas_threads_setup(struct wl_ctx *c) { return spin_setup_kind(c, SPIN_TTAS, 0); }

const struct workload wl_spin_tas_threads = {
	.name = "spin-tas-threads",
	.summary = "atomic_flag test-and-set spinlock between two threads: lock+unlock under contention, or a flag handoff round",
	.seed = "000_6716c315987b0d95.txt: 37.6 ns (lock, macOS); 001_58aa7d8e1e25a57e.txt: 43 ns (lock, WSL); "
		"002_460f2a7bc619b165.txt: 113.5 ns (handoff, one way = rtt/2, macOS)",
	.metrics = { "lock_unlock", "rtt" },
	.derived = "one_way=rtt/2",
	.modes = "lock,handoff",
	.mode_help = "lock: lock+unlock under contention (lock_unlock); handoff: a flag passed there and back (rtt)",
	.flags = WL_SPINS,
	.setup = tas_threads_setup,
	.run = spin_run,
	.teardown = spin_teardown,
};

const struct workload wl_spin_tas_procs = {
	.name = "spin-tas-procs",
	.summary = "atomic_flag test-and-set spinlock in shm_open memory between two forked processes",
	.seed = "000_6716c315987b0d95.txt: 41.4 ns (lock, shared memory, macOS)",
	.metrics = { "lock_unlock", "rtt" },
	.derived = "one_way=rtt/2",
	.modes = "lock,handoff",
	.mode_help = "lock: lock+unlock under contention (lock_unlock); handoff: a flag passed there and back (rtt)",
	.flags = WL_SPINS,
	.setup = tas_procs_setup,
	.run = spin_run,
	.teardown = spin_teardown,
};

const struct workload wl_spin_ttas_threads = {
	.name = "spin-ttas-threads",
	.summary = "test-and-test-and-set spinlock with the pause hint between two threads",
	.seed = "002_460f2a7bc619b165.txt: 88.2 ns (handoff, one way = rtt/2, macOS)",
	.metrics = { "rtt", "lock_unlock" },
	.derived = "one_way=rtt/2",
	.modes = "handoff,lock",
	.mode_help = "handoff: a flag passed there and back (rtt); lock: lock+unlock under contention (lock_unlock)",
	.flags = WL_SPINS,
	.setup = ttas_threads_setup,
	.run = spin_run,
	.teardown = spin_teardown,
};
