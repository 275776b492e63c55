/*
 * The arguments of timeline.c's two widest passes, by name: what they read (columns), how
 * (options) and where they write (outputs). analysis/store/layout.c exports these structs'
 * fields (names, offsets, types), from which analysis/store/clib.py builds the ctypes
 * structures analysis/model/native.py fills: Python declares none of them by hand.
 *
 * Each struct's fields leave no padding (layout.c checks it: a field added here and not
 * there stops the build), so that the table lists every byte Python has to set.
 */
#ifndef IPCTRACE_TIMELINE_H
#define IPCTRACE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

/* A sys_exit's number where the call replaced it (orig_ax = -1, as a u32): the uprobe system
 * call of an optimized uprobe (x86, 6.16 on) exits so; it closes the call it follows.
 * store/layout.c exports it, store/records.py mirrors it. */
#define NR_REPLACED 0xFFFFFFFFLL

/* The events ipt_thread_steps reads, sorted by time: n rows of decode's columns. */
struct ipt_events {
	size_t n;
	const int64_t *ts;
	const int8_t *type;          /* codes of the type column (struct ipt_step_options' codes) */
	const int32_t *tid;
	const int32_t *next_tid;
	const int16_t *cpu;
	const int64_t *aux;
	const int64_t *a0;
};

/* How ipt_thread_steps reads them, and for which thread. */
struct ipt_step_options {
	const int32_t *codes;        /* IPT_STEP_TYPES' code in the type column each (-2: absent) */
	const uint8_t *data_kind;    /* per syscall number (ndata of them): 1 into, 2 from user space */
	size_t ndata;
	size_t cap;                  /* room in each output array (the carves: twice that) */
	int64_t entry_in, entry_out; /* ns of ENTRY carved before a sys_enter, after a sys_exit */
	double copy_call, copy_byte; /* the estimated copy: per call, per byte (copy_call < 0: none) */
	int64_t want;                /* the thread (tid) */
};

/* What ipt_thread_steps writes: arrays with room for cap rows (carve_*: 2 * cap), each group's
 * count in its n* field. */
struct ipt_thread_out {
	int64_t *grid;
	int8_t *mode, *run;
	int64_t *wake_on, *wake_delay, *wake_rq;
	size_t nwake;
	int64_t *sleep_end, *sleep_waker;
	size_t nsleep;
	int64_t *in_ts;
	int16_t *in_cpu;
	size_t nin;
	int64_t *call_enter, *call_exit, *call_nr, *call_ret;
	size_t ncall;
	int64_t *woke_ts, *woke_waker;
	size_t nwoke;
	int64_t *carve_at, *carve_len;
	int8_t *carve_state, *carve_from;
	size_t ncarve;
};

/* What ipt_causal reads: k threads' step functions and facts (arrays of k pointers and k
 * lengths), what ran on each of ncpu CPUs, and n windows [s, e) of thread 0. */
struct ipt_causal_in {
	const int64_t *const *ts;    /* each thread's step function */
	const int8_t *const *st;
	const size_t *len;
	const int64_t *const *sleep_end;
	const int32_t *const *sleep_waker;
	const size_t *nsleep;
	const int64_t *const *in_ts;
	const int16_t *const *in_cpu;
	const size_t *nin;
	const int64_t *const *deliv_at;
	const int32_t *const *deliv_by;
	const size_t *ndeliv;
	const size_t *occ_off;       /* CPU c's occupancy: [occ_off[c], occ_off[c + 1]) of occ_* */
	const int64_t *occ_ts;
	const int32_t *occ_who, *occ_tid;
	const int64_t *s, *e;
	size_t n;
	int32_t k, ncpu;
};

/* How ipt_causal walks: the first nsides threads' states at the edges checked against the
 * mask edge_states; segments kept only with a holder if holders_only. */
struct ipt_causal_options {
	int64_t nsides, edge_states, holders_only;
};

/* What ipt_causal writes: out (NSTATES, n) added to; up to seg_cap segments to seg_* (seg_a
 * NULL: none wanted), seg_lost those beyond. */
struct ipt_causal_out {
	double *out;
	int32_t *seg_w;
	int64_t *seg_a, *seg_b;
	int8_t *seg_thread, *seg_st;
	int64_t *seg_holder;
	size_t seg_cap, seg_lost;
};

/* What ipt_thread_finish reads: a thread's g grid points with its mode, run state and overlay
 * (NULL: none) there, and its ncarve carves (ipt_thread_out's). */
struct ipt_finish_in {
	size_t g;
	const int64_t *grid;
	const int8_t *mode, *run, *overlay;
	size_t ncarve;
	const int64_t *c_at, *c_len;
	const int8_t *c_state, *c_from;
};

/* Where it writes the thread's steps: room for 3 * g each. */
struct ipt_finish_out {
	int64_t *ts;
	int8_t *st;
};

long ipt_thread_steps(const struct ipt_events *ev, const struct ipt_step_options *opt, struct ipt_thread_out *out);
void ipt_release_scratch(void);
size_t ipt_thread_finish(const struct ipt_finish_in *in, struct ipt_finish_out *out);
size_t ipt_causal(const struct ipt_causal_in *in, const struct ipt_causal_options *opt, struct ipt_causal_out *o);
long ipt_keyed_sequence(size_t na, const int64_t *key_a, const int64_t *row_a, size_t nb, const int64_t *key_b,
			const int64_t *row_b, int64_t *key_out, int64_t *row_out, uint8_t *is_b);

long ipt_deliveries(int k, const int64_t *tids, const size_t *ncall, const int64_t *const *enter,
		    const int64_t *const *exit, const int64_t *const *nr, const int64_t *const *ret,
		    const size_t *nwoke, const int64_t *const *woke_ts, const int64_t *const *woke_by,
		    const size_t *nsleep, const int64_t *const *sleep_end, size_t nkind, const uint8_t *kind,
		    int64_t *const *at_out, int32_t *const *by_out, size_t *nout);
#endif
