// SPDX-License-Identifier: MIT
/* pipe-self: one process writes --size bytes into a pipe and reads them back;
 * one write+read is one iteration. The pipe is reused, or with --fresh created
 * before and closed after every iteration, outside the timed part, as the
 * seed report did. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

#define PIPE_SELF_MAX (1u << 20)   /* default /proc/sys/fs/pipe-max-size */

struct pipe_self_state {
	int fd[2];
	char *buf;
};

/* The whole message must fit, or the write would block with nobody to read. */
static int open_pipe(struct wl_ctx *c, int fd[2])
{
	if (pipe2(fd, O_CLOEXEC))
		return -errno;
	if (c->o->size > 65536 && fcntl(fd[1], F_SETPIPE_SZ, (int)c->o->size) < 0) {
		int err = errno;

		wl_close_fds(fd, 2);
		return wl_fail(c, "cannot grow the pipe to %llu bytes: %s%s",
			       (unsigned long long)c->o->size, strerror(err),
			       err == EPERM ? " (above /proc/sys/fs/pipe-max-size)" : "");
	}
	return 0;
}

static int pipe_self_setup(struct wl_ctx *c)
{
	struct pipe_self_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->fd[0] = s->fd[1] = -1;
	c->priv = s;
	s->buf = calloc(1, c->o->size);
	if (!s->buf)
		return -ENOMEM;
	/* with --fresh too, so that a size no pipe can hold fails here, not mid-run */
	int err = open_pipe(c, s->fd);

	if (!err && c->o->fresh)
		wl_close_fds(s->fd, 2);
	return err;
}

static int pipe_self_run(struct wl_ctx *c)
{
	struct pipe_self_state *s = c->priv;
	size_t n = c->o->size;
	uint64_t total = wl_total(c);
	int err = 0;

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		if (c->o->fresh && (err = open_pipe(c, s->fd)))
			return err;
		uint64_t t0 = wl_now();
		err = wl_write_full(s->fd[1], s->buf, n);
		if (!err)
			err = wl_read_full(s->fd[0], s->buf, n);
		uint64_t t1 = wl_now();
		if (c->o->fresh)
			wl_close_fds(s->fd, 2);
		if (err)
			return err;
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void pipe_self_teardown(struct wl_ctx *c)
{
	struct pipe_self_state *s = c->priv;

	if (!s)
		return;
	wl_close_fds(s->fd, 2);
	free(s->buf);
	free(s);
	c->priv = NULL;
}

const struct workload wl_pipe_self = {
	.name = "pipe-self",
	.summary = "write --size bytes into a pipe and read them back in one process (--fresh: new pipe per iteration, creation untimed)",
	.seed = "003_d26c918e84800f01.txt: 1.2 us mean, 1.09 us median (pipe.cpp, new pipe per iteration, creation untimed)",
	.metrics = { "write_read" },
	.flags = WL_SIZE | WL_FRESH | WL_SINGLE,
	.max_size = PIPE_SELF_MAX,
	.setup = pipe_self_setup,
	.run = pipe_self_run,
	.teardown = pipe_self_teardown,
};
