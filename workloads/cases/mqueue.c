// SPDX-License-Identifier: MIT
/* mqueue: POSIX message-queue ping-pong, one queue per direction, one message of
 * --size bytes each way. Both queues are unlinked right after mq_open; the thread
 * or forked peer (--procs) keeps using the open descriptors. */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

#define MSGSIZE_MAX_FILE "/proc/sys/fs/mqueue/msgsize_max"

struct mq_state {
	const struct wl_ctx *c;       /* its injection points */
	mqd_t to_peer, to_me;
	size_t size;
	char *buf_a, *buf_b;
	struct wl_peer peer;
};

static int mq_send_retry(mqd_t q, const char *buf, size_t n)
{
	while (mq_send(q, buf, n, 0)) {
		if (errno != EINTR || wl_stop)
			return -errno;
	}
	return 0;
}

static int mq_recv_retry(mqd_t q, char *buf, size_t n)
{
	ssize_t r;

	while ((r = mq_receive(q, buf, n, NULL)) < 0) {
		if (errno != EINTR || wl_stop)
			return -errno;
	}
	return (size_t)r == n ? 0 : -EPROTO;
}

static int echo_loop(struct wl_ctx *c, void *arg)
{
	struct mq_state *s = arg;

	for (;;) {
		int err = mq_recv_retry(s->to_peer, s->buf_b, s->size);

		if (!err) {
			wl_inject_peer(c);
			err = mq_send_retry(s->to_me, s->buf_b, s->size);
		}
		if (err)
			return err;
	}
}

static mqd_t open_queue(struct wl_ctx *c, const char *what, size_t size)
{
	struct mq_attr attr = { .mq_maxmsg = 1, .mq_msgsize = (long)size };
	char name[96];
	mqd_t q;

	wl_posix_name(c, what, name, sizeof(name));
	q = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600, &attr);
	if (q != (mqd_t)-1)
		mq_unlink(name);
	return q;
}

static int mqueue_setup(struct wl_ctx *c)
{
	struct mq_state *s = calloc(1, sizeof(*s));
	unsigned long long msgsize_max = 0;
	FILE *f;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->c = c;
	s->to_peer = s->to_me = (mqd_t)-1;
	s->size = c->o->size;
	f = fopen(MSGSIZE_MAX_FILE, "re");
	if (!f || fscanf(f, "%llu", &msgsize_max) != 1) {
		if (f)
			fclose(f);
		return wl_fail(c, "mqueue: cannot read " MSGSIZE_MAX_FILE " (no POSIX message queues?)");
	}
	fclose(f);
	if (s->size > msgsize_max)
		return wl_fail(c, "--size %zu: a message queue carries at most %llu bytes (" MSGSIZE_MAX_FILE ")",
			       s->size, msgsize_max);
	s->buf_a = calloc(1, s->size);
	s->buf_b = calloc(1, s->size);
	if (!s->buf_a || !s->buf_b)
		return -ENOMEM;
	s->to_peer = open_queue(c, "mq-req", s->size);
	if (s->to_peer != (mqd_t)-1)
		s->to_me = open_queue(c, "mq-ack", s->size);
	if (s->to_me == (mqd_t)-1) {
		if (errno == ENOSYS)
			return wl_fail(c, "mqueue: this kernel has no POSIX message queues");
		if (errno == EMFILE || errno == ENOMEM)
			return wl_fail(c, "mqueue: mq_open: %s (RLIMIT_MSGQUEUE or queues_max)", strerror(errno));
		return -errno;
	}
	return wl_peer_start(c, &s->peer, c->o->procs, echo_loop, s);
}

static inline int mqueue_round(void *arg)
{
	const struct mq_state *s = arg;
	int err = mq_send_retry(s->to_peer, s->buf_a, s->size);

	if (err)
		return err;
	wl_inject_measuring(s->c);
	return mq_recv_retry(s->to_me, s->buf_a, s->size);
}

static int mqueue_run(struct wl_ctx *c)
{
	return wl_time_rounds(c, mqueue_round, c->priv);
}

static void mqueue_teardown(struct wl_ctx *c)
{
	struct mq_state *s = c->priv;

	if (!s)
		return;
	/* mq_receive and mq_send are cancellation points */
	wl_peer_cancel(&s->peer);
	if (s->to_peer != (mqd_t)-1)
		mq_close(s->to_peer);
	if (s->to_me != (mqd_t)-1)
		mq_close(s->to_me);
	free(s->buf_a);
	free(s->buf_b);
	free(s);
	c->priv = NULL;
}

const struct workload wl_mqueue = {
	.name = "mqueue",
	.summary = "POSIX message-queue ping-pong, one --size message each way (thread, or --procs)",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SIZE | WL_PROCS | WL_INJECT,
	.setup = mqueue_setup,
	.run = mqueue_run,
	.teardown = mqueue_teardown,
};
