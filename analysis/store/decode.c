/*
 * events.bin records -> the columns of events.parquet (analysis/store/events.py, through
 * analysis/model/native.py), in one pass: each record's fields in their stored types, the
 * other task packed in a0 unpacked, and the timed iteration whose window holds it.
 */
#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "ipctrace.h"

/* 1 if the records are in time order. */
int ipt_in_time_order(size_t n, const struct rec *rec)
{
	for (size_t i = 1; i < n; i++)
		if (rec[i].ts < rec[i - 1].ts)
			return 0;
	return 1;
}

static int has_other_task(unsigned type)
{
	return type == REC_WAKING || type == REC_WAKEUP || type == REC_WAKEUP_NEW || type == REC_FORK;
}

/*
 * Columns of the records taken in the order order[] (NULL: as they are; either way in
 * time order), type as enum rec_type - 1. Each record is labelled with the window
 * (sorted by start) that starts last at or before it, if it has not ended by then;
 * else run and iteration are -1. Returns the count of records of unknown type.
 */
size_t ipt_decode(const struct ipt_records *in, const struct ipt_windows *win, struct ipt_decoded *out)
{
	/* the structs' fields under the names the pass reads */
	const size_t n = in->n, nw = win->n;
	const struct rec *rec = in->rec;
	const int64_t *order = in->order, *w_start = win->start, *w_end = win->end, *w_iter = win->iter;
	const int32_t *w_run = win->run;
	int64_t *ts = out->ts, *aux = out->aux, *a0 = out->a0, *iteration = out->iteration;
	int8_t *type = out->type;
	int16_t *cpu = out->cpu;
	int32_t *pid = out->pid, *tid = out->tid, *next_tid = out->next_tid, *next_pid = out->next_pid;
	int32_t *other_tid = out->other_tid, *other_pid = out->other_pid, *run = out->run;
	size_t unknown = 0;
	size_t k = 0;           /* windows that start at or before the record */

	for (size_t i = 0; i < n; i++) {
		const struct rec *r = &rec[order ? (size_t)order[i] : i];
		int32_t lo = (int32_t)(uint32_t)r->a0, hi = (int32_t)(uint32_t)(r->a0 >> 32);

		unknown += r->type < 1 || r->type >= REC_TYPE_MAX;
		ts[i] = (int64_t)r->ts;
		type[i] = (int8_t)(r->type - 1);
		cpu[i] = (int16_t)r->cpu;
		pid[i] = (int32_t)r->pid;
		tid[i] = (int32_t)r->tid;
		aux[i] = r->aux;
		a0[i] = (int64_t)r->a0;
		next_tid[i] = r->type == REC_SWITCH ? lo : -1;
		next_pid[i] = r->type == REC_SWITCH ? hi : -1;
		other_tid[i] = has_other_task(r->type) ? lo : -1;
		other_pid[i] = has_other_task(r->type) ? hi : -1;
		while (k < nw && w_start[k] <= ts[i])
			k++;
		if (k > 0 && ts[i] <= w_end[k - 1]) {
			run[i] = w_run[k - 1];
			iteration[i] = w_iter[k - 1];
		} else {
			run[i] = -1;
			iteration[i] = -1;
		}
	}
	return unknown;
}

/*
 * What the analysis needs of the whole trace before its pieces (analysis/run/analyse_run.py,
 * trace_facts), in one pass over a block of records: the indices of thread cal_tid's
 * sys_enter and sys_exit of syscall cal_nr (*ncalls); whether a copy routine (function
 * ids copy_ids) was entered (*copy_seen set to 1); the tid of the records of the processes
 * pids[] (tid > 0, *ntids); the task switched in (its tid) << 16 | the CPU of each switch
 * (*npairs). Both are written again only where a small cache of the last ones seen misses:
 * a few threads take turns, and the caller makes them distinct.
 */
void ipt_scan_facts(const struct ipt_scan_in *in, struct ipt_scan_out *out)
{
	/* the structs' fields under the names the pass reads */
	const size_t n = in->n, ncopy = in->ncopy, npids = in->npids;
	const struct rec *rec = in->rec;
	const int64_t cal_tid = in->cal_tid, cal_nr = in->cal_nr, *copy_ids = in->copy_ids, *pids = in->pids;
	int64_t *calls = out->calls, *tids = out->tids, *pairs = out->pairs, *copy_seen = &out->copy_seen;
	size_t *ncalls = &out->ncalls, *ntids = &out->ntids, *npairs = &out->npairs;
	enum { SLOTS = 64 };
	size_t nc = 0, nt = 0, np = 0;
	int64_t seen_tid[SLOTS], seen_pair[SLOTS];
	int64_t last_pid = -1;
	int last_mine = 0;

	for (int k = 0; k < SLOTS; k++)
		seen_tid[k] = seen_pair[k] = -1;

	for (size_t i = 0; i < n; i++) {
		const struct rec *r = &rec[i];

		if ((r->type == REC_SYS_ENTER || r->type == REC_SYS_EXIT) && (int64_t)r->tid == cal_tid &&
		    (int64_t)r->aux == cal_nr)
			calls[nc++] = (int64_t)i;
		if (r->type == REC_FUNC_ENTRY && !*copy_seen) {
			for (size_t k = 0; k < ncopy; k++)
				if ((int64_t)r->aux == copy_ids[k])
					*copy_seen = 1;
		}
		if ((int64_t)r->pid != last_pid) {   /* the process of a record: mostly the last one's */
			last_pid = (int64_t)r->pid;
			last_mine = 0;
			for (size_t k = 0; k < npids; k++)
				last_mine |= pids[k] == last_pid;
		}
		if (last_mine && r->tid > 0 && seen_tid[r->tid % SLOTS] != (int64_t)r->tid)
			tids[nt++] = seen_tid[r->tid % SLOTS] = (int64_t)r->tid;
		if (r->type == REC_SWITCH) {
			int64_t pair = (int64_t)(r->a0 & 0xffffffffu) << 16 | (int64_t)r->cpu;
			size_t slot = (size_t)((uint64_t)pair * 0x9E3779B97F4A7C15ull >> 58);

			if (seen_pair[slot] != pair)
				pairs[np++] = seen_pair[slot] = pair;
		}
	}
	*ncalls = nc, *ntids = nt, *npairs = np;
}

/*
 * Records later in the file than in time (analysis/store/events.py, TimeOrder), a block at a
 * time: with E the times of the `lag` records before the block (tail[], oldest first) and then
 * the block's, record i is late if its time is below the latest of *before (the latest time
 * before those lag records) and E[0..i] (every time at least lag records before it). Writes
 * the late records' indices to late[] and returns their count; *cut becomes the latest of
 * *before and E[0..n] (what every later record that is not late reaches), then tail[] and
 * *before move on by the block.
 */
size_t ipt_lagged_late(size_t n, const struct rec *rec, size_t lag, int64_t *tail, int64_t *before,
		       int64_t *cut, int64_t *late)
{
	int64_t running = *before;
	size_t nlate = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t e = i < lag ? tail[i] : (int64_t)rec[i - lag].ts;

		if (e > running)
			running = e;
		if ((int64_t)rec[i].ts < running)
			late[nlate++] = (int64_t)i;
	}
	{
		int64_t e = n < lag ? tail[n] : (int64_t)rec[n - lag].ts;

		*cut = e > running ? e : running;
	}
	if (n)
		*before = running;
	/* the last lag of E: tail[n..lag) then the block, or the block's last lag */
	if (n >= lag) {
		for (size_t k = 0; k < lag; k++)
			tail[k] = (int64_t)rec[n - lag + k].ts;
	} else {
		for (size_t k = 0; k + n < lag; k++)
			tail[k] = tail[k + n];
		for (size_t k = 0; k < n; k++)
			tail[lag - n + k] = (int64_t)rec[k].ts;
	}
	return nlate;
}
