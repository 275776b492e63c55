/* SPDX-License-Identifier: MIT */
/* DIR/trace.json (tracejson.c). */
#ifndef IPCTRACE_TRACEJSON_H
#define IPCTRACE_TRACEJSON_H
#include <stdbool.h>
#include <sys/types.h>
#include "features.h"
#include "probes.h"
#include "reader.h"
#include "sink.h"
#include "steal.h"

/* The loader's own threads (trace.json "tracer"): when the analysis finds one of them on
 * the workload's CPU, that is the probe effect. */
#define TRACER_TIDS_MAX 32

struct tracer_threads {
	pid_t tids[TRACER_TIDS_MAX];
	int n;
};

struct marks;

/* --only-uid: a system call after whose exit the programs check the caller's uids again. */
struct cred_call {
	const char *name;
	long nr;                /* this architecture's number */
};

/* --only-uid: a task that took another user's rights (the programs' left map). */
struct left_entry {
	__u32 tid;
	struct left_task l;
};

/* "setuid exec", "credential change": enum left_why as trace.json and stderr say it. */
const char *left_why_name(__u32 why);

/* The run's settings trace.json records. */
struct trace_facts {
	bool floor, floor_clock;
	__u32 ringbuf_bytes;
	const char *mode;               /* "command" (-- CMD), "pid" (--pid), "comm" (--comm only) */
	const char *stopped_by;         /* "exit", "duration", "signal" */
	const pid_t *procs;             /* processes followed from the start (--pid, --comm) */
	int nprocs;
	const struct marks *marks;      /* --usdt, --uprobe */
	long only_uid;                  /* --only-uid, -1 none */
	const struct cred_call *cred_calls;     /* --only-uid: the calls checked */
	int ncred_calls;
	const struct left_entry *left;  /* --only-uid: the tasks that took another user's rights, */
	int nleft;                      /* in time order (at most LEFT_MAX) */
	__u64 left_total;               /* and how many times one did (listed or not) */
};

void tracer_threads(struct tracer_threads *t);
/* Runs of our programs the kernel skipped (recursion): -errno if one could not be asked. */
int recursion_misses(const struct trace_bpf *skel, __u64 *n);
int write_trace_json(const struct trace_facts *t, int outfd, const struct features *ft,
		     const struct probe_set *ps, const struct trace_bpf *skel,
		     struct sink *s, __u64 drops, __u64 misses, int ncpus, pid_t root, int code,
		     const struct steal *steal, const struct tracer_threads *tracer,
		     const struct reader *reader);

#endif
