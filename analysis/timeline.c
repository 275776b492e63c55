/*
 * The breakdown's passes over the events (analysis/breakdown.py, through
 * analysis/native.py): a thread's state step function, the union of several
 * step functions with the critical path over it, and the time each window
 * spends in each state. Each is one forward pass over arrays numpy hands in; at
 * 10 M events the same steps as whole-array numpy operations cost several
 * seconds of temporaries. The rules are those documented in breakdown.py.
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* Thread states, as STATE_NAMES of breakdown.py; ON_CPU: run state only. */
enum { USER, SYSCALL, COPY, IRQ, BLOCKED, SCHED_DELAY, PREEMPTED, UNKNOWN, ON_CPU };

/* codes[] of ipt_thread_steps: each type's code in the events' type column (-2: absent). */
enum { C_SYS_ENTER, C_SYS_EXIT, C_SWITCH, C_WAKING, C_WAKEUP, C_WAKEUP_NEW };

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
 * each). */
static void *scratch(size_t bytes)
{
	void *p = mmap(NULL, bytes + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes + 1, MADV_HUGEPAGE);
	return p;
}

static void scratch_free(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes + 1);
}

struct sw { int64_t ts; size_t pos, row; int8_t out, off; };
struct wk { int64_t ts; size_t pos, row; int8_t ends_sleep, woken; };

/* A switch's step: on CPU after a switch in, its off state after a switch out, UNKNOWN
 * where outs and ins do not alternate (a lost record). */
static int8_t switch_step(const struct sw *s, size_t i, size_t nsw)
{
	if (i + 1 < nsw && s[i].out == s[i + 1].out)
		return UNKNOWN;
	return s[i].out ? s[i].off : ON_CPU;
}

/*
 * The state of thread `want` from the events (sorted by time), before the overlays:
 * grid[] its distinct event times (returns their count), mode[] user/syscall and run[]
 * its run state on them, and (wake_on, wake_delay) of each sleep's first wake-up
 * (*nwake). cap: room in each output array, at least the thread's events (its own and
 * the switches to it). Returns -1 if out of memory.
 */
long ipt_thread_steps(size_t n, const int64_t *ts, const int8_t *type, const int32_t *tid,
		      const int32_t *next_tid, const int64_t *aux, const int32_t *codes, int32_t want,
		      size_t cap, int64_t *grid, int8_t *mode, int8_t *run,
		      int64_t *wake_on, int64_t *wake_delay, size_t *nwake)
{
	struct sw *sws = scratch(cap * sizeof(*sws));
	struct wk *wks = scratch(cap * sizeof(*wks));
	struct ffill fm = { mode, 0, UNKNOWN }, fr = { run, 0, UNKNOWN };
	size_t g = 0, row = 0, nsw = 0, nwk = 0;
	/* The previous sys_enter/exit: its step is known once the next one shows whether
	 * the pair is consistent (enter -> exit of the same syscall, exit -> enter). */
	int have_prev = 0, prev_open = 0;
	int64_t prev_nr = 0;
	size_t prev_pos = 0;

	if (!sws || !wks) {
		scratch_free(sws, cap * sizeof(*sws));
		scratch_free(wks, cap * sizeof(*wks));
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		int8_t t = type[i];
		int own = tid[i] == want;

		if (!is_row(want, tid[i], next_tid[i], t, codes[C_SWITCH]))
			continue;
		if (g == 0 || ts[i] != grid[g - 1])
			grid[g++] = ts[i];
		if (own && (t == codes[C_SYS_ENTER] || t == codes[C_SYS_EXIT])) {
			int open = t == codes[C_SYS_ENTER];

			if (have_prev) {
				int ok = prev_open != open && (!prev_open || aux[i] == prev_nr);

				ffill_change(&fm, prev_pos, ok ? (prev_open ? SYSCALL : USER) : UNKNOWN);
			}
			have_prev = 1, prev_open = open, prev_nr = aux[i], prev_pos = g - 1;
		} else if (t == codes[C_SWITCH]) {
			sws[nsw++] = (struct sw){ ts[i], g - 1, row, (int8_t)own,
						  aux[i] == 0 ? PREEMPTED : BLOCKED };
		} else if (own && (t == codes[C_WAKING] || t == codes[C_WAKEUP] || t == codes[C_WAKEUP_NEW])) {
			wks[nwk++] = (struct wk){ ts[i], g - 1, row, 0, 0 };
		}
		row++;
	}
	if (have_prev)
		ffill_change(&fm, prev_pos, prev_open ? SYSCALL : USER);
	ffill_finish(&fm, g);

	/* Wake-ups. The tracepoints fire only for a sleeping thread; one that fires while
	 * it is still on CPU (set sleeping, not switched out yet) makes its next switch out
	 * that of a woken thread, which waits for a CPU. A wake-up of a blocked thread
	 * ends its sleep. p: the switches at or before the wake-up. Each wake-up changes
	 * only the switch after it, which only later wake-ups read. */
	for (size_t w = 0, p = 0; w < nwk; w++) {
		while (p < nsw && sws[p].ts <= wks[w].ts)
			p++;
		if (p > 0 && switch_step(sws, p - 1, nsw) == ON_CPU) {
			if (p < nsw && sws[p].out) {
				sws[p].off = SCHED_DELAY;
				wks[w].woken = 1;
			}
		} else if (p > 0 && switch_step(sws, p - 1, nsw) == BLOCKED) {
			wks[w].ends_sleep = wks[w].woken = 1;
		}
	}
	/* The run state's changes in event order: every switch, and the wake-ups that end a sleep. */
	for (size_t a = 0, b = 0; a < nsw || b < nwk;) {
		if (b == nwk || (a < nsw && sws[a].row < wks[b].row)) {
			ffill_change(&fr, sws[a].pos, switch_step(sws, a, nsw));
			a++;
		} else {
			if (wks[b].ends_sleep)
				ffill_change(&fr, wks[b].pos, SCHED_DELAY);
			b++;
		}
	}
	ffill_finish(&fr, g);

	/* Wake-up delays: from the first wake-up of each sleep to the next switch in. */
	*nwake = 0;
	for (size_t w = 0, k = 0, nin_before = 0, last = SIZE_MAX; w < nwk; w++) {
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
		wake_on[*nwake] = sws[k].ts;
		wake_delay[*nwake] = sws[k].ts - wks[w].ts;
		(*nwake)++;
	}
	scratch_free(sws, cap * sizeof(*sws));
	scratch_free(wks, cap * sizeof(*wks));
	return (long)g;
}

/*
 * The thread's state from mode, run state and overlays (NULL: none) on its grid, kept
 * only where it changes, written over grid[] and mode[]. Returns the count kept.
 */
size_t ipt_thread_finish(size_t g, int64_t *grid, int8_t *mode, const int8_t *run, const int8_t *overlay)
{
	size_t m = 0;

	for (size_t i = 0; i < g; i++) {
		int8_t on = overlay && overlay[i] != 0 ? overlay[i] : mode[i];
		int8_t st = run[i] == ON_CPU ? on : run[i];

		if (m == 0 || st != mode[m - 1]) {
			grid[m] = grid[i];
			mode[m++] = st;
		}
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

/*
 * The critical path over k threads' states on one grid: the first thread's state where
 * it is not blocked, else that of the other thread with the lowest rank[state] (the
 * first of equals). who: index of the thread followed.
 */
void ipt_critical(int k, size_t u, const int8_t *const *states, const int8_t *rank, int8_t *crit, int8_t *who)
{
	for (size_t i = 0; i < u; i++) {
		int8_t st = states[0][i];
		int best = 0;

		if (st == BLOCKED && k > 1) {
			best = 1;
			for (int j = 2; j < k; j++)
				if (rank[states[j][i]] < rank[states[best][i]])
					best = j;
			st = states[best][i];
		}
		crit[i] = st;
		who[i] = (int8_t)best;
	}
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
