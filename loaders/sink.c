// SPDX-License-Identifier: MIT
/* events.bin's writer, fed by the ring buffers' callbacks: records copied as they come
 * (counted per type, the child processes noted from fork records), and the spans of
 * records the kernel lost. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sink.h"
#include "trace.skel.h"

#define REC_NAME(e, name) [REC_##e] = #name,
const char *const rec_names[REC_TYPE_MAX] = { IPT_REC_TYPES(REC_NAME) };
#undef REC_NAME

int sink_flush(struct sink *s)
{
	size_t off = 0;

	while (off < s->used) {
		size_t want = s->used - off;
		ssize_t n = write(s->fd, s->buf + off, want < SINK_WRITE_BYTES ? want : SINK_WRITE_BYTES);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			s->write_errno = errno;
			return -1;
		}
		off += n;
	}
	s->used = 0;
	return 0;
}

static int add_record(struct sink *s, const struct rec *r)
{
	if (s->used + sizeof(*r) > SINK_BUF_BYTES && sink_flush(s))
		return -EIO;
	memcpy(s->buf + s->used, r, sizeof(*r));
	s->used += sizeof(*r);
	s->count++;
	if (r->type < REC_TYPE_MAX && rec_names[r->type])
		s->per_type[r->type]++;
	else
		s->unknown++;
	if (r->type == REC_FORK && r->a0 >> 32) {
		if (s->npids == s->cap) {
			__u32 *more = realloc(s->pids, (s->cap ? s->cap * 2 : 64) * sizeof(*more));

			if (!more)
				return -ENOMEM;
			s->pids = more;
			s->cap = s->cap ? s->cap * 2 : 64;
		}
		s->pids[s->npids++] = r->a0 >> 32;
	}
	return 0;
}

/* A ring-buffer sample is one record or a full batch of them. */
int sink_on_sample(void *ctx, void *data, size_t size)
{
	struct sink *s = ctx;
	size_t i;
	int err;

	if (size % sizeof(struct rec)) {
		s->unknown++;
		return 0;
	}
	for (i = 0; i < size / sizeof(struct rec); i++)
		if ((err = add_record(s, (const struct rec *)data + i)))
			return err;
	return 0;
}

static int add_span(struct sink *s, const struct lost_span *span)
{
	if (s->nspans == s->spans_cap) {
		size_t cap = s->spans_cap ? s->spans_cap * 2 : 64;
		struct lost_span *more = realloc(s->spans, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		s->spans = more;
		s->spans_cap = cap;
	}
	s->spans[s->nspans++] = *span;
	return 0;
}

int sink_on_lost(void *ctx, void *data, size_t size)
{
	if (size != sizeof(struct lost_span))
		return 0;
	return add_span(ctx, data);
}

static int cmp_span(const void *a, const void *b)
{
	__u64 x = ((const struct lost_span *)a)->start, y = ((const struct lost_span *)b)->start;

	return x < y ? -1 : x > y;
}

/* "lost_spans": [[start, end, records], ...], overlapping spans merged, by time. */
void sink_write_spans(FILE *f, struct sink *s)
{
	size_t i, k = 0;

	if (s->nspans)          /* qsort(NULL, 0, ...) is undefined */
		qsort(s->spans, s->nspans, sizeof(*s->spans), cmp_span);
	for (i = 1; i < s->nspans; i++) {
		if (s->spans[i].start <= s->spans[k].end) {
			if (s->spans[i].end > s->spans[k].end)
				s->spans[k].end = s->spans[i].end;
			s->spans[k].n += s->spans[i].n;
		} else {
			s->spans[++k] = s->spans[i];
		}
	}
	fprintf(f, "\"lost_spans\": [");
	for (i = 0; s->nspans && i <= k; i++)
		fprintf(f, "%s[%llu, %llu, %llu]", i ? ", " : "", (unsigned long long)s->spans[i].start,
			(unsigned long long)s->spans[i].end, (unsigned long long)s->spans[i].n);
	fprintf(f, "]");
}

/* What is still staged per CPU once the programs are detached: records, and the
 * lost spans a CPU had open (their records are in drops, so they must be in lost_spans). */
int sink_drain_batches(struct trace_bpf *skel, struct sink *s, int ncpus)
{
	struct rec_batch *b = calloc(ncpus, sizeof(*b));
	__u32 zero = 0, i, k;
	int err = 0;

	if (!b)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.batches), &zero, b))
		err = -errno;
	for (i = 0; !err && i < (__u32)ncpus; i++) {
		for (k = 0; !err && k < b[i].n && k < REC_BATCH; k++)
			err = add_record(s, &b[i].recs[k]);
		if (!err && b[i].open.n)
			err = add_span(s, &b[i].open);
		if (!err && b[i].direct.n)
			err = add_span(s, &b[i].direct);
	}
	free(b);
	return err;
}
