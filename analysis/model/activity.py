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
  tid is the wakee, the waker is in a0, as other_tid) after the wakee's last switch in: a
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

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.model import timeline
from analysis.store import records, syscalls

# The states of timeline.STATE_NAMES, the last (residual) named for what it is here.
STATES = tuple(timeline.STATE_NAMES[:-1]) + ("unknown",)
OFF_CPU = ("blocked", "wakeup", "runqueue", "preempted")
ON_CPU = ("user", "syscall", "copy", "irq", "entry")
QUANTILES = (0.5, 0.9, 0.99)
TOP_PREEMPTORS = 3
WAKE_TYPES = ("waking", "wakeup", "wakeup_new")


@dataclass(frozen=True)
class Preemptor:
    """A task that took the CPU from a thread: how often and for how long in all."""

    tid: int
    comm: str | None
    count: int
    ns: int


class _OnOffCpu:
    """on_cpu_ns / off_cpu_ns of a record with states_ns over STATES."""

    states_ns: dict[str, int]

    @property
    def on_cpu_ns(self) -> int:
        return sum(self.states_ns[s] for s in ON_CPU)

    @property
    def off_cpu_ns(self) -> int:
        return sum(self.states_ns[s] for s in OFF_CPU)


@dataclass(frozen=True)
class ThreadActivity(_OnOffCpu):
    tid: int
    pid: int | None
    comm: str | None
    start_ns: int  # its first record
    end_ns: int  # its last record
    states_ns: dict[str, int]  # STATES -> ns in [start_ns, end_ns); they sum to span_ns
    switches_out: int
    preempted_by: list[Preemptor]  # the top TOP_PREEMPTORS by time

    @property
    def span_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class WakeEdge:
    """waker -> wakee: wake-ups, of them those in a hard interrupt, and the delay from the
    wake-up to the wakee's switch in (ns; over `delays` of them, None if none)."""

    waker: int
    waker_comm: str | None
    wakee: int
    wakee_comm: str | None
    count: int
    hardirq: int
    delays: int
    delay_p50_ns: float | None
    delay_p90_ns: float | None
    delay_p99_ns: float | None
    delay_max_ns: float | None


@dataclass(frozen=True)
class SyscallActivity(_OnOffCpu):
    """One system call over all followed threads: its completed calls' latencies (ns) and
    where that time went (states_ns over STATES)."""

    nr: int
    name: str
    count: int
    threads: int
    total_ns: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    max_ns: int
    states_ns: dict[str, int]


@dataclass(frozen=True)
class Activity:
    arch: str
    start_ns: int | None  # the first and last record of the followed threads
    end_ns: int | None
    threads: list[ThreadActivity]  # by tid
    wake_edges: list[WakeEdge]  # most wake-ups first
    syscalls: list[SyscallActivity]  # most total time first
    unpaired_syscalls: int  # sys_enter or sys_exit records of no complete call

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data, keys in field order (summary.json "activity")."""
        return _plain(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Activity:
        """to_json's data read back. ValueError if it is not that."""
        try:
            return cls(
                arch=d["arch"],
                start_ns=d["start_ns"],
                end_ns=d["end_ns"],
                threads=[
                    ThreadActivity(**{**t, "preempted_by": [Preemptor(**p) for p in t["preempted_by"]]})
                    for t in d["threads"]
                ],
                wake_edges=[WakeEdge(**e) for e in d["wake_edges"]],
                syscalls=[SyscallActivity(**s) for s in d["syscalls"]],
                unpaired_syscalls=d["unpaired_syscalls"],
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not an activity summary of this version ({e})") from None


def _plain(v: Any) -> Any:  # noqa: ANN401 - any JSON value or dataclass of them
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


# --- helpers ----------------------------------------------------------------------------


def _comm(tasks: Mapping[str, Mapping[str, Any]], tid: int) -> str | None:
    t = tasks.get(str(tid))
    return None if t is None else t.get("comm")


def _pid(tasks: Mapping[str, Mapping[str, Any]], tid: int) -> int | None:
    t = tasks.get(str(tid))
    pid = None if t is None else t.get("pid")
    return int(pid) if pid else None


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 1)


def group_quantiles(
    codes: np.ndarray, values: np.ndarray, ngroups: int, qs: Iterable[float] = QUANTILES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group 0..ngroups-1 of values (NaN left out): (count, quantiles (ngroups, len(qs))
    by linear interpolation, max); NaN where a group has no value. One sort of all values."""
    qs = np.asarray(list(qs), np.float64)
    values = np.asarray(values, np.float64)
    codes = np.asarray(codes, np.int64)
    order = np.lexsort((values, codes))  # NaN last within each group
    xs = values[order]
    sizes = np.bincount(codes, minlength=ngroups)
    valid = np.bincount(codes, weights=~np.isnan(values), minlength=ngroups).astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    last = max(len(xs) - 1, 0)
    pos = qs[None, :] * np.maximum(valid - 1, 0)[:, None].astype(np.float64)
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    hi = np.minimum(lo + 1, np.maximum(valid - 1, 0)[:, None])
    if len(xs):
        a = xs[np.minimum(starts[:, None] + lo, last)]
        b = xs[np.minimum(starts[:, None] + hi, last)]
        with np.errstate(invalid="ignore"):
            q = np.where(frac == 0.0, a, a + (b - a) * frac)
        mx = xs[np.minimum(starts + np.maximum(valid - 1, 0), last)]
    else:
        q, mx = np.zeros((ngroups, len(qs))), np.zeros(ngroups)
    return valid, np.where(valid[:, None] > 0, q, np.nan), np.where(valid > 0, mx, np.nan)


def _keyed_sequence(thread_a: np.ndarray, rows_a: np.ndarray, thread_b: np.ndarray, rows_b: np.ndarray):
    """Two kinds of records (a, b), each with the thread it concerns and its row in time
    order, merged into each thread's sequence in time order: (thread, row, is_b)."""
    thread = np.concatenate((thread_a, thread_b)).astype(np.int64)
    row = np.concatenate((rows_a, rows_b)).astype(np.int64)
    is_b = np.concatenate((np.zeros(len(rows_a), bool), np.ones(len(rows_b), bool)))
    order = np.lexsort((is_b, row, thread))
    return thread[order], row[order], is_b[order]


# --- the three views ----------------------------------------------------------------------


def _thread_rows(ev: timeline.Events, tids: np.ndarray) -> dict[int, np.ndarray]:
    """{tid: its rows} of each followed thread that has any: its own records and the switches
    to it, in time order (what thread_timeline reads of all the events)."""
    sw = ev.of("switch")
    who = np.concatenate((ev.tid, ev.next_tid[sw])).astype(np.int64)
    rows = np.concatenate((np.arange(len(ev.ts)), sw))
    keep = np.flatnonzero(np.isin(who, tids))
    who, rows = who[keep], rows[keep]
    order = np.lexsort((rows, who))
    who, rows = who[order], rows[order]
    cut = np.flatnonzero(np.r_[True, who[1:] != who[:-1]]) if len(who) else np.zeros(0, np.int64)
    return {int(who[a]): rows[a:b] for a, b in zip(cut, np.r_[cut[1:], len(who)])}


def _preemptions(ev: timeline.Events, tids: np.ndarray) -> pd.DataFrame:
    """Each span from a switch out of a followed thread with prev_state 0 to its next switch
    in: (thread, by, ns)."""
    sw = ev.of("switch")
    outs = sw[np.isin(ev.tid[sw], tids)]
    ins = sw[np.isin(ev.next_tid[sw], tids)]
    thread, row, is_in = _keyed_sequence(ev.tid[outs], outs, ev.next_tid[ins], ins)
    k = np.flatnonzero(~is_in[:-1] & is_in[1:] & (thread[:-1] == thread[1:]))
    k = k[ev.aux[row[k]] == 0]
    return pd.DataFrame(
        {
            "thread": thread[k],
            "by": ev.next_tid[row[k]].astype(np.int64),
            "ns": ev.ts[row[k + 1]] - ev.ts[row[k]],
        }
    )


def _switch_outs(ev: timeline.Events, tids: np.ndarray) -> dict[int, int]:
    sw = ev.of("switch")
    t, n = np.unique(ev.tid[sw][np.isin(ev.tid[sw], tids)], return_counts=True)
    return dict(zip(t.tolist(), n.tolist()))


def wake_edges(ev: timeline.Events, tids: Iterable[int], tasks: Mapping[str, Mapping[str, Any]]) -> list[WakeEdge]:
    """The wake-up graph's edges into the followed threads (module docstring), most wake-ups first."""
    tids = np.asarray(sorted(set(map(int, tids))), np.int64)
    wk = ev.of(*WAKE_TYPES)
    wk = wk[np.isin(ev.tid[wk], tids)]
    sw = ev.of("switch")
    ins = sw[np.isin(ev.next_tid[sw], tids)]
    thread, row, is_in = _keyed_sequence(ev.tid[wk], wk, ev.next_tid[ins], ins)
    if not len(wk):
        return []
    # The first wake-up record after each switch in (or the thread's start).
    first = ~is_in & np.r_[True, is_in[:-1] | (thread[1:] != thread[:-1])]
    p = np.flatnonzero(first)
    # Its wakee's next switch in, if the trace has one.
    in_pos = np.flatnonzero(is_in)
    r = row[p]
    delay = np.full(len(p), np.nan)
    if len(in_pos):
        j = np.searchsorted(in_pos, p)
        q = in_pos[np.minimum(j, len(in_pos) - 1)]
        has = (j < len(in_pos)) & (thread[q] == thread[p])
        delay[has] = ev.ts[row[q[has]]] - ev.ts[r[has]]
    waker = (ev.a0[r] & 0xFFFFFFFF).astype(np.int64)
    wakee = thread[p]
    irq = (ev.aux[r] & records.WAKE_IN_HARDIRQ) != 0
    keys, code = np.unique(np.stack((waker, wakee), axis=1), axis=0, return_inverse=True)
    code = code.reshape(-1)
    count = np.bincount(code, minlength=len(keys))
    hard = np.bincount(code, weights=irq, minlength=len(keys)).astype(np.int64)
    valid, q3, mx = group_quantiles(code, delay, len(keys))
    edges = [
        WakeEdge(
            waker=int(a),
            waker_comm=_comm(tasks, int(a)),
            wakee=int(b),
            wakee_comm=_comm(tasks, int(b)),
            count=int(count[i]),
            hardirq=int(hard[i]),
            delays=int(valid[i]),
            delay_p50_ns=_num(q3[i, 0]),
            delay_p90_ns=_num(q3[i, 1]),
            delay_p99_ns=_num(q3[i, 2]),
            delay_max_ns=_num(mx[i]),
        )
        for i, (a, b) in enumerate(keys)
    ]
    return sorted(edges, key=lambda e: (-e.count, e.waker, e.wakee))


def _syscall_pairs(ev: timeline.Events, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(enter rows, exit rows) of every complete call of the followed threads, by thread then
    time; and how many sys_enter/sys_exit records are of no complete call."""
    sc = ev.of("sys_enter", "sys_exit")
    sc = sc[np.isin(ev.tid[sc], tids)]
    sc = sc[np.argsort(ev.tid[sc], kind="stable")]
    enter = ev.type[sc] == ev.code["sys_enter"]
    t, nr = ev.tid[sc], ev.aux[sc]
    k = np.flatnonzero(enter[:-1] & ~enter[1:] & (t[:-1] == t[1:]) & (nr[:-1] == nr[1:]))
    return sc[k], sc[k + 1], len(sc) - 2 * len(k)


def summarize(
    events: pd.DataFrame | timeline.Events,
    tasks: Mapping[str, Mapping[str, Any]] | None,
    tids: Iterable[int] | None,
    arch: str = "x86_64",
) -> Activity:
    """The whole-trace Activity of the followed threads `tids` (trace.json "tids"; None: every
    thread with a system call record) from the events (events.parquet's frame, or its Events),
    tasks: trace.json "tasks" ({"<tid>": {"comm", "pid"}}), arch: the syscall table's."""
    ev = events if isinstance(events, timeline.Events) else timeline.Events(events)
    tasks = tasks or {}
    if tids is None:
        sc = ev.of("sys_enter", "sys_exit")
        tids = np.unique(ev.tid[sc])
    followed = np.asarray(sorted(set(map(int, tids))), np.int64)
    rows = _thread_rows(ev, followed)
    rules = timeline.StepRules(arch)  # no carves: no entry or copy estimate
    pre = _preemptions(ev, followed)
    outs = _switch_outs(ev, followed)
    enters, exits, unpaired = _syscall_pairs(ev, followed)
    call_tid = ev.tid[enters].astype(np.int64)
    call_states = np.zeros((len(enters), len(STATES)), np.int64)
    threads = []
    for tid in followed.tolist():
        if tid not in rows:
            continue
        tl = timeline.thread_timeline(ev.take(rows[tid]), tid, rules)
        a, b = int(ev.ts[rows[tid][0]]), int(ev.ts[rows[tid][-1]])
        st = np.rint(tl.time_in([a], [b])[0]).astype(np.int64)
        mine = np.flatnonzero(call_tid == tid)
        if len(mine):
            call_states[mine] = np.rint(tl.time_in(ev.ts[enters[mine]], ev.ts[exits[mine]])).astype(np.int64)
        p = pre[pre["thread"] == tid]
        by = []
        if len(p):
            g = p.groupby("by")["ns"].agg(["count", "sum"]).reset_index()
            g = g.sort_values(["sum", "by"], ascending=[False, True]).head(TOP_PREEMPTORS)
            by = [
                Preemptor(tid=int(t), comm=_comm(tasks, int(t)), count=int(c), ns=int(s))
                for t, c, s in zip(g["by"], g["count"], g["sum"])
            ]
        threads.append(
            ThreadActivity(
                tid=tid,
                pid=_pid(tasks, tid),
                comm=_comm(tasks, tid),
                start_ns=a,
                end_ns=b,
                states_ns=dict(zip(STATES, st.tolist())),
                switches_out=int(outs.get(tid, 0)),
                preempted_by=by,
            )
        )
    return Activity(
        arch=arch,
        start_ns=min((t.start_ns for t in threads), default=None),
        end_ns=max((t.end_ns for t in threads), default=None),
        threads=threads,
        wake_edges=wake_edges(ev, followed, tasks),
        syscalls=_syscalls(ev, enters, exits, call_tid, call_states, arch),
        unpaired_syscalls=int(unpaired),
    )


def _syscalls(
    ev: timeline.Events,
    enters: np.ndarray,
    exits: np.ndarray,
    call_tid: np.ndarray,
    call_states: np.ndarray,
    arch: str,
) -> list[SyscallActivity]:
    if not len(enters):
        return []
    lat = ev.ts[exits] - ev.ts[enters]
    nrs, code = np.unique(ev.aux[enters], return_inverse=True)
    code = code.reshape(-1)
    n = len(nrs)
    count, q3, mx = group_quantiles(code, lat.astype(np.float64), n)
    total = np.bincount(code, weights=lat, minlength=n)
    states = np.stack([np.bincount(code, weights=col, minlength=n) for col in call_states.T], axis=1)
    states = np.rint(states).astype(np.int64)
    nthreads = pd.Series(call_tid).groupby(code).nunique().reindex(range(n), fill_value=0).to_numpy()
    out = [
        SyscallActivity(
            nr=int(nr),
            name=syscalls.name(arch, int(nr)),
            count=int(count[i]),
            threads=int(nthreads[i]),
            total_ns=int(round(total[i])),
            p50_ns=round(float(q3[i, 0]), 1),
            p90_ns=round(float(q3[i, 1]), 1),
            p99_ns=round(float(q3[i, 2]), 1),
            max_ns=int(mx[i]),
            states_ns=dict(zip(STATES, states[i].tolist())),
        )
        for i, nr in enumerate(nrs)
    ]
    return sorted(out, key=lambda s: (-s.total_ns, s.nr))
