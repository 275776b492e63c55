// SPDX-License-Identifier: MIT
/* The iterations.bin writer (layout in iterfile.h): a header, then each run's timed
 * iterations appended in time order, the header's count rewritten after each append. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "iterfile.h"
#include "outfile.h"

static int write_header(struct iterfile *f)
{
	struct iter_file_header h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, ITER_FILE_MAGIC, sizeof(h.magic));
	h.version = ITER_FILE_VERSION;
	h.rec_size = sizeof(struct iter_rec);
	h.count = f->count;
	h.nmetrics = f->nmetrics;
	for (;;) {
		ssize_t r = pwrite(f->fd, &h, sizeof(h), 0);

		if (r == (ssize_t)sizeof(h))
			return 0;
		if (r >= 0)
			return -EIO;
		if (errno != EINTR)
			return -errno;
	}
}

int iterfile_create(struct iterfile *f, int dirfd, const char *name, uint32_t nmetrics)
{
	int err;

	f->fd = outfile_create_final(dirfd, name);
	if (f->fd < 0)
		return -errno;
	f->count = f->seq = 0;
	f->nmetrics = nmetrics;
	err = write_header(f);
	if (err) {
		close(f->fd);
		f->fd = -1;
	}
	return err;
}

static int flush_recs(struct iterfile *f, const struct iter_rec *buf, size_t n)
{
	off_t at = (off_t)(sizeof(struct iter_file_header) + f->count * sizeof(struct iter_rec));
	size_t bytes = n * sizeof(*buf), off = 0;

	while (off < bytes) {
		ssize_t r = pwrite(f->fd, (const char *)buf + off, bytes - off, at + (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)r;
	}
	f->count += n;
	return 0;
}

/* Each metric's slots are in time order already (a case records iteration k after
 * k-1), so a k-way merge on t_start gives the invocation's time order without
 * sorting or extra memory. */
int iterfile_append_run(struct iterfile *f, const struct wl_ctx *c, unsigned nmetrics,
			uint64_t *written, uint64_t *unrecorded)
{
	enum { CHUNK = 4096 };
	static struct iter_rec buf[CHUNK];
	uint64_t n = c->o->iterations, pos[WL_MAX_METRICS], last[WL_MAX_METRICS];
	size_t fill = 0;
	int err;

	*written = *unrecorded = 0;
	for (unsigned m = 0; m < nmetrics; m++) {
		pos[m] = 0;
		last[m] = 0;
		for (uint64_t k = n; k > 0; k--)
			if (c->t1[m * n + k - 1]) {
				last[m] = k;
				break;
			}
		for (uint64_t k = 0; k < last[m]; k++)
			if (!c->t1[m * n + k])
				(*unrecorded)++;
	}
	for (;;) {
		int best = -1;

		for (unsigned m = 0; m < nmetrics; m++) {
			while (pos[m] < last[m] && !c->t1[m * n + pos[m]])
				pos[m]++;
			if (pos[m] < last[m] &&
			    (best < 0 || c->t0[m * n + pos[m]] < c->t0[best * n + pos[best]]))
				best = (int)m;
		}
		if (best < 0)
			break;
		uint64_t i = (uint64_t)best * n + pos[best];
		buf[fill++] = (struct iter_rec){
			.seq = f->seq++,
			.t_start_ns = c->t0[i],
			.t_end_ns = c->t1[i],
			.run = c->run,
			.metric = (uint16_t)best,
			.cpu = c->cpu[i],
			.tid = c->tid[i],
			.iteration = (uint32_t)pos[best],
		};
		pos[best]++;
		if (fill == CHUNK) {
			err = flush_recs(f, buf, fill);
			if (err)
				return err;
			*written += fill;
			fill = 0;
		}
	}
	if (fill) {
		err = flush_recs(f, buf, fill);
		if (err)
			return err;
		*written += fill;
	}
	return write_header(f);
}

void iterfile_close(struct iterfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}
