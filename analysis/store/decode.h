/*
 * The arguments of decode.c's ipt_decode, by name: the records it reads, the windows it labels
 * them with, the columns it writes. analysis/store/layout.c exports these structs' fields, from
 * which analysis/store/clib.py builds its ctypes structures and the columns' types: Python
 * declares none of them by hand. No padding (layout.c checks that the fields fill each).
 */
#ifndef IPCTRACE_DECODE_H
#define IPCTRACE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "ipctrace.h"

/* n records taken in the order order[] (NULL: as they are; either way in time order). */
struct ipt_records {
	size_t n;
	const struct rec *rec;
	const int64_t *order;
};

/* n windows [start, end] sorted by start, each a run's timed iteration. */
struct ipt_windows {
	size_t n;
	const int64_t *start, *end;
	const int32_t *run;
	const int64_t *iter;
};

/* The columns of events.parquet, a row per record (analysis/store/events.py's COLUMNS). */
struct ipt_decoded {
	int64_t *ts;
	int8_t *type;
	int16_t *cpu;
	int32_t *pid, *tid;
	int64_t *aux, *a0;
	int32_t *next_tid, *next_pid, *other_tid, *other_pid;
	int32_t *run;
	int64_t *iteration;
};

/* What ipt_scan_facts reads: n records, the calibration thread and call, the copy routines'
 * function ids, the processes whose threads it lists. */
struct ipt_scan_in {
	size_t n;
	const struct rec *rec;
	int64_t cal_tid, cal_nr;
	size_t ncopy;
	const int64_t *copy_ids;
	size_t npids;
	const int64_t *pids;
};

/* What it writes: arrays with room for n each, their counts; copy_seen set to 1 if a copy
 * routine was entered (left as it is otherwise). */
struct ipt_scan_out {
	int64_t *calls;
	size_t ncalls;
	int64_t *tids;
	size_t ntids;
	int64_t *pairs;
	size_t npairs;
	int64_t copy_seen;
};

size_t ipt_decode(const struct ipt_records *in, const struct ipt_windows *win, struct ipt_decoded *out);
void ipt_scan_facts(const struct ipt_scan_in *in, struct ipt_scan_out *out);

#endif
