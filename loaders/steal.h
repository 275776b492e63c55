/* SPDX-License-Identifier: MIT */
/*
 * Hypervisor steal time over the run, per CPU, for trace.json "steal": read
 * with the programs' own source (trace.bpf.c steal_snapshot, run at the start
 * and the end) where features.c found one, and from /proc/stat's steal column
 * (USER_HZ steps) always, as a cross-check and the fallback.
 */
#ifndef IPCTRACE_STEAL_H
#define IPCTRACE_STEAL_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>
#include "features.h"

struct trace_bpf;

struct steal {
	enum steal_source source;       /* what the programs read, STEAL_NONE if nothing */
	char what[240];                 /* the source described, or "none: why" */
	int ncpus;
	__u64 *start, *end;             /* the programs' counts (ns) at the start and the end */
	__u64 *stat_start, *stat_end;   /* /proc/stat's (ns) */
	bool stat_ok;
	long user_hz;
};

/* Before the probes attach: the counts at the start, and each CPU's starting point
 * in the programs (cur[].steal), so that the first STEAL record of a CPU counts from
 * here. A source that cannot be read turns into "none: why". -1 only when out of memory. */
int steal_begin(struct steal *st, struct trace_bpf *skel, const struct features *ft,
		const char *not_loaded, int ncpus);
/* After the run (probes detached). */
void steal_end(struct steal *st, struct trace_bpf *skel);
/* "steal": {...} */
void steal_json(const struct steal *st, FILE *f);
void steal_free(struct steal *st);

#endif
