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

#define SITE_BYTES 5              /* a USDT site's no-op, a function's first instruction */
#define SITES_MAX  4                /* per target: the first ones (a marker used in several places) */

struct mark_target {
	const char *arg;                /* as given: BINARY, or BINARY:FUNCTION */
	char path[PATH_MAX];            /* BINARY resolved (a bare library or program name searched) */
	const char *func;               /* --uprobe: FUNCTION (into arg's copy) */
	char *copy;
	/* The bytes the probes sit on (marks_check), for the analysis to tell whether the
	 * calibration's probes are of the same kind (a nop5 the kernel turns into a call, a
	 * push it emulates, an instruction it single-steps): hex, "" when not found. */
	char sites[SITES_MAX][2 * SITE_BYTES + 1];
	int nsites;
};

/* The probe calibration (--calibrate BINARY: ipcbench's ipctrace_cal:begin/end and
 * ipcbench_probe_cal_fn[_clock], workloads/probecal.c): the same programs attached there. */
#define CAL_LINKS 6

struct marks {
	struct mark_target usdt[MARKS_MAX], uprobe[MARKS_MAX];
	int nusdt, nuprobe;
	struct bpf_link *links[4 * MARKS_MAX + CAL_LINKS];
	char *probes[4 * MARKS_MAX];    /* "usdt BINARY ipctrace:iteration_begin", ... as attached */
	int nlinks, nprobes;
	const char *calibrate;          /* --calibrate BINARY, or NULL */
	char *cal_probes[CAL_LINKS];    /* as attached there */
	int ncal;
	char cal_error[300];            /* why the calibration's probes are not attached ("" if they are) */
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
/* Attach them all; -1 with the message in err (what was attached stays until marks_detach).
 * The calibration's probes too, if asked: their failure is no error (cal_error says why; the
 * analysis then leaves the windows as traced). */
int marks_attach(struct marks *m, struct trace_bpf *skel, char *err, size_t errlen);
void marks_detach(struct marks *m);
/* trace.json's "marks": {"names": {"<address>": "name"}, "probes": [...], "count": n,
 * "sites": {"<probe>": ["<hex bytes>", ...]}, "calibration": {"probes": [...], "error": ...}
 * or null}, or null. */
void marks_json(const struct marks *m, const struct trace_bpf *skel, __u64 count, FILE *f);
void marks_free(struct marks *m);

#endif
