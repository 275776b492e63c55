/* SPDX-License-Identifier: MIT */
/*
 * What this kernel lets the tracer do, probed once at start-up. Every later
 * choice (attach modes, whether tracing is possible at all) reads this struct.
 */
#ifndef IPCTRACE_FEATURES_H
#define IPCTRACE_FEATURES_H

#include <stdbool.h>
#include <stdio.h>

enum feature {
	F_PRIVILEGES,
	F_BTF,
	F_TP_BTF,
	F_RAW_TP,
	F_TRACEPOINT,
	F_KPROBE,
	F_FENTRY,
	F_PERF_SAMPLING,
	F_RINGBUF,
	F_LOCKDOWN,
	F_MEMLOCK,
	F_CLOCK,
	F_STEAL,
	F_COUNT,
};

/* Where the tracer reads the hypervisor's steal count (enum steal_source in trace.bpf.c). */
enum steal_source { STEAL_NONE, STEAL_RQ };

struct feature_answer {
	bool ok;
	char detail[160];       /* why not, or what was found */
};

struct features {
	struct feature_answer f[F_COUNT];
	char tracefs[64];       /* mounted tracefs events directory, "" if none */
	enum steal_source steal; /* F_STEAL's answer: which per-CPU count the programs read */
	char why_impossible[600]; /* "" when tracing is possible */
};

extern const char *const feature_names[F_COUNT];

void features_probe(struct features *ft);
void features_print_json(const struct features *ft, FILE *out);
/* Fill buf with the features as a JSON object (for trace.json). */
void features_json(const struct features *ft, FILE *f);

#endif
