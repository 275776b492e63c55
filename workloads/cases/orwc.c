// SPDX-License-Identifier: MIT
/* orwc: open, read, write and close of /dev/null, each syscall its own metric.
 * /dev/null does no I/O, so what is left is syscall entry/exit, VFS and the
 * file table (open/close) or the null driver (read/write). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "workload.h"

struct orwc_state {
	char *buf;
};

static int orwc_setup(struct wl_ctx *c)
{
	struct orwc_state *s = calloc(1, sizeof(*s));
	int fd;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->buf = calloc(1, c->o->size);
	if (!s->buf)
		return -ENOMEM;
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return wl_fail(c, "cannot open /dev/null: %m");
	close(fd);
	return 0;
}

static int orwc_run(struct wl_ctx *c)
{
	struct orwc_state *s = c->priv;
	size_t n = c->o->size;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		uint64_t t1 = wl_now();
		if (fd < 0)
			return -errno;
		wl_record(c, 0, i, t0, t1);

		t0 = wl_now();
		ssize_t r = read(fd, s->buf, n);
		t1 = wl_now();
		if (r != 0) {
			close(fd);
			return r < 0 ? -errno : -EIO;
		}
		wl_record(c, 1, i, t0, t1);

		t0 = wl_now();
		r = write(fd, s->buf, n);
		t1 = wl_now();
		if (r != (ssize_t)n) {
			close(fd);
			return r < 0 ? -errno : -EIO;
		}
		wl_record(c, 2, i, t0, t1);

		t0 = wl_now();
		int e = close(fd);
		t1 = wl_now();
		if (e)
			return -errno;
		wl_record(c, 3, i, t0, t1);
	}
	return 0;
}

static void orwc_teardown(struct wl_ctx *c)
{
	struct orwc_state *s = c->priv;

	if (!s)
		return;
	free(s->buf);
	free(s);
	c->priv = NULL;
}

const struct workload wl_orwc = {
	.name = "orwc",
	.summary = "open, read, write, close of /dev/null, each timed as its own metric",
	.seed = "004_dc97f491540bbac1.txt: open 2047 ns, read 192 ns, write 212 ns, close 561 ns (means)",
	.metrics = { "open", "read", "write", "close" },
	.flags = WL_SIZE | WL_SINGLE | WL_NO_COPY,
	.setup = orwc_setup,
	.run = orwc_run,
	.teardown = orwc_teardown,
};
