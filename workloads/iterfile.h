/* SPDX-License-Identifier: MIT */
/*
 * Layout of iterations.bin: what the measuring side of a workload writes and
 * analysis/store/results.py reads. Little-endian, packed, no pointers.
 *
 *   struct iter_file_header   (once)
 *   struct iter_rec           (count times, appended after each run)
 *
 * A run that is interrupted still appends the iterations it completed; the
 * header's count is rewritten after every append, so a reader that finds more
 * bytes than count * rec_size knows the file was cut short.
 */
#ifndef IPCTRACE_ITERFILE_H
#define IPCTRACE_ITERFILE_H

#include <stdint.h>

#define ITER_FILE_MAGIC   "IPTITER1"
#define ITER_FILE_VERSION 1

struct iter_file_header {
	char     magic[8];      /* ITER_FILE_MAGIC, no NUL */
	uint32_t version;       /* ITER_FILE_VERSION */
	uint32_t rec_size;      /* sizeof(struct iter_rec) */
	uint64_t count;         /* records that follow */
	uint32_t nmetrics;      /* metric ids are 0..nmetrics-1, names in workload.json */
	uint32_t reserved[9];
} __attribute__((packed));  /* 64 bytes */

struct iter_rec {
	uint64_t seq;           /* sequence number, unique within the invocation, in time order */
	uint64_t t_start_ns;    /* CLOCK_MONOTONIC (== bpf_ktime_get_ns) */
	uint64_t t_end_ns;
	uint32_t run;           /* 0-based run index */
	uint16_t metric;        /* index into workload.json "metrics" */
	uint16_t cpu;           /* CPU the measuring thread ran on at t_end (sched_getcpu) */
	uint32_t tid;           /* measuring thread */
	uint32_t iteration;     /* 0-based timed iteration within the run (warm-up excluded) */
} __attribute__((packed));  /* 40 bytes */

#endif
