"""The whole-trace view of any traced program (no iteration windows): per thread, its time in
each state over the trace and who preempted it; the wake-up graph (who woke whom, how often,
how long the wakee then took to run); per system call, its count, latency distribution and how
much of it the thread spent off CPU.

Every figure comes from the events and the thread's state step function
(timeline.thread_timeline, without carves: no entry or copy estimate), so that it agrees with
the breakdown's and explain's rules (docs/DESIGN.md, "The rules of the breakdown"):
- a thread's span runs from its first to its last record (its own, or a switch to it); the
  states partition it, so they sum to the span (time before its first state change and in
  inconsistent pairs is `unknown`, the timeline's residual);
- preempted by: each switch out of the thread with prev_state 0 (runnable) to the next switch
  in of the thread, counted for the task the switch gave the CPU to (its next_tid);
- a wake-up of a thread is the first wake-up record (waking, wakeup or wakeup_new; the record's
  tid is the wakee, the waker its other_tid) after the wakee's last switch in: a
  remote wake-up's sched_waking comes before its sched_wakeup on the target CPU (whose
  recorded waker is whatever the IPI interrupted), so each wake-up counts once and its waker
  is the task that started it. Its delay runs to the wakee's next switch in (none if the trace
  ends first). `hardirq` counts those flagged WAKE_IN_HARDIRQ: the waker's CPU was in a hard
  interrupt or vector handler, so a timer or an IPI woke the task, not the recorded waker;
- a system call is a sys_enter followed, among that thread's sys_enter/sys_exit records, by a
  sys_exit of the same number; its states are the thread's timeline over [enter, exit).
Quantiles interpolate linearly between order statistics (numpy's default, as model/stats.py).
Only the followed threads (trace.json "tids") are wakees and have states and system calls;
wakers and preempting tasks may be any task (named from trace.json "tasks").
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from analysis.model import decoded, native, stats, timeline
from analysis.store import syscalls
from analysis.store.jsonfiles import Tasks
from analysis.store.summaryfile import STATES, Activity, Preemptor, SyscallActivity, ThreadActivity, WakeEdge

QUANTILES = (0.5, 0.9, 0.99)
TOP_PREEMPTORS = 3
WAKE_TYPES = ("waking", "wakeup", "wakeup_new")
# Rows of all threads held back past their last switches for the next piece (_settled): a thread
# that runs without a switch for longer is counted up to its last record instead.
HELD_ROWS = 100_000


# --- helpers ----------------------------------------------------------------------------


def _comm(tasks: Tasks, tid: int) -> str | None:
    t = tasks.get(tid)
    return None if t is None else t.comm


def _pid(tasks: Tasks, tid: int) -> int | None:
    t = tasks.get(tid)
    return (t.pid or None) if t is not None else None


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 1)


# --- the pass over the events ------------------------------------------------------------


def _grouped(keys: np.ndarray) -> np.ndarray:
    """The order that groups positions by key, each group in its positions' order: by hash and
    radix sort, not a comparison sort (a few threads' keys over a million events)."""
    codes, uniq = pd.factorize(keys)
    return np.argsort(codes.astype(np.int16 if len(uniq) < (1 << 15) else np.int64), kind="stable")


def _keyed_sequence(thread_a: np.ndarray, rows_a: np.ndarray, thread_b: np.ndarray, rows_b: np.ndarray):
    """Two kinds of records (a, b), each with the thread it concerns and its row in time
    order (ascending), merged into each thread's sequence in time order: (thread, row, is_b)."""
    done = native.keyed_sequence(thread_a, rows_a, thread_b, rows_b)  # one pass in C
    if done is not None:
        return done
    # a stable sort of two ascending runs (a's first at a tie), which timsort merges in one pass
    by_row = np.argsort(np.concatenate((rows_a, rows_b)), kind="stable")
    thread = np.concatenate((thread_a, thread_b)).astype(np.int64)[by_row]
    row = np.concatenate((rows_a, rows_b)).astype(np.int64)[by_row]
    is_b = by_row >= len(rows_a)
    order = _grouped(thread)
    return thread[order], row[order], is_b[order]


def _of_followed(ev: timeline.Events, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which records are the followed threads' own, the rows of the switches to them): what
    each view of a piece starts from, found once."""
    sw = ev.of("switch")
    return np.isin(ev.tid, tids), sw[np.isin(ev.next_tid[sw], tids)]


def _thread_rows(ev: timeline.Events, mine: np.ndarray, into: np.ndarray) -> dict[int, np.ndarray]:
    """{tid: its rows} of each followed thread that has any: its own records (mine) and the
    switches to it (into), in time order (what thread_timeline reads of all the events)."""
    own = np.flatnonzero(mine)
    thread, rows, _ = _keyed_sequence(ev.tid[own], own, ev.next_tid[into], into)
    if not len(rows):
        return {}
    cut = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]])
    return {int(thread[a]): rows[a:b] for a, b in zip(cut, np.r_[cut[1:], len(rows)])}


def _last_of(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Of rows (ascending) with their keys, the last row of each key."""
    if not len(rows):
        return rows
    # Backwards, factorize numbers the keys as they first appear: where its running maximum
    # rises, a key's last row.
    codes, _ = pd.factorize(keys[::-1])
    rising = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)
    return np.sort(rows[::-1][rising])


def _pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One int64 key of two tids (non-negative, 32 bits each)."""
    return (a.astype(np.int64) << 32) | (b.astype(np.int64) & 0xFFFFFFFF)


class _Calls:
    """One system call's complete calls so far: latencies (ns), their sum, the threads that
    made them, the time in each state."""

    def __init__(self) -> None:
        self.latencies = stats.ValueCounts()
        self.total = 0
        self.tids: set[int] = set()
        self.states = np.zeros(len(STATES))


class _Edge:
    """waker -> wakee so far: wake-ups, of them in a hard interrupt, their delays (ns)."""

    def __init__(self) -> None:
        self.count = self.hardirq = 0
        self.delays = stats.ValueCounts()


class ActivityPass:
    """The whole-trace Activity of the followed threads from the events taken a piece at a time
    in time order, in memory that grows with the threads, system calls and distinct latencies,
    not with the events (a traced program's trace of any length).

    Each piece is read behind the rows the one before left it: each followed thread's last
    record of each type and last switch in, and the last `lead` events. Those give every
    thread's state from where its time was last counted, and the element before each new one
    of every sequence (the sys_enter before a sys_exit, the switch out before a switch in, the
    record before a wake-up). So:
    - a thread's states are counted from its last record in the pieces before to its last
      record in this one: a step is counted once the record that ends it is read;
    - a call, a preemption and a wake-up count in the piece that holds their last record (the
      sys_exit, the switch in, the wake-up record); a call's states are summed over the pieces
      it spans, a wake-up's delay comes with its wakee's next switch in, in whichever piece.
    One piece of all events (summarize) is the view of them at once; the tests cut events into
    many pieces and find the same view, also where switches were missed: a thread's step after
    its last switch (in or out) is known only from its next switch (two ins or two outs in a row
    lost a record between them: that stretch is unknown), so it is counted, with the calls that
    end in it, once that switch comes (HELD_ROWS rows held back at most: past that, a thread is
    counted up to its last record, its steps taken as consistent). A lost system call record is
    seen as such when the thread's next one comes, as at once."""

    def __init__(self, tids: Iterable[int], arch: str = "x86_64", lead: int = 100_000):
        self.followed = np.asarray(sorted(set(map(int, tids))), np.int64)
        self.arch, self.lead = arch, int(lead)
        self.rules = timeline.StepRules(arch)  # no carves: no entry or copy estimate
        self.context: timeline.Events | None = None  # the rows the next piece is read behind
        self.span: dict[int, tuple[int, int]] = {}  # tid -> (first record, last record so far)
        self.counted: dict[int, int] = {}  # tid -> up to when its states are counted
        self.states: dict[int, np.ndarray] = {}  # tid -> ns in each state up to then
        self.keep: list[np.ndarray] = []  # rows each thread's next count starts from
        self.switches_out: dict[int, int] = {}
        self.preempted: dict[tuple[int, int], list[int]] = {}  # (thread, by) -> [count, ns]
        self.edges: dict[tuple[int, int], _Edge] = {}
        self.waiting: dict[int, tuple[int, int]] = {}  # wakee -> (waker, ts): woken, not yet on CPU
        self.calls: dict[int, _Calls] = {}  # syscall nr -> its complete calls
        self.open_call: dict[int, tuple[int, np.ndarray]] = {}  # tid -> (sys_enter ts, states so far)
        self.sys_records = self.paired = 0

    def add(self, events: pd.DataFrame | timeline.Events) -> None:
        """The next events in time order (a frame or its Events)."""
        new = decoded.on_type_codes(events if isinstance(events, timeline.Events) else timeline.Events(events))
        ev = new if self.context is None else timeline.Events.joined(self.context, new)
        first_new = len(ev.ts) - len(new.ts)
        mine, into = _of_followed(ev, self.followed)
        self._threads(ev, first_new, mine, into)
        self._preemptions(ev, first_new, mine, into)
        self._wake_ups(ev, first_new, mine, into)
        self.context = ev.take(self._carried(ev, mine, into))

    def _threads(
        self, ev: timeline.Events, first_new: int, mine: np.ndarray, into: np.ndarray, final: bool = False
    ) -> None:
        """Each followed thread's states and its complete calls, from its new records (final: no
        records come after these, count every thread up to its last record)."""
        is_sys = ev.mask("sys_enter", "sys_exit")
        nrs, tids, latencies, states = [], [], [], []
        self.keep = []
        budget = HELD_ROWS  # rows held back past the threads' last switches (_settled), in all
        for tid, rows in _thread_rows(ev, mine, into).items():
            if rows[-1] >= first_new:
                begun = self.span[tid][0] if tid in self.span else int(ev.ts[rows[np.searchsorted(rows, first_new)]])
                self.span[tid] = (begun, int(ev.ts[rows[-1]]))
            elif not final or tid not in self.span or self.counted[tid] == self.span[tid][1]:
                self._keep_from(ev, rows, tid)
                continue  # nothing new of it to count
            counted = self.counted.get(tid, self.span[tid][0])
            if final:
                until = self.span[tid][1]
            else:
                until, held = self._settled(ev, rows, tid, budget)
                budget -= held
            until = max(until, counted)
            # its system calls (decoded.call_pairs) that ended since the last count, up to until
            sc = rows[is_sys[rows]]
            enter = ev.at(sc, "sys_enter")
            nr = ev.nr[sc]
            pairs = decoded.call_pairs(ev, sc)
            pair_enter, pair_exit = ev.ts[sc[pairs]], ev.ts[sc[pairs + 1]]
            # (those that ended up to the last count were counted then)
            done = (pair_exit > self.counted.get(tid, -1)) & (pair_exit <= until)
            k, enter_ts, exit_ts = pairs[done], pair_enter[done], pair_exit[done]
            # the call it is in at until: one that ends after it, or the last record an enter
            later = np.flatnonzero((pair_enter < until) & (pair_exit > until))
            if len(later):
                going = int(pair_enter[later[0]])
            elif len(sc) and enter[-1] and ev.ts[sc[-1]] < until:
                going = int(ev.ts[sc[-1]])
            else:
                going = None
            starts = np.concatenate(([counted], np.maximum(enter_ts, counted)))
            ends = np.concatenate(([until], exit_ts))
            if going is not None:
                starts, ends = np.append(starts, max(going, counted)), np.append(ends, until)
            t = timeline.thread_timeline(ev.take(rows), tid, self.rules).time_in(starts, ends)
            self.states[tid] = self.states.get(tid, 0) + t[0]
            self.counted[tid] = until
            self._keep_from(ev, rows, tid)
            self.sys_records += int(np.count_nonzero(sc >= first_new))
            self.paired += len(k)
            # the call a count before left going: what it counted of it
            before = self.open_call.pop(tid, None)
            call_states = t[1 : 1 + len(k)]
            if before is not None and len(k) and enter_ts[0] == before[0]:
                call_states[0] += before[1]
            if going is not None:
                so_far = t[-1]
                if before is not None and going == before[0]:
                    so_far = so_far + before[1]
                self.open_call[tid] = (going, so_far)
            nrs.append(nr[k])
            tids.append(np.full(len(k), tid, np.int64))
            latencies.append(exit_ts - enter_ts)
            states.append(call_states)
        if not nrs:
            return
        call_nr, call_tid, lat, st = (np.concatenate(x) for x in (nrs, tids, latencies, states))
        for n in pd.unique(call_nr).tolist():
            m = call_nr == n
            calls = self.calls.setdefault(int(n), _Calls())
            calls.latencies.add(lat[m])
            calls.total += int(lat[m].sum())
            calls.tids.update(np.unique(call_tid[m]).tolist())  # a few threads, not a Python int a call
            calls.states += st[m].sum(axis=0)

    def _settled(self, ev: timeline.Events, rows: np.ndarray, tid: int, budget: int) -> tuple[int, int]:
        """Up to when a thread's states are known from its records so far, and the rows after
        that point held back for the next piece: its last switch (in or out), whose step is
        known only from the next one (a switch in followed by another switch in, or an out by
        an out, lost a record between: the stretch is unknown, timeline.c's switch_step); its
        last record where it has no switch, or where more than `budget` rows follow the switch
        (memory stays bounded: those steps are taken as consistent)."""
        sw = rows[ev.at(rows, "switch")]
        if len(sw):
            held = len(rows) - 1 - int(np.searchsorted(rows, sw[-1]))
            if held <= budget:
                return int(ev.ts[sw[-1]]), held
            if ev.tid[sw[-1]] == tid and ev.next_tid[sw[-1]] != tid:
                return int(ev.ts[sw[-1]]), 0  # switched out: what follows is its wake-ups
        return int(ev.ts[rows[-1]]), 0

    def _keep_from(self, ev: timeline.Events, rows: np.ndarray, tid: int) -> None:
        """The next piece is read behind a thread's rows from where its states are counted to,
        and its last system call record before that (the step there: user or in a call, and the
        call it is in); where that is a switch out, also behind the thread's switch before it
        and the wake-ups since: they tell a wake-up that came while it was on CPU (its switch
        out then waits in the run queue) from one of a sleep whose switch in was lost."""
        if tid not in self.counted:
            return
        ts = ev.ts[rows]
        at = int(np.searchsorted(ts, self.counted[tid], side="left"))
        sys_before = np.flatnonzero(ev.at(rows[:at], "sys_enter", "sys_exit"))
        self.keep.append(rows[sys_before[-1] if len(sys_before) else at :])
        if at == len(rows) or ev.kind_at(rows[at]) != "switch" or ev.tid[rows[at]] != tid:
            return
        before = rows[:at]
        sw = np.flatnonzero(ev.at(before, "switch"))
        if len(sw):
            since = before[sw[-1] :]
            woken = ev.at(since, *decoded.WAKE_TYPES)
            self.keep.append(since[(np.arange(len(since)) == 0) | woken])

    def _preemptions(self, ev: timeline.Events, first_new: int, mine: np.ndarray, into: np.ndarray) -> None:
        """Switches out of followed threads; each span from a switch out with prev_state 0 to the
        thread's next switch in, counted for the task the switch gave the CPU to."""
        sw = ev.of("switch")
        outs, ins = sw[mine[sw]], into
        codes, who = pd.factorize(ev.tid[outs[outs >= first_new]])
        for t, c in zip(np.asarray(who).tolist(), np.bincount(codes, minlength=len(who)).tolist()):
            self.switches_out[t] = self.switches_out.get(t, 0) + c
        thread, row, is_in = _keyed_sequence(ev.tid[outs], outs, ev.next_tid[ins], ins)
        k = np.flatnonzero(~is_in[:-1] & is_in[1:] & (thread[:-1] == thread[1:]) & (row[1:] >= first_new))
        k = k[ev.prev_state[row[k]] == 0]
        if not len(k):
            return
        by = ev.next_tid[row[k]].astype(np.int64)
        ns = ev.ts[row[k + 1]] - ev.ts[row[k]]
        code, keys = pd.factorize(_pairs(thread[k], by))
        count = np.bincount(code, minlength=len(keys))
        total = np.bincount(code, weights=ns, minlength=len(keys))
        for key, c, s in zip(np.asarray(keys).tolist(), count.tolist(), total.tolist()):
            p = self.preempted.setdefault((key >> 32, key & 0xFFFFFFFF), [0, 0])
            p[0] += c
            p[1] += int(s)

    def _wake_ups(self, ev: timeline.Events, first_new: int, mine: np.ndarray, into: np.ndarray) -> None:
        """The wake-ups of followed threads (module docstring) and their delays."""
        wk = ev.of(*WAKE_TYPES)
        wk = wk[mine[wk]]
        thread, row, is_in = _keyed_sequence(ev.tid[wk], wk, ev.next_tid[into], into)
        in_pos = np.flatnonzero(is_in)
        if self.waiting:  # woken in a piece before: their next switch in
            new_in = in_pos[row[in_pos] >= first_new]
            for wakee in list(self.waiting):
                p = new_in[thread[new_in] == wakee][:1]
                if len(p):
                    waker, at = self.waiting.pop(wakee)
                    self.edges[(waker, wakee)].delays.add([int(ev.ts[row[p[0]]]) - at])
        # The first wake-up record after each switch in (or the thread's start), new.
        first = ~is_in & np.r_[True, is_in[:-1] | (thread[1:] != thread[:-1])] & (row >= first_new)
        p = np.flatnonzero(first)
        if not len(p):
            return
        r = row[p]
        # its wakee's next switch in, if it is read yet
        if len(in_pos):
            j = np.searchsorted(in_pos, p)
            q = in_pos[np.minimum(j, len(in_pos) - 1)]
            has = (j < len(in_pos)) & (thread[q] == thread[p])
            delay = ev.ts[row[q]] - ev.ts[r]
        else:
            has, delay = np.zeros(len(p), bool), np.zeros(len(p), np.int64)
        waker = ev.other_tid[r]
        wakee = thread[p]
        irq = ev.in_hardirq[r]
        code, keys = pd.factorize(_pairs(waker, wakee))
        for i, key in enumerate(np.asarray(keys).tolist()):
            m = code == i
            e = self.edges.setdefault((key >> 32, key & 0xFFFFFFFF), _Edge())
            e.count += int(m.sum())
            e.hardirq += int(irq[m].sum())
            e.delays.add(delay[m & has])
        for i in np.flatnonzero(~has).tolist():
            self.waiting[int(wakee[i])] = (int(waker[i]), int(ev.ts[r[i]]))

    def _carried(self, ev: timeline.Events, mine: np.ndarray, into: np.ndarray) -> np.ndarray:
        """The rows the next piece is read behind: the last `lead`, and before them each followed
        thread's last record of each type, its last switch in and its rows from where its states
        are counted to."""
        n = len(ev.ts)
        start = max(n - self.lead, 0)
        own = np.flatnonzero(mine[:start])
        by_type = ev.thread_type_keys(own)
        into = into[into < start]
        # rows of ev, each marked once: in order and unique without np.unique's sort
        held = np.zeros(n, bool)
        held[start:] = True
        for rows in (_last_of(by_type, own), _last_of(ev.next_tid[into].astype(np.int64), into), *self.keep):
            held[rows] = True
        return np.flatnonzero(held)

    def finish(self, tasks: Tasks | None) -> Activity:
        """The Activity of all pieces added; tasks: trace.json's (TraceFile.tasks)."""
        tasks = tasks or {}
        if self.context is not None:  # the steps held back for records that did not come
            self._threads(self.context, len(self.context.ts), *_of_followed(self.context, self.followed), final=True)
            self.context = None
        threads = []
        for tid in sorted(self.span):
            begun, until = self.span[tid]
            by = sorted((-ns, b, c) for (t, b), (c, ns) in self.preempted.items() if t == tid)[:TOP_PREEMPTORS]
            threads.append(
                ThreadActivity(
                    tid=tid,
                    pid=_pid(tasks, tid),
                    comm=_comm(tasks, tid),
                    start_ns=begun,
                    end_ns=until,
                    states_ns=dict(zip(STATES, np.rint(self.states[tid]).astype(np.int64).tolist())),
                    switches_out=self.switches_out.get(tid, 0),
                    preempted_by=[Preemptor(tid=b, comm=_comm(tasks, b), count=c, ns=-ns) for ns, b, c in by],
                )
            )
        edges = [
            WakeEdge(
                waker=a,
                waker_comm=_comm(tasks, a),
                wakee=b,
                wakee_comm=_comm(tasks, b),
                count=e.count,
                hardirq=e.hardirq,
                delays=e.delays.n,
                delay_p50_ns=_num(e.delays.percentile(50)),
                delay_p90_ns=_num(e.delays.percentile(90)),
                delay_p99_ns=_num(e.delays.percentile(99)),
                delay_max_ns=_num(e.delays.percentile(100)),
            )
            for (a, b), e in self.edges.items()
        ]
        calls = [
            SyscallActivity(
                nr=nr,
                name=syscalls.name(self.arch, nr),
                count=c.latencies.n,
                threads=len(c.tids),
                total_ns=c.total,
                p50_ns=round(c.latencies.percentile(50), 1),
                p90_ns=round(c.latencies.percentile(90), 1),
                p99_ns=round(c.latencies.percentile(99), 1),
                max_ns=int(c.latencies.values[-1]),
                states_ns=dict(zip(STATES, np.rint(c.states).astype(np.int64).tolist())),
            )
            for nr, c in self.calls.items()
        ]
        return Activity(
            arch=self.arch,
            start_ns=min((t.start_ns for t in threads), default=None),
            end_ns=max((t.end_ns for t in threads), default=None),
            threads=threads,
            wake_edges=sorted(edges, key=lambda e: (-e.count, e.waker, e.wakee)),
            syscalls=sorted(calls, key=lambda s: (-s.total_ns, s.nr)),
            unpaired_syscalls=self.sys_records - 2 * self.paired,
        )


def summarize(
    events: pd.DataFrame | timeline.Events,
    tasks: Tasks | None,
    tids: Iterable[int] | None,
    arch: str = "x86_64",
) -> Activity:
    """The whole-trace Activity of the followed threads `tids` (trace.json "tids"; None: every
    thread with a system call record) from all the events at once (events.parquet's frame, or
    its Events), tasks: trace.json's (TraceFile.tasks), arch: the syscall table's."""
    ev = events if isinstance(events, timeline.Events) else timeline.Events(events)
    if tids is None:
        tids = np.unique(ev.tid[ev.of("sys_enter", "sys_exit")]).tolist()
    whole = ActivityPass(tids, arch)
    whole.add(ev)
    return whole.finish(tasks)
