// SPDX-License-Identifier: MIT
/* pipe: ping-pong between two forked processes over two pipes. The measuring
 * side writes --size bytes to the peer, the peer reads them and writes them
 * back; one round trip is one iteration. pipe-bandwidth: the measuring side
 * writes --size bytes after --size bytes and the peer only reads; one write is
 * one iteration (metric write), so --size over the mean write is the pipe's
 * bandwidth for writes of that size. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "workload.h"

struct pipe_state {
	int to_peer[2], to_me[2];
	struct wl_peer peer;
	char *buf;
	int stream;    /* pipe-bandwidth: one way only, each write timed */
};

static int echo_peer(struct wl_ctx *c, void *arg)
{
	struct pipe_state *s = arg;
	size_t n = c->o->size;
	int err;

	close(s->to_peer[1]);
	close(s->to_me[0]);
	for (;;) {
		err = wl_read_full(s->to_peer[0], s->buf, n);
		if (err)
			return err == -EPIPE ? 0 : err;   /* EOF: the measuring side is done */
		if (s->stream)
			continue;
		wl_inject_peer(c);
		err = wl_write_full(s->to_me[1], s->buf, n);
		if (err)
			return err;
	}
}

static int pipe_setup_kind(struct wl_ctx *c, int stream)
{
	struct pipe_state *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->to_peer[0] = s->to_peer[1] = s->to_me[0] = s->to_me[1] = -1;
	c->priv = s;
	s->stream = stream;
	s->buf = calloc(1, c->o->size);
	if (!s->buf)
		return -ENOMEM;
	if (pipe(s->to_peer) || pipe(s->to_me))
		return -errno;
	err = wl_peer_start(c, &s->peer, 1, echo_peer, s);
	if (err)
		return err;
	close(s->to_peer[0]);
	close(s->to_me[1]);
	s->to_peer[0] = s->to_me[1] = -1;
	return 0;
}

static int pipe_setup(struct wl_ctx *c) { return pipe_setup_kind(c, 0); }
static int pipe_bandwidth_setup(struct wl_ctx *c) { return pipe_setup_kind(c, 1); }

static int pipe_run(struct wl_ctx *c)
{
	struct pipe_state *s = c->priv;
	size_t n = c->o->size;
	uint64_t total = wl_total(c);
	int err;

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		err = wl_write_full(s->to_peer[1], s->buf, n);
		if (!err && s->stream) {
			uint64_t t1 = wl_now();
			wl_record(c, 0, i, t0, t1);   /* pipe-bandwidth's one metric: write */
			continue;
		}
		if (!err) {
			wl_inject_measuring(c);
			err = wl_read_full(s->to_me[0], s->buf, n);
		}
		uint64_t t1 = wl_now();
		if (err == -EPIPE)
			return wl_fail(c, "the peer process is gone (pipe closed)");
		if (err)
			return err;
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void pipe_teardown(struct wl_ctx *c)
{
	struct pipe_state *s = c->priv;

	if (!s)
		return;
	wl_close_fds(s->to_peer, 2);
	wl_close_fds(s->to_me, 2);
	wl_peer_stop(&s->peer);
	free(s->buf);
	free(s);
	c->priv = NULL;
}

const struct workload wl_pipe = {
	.name = "pipe",
	.summary = "round trip of --size bytes between two forked processes over two pipes",
	.seed = "003_d26c918e84800f01.txt: 6.71 us mean, 5.49 us median (round trip)",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SIZE | WL_INJECT,
	.setup = pipe_setup,
	.run = pipe_run,
	.teardown = pipe_teardown,
};

const struct workload wl_pipe_bandwidth = {
	.name = "pipe-bandwidth",
	.summary = "--size bytes written after --size bytes over a pipe to a forked peer that only reads, each write "
		   "timed: --size / the mean write is the bandwidth",
	.seed = "",
	.metrics = { "write" },
	.flags = WL_SIZE,
	.setup = pipe_bandwidth_setup,
	.run = pipe_run,
	.teardown = pipe_teardown,
};
