/* SPDX-License-Identifier: MIT */
/*
 * Iteration markers of the traced program (marks.c): USDT probes
 * ipctrace:iteration_begin/iteration_end in the binaries given with --usdt, or a
 * uprobe/uretprobe pair on the functions given with --uprobe BINARY:FUNCTION. The
 * programs are bpf/trace.bpf.c's mark_*; every one attaches for all processes
 * (pid -1) and records the followed tasks' marks only (REC_MARK).
 */
#ifndef IPCTRACE_MARKS_H
#define IPCTRACE_MARKS_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

struct trace_bpf;
struct bpf_link;

#define MARKS_MAX 8                     /* --usdt and --uprobe, each */

struct mark_target {
	const char *arg;                /* as given: BINARY, or BINARY:FUNCTION */
	char path[PATH_MAX];            /* BINARY resolved (a bare library or program name searched) */
	const char *func;               /* --uprobe: FUNCTION (into arg's copy) */
	char *copy;
};

struct marks {
	struct mark_target usdt[MARKS_MAX], uprobe[MARKS_MAX];
	int nusdt, nuprobe;
	struct bpf_link *links[4 * MARKS_MAX];
	char *probes[4 * MARKS_MAX];    /* "usdt BINARY ipctrace:iteration_begin", ... as attached */
	int nlinks, nprobes;
};

/* Add --usdt BINARY or --uprobe BINARY:FUNCTION; -1 with a message in err. */
int marks_add(struct marks *m, bool usdt, const char *arg, char *err, size_t errlen);
bool marks_any(const struct marks *m);
/* Before anything is loaded: every binary found and readable, every --usdt binary holds both
 * notes. -1 with the one-line message in err. */
int marks_check(struct marks *m, char *err, size_t errlen);
/* In the opened skeleton (after probes_choose switched everything off): switch the mark
 * programs that will be used on. */
void marks_choose(const struct marks *m, struct trace_bpf *skel);
/* Attach them all; -1 with the message in err (what was attached stays until marks_detach). */
int marks_attach(struct marks *m, struct trace_bpf *skel, char *err, size_t errlen);
void marks_detach(struct marks *m);
/* trace.json's "marks": {"names": {"<address>": "name"}, "probes": [...], "count": n}, or null. */
void marks_json(const struct marks *m, const struct trace_bpf *skel, __u64 count, FILE *f);
void marks_free(struct marks *m);

#endif
