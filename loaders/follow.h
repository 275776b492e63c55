/* SPDX-License-Identifier: MIT */
/*
 * Tasks that were running before the probes were attached (follow.c): --pid PID and the
 * processes descended from it, --comm NAME's processes, each with every thread, marked in
 * the programs' followed[] table (from then on the fork tracepoint follows their children,
 * and the exec and rename tracepoints new --comm processes).
 */
#ifndef IPCTRACE_FOLLOW_H
#define IPCTRACE_FOLLOW_H

#include <stdbool.h>
#include <sys/types.h>

struct trace_bpf;
struct sampler;

#define FOLLOW_COMM_MAX 4

struct follow {
	const pid_t *roots;             /* --pid */
	int nroots;
	char comms[FOLLOW_COMM_MAX][16];        /* --comm, cut to the kernel's 15 characters */
	int ncomms;
	long comm_uid;                  /* --comm-uid: a --comm process counts only if all its uids are this; -1 any */
	long only_uid;                  /* --only-uid: only processes whose uids are all this are followed
					 * (a root that is not is marked FOLLOW_OTHER_USER); -1 any */
	unsigned char *marked;          /* by pid: the processes marked so far */
	pid_t *procs;                   /* those, in the order found (trace.json "pids") */
	int nprocs, cap;
};

/* One pass over /proc: mark every thread of the roots, of their descendants and of the
 * processes named like a --comm, and the CPUs running one of them; the processes found
 * the first time are added to procs and to the sampler (may be NULL). 0 or -errno. */
int follow_scan(struct follow *f, struct trace_bpf *skel, struct sampler *smp);
/* Every thread of pid marked so in followed[] (1: followed; FOLLOW_EXCLUDED: the tracer's);
 * false when the process is gone. */
bool follow_mark_threads(struct trace_bpf *skel, pid_t pid, __u8 mark);
/* --all-cpus --only-uid: every running thread not yet marked in followed[] marked FOLLOW_YES if
 * its real, effective, saved and file-system uids are all uid, else FOLLOW_OTHER_USER. 0 or -errno. */
int follow_scan_uid(struct trace_bpf *skel, long uid);
void follow_free(struct follow *f);

#endif
