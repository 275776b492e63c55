/* SPDX-License-Identifier: MIT */
/*
 * Records shared by the stack sampler (bpf/sample.bpf.c) and its loader
 * (loaders/sample.c): per-stack aggregates in hash maps, read once at the end.
 */
#ifndef IPCTRACE_SAMPLE_H
#define IPCTRACE_SAMPLE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SAMPLE_MAX_DEPTH   127      /* PERF_MAX_STACK_DEPTH */
#define SAMPLE_MAX_STACKS  16384
#define SAMPLE_MAX_TGIDS   1024
#define SAMPLE_COMM_LEN    16

/* Stack ids are bpf_get_stackid() results: >= 0 an id in the stack map,
 * -EFAULT no stack of that kind (a user-mode sample has no kernel stack),
 * anything else the stack was lost (map full, bucket taken). */
struct sample_key {
	__u32 tgid;
	__u32 tid;
	__s32 kstack;
	__s32 ustack;
	__u32 blocked;          /* off-CPU: 1 = went to sleep, 0 = preempted while runnable */
	char comm[SAMPLE_COMM_LEN];
};

struct sample_val {
	__u64 count;            /* samples (on-CPU) or switches (off-CPU) */
	__u64 ns;               /* off-CPU: ns between switch-out and switch-in */
};

struct sample_stats {           /* .bss, read at the end */
	__u64 samples;          /* on-CPU samples of followed tasks */
	__u64 lost_samples;     /* not counted in a map: the map was full */
	__u64 lost_switches;    /* off-CPU intervals not counted: map full */
	__u64 lost_ns;
};

#endif
