// SPDX-License-Identifier: MIT
/* pipe-nonblock: one thread, O_NONBLOCK pipes, three syscalls timed one by one:
 * a write of --size bytes into an empty pipe, the read that takes them out
 * again, and a write into a second pipe that is kept full, which fails with
 * EAGAIN. The seed report wrote into a filling pipe and drained it on EAGAIN;
 * here every timed write finds the pipe empty, so no drain lands among them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workload.h"

#define PIPE_NONBLOCK_MAX (1u << 20)   /* default /proc/sys/fs/pipe-max-size */

struct pipe_nonblock_state {
	int data[2], full[2];
	char *buf;
};

/* Fill fd's pipe until a write fails with EAGAIN; the bytes it took, or -errno. */
static long fill_pipe(int fd)
{
	static char chunk[65536];
	long bytes = 0;
	ssize_t r;

	while ((r = write(fd, chunk, sizeof(chunk))) > 0)
		if ((bytes += r) > (64l << 20))
			return -EFBIG;
	if (errno != EAGAIN)
		return -errno;
	/* a partly used last page could still take a small write */
	while ((r = write(fd, chunk, 1)) > 0)
		if ((bytes += r) > (64l << 20))
			return -EFBIG;
	return errno == EAGAIN ? bytes : -errno;
}

static int pipe_nonblock_setup(struct wl_ctx *c)
{
	struct pipe_nonblock_state *s = calloc(1, sizeof(*s));
	long full;

	if (!s)
		return -ENOMEM;
	s->data[0] = s->data[1] = s->full[0] = s->full[1] = -1;
	c->priv = s;
	s->buf = calloc(1, c->o->size);
	if (!s->buf)
		return -ENOMEM;
	if (pipe2(s->data, O_NONBLOCK | O_CLOEXEC) || pipe2(s->full, O_NONBLOCK | O_CLOEXEC))
		return -errno;
	if (c->o->size > 65536 && fcntl(s->data[1], F_SETPIPE_SZ, (int)c->o->size) < 0)
		return wl_fail(c, "cannot grow the pipe to %llu bytes: %s%s",
			       (unsigned long long)c->o->size, strerror(errno),
			       errno == EPERM ? " (above /proc/sys/fs/pipe-max-size)" : "");
	full = fill_pipe(s->full[1]);
	if (full < 0)
		return (int)full;
	snprintf(c->extra_json, sizeof(c->extra_json), "\"full_pipe_bytes\": %ld", full);
	return 0;
}

static int pipe_nonblock_run(struct wl_ctx *c)
{
	struct pipe_nonblock_state *s = c->priv;
	size_t n = c->o->size;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		ssize_t r = write(s->data[1], s->buf, n);
		uint64_t t1 = wl_now();
		if (r != (ssize_t)n)
			return r < 0 ? -errno : wl_fail(c, "short write: %zd of %zu bytes", r, n);
		wl_record(c, 0, i, t0, t1);

		t0 = wl_now();
		r = read(s->data[0], s->buf, n);
		t1 = wl_now();
		if (r != (ssize_t)n)
			return r < 0 ? -errno : wl_fail(c, "short read: %zd of %zu bytes", r, n);
		wl_record(c, 1, i, t0, t1);

		t0 = wl_now();
		r = write(s->full[1], s->buf, n);
		t1 = wl_now();
		if (r >= 0 || errno != EAGAIN)
			return r >= 0 ? wl_fail(c, "write into the full pipe succeeded") : -errno;
		wl_record(c, 2, i, t0, t1);
	}
	return 0;
}

static void pipe_nonblock_teardown(struct wl_ctx *c)
{
	struct pipe_nonblock_state *s = c->priv;

	if (!s)
		return;
	wl_close_fds(s->data, 2);
	wl_close_fds(s->full, 2);
	free(s->buf);
	free(s);
	c->priv = NULL;
}

const struct workload wl_pipe_nonblock = {
	.name = "pipe-nonblock",
	.summary = "one thread, O_NONBLOCK pipe: write into an empty pipe, read it back, write into a full pipe (EAGAIN)",
	.seed = "004_dc97f491540bbac1.txt: write 347 ns, read 342 ns (means)",
	.metrics = { "write", "read", "write_eagain" },
	.flags = WL_SIZE | WL_SINGLE,
	.max_size = PIPE_NONBLOCK_MAX,
	.setup = pipe_nonblock_setup,
	.run = pipe_nonblock_run,
	.teardown = pipe_nonblock_teardown,
};
