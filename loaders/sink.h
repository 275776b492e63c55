/* SPDX-License-Identifier: MIT */
/* events.bin's writer (sink.c), fed by the ring buffers' callbacks. */
#ifndef IPCTRACE_SINK_H
#define IPCTRACE_SINK_H
#include <stdio.h>
#include "ipctrace.h"

#define SINK_BUF_BYTES (1 << 20)
/* Bytes a write(2) of the buffer hands the kernel at once: on a PREEMPT_NONE kernel a system
 * call is not preempted, and the reader thread's write of 1 MiB held a traced thread's CPU for
 * 0.4 ms at SCHED_IDLE; one of 256 KiB takes about 0.1 ms. */
#define SINK_WRITE_BYTES (256 << 10)

struct trace_bpf;

struct sink {                       /* events.bin writer, fed by the ring buffer callback */
	int fd;
	char *buf;
	size_t used;
	__u64 count, per_type[REC_TYPE_MAX], unknown;
	int write_errno;
	__u32 *pids;                    /* child process ids seen in fork records */
	size_t npids, cap;
	struct lost_span *spans;        /* when records were lost (lost_rb) */
	size_t nspans, spans_cap;
};

extern const char *const rec_names[REC_TYPE_MAX];   /* enum rec_type -> its name */

/* Write what is buffered; -1 with write_errno set when the file refuses it. */
int sink_flush(struct sink *s);
/* ring_buffer callbacks: rb (one record or a batch of them), lost_rb (a lost span). */
int sink_on_sample(void *ctx, void *data, size_t size);
int sink_on_lost(void *ctx, void *data, size_t size);
/* What is still staged per CPU once the programs are detached. */
int sink_drain_batches(struct trace_bpf *skel, struct sink *s, int ncpus);
/* "lost_spans": [[start, end, records], ...], overlapping spans merged, by time. */
void sink_write_spans(FILE *f, struct sink *s);

#endif
