// SPDX-License-Identifier: MIT
/* signal: signal ping-pong. The measuring thread sends SIGUSR1 to the peer thread
 * (or forked process with --procs) with tgkill, the peer takes it with sigwaitinfo
 * and answers SIGUSR2 the same way. Both signals stay blocked, so no handler runs:
 * the figure is delivery and wake-up. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "workload.h"

#define SIG_TO_PEER SIGUSR1
#define SIG_TO_ME   SIGUSR2

struct sig_shared {
	atomic_int peer_pid, peer_tid;   /* published by the peer once it waits */
	pid_t me_pid, me_tid;
};

struct sig_state {
	struct sig_shared *sh;
	sigset_t old_mask;
	int mask_saved;
	struct wl_peer peer;
};

static int send_sig(pid_t pid, pid_t tid, int sig)
{
	return syscall(SYS_tgkill, pid, tid, sig) ? -errno : 0;
}

/* sigwaitinfo for sig; -EINTR only when the user asked to stop. */
static int wait_sig(int sig)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	while (sigwaitinfo(&set, NULL) < 0) {
		if (errno != EINTR || wl_stop)
			return -errno;
	}
	return 0;
}

static int peer_loop(struct wl_ctx *c, void *arg)
{
	struct sig_shared *sh = arg;

	atomic_store(&sh->peer_pid, getpid());
	atomic_store(&sh->peer_tid, gettid());
	for (;;) {
		int err = wait_sig(SIG_TO_PEER);

		if (!err)
			err = send_sig(sh->me_pid, sh->me_tid, SIG_TO_ME);
		if (err)
			return err;
	}
}

static int signal_setup(struct wl_ctx *c)
{
	struct sig_state *s = calloc(1, sizeof(*s));
	sigset_t both;
	int err;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->sh = wl_map_shared(c, NULL, sizeof(*s->sh));
	if (!s->sh)
		return -errno;
	s->sh->me_pid = getpid();
	s->sh->me_tid = gettid();
	/* blocked before the peer exists: it inherits the mask, so no signal can
	 * arrive unblocked (SIGUSR1's default action would end the process) */
	sigemptyset(&both);
	sigaddset(&both, SIG_TO_PEER);
	sigaddset(&both, SIG_TO_ME);
	if ((err = pthread_sigmask(SIG_BLOCK, &both, &s->old_mask)))
		return -err;
	s->mask_saved = 1;
	err = wl_peer_start(c, &s->peer, c->o->procs, peer_loop, s->sh);
	if (err)
		return err;
	while (!atomic_load(&s->sh->peer_tid) && !wl_stop)
		usleep(100);
	return 0;
}

struct sig_target {
	pid_t pid, tid;
};

static inline int signal_round(void *arg)
{
	const struct sig_target *peer = arg;
	int err = send_sig(peer->pid, peer->tid, SIG_TO_PEER);

	return err ? err : wait_sig(SIG_TO_ME);
}

static int signal_run(struct wl_ctx *c)
{
	struct sig_state *s = c->priv;
	struct sig_target peer = { atomic_load(&s->sh->peer_pid), atomic_load(&s->sh->peer_tid) };

	return wl_time_rounds(c, signal_round, &peer);
}

static void signal_teardown(struct wl_ctx *c)
{
	struct sig_state *s = c->priv;
	sigset_t mine;
	struct timespec zero = { 0, 0 };

	if (!s)
		return;
	/* sigwaitinfo is a cancellation point */
	wl_peer_cancel(&s->peer);
	if (s->mask_saved) {
		/* an answer that was in flight when the run stopped must not be
		 * delivered with its default action once unblocked */
		sigemptyset(&mine);
		sigaddset(&mine, SIG_TO_PEER);
		sigaddset(&mine, SIG_TO_ME);
		while (sigtimedwait(&mine, NULL, &zero) > 0)
			;
		pthread_sigmask(SIG_SETMASK, &s->old_mask, NULL);
	}
	if (s->sh)
		munmap(s->sh, sizeof(*s->sh));
	free(s);
	c->priv = NULL;
}

const struct workload wl_signal = {
	.name = "signal",
	.summary = "signal ping-pong: tgkill and sigwaitinfo with SIGUSR1/SIGUSR2 blocked (thread, or --procs)",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_PROCS,
	.setup = signal_setup,
	.run = signal_run,
	.teardown = signal_teardown,
};
