/* SPDX-License-Identifier: MIT */
/*
 * The probes of bpf/trace.bpf.c and how each one attaches on this kernel:
 * tracepoints as tp_btf, raw_tp or classic tracepoint; IPC functions as
 * fentry/fexit or kprobe/kretprobe, or absent with the reason.
 */
#ifndef IPCTRACE_PROBES_H
#define IPCTRACE_PROBES_H

#include <stdbool.h>
#include "callsite.h"
#include "features.h"

struct trace_bpf;
struct btf;

#define PROBES_MAX 64

struct probe {
	const char *name;            /* "sys_enter", "pipe_write", ... */
	bool required;               /* tracing is pointless without it */
	bool func;                   /* function probe (entry + exit programs) */
	struct bpf_program *prog[2]; /* chosen programs: entry (and exit for functions) */
	const char *kfunc;           /* kernel function a kprobe attaches to, NULL otherwise */
	struct bpf_link *link[2];
	struct callsites sites;      /* kprobes around calls of kfunc when it is notrace */
	char mode[640];              /* "tp_btf", "fentry/fexit anon_pipe_write", "absent: ..." */
};

struct probe_set {
	struct probe p[PROBES_MAX];
	int n;
};

/* Decide every probe's mode from the features and the kernel's BTF (which may be
 * NULL), switch the chosen programs on in the opened skeleton and set the
 * function probes' rodata. Returns 0, or -1 with a message in err when a
 * required probe cannot attach. skel may be NULL to only decide (doctor).
 * funcs_off: NULL, or why the function probes are left out. */
int probes_choose(struct probe_set *ps, struct trace_bpf *skel, const struct features *ft,
		  const struct btf *vmlinux, const char *funcs_off, char *err, size_t errlen);
bool probes_any_function(const struct probe_set *ps);
/* Attach the chosen programs; -1 with "failed to attach NAME (MODE): why" in err.
 * A function probe that does not attach is left out, its mode says why. */
int probes_attach(struct probe_set *ps, char *err, size_t errlen);
/* After probes_attach: each tracepoint of a pair every wake-up or system call passes through
 * (sched_waking and sched_wakeup, sys_enter and sys_exit) runs in a few wake-up round trips
 * with a child whenever its partner does; one that does not is attached again, up to three
 * times, then -1 with why in err. 0 unchecked where the kernel keeps no run counts (< 5.8). */
int probes_check_silent(struct probe_set *ps, char *err, size_t errlen);
/* Entries are attached before their exits and detached after them. */
void probes_detach(struct probe_set *ps);
/* {"sys_enter": "tp_btf", ...} */
void probes_json(const struct probe_set *ps, FILE *f);

#endif
