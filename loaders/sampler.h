/* SPDX-License-Identifier: MIT */
/*
 * The stack sampler (`--sample-hz N`): on-CPU stacks of the workload's threads
 * from a perf_event timer, off-CPU stacks at sched_switch weighted by the ns
 * blocked. The main loader calls sampler_start() after forking the workload
 * and before releasing it, and sampler_finish() once it has exited; the
 * analysis turns DIR/samples.json into oncpu.folded and offcpu.folded.
 */
#ifndef IPCTRACE_SAMPLER_H
#define IPCTRACE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sampler;

/* Load and attach for root_tgid (none if <= 0: sampler_follow) and the processes it forks; hz samples per second
 * per CPU; tp_btf chooses tp_btf over raw_tp for the scheduler probes; only_uid (--only-uid, or
 * ONLY_UID_NONE): only the tasks whose uids are all this are sampled.
 * Returns NULL with a one-line reason in err ("attach perf_event on cpu 1: ..."). */
struct sampler *sampler_start(pid_t root_tgid, unsigned int hz, bool tp_btf, unsigned int only_uid,
			      char *err, size_t errlen);
/* Also follow tgid (and the processes it forks from now on). 0 or -errno. */
int sampler_follow(struct sampler *s, pid_t tgid);
/* Detach, then write DIR/samples.json. 0, or -errno with the reason in err. */
int sampler_finish(struct sampler *s, int dirfd, char *err, size_t errlen);
/* Free everything; safe with NULL and after sampler_finish(). */
void sampler_destroy(struct sampler *s);

#endif
