/*
 * The breakdown's passes over the events (analysis/model/breakdown.py, through
 * analysis/model/native.py): a thread's state step function, the union of several
 * step functions with the critical path over it, and the time each window
 * spends in each state. Each is one forward pass over arrays numpy hands in; at
 * 10 M events the same steps as whole-array numpy operations cost several
 * seconds of temporaries. The rules are those documented in breakdown.py.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "ipctrace.h"
#include "timeline.h"

/* Thread states, once, as X(ENUM, the component it counts towards): analysis/store/records.py's
 * STATES (tests/unit/store/test_records.py checks them against ipt_name). ON_CPU: run state only. The
 * on-CPU states come first (< BLOCKED), so that `st < BLOCKED || st == UNKNOWN` is "on a
 * CPU or in no known state". STEAL: the hypervisor had the CPU the thread was on (or was
 * waiting for); timeline.py cuts it out of the other states, from the steal records. */
#define IPT_STATES(X) X(USER, user) X(SYSCALL, syscall) X(COPY, copy) X(IRQ, irq) X(ENTRY, entry) \
	X(STEAL, steal) X(BLOCKED, blocked) X(WAKEUP, wakeup) X(RUNQUEUE, runqueue) X(PREEMPTED, preempted) X(UNKNOWN, residual)
/* codes[] of ipt_thread_steps: each record type's code in the events' type column (-2: absent). */
#define IPT_STEP_TYPES(X) X(C_SYS_ENTER, sys_enter) X(C_SYS_EXIT, sys_exit) X(C_SWITCH, switch) \
	X(C_WAKING, waking) X(C_WAKEUP, wakeup) X(C_WAKEUP_NEW, wakeup_new)

#define ENUM(e, name) e,
enum { IPT_STATES(ENUM) ON_CPU, NSTATES = UNKNOWN + 1 };
enum { IPT_STEP_TYPES(ENUM) NSTEP_TYPES };
#undef ENUM

#define NAME(e, name) #name,
static const char *const state_names[] = { IPT_STATES(NAME) NULL };
static const char *const step_type_names[] = { IPT_STEP_TYPES(NAME) NULL };
static const char *const rec_type_names[] = { IPT_REC_TYPES(NAME) NULL };   /* enum rec_type - 1 */
static const char *const func_names[] = { IPT_FUNC_IDS(NAME) NULL };        /* enum func_id - 1 */
#undef NAME

/* The i-th name of a table (0 record types, 1 function ids, 2 states, 3 step types; the
 * C side's view that analysis/store/records.py is checked against); NULL past the end. */
const char *ipt_name(int table, int i)
{
	static const char *const *const tables[] = { rec_type_names, func_names, state_names, step_type_names };
	static const int counts[] = { REC_TYPE_MAX - 1, FN_MAX - 1, NSTATES, NSTEP_TYPES };

	if (table < 0 || table >= 4 || i < 0 || i >= counts[table])
		return NULL;
	return tables[table][i];
}

/* A step function written point by point: out[p] takes the value of the last change
 * at or before p; of several changes at one point the latest holds. */
struct ffill {
	int8_t *out;
	size_t filled;
	int8_t cur;
};

static void ffill_change(struct ffill *f, size_t pos, int8_t val)
{
	while (f->filled < pos)
		f->out[f->filled++] = f->cur;
	f->cur = val;
}

static void ffill_finish(struct ffill *f, size_t n)
{
	while (f->filled < n)
		f->out[f->filled++] = f->cur;
}

/* Events of thread `want`: its own, and the switches to it. */
static int is_row(int32_t want, int32_t tid, int32_t next_tid, int8_t type, int32_t sw)
{
	return tid == want || (next_tid == want && type == sw);
}

/* Scratch memory for up to every event, of which a thread's part is written: mapped
 * in huge pages where the kernel allows (MADV_HUGEPAGE), as numpy maps its arrays.
 * Memory first written in 4 KiB pages costs several times as much here (a fault
 * each). Each calling thread keeps its scratch from one call to the next (a piece's
 * timelines, then the next piece's): mapped afresh each call, its huge pages were
 * zeroed by the kernel each time, which cost more than the pass itself. Unmapped when
 * the thread ends, or when it calls ipt_release_scratch. */
enum { SCRATCH_SW, SCRATCH_WK, NSCRATCH };
struct kept_scratch { void *p[NSCRATCH]; size_t bytes[NSCRATCH]; };

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_unmap(void *k)
{
	struct kept_scratch *kept = k;

	for (int i = 0; i < NSCRATCH; i++)
		if (kept->p[i])
			munmap(kept->p[i], kept->bytes[i]);
	free(kept);
}

static void scratch_key_make(void)
{
	pthread_key_create(&scratch_key, scratch_unmap);
}

/* This thread's scratch `which` with room for `bytes`; NULL if out of memory. */
static void *scratch(int which, size_t bytes)
{
	struct kept_scratch *kept;
	void *p;

	pthread_once(&scratch_once, scratch_key_make);
	kept = pthread_getspecific(scratch_key);
	if (!kept) {
		kept = calloc(1, sizeof(*kept));
		if (!kept || pthread_setspecific(scratch_key, kept)) {
			free(kept);
			return NULL;
		}
	}
	if (kept->p[which] && kept->bytes[which] >= bytes + 1)
		return kept->p[which];
	if (kept->p[which])
		munmap(kept->p[which], kept->bytes[which]);
	kept->p[which] = NULL;
	bytes += bytes / 8 + 1;  /* the next piece is usually a little larger */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	kept->p[which] = p, kept->bytes[which] = bytes;
	return p;
}

/* Unmap the calling thread's scratch (once its passes are done). */
void ipt_release_scratch(void)
{
	struct kept_scratch *kept;

	pthread_once(&scratch_once, scratch_key_make);
	kept = pthread_getspecific(scratch_key);
	if (kept) {
		pthread_setspecific(scratch_key, NULL);
		scratch_unmap(kept);
	}
}

struct sw { int64_t ts; size_t pos, row; int8_t out, off; int16_t cpu; };
struct wk { int64_t ts; size_t pos, row, sleep; int64_t waker; int8_t kind, ends_sleep, woken, st, irq; };

/* A switch's step: on CPU after a switch in, its off state after a switch out, UNKNOWN
 * where outs and ins do not alternate (a lost record). */
static int8_t switch_step(const struct sw *s, size_t i, size_t nsw)
{
	if (i + 1 < nsw && s[i].out == s[i + 1].out)
		return UNKNOWN;
	return s[i].out ? s[i].off : ON_CPU;
}

/* Carve-outs: a known cost placed beside an event, taken out of the step next to it
 * when that step is in state `from` (ENTRY out of user time around a syscall's entry
 * and exit, an estimated COPY out of a data syscall's time). len < 0: the |len| ns
 * before `at`; len > 0: the len ns from `at`. */
struct carve_out { int64_t *at, *len; int8_t *state, *from; size_t n; };

static void carve(struct carve_out *c, int64_t at, int64_t len, int8_t state, int8_t from)
{
	if (!len)
		return;
	c->at[c->n] = at;
	c->len[c->n] = len;
	c->state[c->n] = state;
	c->from[c->n] = from;
	c->n++;
}

/*
 * The state of thread `want` from the events (sorted by time), before the overlays:
 * grid[] its distinct event times (returns their count), mode[] user/syscall and run[]
 * its run state on them. cap: room in each output array, at least the thread's events
 * (its own and the switches to it); the carve arrays need twice that.
 *
 * Wake-ups: a sleep's first wake-up is sched_waking (the wake-up starts: WAKEUP) and,
 * where the kernel finished it elsewhere, a later sched_wakeup (queued on the target
 * CPU: RUNQUEUE); a waking with no wakeup after it was finished at once (the tracer
 * leaves that wakeup out), so RUNQUEUE starts at the waking. Per sleep: (wake_on: the
 * switch in, wake_delay: from the first wake-up, wake_rq: from the start of RUNQUEUE)
 * into wake_* (*nwake), and the wake-up that ended it: (sleep_end: its time, sleep_waker:
 * the waker's tid, -1 if the waker's CPU was in a hard interrupt) into *nsleep. Each
 * switch in: (in_ts, in_cpu) into *nin.
 *
 * Each data syscall (data_kind) that returned bytes, its sys_enter and sys_exit paired up:
 * (call_enter, call_exit, call_nr, call_ret) into *ncall, and each wake-up that made the thread runnable (the first of a sleep, or one that
 * came while it was still on CPU, setting itself to sleep): (woke_ts, woke_waker as sleep_waker)
 * into *nwoke, for the rule of what ended a wait (ipt_causal's deliveries).
 *
 * Carves (carve_*: *ncarve): entry_in ns of ENTRY before each sys_enter and entry_out after
 * each sys_exit (from USER); where copy_call >= 0, an estimated COPY of copy_call +
 * bytes * copy_byte in each data syscall that returned bytes: data_kind[nr] 1 (into user
 * space, copied before the exit) or 2 (from user space, copied after the entry).
 * Returns -1 if out of memory.
 */
long ipt_thread_steps(const struct ipt_events *ev, const struct ipt_step_options *opt, struct ipt_thread_out *out)
{
	/* the structs' fields under the names the pass reads */
	const size_t n = ev->n, cap = opt->cap, ndata = opt->ndata;
	const int64_t *ts = ev->ts, *aux = ev->aux, *a0 = ev->a0;
	const int8_t *type = ev->type;
	const int32_t *tid = ev->tid, *next_tid = ev->next_tid, *codes = opt->codes;
	const int16_t *cpu = ev->cpu;
	const uint8_t *data_kind = opt->data_kind;
	const int32_t want = (int32_t)opt->want;
	const int64_t entry_in = opt->entry_in, entry_out = opt->entry_out;
	const double copy_call = opt->copy_call, copy_byte = opt->copy_byte;
	int64_t *grid = out->grid, *wake_on = out->wake_on, *wake_delay = out->wake_delay, *wake_rq = out->wake_rq;
	int64_t *sleep_end = out->sleep_end, *sleep_waker = out->sleep_waker, *in_ts = out->in_ts;
	int64_t *call_enter = out->call_enter, *call_exit = out->call_exit, *call_nr = out->call_nr;
	int64_t *call_ret = out->call_ret, *woke_ts = out->woke_ts, *woke_waker = out->woke_waker;
	int64_t *carve_at = out->carve_at, *carve_len = out->carve_len;
	int8_t *mode = out->mode, *run = out->run, *carve_state = out->carve_state, *carve_from = out->carve_from;
	int16_t *in_cpu = out->in_cpu;
	size_t *nwake = &out->nwake, *nsleep = &out->nsleep, *nin = &out->nin, *ncall = &out->ncall;
	size_t *nwoke = &out->nwoke, *ncarve = &out->ncarve;
	struct sw *sws = scratch(SCRATCH_SW, cap * sizeof(*sws));
	struct wk *wks = scratch(SCRATCH_WK, cap * sizeof(*wks));
	struct ffill fm = { mode, 0, UNKNOWN }, fr = { run, 0, UNKNOWN };
	struct carve_out co = { carve_at, carve_len, carve_state, carve_from, 0 };
	size_t g = 0, row = 0, nsw = 0, nwk = 0;
	/* The previous sys_enter/exit: its step is known once the next one shows whether
	 * the pair is consistent (enter -> exit of the same syscall, exit -> enter). */
	int have_prev = 0, prev_open = 0;
	int64_t prev_nr = 0, prev_ts = 0;
	size_t prev_pos = 0;
	/* an own event other than a syscall's since the last sys_exit (an interrupt, a fault) */
	int other_since = 0;
	/* preempted on a syscall's way out: the exit path runs once it is back on a CPU */
	int exit_pending = 0;

	*ncall = *nwoke = 0;
	if (!sws || !wks)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int8_t t = type[i];
		int own = tid[i] == want;

		if (!is_row(want, tid[i], next_tid[i], t, codes[C_SWITCH]))
			continue;
		if (g == 0 || ts[i] != grid[g - 1])
			grid[g++] = ts[i];
		if (own && (t == codes[C_SYS_ENTER] || t == codes[C_SYS_EXIT])) {
			int open = t == codes[C_SYS_ENTER];
			int ok = have_prev && prev_open != open && (!prev_open || aux[i] == prev_nr || aux[i] == NR_REPLACED);

			if (have_prev)
				ffill_change(&fm, prev_pos, ok ? (prev_open ? SYSCALL : USER) : UNKNOWN);
			if (open) {
				carve(&co, ts[i], -entry_in, ENTRY, USER);
			} else {
				int64_t nr = aux[i], ret = a0[i];
				int kind = nr >= 0 && (size_t)nr < ndata ? data_kind[nr] : 0;

				if (ok && kind && ret > 0) {
					call_enter[*ncall] = prev_ts, call_exit[*ncall] = ts[i];
					call_nr[*ncall] = nr, call_ret[*ncall] = ret;
					(*ncall)++;
				}

				if (ok && copy_call >= 0 && ret > 0 && kind) {
					int64_t len = (int64_t)(copy_call + (double)ret * copy_byte + 0.5);

					if (kind == 2)
						carve(&co, prev_ts, len, COPY, SYSCALL);
					else
						carve(&co, ts[i], -len, COPY, SYSCALL);
				}
				carve(&co, ts[i], entry_out, ENTRY, USER);
			}
			have_prev = 1, prev_open = open, prev_nr = aux[i], prev_pos = g - 1, prev_ts = ts[i];
			other_since = exit_pending = 0;
		} else if (t == codes[C_SWITCH]) {
			/* Preempted right after a sys_exit with nothing in between: the scheduler ran on
			 * the syscall's way out (a wake-up preemption), in the kernel, not in user space;
			 * an interrupt (timer, IPI) would have a record of its own. */
			if (own && aux[i] == 0 && have_prev && !prev_open && !other_since) {
				ffill_change(&fm, prev_pos, SYSCALL);
				prev_pos = g - 1;
				exit_pending = 1;
			} else if (!own && exit_pending) {
				carve(&co, ts[i], entry_out, ENTRY, USER);
				exit_pending = 0;
			}
			sws[nsw++] = (struct sw){ ts[i], g - 1, row, (int8_t)own,
						  aux[i] == 0 ? PREEMPTED : BLOCKED, cpu[i] };
		} else if (own && (t == codes[C_WAKING] || t == codes[C_WAKEUP] || t == codes[C_WAKEUP_NEW])) {
			wks[nwk++] = (struct wk){ ts[i], g - 1, row, SIZE_MAX, (int64_t)(a0[i] & 0xffffffff),
						  (int8_t)(t == codes[C_WAKING] ? 0 : t == codes[C_WAKEUP] ? 1 : 2),
						  0, 0, -1, (int8_t)!!(aux[i] & WAKE_IN_HARDIRQ) };
		} else if (own) {
			other_since = 1;
		}
		row++;
	}
	if (have_prev)
		ffill_change(&fm, prev_pos, prev_open ? SYSCALL : USER);
	ffill_finish(&fm, g);

	/* Wake-ups. The tracepoints fire only for a sleeping thread; one that fires while
	 * it is still on CPU (set sleeping, not switched out yet) makes its next switch out
	 * that of a woken thread, which waits in the run queue. A wake-up of a blocked
	 * thread ends its sleep (sleep: the index of the switch out). p: the switches at or
	 * before the wake-up. Each wake-up changes only the switch after it, which only
	 * later wake-ups read. */
	for (size_t w = 0, p = 0; w < nwk; w++) {
		while (p < nsw && sws[p].ts <= wks[w].ts)
			p++;
		if (p > 0 && switch_step(sws, p - 1, nsw) == ON_CPU) {
			if (p < nsw && sws[p].out) {
				sws[p].off = RUNQUEUE;
				wks[w].woken = 1;
			}
		} else if (p > 0 && switch_step(sws, p - 1, nsw) == BLOCKED) {
			wks[w].ends_sleep = wks[w].woken = 1;
			wks[w].sleep = p - 1;
		}
	}
	/* Per sleep, the state each of its wake-ups starts: the first WAKEUP if it is a
	 * waking followed by a wakeup in the same sleep, else RUNQUEUE; that wakeup RUNQUEUE. */
	*nsleep = 0;
	for (size_t w = 0; w < nwk; w++) {
		if (!wks[w].ends_sleep || (w > 0 && wks[w - 1].ends_sleep && wks[w - 1].sleep == wks[w].sleep))
			continue;
		wks[w].st = RUNQUEUE;
		if (wks[w].kind == 0) {
			for (size_t v = w + 1; v < nwk && wks[v].ends_sleep && wks[v].sleep == wks[w].sleep; v++) {
				if (wks[v].kind == 1) {
					wks[w].st = WAKEUP;
					wks[v].st = RUNQUEUE;
					break;
				}
			}
		}
		sleep_end[*nsleep] = wks[w].ts;
		sleep_waker[*nsleep] = wks[w].irq ? -1 : wks[w].waker;
		(*nsleep)++;
	}
	/* The wake-ups that made it runnable: a sleep's first (its sched_wakeup may name the task
	 * that ran on the target CPU, not the waker), and those while on CPU, by their waking. */
	for (size_t w = 0; w < nwk; w++) {
		int later_in_sleep = w > 0 && wks[w - 1].ends_sleep && wks[w - 1].sleep == wks[w].sleep;

		if (!wks[w].woken || (wks[w].ends_sleep ? later_in_sleep : wks[w].kind == 1))
			continue;
		woke_ts[*nwoke] = wks[w].ts;
		woke_waker[*nwoke] = wks[w].irq ? -1 : wks[w].waker;
		(*nwoke)++;
	}
	/* The run state's changes in event order: every switch, and the wake-ups that start a state. */
	for (size_t a = 0, b = 0; a < nsw || b < nwk;) {
		if (b == nwk || (a < nsw && sws[a].row < wks[b].row)) {
			ffill_change(&fr, sws[a].pos, switch_step(sws, a, nsw));
			a++;
		} else {
			if (wks[b].st >= 0)
				ffill_change(&fr, wks[b].pos, wks[b].st);
			b++;
		}
	}
	ffill_finish(&fr, g);

	*nin = 0;
	for (size_t a = 0; a < nsw; a++) {
		if (!sws[a].out) {
			in_ts[*nin] = sws[a].ts;
			in_cpu[*nin] = sws[a].cpu;
			(*nin)++;
		}
	}
	/* Wake-up delays: from the first wake-up of each sleep to the next switch in, and
	 * the part of it in the run queue. */
	*nwake = 0;
	for (size_t w = 0, k = 0, nin_before = 0, last = SIZE_MAX; w < nwk; w++) {
		int64_t rq_from;

		if (!wks[w].woken)
			continue;
		/* k: first switch in after the wake-up; nin_before: switches in before k */
		while (k < nsw && (sws[k].out || sws[k].ts <= wks[w].ts)) {
			nin_before += !sws[k].out;
			k++;
		}
		if (k == nsw || nin_before == last)
			continue;
		last = nin_before;
		rq_from = wks[w].ts;
		if (wks[w].st == WAKEUP) {
			for (size_t v = w + 1; v < nwk && wks[v].ts <= sws[k].ts; v++) {
				if (wks[v].st == RUNQUEUE) {
					rq_from = wks[v].ts;
					break;
				}
			}
		}
		wake_on[*nwake] = sws[k].ts;
		wake_delay[*nwake] = sws[k].ts - wks[w].ts;
		wake_rq[*nwake] = sws[k].ts - rq_from;
		(*nwake)++;
	}
	*ncarve = co.n;
	return (long)g;
}

/* Append a step to (out_ts, out_st) unless it goes on in the same state. */
static void put(int64_t *out_ts, int8_t *out_st, size_t *m, int64_t t, int8_t st)
{
	if (*m && out_st[*m - 1] == st)
		return;
	out_ts[*m] = t;
	out_st[(*m)++] = st;
}

static int8_t state_on(const int8_t *mode, const int8_t *run, const int8_t *overlay, size_t i)
{
	int8_t on = overlay && overlay[i] != 0 ? overlay[i] : mode[i];

	return run[i] == ON_CPU ? on : run[i];
}

/*
 * The thread's state from mode, run state and overlays (NULL: none) on its grid, with
 * the carves (sorted by `at`) cut out of the steps next to them: a carve with len > 0
 * from the start of the step that begins at `at`, one with len < 0 from the end of the
 * step that ends there, each only from a step in its `from` state and never beyond it.
 * Into out_ts/out_st (room for 3 * g), kept only where the state changes. Returns the count.
 */
size_t ipt_thread_finish(const struct ipt_finish_in *in, struct ipt_finish_out *out)
{
	/* the structs' fields under the names the pass reads */
	const size_t g = in->g, ncarve = in->ncarve;
	const int64_t *grid = in->grid, *c_at = in->c_at, *c_len = in->c_len;
	const int8_t *mode = in->mode, *run = in->run, *overlay = in->overlay, *c_state = in->c_state;
	const int8_t *c_from = in->c_from;
	int64_t *out_ts = out->ts;
	int8_t *out_st = out->st;
	size_t m = 0, c0 = 0;

	for (size_t i = 0, j; i < g; i = j) {
		int8_t st = state_on(mode, run, overlay, i), sa = st, sb = st;
		int64_t start = grid[i], end, a, b;

		for (j = i + 1; j < g && state_on(mode, run, overlay, j) == st; j++)
			;
		end = j < g ? grid[j] : INT64_MAX;
		a = start, b = end;
		while (c0 < ncarve && c_at[c0] < start)
			c0++;
		for (size_t c = c0; c < ncarve && c_at[c] <= end; c++) {
			if (c_from[c] != st)
				continue;
			if (c_at[c] == start && c_len[c] > 0) {
				a = end - start > c_len[c] ? start + c_len[c] : end;
				sa = c_state[c];
			} else if (c_at[c] == end && c_len[c] < 0 && j < g) {
				b = end + c_len[c];
				sb = c_state[c];
			}
		}
		if (b < a)
			b = a;
		if (a > start)
			put(out_ts, out_st, &m, start, sa);
		if (b > a)
			put(out_ts, out_st, &m, a, st);
		if (end > b)
			put(out_ts, out_st, &m, b, sb);
	}
	return m;
}

/*
 * The sorted union of the change points of k step functions (ts[j] sorted; before[j]
 * their value before their first change) into out_ts (returns its length), and each
 * function's value there into out_val[j].
 */
size_t ipt_merge_steps(int k, const int64_t *const *ts, const int8_t *const *val, const size_t *len,
		       const int8_t *before, int64_t *out_ts, int8_t *const *out_val)
{
	size_t at[k], u = 0;

	for (int j = 0; j < k; j++)
		at[j] = 0;
	for (;;) {
		int any = 0;
		int64_t t = 0;

		for (int j = 0; j < k; j++) {
			if (at[j] < len[j] && (!any || ts[j][at[j]] < t)) {
				t = ts[j][at[j]];
				any = 1;
			}
		}
		if (!any)
			return u;
		out_ts[u] = t;
		for (int j = 0; j < k; j++) {
			while (at[j] < len[j] && ts[j][at[j]] == t)
				at[j]++;
			out_val[j][u] = at[j] ? val[j][at[j] - 1] : before[j];
		}
		u++;
	}
}

/* The first index i in [a, b) with ts[i] >= t, b if none (ts[a..b) ascending). */
static size_t lower_bound(const int64_t *ts, size_t a, size_t b, int64_t t)
{
	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (ts[mid] < t)
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

/* The first index i with ts[i] >= t, n if none, searched outwards from *hint (the answer of
 * the last search in ts, kept there): the causal walk's searches land near the one before,
 * and a binary search over a whole thread's steps costs a cache miss a level. */
static size_t first_from_near(const int64_t *ts, size_t n, int64_t t, size_t *hint)
{
	size_t a = 0, b = 0, h = *hint < n ? *hint : n, step = 1;

	if (h < n && ts[h] < t) {        /* after h: double the stride until past t */
		size_t lo = h;

		for (;;) {
			size_t hi = lo + step;

			if (hi >= n) {
				a = lo + 1, b = n;
				break;
			}
			if (ts[hi] >= t) {
				a = lo + 1, b = hi;
				break;
			}
			lo = hi, step *= 2;
		}
	} else {                         /* at or before h */
		size_t hi = h;

		while (hi > 0) {
			size_t lo = hi > step ? hi - step : 0;

			if (ts[lo] < t) {
				a = lo + 1, b = hi;
				break;
			}
			hi = lo, step *= 2;
		}
	}
	return *hint = lower_bound(ts, a, b, t);
}

static int on_cpu_state(int8_t st)
{
	return st < BLOCKED || st == UNKNOWN;
}

/* The threads, CPUs and windows of one ipt_causal call. */
struct causal {
	int k;                                   /* threads: 0 the measuring one, then its peers, then the others */
	const int64_t *const *ts;                /* each thread's step function */
	const int8_t *const *st;
	const size_t *len;
	const int64_t *const *sleep_end;         /* the end of each sleep, and who ended it (thread index, -1: none of them) */
	const int32_t *const *sleep_waker;
	const size_t *nsleep;
	const int64_t *const *in_ts;             /* switches in, and to which CPU */
	const int16_t *const *in_cpu;
	const size_t *nin;
	const int64_t *const *deliv_at;          /* what ended a wait that a wake-up had not: when, by which thread */
	const int32_t *const *deliv_by;
	const size_t *ndeliv;
	int ncpu;                                /* who ran on each CPU from occ_off[c] to occ_off[c + 1]: */
	const size_t *occ_off;                   /* from occ_ts on, thread index occ_who (-1: another task, occ_tid) */
	const int64_t *occ_ts;
	const int32_t *occ_who, *occ_tid;
	/* the segments being emitted for the current window */
	double *out;                             /* [state * n + window] */
	size_t n, w;
	int64_t *seg_a, *seg_b, *seg_holder;     /* NULL: not wanted */
	int32_t *seg_w;
	int8_t *seg_thread, *seg_st;
	size_t seg_cap, nseg, seg_lost;
	int holders_only;                        /* keep only the segments with a holder */
	int have;                                /* a segment is held back: the edge rules may change it */
	int64_t ha, hb, hh;
	int8_t hth, hst;
	int first;                               /* the held segment touches the window's end */
	int ok_end;                              /* some side is in an edge state at the end */
	size_t *hint;                            /* first_from_near's: ts of each thread, sleep_end, in_ts, occ_ts of each CPU, deliv_at of each thread; NULL: none */
};

/* The first index with a time >= t in array `which` (0 ts, 1 sleep_end, 2 in_ts, 3 occ_ts,
 * 4 deliv_at) of thread or CPU j. */
static size_t find(const struct causal *c, int which, int j, int64_t t)
{
	const int64_t *ts;
	size_t n;

	switch (which) {
	case 0: ts = c->ts[j], n = c->len[j]; break;
	case 1: ts = c->sleep_end[j], n = c->nsleep[j]; break;
	case 2: ts = c->in_ts[j], n = c->nin[j]; break;
	case 3: ts = c->occ_ts + c->occ_off[j], n = c->occ_off[j + 1] - c->occ_off[j]; break;
	default: ts = c->deliv_at[j], n = c->ndeliv[j]; break;
	}
	if (!c->hint)
		return lower_bound(ts, 0, n, t);
	/* hints: 3 arrays of each thread, then one of each CPU, then deliv_at of each thread */
	return first_from_near(ts, n, t, &c->hint[which < 4 ? (size_t)which * (size_t)c->k + (size_t)j
							 : 3 * (size_t)c->k + (size_t)c->ncpu + (size_t)j]);
}

static void flush(struct causal *c)
{
	if (!c->have)
		return;
	c->out[(size_t)c->hst * c->n + c->w] += (double)(c->hb - c->ha);
	if (c->seg_a && (!c->holders_only || c->hh >= 0)) {
		if (c->nseg < c->seg_cap) {
			size_t q = c->nseg++;

			c->seg_w[q] = (int32_t)c->w;
			c->seg_a[q] = c->ha, c->seg_b[q] = c->hb, c->seg_holder[q] = c->hh;
			c->seg_thread[q] = c->hth, c->seg_st[q] = c->hst;
		} else {
			c->seg_lost++;
		}
	}
	c->have = 0;
}

/* A segment [a, b) of thread th in state st, the walk going backwards in time. */
static void emit(struct causal *c, int64_t a, int64_t b, int th, int8_t st, int64_t holder)
{
	if (b <= a)
		return;
	if (c->have && c->hth == th && c->hst == st && c->hh == holder && c->ha == b) {
		c->ha = a;
		return;
	}
	if (c->have && c->first && !c->ok_end)
		c->hst = UNKNOWN;
	if (c->have)
		c->first = 0;
	flush(c);
	c->have = 1;
	c->ha = a, c->hb = b, c->hh = holder, c->hth = (int8_t)th, c->hst = st;
}

/* State of thread j at time t (the step holding t), UNKNOWN before its first. */
static int8_t state_at(const struct causal *c, int j, int64_t t)
{
	long i = (long)find(c, 0, j, t + 1) - 1;

	return i < 0 ? UNKNOWN : c->st[j][i];
}

/* Thread th's own steps over [a, b), where it held a CPU: off-CPU states there contradict that. */
static void emit_holder(struct causal *c, int th, int64_t a, int64_t b)
{
	long i = (long)find(c, 0, th, b) - 1;

	while (b > a) {
		int64_t from = i < 0 ? a : (c->ts[th][i] > a ? c->ts[th][i] : a);
		int8_t st = i < 0 ? UNKNOWN : c->st[th][i];

		emit(c, from, b, th, on_cpu_state(st) ? st : UNKNOWN, -1);
		b = from;
		i--;
	}
}

/* Thread j runnable off CPU over [a, b): whoever held the CPU it came back on. */
static void emit_waiting(struct causal *c, int j, int64_t a, int64_t b, int8_t st, int64_t step_end)
{
	size_t q = find(c, 2, j, step_end);
	int cpu = q < c->nin[j] ? c->in_cpu[j][q] : -1;

	if (cpu < 0 || cpu >= c->ncpu) {
		emit(c, a, b, j, st, -1);
		return;
	}
	const int64_t *ots = c->occ_ts + c->occ_off[cpu];
	long o = (long)find(c, 3, cpu, b) - 1;

	while (b > a) {
		int64_t from = o < 0 ? a : (ots[o] > a ? ots[o] : a);
		int who = o < 0 ? -1 : c->occ_who[c->occ_off[cpu] + o];
		int64_t tid = o < 0 ? -1 : c->occ_tid[c->occ_off[cpu] + o];

		if (who >= 0 && who != j)
			emit_holder(c, who, from, b);
		else if (who < 0 && tid > 0)
			emit(c, from, b, j, st, tid);            /* another task had the CPU: named */
		else
			emit(c, from, b, j, st, -1);             /* idle, or switching: the wait itself */
		b = from;
		o--;
	}
}

/*
 * The causal critical path of each window [s, e) of thread 0, walking back from e: the
 * thread on the path in a state on a CPU counts that state; woken and waiting (WAKEUP,
 * RUNQUEUE) or preempted, the time counts for whichever thread of the workload held the
 * CPU it came back on (that thread's own state), else as its waiting state, with the task
 * that held the CPU if one did (the field's names: RUNQUEUE from a wake-up until running,
 * whoever held the CPU; PREEMPTED only after an involuntary switch out); blocked, the
 * path moves to the thread of the workload that ended the sleep, at that moment, or if none did (an interrupt, another task) the time
 * counts as BLOCKED and the path stays. What ended a wait is not always a wake-up: a
 * thread woken early (a UNIX socket's reader woken by its peer's read, the write-space
 * wake-up) that stays in the same receive until the data comes waited for the send that
 * delivered it; deliv_at[j] (ascending) holds those sends' times, deliv_by[j] the sender's
 * index: at such a time the path moves to the sender, whatever thread j's state there. What
 * marks a window's edges happens in a known state: edge_states, a mask of states (1 << state),
 * USER and ENTRY for the workload's clock reads, made in user space, the states on a CPU for
 * a traced program's round trips, whose edges are the measuring thread's sys_enter and
 * sys_exit; where none of the first nsides threads is in one of them there, the segment at
 * that edge is UNKNOWN (the events and the edges disagree).
 * out: (NSTATES, n) ns per state, added to. Segments (window, [a, b), thread, state,
 * holder tid or -1) go to seg_* when seg_a is not NULL, up to seg_cap (*seg_lost counts
 * the rest), only those with a holder if holders_only. Returns the count of segments written.
 */
size_t ipt_causal(const struct ipt_causal_in *in, const struct ipt_causal_options *opt, struct ipt_causal_out *o)
{
	/* the structs' fields under the names the walk reads */
	const int k = in->k, ncpu = in->ncpu;
	const int64_t *const *ts = in->ts, *const *sleep_end = in->sleep_end, *const *in_ts = in->in_ts;
	const int64_t *const *deliv_at = in->deliv_at, *occ_ts = in->occ_ts, *s = in->s, *e = in->e;
	const int8_t *const *st = in->st;
	const int32_t *const *sleep_waker = in->sleep_waker, *const *deliv_by = in->deliv_by;
	const int32_t *occ_who = in->occ_who, *occ_tid = in->occ_tid;
	const int16_t *const *in_cpu = in->in_cpu;
	const size_t *len = in->len, *nsleep = in->nsleep, *nin = in->nin, *ndeliv = in->ndeliv, *occ_off = in->occ_off;
	const size_t n = in->n, seg_cap = o->seg_cap;
	const int nsides = (int)opt->nsides, edge_states = (int)opt->edge_states, holders_only = (int)opt->holders_only;
	double *out = o->out;
	int32_t *seg_w = o->seg_w;
	int64_t *seg_a = o->seg_a, *seg_b = o->seg_b, *seg_holder = o->seg_holder;
	int8_t *seg_thread = o->seg_thread, *seg_st = o->seg_st;
	size_t *seg_lost = &o->seg_lost;
	struct causal c = {
		.k = k, .ts = ts, .st = st, .len = len, .sleep_end = sleep_end, .sleep_waker = sleep_waker,
		.nsleep = nsleep, .in_ts = in_ts, .in_cpu = in_cpu, .nin = nin,
		.deliv_at = deliv_at, .deliv_by = deliv_by, .ndeliv = ndeliv, .ncpu = ncpu, .occ_off = occ_off,
		.occ_ts = occ_ts, .occ_who = occ_who, .occ_tid = occ_tid, .out = out, .n = n,
		.seg_a = seg_a, .seg_b = seg_b, .seg_holder = seg_holder, .seg_w = seg_w, .seg_thread = seg_thread,
		.seg_st = seg_st, .seg_cap = seg_cap, .holders_only = holders_only,
		.hint = calloc((size_t)4 * (size_t)(k > 0 ? k : 0) + (size_t)(ncpu > 0 ? ncpu : 0) + 1, sizeof(size_t)),
	};

	for (size_t w = 0; w < n; w++) {
		int cur = 0, ok_start = 0, jumps = 0;
		int64_t t = e[w];

		c.w = w, c.have = 0, c.first = 1, c.ok_end = 0;
		for (int j = 0; j < nsides && j < k; j++) {
			int8_t se = state_at(&c, j, e[w] - 1), ss = state_at(&c, j, s[w]);

			c.ok_end |= se >= 0 && (edge_states >> se & 1);
			ok_start |= ss >= 0 && (edge_states >> ss & 1);
		}
		while (t > s[w]) {
			long i = (long)find(&c, 0, cur, t) - 1;
			int8_t now = i < 0 ? UNKNOWN : st[cur][i];
			int64_t a = i < 0 || ts[cur][i] < s[w] ? s[w] : ts[cur][i];
			int64_t step_end = i >= 0 && (size_t)(i + 1) < len[cur] ? ts[cur][i + 1] : t;
			int sender = -1;

			/* a send that ended this thread's wait in (a, t]: the step from it, then the sender */
			if (ndeliv[cur] && jumps < k) {
				size_t q = find(&c, 4, cur, a + 1);

				if (q < ndeliv[cur] && deliv_at[cur][q] <= t) {
					int by = deliv_by[cur][q];

					if (by >= 0 && by < k && by != cur && find(&c, 0, by, deliv_at[cur][q]) > 0) {
						sender = by;
						a = deliv_at[cur][q];
					}
				}
			}
			if (sender >= 0) {
				if (on_cpu_state(now) || now == WAKEUP)
					emit(&c, a, t, cur, now, -1);
				else if (now == RUNQUEUE || now == PREEMPTED)
					emit_waiting(&c, cur, a, t, now, step_end);
				else
					emit(&c, a, t, cur, BLOCKED, -1);
				cur = sender;
				jumps++;
				t = a;
				continue;
			}
			if (on_cpu_state(now) || now == WAKEUP) {
				emit(&c, a, t, cur, now, -1);
			} else if (now == RUNQUEUE || now == PREEMPTED) {
				emit_waiting(&c, cur, a, t, now, step_end);
			} else {   /* BLOCKED: who ended the sleep, if it ends here */
				size_t q = find(&c, 1, cur, t);
				int waker = q < nsleep[cur] && sleep_end[cur][q] == t ? sleep_waker[cur][q] : -1;
				int ours = step_end == t && waker >= 0 && waker != cur && waker < k;

				if (ours && find(&c, 0, waker, t) == 0) {
					/* woken by a thread of the workload the trace has nothing of yet */
					emit(&c, a, t, cur, UNKNOWN, -1);
				} else if (ours && jumps < k && on_cpu_state(state_at(&c, waker, t - 1))) {
					/* the waker was on a CPU, in a known state or not (a lost record) */
					cur = waker;
					jumps++;
					continue;
				} else {
					emit(&c, a, t, cur, BLOCKED, -1);
				}
			}
			jumps = 0;
			t = a;
		}
		if (c.have && c.first && !c.ok_end)
			c.hst = UNKNOWN;
		if (c.have && !ok_start)
			c.hst = UNKNOWN;
		flush(&c);
	}
	free(c.hint);
	*seg_lost = c.seg_lost;
	return c.nseg;
}

/* The count of ts[] at or before x, searched from `from` (that count for an x at or
 * before this one): windows come in time order as a rule, so the next one lies a few
 * steps on, which a doubling search finds without touching the whole array. */
static size_t count_upto(const int64_t *ts, size_t nts, size_t from, int64_t x)
{
	size_t a, b, step = 1;

	if (from > nts || (from > 0 && ts[from - 1] > x))
		from = 0;
	a = from, b = from;
	while (b < nts && ts[b] <= x) {
		a = b + 1;
		b = b + step < nts ? b + step : nts;
		step *= 2;
	}
	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (ts[mid] <= x)
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

/* np.searchsorted(ts, x, side="right") for each x. */
void ipt_count_upto(size_t nts, const int64_t *ts, size_t n, const int64_t *x, int64_t *out)
{
	for (size_t i = 0, at = 0; i < n; i++)
		out[i] = (int64_t)(at = count_upto(ts, nts, at, x[i]));
}

/*
 * ns that each window [s, e) spends in each state of the step functions states[j] on the
 * change points ts (UNKNOWN before ts[0]), added to out[j][state * n + window]: a column
 * per state, which the breakdown's table and its parquet writer take as they are.
 * A window with e < s counts [e, s) negatively.
 */
void ipt_time_in(size_t nts, const int64_t *ts, int k, const int8_t *const *states, size_t n,
		 const int64_t *s, const int64_t *e, double *const *out)
{
	for (size_t w = 0, at = 0; w < n; w++) {
		int64_t lo = s[w] < e[w] ? s[w] : e[w], hi = s[w] < e[w] ? e[w] : s[w];
		double sign = s[w] <= e[w] ? 1.0 : -1.0;
		/* idx: the last change at or before lo (nts: none, i.e. UNKNOWN) */
		at = count_upto(ts, nts, at, lo);
		size_t idx = at ? at - 1 : nts;
		int64_t cur = lo;

		while (cur < hi) {
			int64_t next = idx == nts ? (nts ? ts[0] : hi) : idx + 1 < nts ? ts[idx + 1] : hi;
			int64_t end = next < hi ? next : hi;

			for (int j = 0; j < k; j++) {
				int8_t st = idx == nts ? UNKNOWN : states[j][idx];

				out[j][(size_t)st * n + w] += sign * (double)(end - cur);
			}
			cur = end;
			idx = idx == nts ? 0 : idx + 1;
		}
	}
}

/*
 * Two kinds of records (a, b), each with its key (a thread) and its row (ascending within each
 * kind), merged into each key's sequence in row order: the rows merged (a's first at a tie),
 * then grouped by key, the groups in the order their keys first come, each in row order
 * (activity.py's _keyed_sequence: a stable sort of the two runs, then pandas.factorize's codes
 * sorted stably). key_out, row_out, is_b: room for na + nb. Returns the count of keys, or -1
 * where a kind's rows are not ascending (or memory ran out), nothing then written.
 */
long ipt_keyed_sequence(size_t na, const int64_t *key_a, const int64_t *row_a, size_t nb, const int64_t *key_b,
			const int64_t *row_b, int64_t *key_out, int64_t *row_out, uint8_t *is_b)
{
	size_t n = na + nb, cap = 64, nkeys = 0;
	for (size_t i = 1; i < na; i++)
		if (row_a[i] < row_a[i - 1])
			return -1;
	for (size_t i = 1; i < nb; i++)
		if (row_b[i] < row_b[i - 1])
			return -1;
	/* codes of the merged sequence, numbered as the keys first come (an open-addressing table) */
	uint32_t *code = malloc(n * sizeof(*code) + 1);
	int64_t *slot_key = malloc(cap * sizeof(*slot_key));
	int64_t *slot_code = malloc(cap * sizeof(*slot_code));
	size_t *count = malloc(cap * sizeof(*count));
	long ret = -1;
	if (!code || !slot_key || !slot_code || !count)
		goto out;
	for (size_t s = 0; s < cap; s++)
		slot_code[s] = -1;
	for (size_t i = 0, ia = 0, ib = 0; i < n; i++) {
		int from_b = ia == na || (ib < nb && row_b[ib] < row_a[ia]);
		int64_t k = from_b ? key_b[ib] : key_a[ia];
		if (2 * (nkeys + 1) > cap) { /* grow: rehash the keys so far */
			size_t ncap = 2 * cap;
			int64_t *nk = malloc(ncap * sizeof(*nk)), *nc = malloc(ncap * sizeof(*nc));
			size_t *ncount = realloc(count, ncap * sizeof(*ncount));
			if (ncount)
				count = ncount;
			if (!nk || !nc || !ncount) {
				free(nk);
				free(nc);
				goto out;
			}
			for (size_t s = 0; s < ncap; s++)
				nc[s] = -1;
			for (size_t s = 0; s < cap; s++) {
				if (slot_code[s] < 0)
					continue;
				size_t h = (size_t)((uint64_t)slot_key[s] * 0x9E3779B97F4A7C15ULL >> 20) & (ncap - 1);
				while (nc[h] >= 0)
					h = (h + 1) & (ncap - 1);
				nk[h] = slot_key[s];
				nc[h] = slot_code[s];
			}
			free(slot_key);
			free(slot_code);
			slot_key = nk;
			slot_code = nc;
			cap = ncap;
		}
		size_t h = (size_t)((uint64_t)k * 0x9E3779B97F4A7C15ULL >> 20) & (cap - 1);
		while (slot_code[h] >= 0 && slot_key[h] != k)
			h = (h + 1) & (cap - 1);
		if (slot_code[h] < 0) {
			slot_key[h] = k;
			slot_code[h] = (int64_t)nkeys;
			count[nkeys++] = 0;
		}
		code[i] = (uint32_t)slot_code[h];
		count[code[i]]++;
		key_out[i] = k; /* in merged order for now: placed below */
		row_out[i] = from_b ? row_b[ib] : row_a[ia];
		is_b[i] = (uint8_t)from_b;
		if (from_b)
			ib++;
		else
			ia++;
	}
	/* the groups' starts, then each record to its place: a counting sort, stable */
	for (size_t c = 0, at = 0; c < nkeys; c++) {
		size_t k = count[c];
		count[c] = at;
		at += k;
	}
	int64_t *tmp_row = malloc(n * sizeof(*tmp_row) + 1);
	uint8_t *tmp_b = malloc(n + 1);
	if (!tmp_row || !tmp_b) {
		free(tmp_row);
		free(tmp_b);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t to = count[code[i]]++;
		tmp_row[to] = row_out[i];
		tmp_b[to] = is_b[i];
	}
	/* keys: each group's own, rebuilt from the table */
	for (size_t s = 0; s < cap; s++) {
		if (slot_code[s] < 0)
			continue;
		size_t c = (size_t)slot_code[s];
		size_t end = count[c], start = c ? count[c - 1] : 0;
		for (size_t i = start; i < end; i++)
			key_out[i] = slot_key[s];
	}
	for (size_t i = 0; i < n; i++) {
		row_out[i] = tmp_row[i];
		is_b[i] = tmp_b[i];
	}
	free(tmp_row);
	free(tmp_b);
	ret = (long)nkeys;
out:
	free(code);
	free(slot_key);
	free(slot_code);
	free(count);
	return ret;
}

/* A thread's data calls of one kind that moved data: their entries and exits, in time order. */
struct data_calls {
	int64_t *in, *out;
	size_t n;
};

/* One delivery found, with what orders it among those of its time: the wake-ups first, then
 * the sends (as timeline.py's concatenation sorted stably did), each in its receive's order. */
struct delivery {
	int64_t at;
	size_t order;
	int32_t by;
};

static int delivery_cmp(const void *pa, const void *pb)
{
	const struct delivery *a = pa, *b = pb;

	if (a->at != b->at)
		return a->at < b->at ? -1 : 1;
	return (a->order > b->order) - (a->order < b->order);
}

/* Whether v is one of a[0..n): searched from *hint where a ascends (count_upto), else by
 * looking at each. */
static int one_of(const int64_t *a, size_t n, int ascending, int64_t v, size_t *hint)
{
	if (ascending) {
		size_t at = *hint = count_upto(a, n, *hint, v);
		return at > 0 && a[at - 1] == v;
	}
	for (size_t i = 0; i < n; i++)
		if (a[i] == v)
			return 1;
	return 0;
}

/*
 * What ended each of k threads' waits where ipt_causal's wake-up rule would not find it
 * (analysis/model/timeline.py's deliveries says the rule): per thread x, from its system calls
 * (ncall[x] of enter, exit, nr, ret; kind[nr] 1 a receive, 2 a send where ret > 0), its
 * wake-ups (woke_ts ascending, woke_by the waker's tid) and the ends of its sleeps (sleep_end),
 * the times (at_out[x], room for ncall[x]) and the index among tids of the sender (by_out[x]),
 * in time order, nout[x] of them. Returns 0, or -1 where memory ran out.
 */
long ipt_deliveries(int k, const int64_t *tids, const size_t *ncall, const int64_t *const *enter,
		    const int64_t *const *exit, const int64_t *const *nr, const int64_t *const *ret,
		    const size_t *nwoke, const int64_t *const *woke_ts, const int64_t *const *woke_by,
		    const size_t *nsleep, const int64_t *const *sleep_end, size_t nkind, const uint8_t *kind,
		    int64_t *const *at_out, int32_t *const *by_out, size_t *nout)
{
	size_t total = 0, most = 0;
	for (int x = 0; x < k; x++) {
		total += ncall[x];
		most = ncall[x] > most ? ncall[x] : most;
		nout[x] = 0;
	}
	struct data_calls *recv = calloc((size_t)k + 1, sizeof(*recv)), *send = calloc((size_t)k + 1, sizeof(*send));
	int64_t *buf = malloc(4 * total * sizeof(*buf) + 1);
	struct delivery *found = malloc(most * sizeof(*found) + 1);
	/* where the last search in each thread's receives and sends ended: the wake-ups come in time
	 * order as a rule, so the next search starts a few steps on (count_upto) */
	size_t *at_recv = malloc(((size_t)k + 1) * sizeof(*at_recv)), *at_send = malloc(((size_t)k + 1) * sizeof(*at_send));
	long rc = -1;
	if (!recv || !send || !buf || !found || !at_recv || !at_send)
		goto out;
	size_t at = 0;
	for (int x = 0; x < k; x++) {
		recv[x].in = buf + at, recv[x].out = buf + at + ncall[x];
		send[x].in = buf + at + 2 * ncall[x], send[x].out = buf + at + 3 * ncall[x];
		at += 4 * ncall[x];
		for (size_t i = 0; i < ncall[x]; i++) {
			int64_t n = nr[x][i];
			int kd = n >= 0 && (uint64_t)n < nkind ? kind[n] : 0;
			struct data_calls *to = kd == 1 ? &recv[x] : kd == 2 ? &send[x] : NULL;

			if (!to || ret[x][i] <= 0)
				continue;
			to->in[to->n] = enter[x][i];
			to->out[to->n++] = exit[x][i];
		}
	}
	for (int x = 0; x < k; x++) {
		const struct data_calls *r = &recv[x];
		size_t m = 0, nw = nwoke[x], at_woke = 0, at_sleep = 0;
		int ascending = 1;

		if (!r->n || !nw || k < 2)
			continue;
		for (size_t i = 1; i < nsleep[x] && ascending; i++)
			ascending = sleep_end[x][i] >= sleep_end[x][i - 1];
		for (int y = 0; y < k; y++)
			at_recv[y] = at_send[y] = 0;
		for (size_t i = 0; i < r->n; i++) {
			/* the last wake-up before the receive returned, by a thread of these but x, inside it */
			size_t j = r->out[i] == INT64_MIN ? 0 : (at_woke = count_upto(woke_ts[x], nw, at_woke, r->out[i] - 1));
			if (!j)
				continue;
			int64_t woke = woke_ts[x][j - 1], waker = woke_by[x][j - 1];
			int w = -1;
			for (int y = 0; y < k && w < 0; y++)
				w = tids[y] == waker ? y : -1;
			if (woke <= r->in[i] || w < 0 || w == x)
				continue;
			/* whether the waker was itself receiving then */
			size_t kw = at_recv[w] = count_upto(recv[w].in, recv[w].n, at_recv[w], woke);
			if (!(kw > 0 && recv[w].out[kw - 1] >= woke)) {
				if (!one_of(sleep_end[x], nsleep[x], ascending, woke, &at_sleep))
					found[m++] = (struct delivery){ woke, i, (int32_t)w };
				continue;
			}
			/* woken early: the first send of another thread after the wake-up */
			int64_t first_in = INT64_MAX, first_out = 0;
			int first_by = -1;
			for (int y = 0; y < k; y++) {
				size_t ks = y == x ? 0 : (at_send[y] = count_upto(send[y].in, send[y].n, at_send[y], woke));
				if (y == x || ks >= send[y].n || send[y].in[ks] >= first_in)
					continue;
				first_in = send[y].in[ks], first_out = send[y].out[ks], first_by = y;
			}
			if (first_by >= 0 && first_in < r->out[i])
				found[m++] = (struct delivery){ first_out < r->out[i] ? first_out : r->out[i], r->n + i,
								(int32_t)first_by };
		}
		qsort(found, m, sizeof(*found), delivery_cmp);
		for (size_t i = 0; i < m; i++) {
			at_out[x][i] = found[i].at;
			by_out[x][i] = found[i].by;
		}
		nout[x] = m;
	}
	rc = 0;
out:
	free(recv);
	free(send);
	free(buf);
	free(found);
	free(at_recv);
	free(at_send);
	return rc;
}
