"""Where each iteration's latency went, measured from the kernel events of its threads.

Components (ns per iteration): user, entry, syscall, copy, irq, wakeup, runqueue, blocked,
preempted, residual. Each one is the time some thread spent in a state that its events
prove; none is latency minus the others. The method:

1. Per thread, its state step function from its events (model/timeline.py, timeline.c).
2. The critical path of a ping-pong: while the measuring thread A is on CPU or
   runnable, its own state; while A is blocked, the state of another thread that
   works on the message: the peers of workload.json first, then any other thread
   of the workload's processes seen in the trace (ZeroMQ's I/O threads), one on
   CPU (its user/syscall/irq time) before one woken and waiting (wakeup, runqueue)
   before one preempted (preempted). `blocked` is left only where all of them
   are blocked, i.e. nobody works on the message. The per-side view integrates
   each side's own states over the whole window.
3. The edges of a window come from the workload's own clock reads, which happen
   in user space: if no side is in user space at t_start (just before t_end) by
   the kernel's account, the events and the clock disagree there and the
   critical-path step holding that edge counts as residual.
4. A window's time in each state: one pass over the windows and the steps inside
   them. The passes over all events (1, the union of 2, 4) are in analysis/model/timeline.c,
   called through ctypes: as whole-array numpy operations they cost seconds of
   temporaries at 10 M events.

closure_residual_pct is the mean over iterations of (latency - the measured
components) / latency * 100, i.e. the share of the latency in no known state.

Copy: when the copy routines are probed, copy time is measured like the other
states (it is carved out of syscall time because it nests inside it). Otherwise it
is estimated from the bytes the data-moving syscalls of the window returned
(read/write/send/recv..., measured from sys_exit) as calls x ns/call +
bytes x ns/byte (copy_costs: the driver's timing of this CPU's copy instruction), capped by and taken out of the syscall time, and marked
"estimated" in copy_source.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis.model import decoded, native, stats
from analysis.model.stats import metric_entry
from analysis.model.timeline import (
    CLOCK_EDGES,
    DATA_SYSCALLS,
    PREEMPTED,
    RUNQUEUE,
    STATE_NAMES,
    SYSCALL_EDGES,
    Events,
    StepRules,
    Timeline,
    deliveries,
    thread_timeline,
    time_in,
    wakeup_delays,
)
from analysis.store import clib, records, spool, syscalls
from analysis.store.itercolumns import BLOCK, IterationColumns, KeptRows, WindowCursor
from analysis.store.spool import SpoolMaker

if TYPE_CHECKING:
    import numpy.typing as npt

COMPONENTS = (
    "user",
    "entry",
    "syscall",
    "copy",
    "irq",
    "wakeup",
    "runqueue",
    "blocked",
    "preempted",
    "steal",
    "residual",
)
MEASURED = tuple(c for c in COMPONENTS if c != "residual")


# Copy estimate without copy-routine probes. The driver times this CPU's copy instruction
# before each run (workload.json copy_calibration: ns per 1-byte copy, ns per byte);
# `ipctrace sweep` replaces the per-byte figure with the slope it measures
# (copy_ns_per_byte). Results written before the calibration existed fall back to these
# assumed figures (a fixed cost per copy, and 10 GB/s), and copy_source says "assumed".
COPY_NS_PER_CALL = 15.0
COPY_NS_PER_BYTE = 0.1


def copy_costs(workload: dict[str, Any], copy_ns_per_byte: float | None = None) -> tuple[float, float, str]:
    """(ns per copy call, ns per byte, where each comes from) for the copy estimate."""
    cal = workload.get("copy_calibration") or {}
    if "ns_per_call" in cal:
        per_call, call_src = float(cal["ns_per_call"]), "timed on this CPU"
    else:
        per_call, call_src = COPY_NS_PER_CALL, "assumed"
    if copy_ns_per_byte is not None:
        per_byte, byte_src = float(copy_ns_per_byte), "from the size sweep"
    elif "ns_per_byte" in cal:
        per_byte, byte_src = float(cal["ns_per_byte"]), "timed on this CPU, cache-hot"
    else:
        per_byte, byte_src = COPY_NS_PER_BYTE, "assumed"
    return per_call, per_byte, f"per call {call_src}, per byte {byte_src}"


# --- windows ----------------------------------------------------------------


def _count_in(ts_sorted: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    return np.searchsorted(ts_sorted, ends, side="right") - np.searchsorted(ts_sorted, starts, side="left")


class CopyBytes:
    """Bytes the data-moving syscalls of each thread returned (sys_exit), for the copy estimate."""

    def __init__(self, ev: Events, arch: str):
        table = syscalls.numbers(arch, DATA_SYSCALLS)
        i = ev.of("sys_exit")
        # A lookup table: np.isin of 3 M values in this list took 0.2 s.
        data = np.zeros(max(table) + 1, bool)
        data[list(table)] = True
        nr = ev.nr[i]
        i = i[(nr < len(data)) & data[np.clip(nr, 0, len(data) - 1)] & (ev.ret[i] > 0)]
        self.ev, self.idx, self.cache = ev, i, {}

    def calls_bytes(self, tid: int, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if tid not in self.cache:
            i = self.idx[self.ev.tid[self.idx] == tid]
            self.cache[tid] = self.ev.ts[i], np.concatenate(([0], np.cumsum(self.ev.ret[i])))
        ts, cum = self.cache[tid]
        # side left: the count at or before starts - 1 (integer ns)
        a, b = native.count_upto(ts, starts - 1), native.count_upto(ts, ends)
        return b - a, cum[b] - cum[a]


class Occupancy:
    """Who ran on each CPU from the recorded switches (each involves a task of the workload):
    per CPU from offsets[c] to offsets[c + 1], from ts on the task tid. A task outside the
    workload switched in is known to hold the CPU up to the next recorded switch only if that
    switch names it as the one leaving: its own switch out to another task outside the
    workload is not recorded. Otherwise the task the next switch names as leaving held the
    CPU at the end, and while a thread of the workload waited there in the run queue the CPU
    did not idle in between, so that task is the one named; if it is the idle task, the
    holder is unknown (-2) and not blamed."""

    def __init__(self, ev: Events):
        i = ev.of("switch")
        cpu = ev.cpu[i].astype(np.int64)
        order = np.argsort(cpu, kind="stable")  # the switches are in time order within a CPU
        cpu = cpu[order]
        self.ts = ev.ts[i][order]
        self.tid = ev.next_tid[i][order].astype(np.int32)
        prev = ev.tid[i][order].astype(np.int32)
        same = np.zeros(len(order), bool)
        same[:-1] = cpu[1:] == cpu[:-1]
        self.leaving = np.full(len(order), -2, np.int32)  # who the next switch there says left
        self.leaving[:-1] = np.where(same[:-1], prev[1:], -2)
        ncpu = int(cpu.max()) + 1 if len(cpu) else 0
        self.offsets = np.searchsorted(cpu, np.arange(ncpu + 1)).astype(np.uint64)

    def of(self, tids: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, ts, index of each holder among tids or -1, tid or -2 where unknown)
        for native.causal."""
        who = _index_of(self.tid, tids)
        known = (self.leaving == self.tid) | (who >= 0)
        holder = np.where(known, self.tid, np.where(self.leaving > 0, self.leaving, -2))
        return self.offsets, self.ts, who, holder.astype(np.int32)


def _index_of(values: np.ndarray, tids: npt.ArrayLike) -> np.ndarray:
    """Index of each value in tids (distinct), -1 where it is none of them."""
    tids = np.asarray(tids, np.int64)
    order = np.argsort(tids)
    pos = np.searchsorted(tids[order], values)
    pos = np.minimum(pos, len(tids) - 1)
    return np.where(tids[order][pos] == values, order[pos], -1).astype(np.int32)


def window_components(
    tls: Sequence[Timeline],
    tids: Sequence[int],
    occupancy: Occupancy,
    starts: np.ndarray,
    ends: np.ndarray,
    nsides: int,
    segments: int = 0,
    holders_only: bool = False,
    data_kind: np.ndarray | None = None,
    edge_states: int = CLOCK_EDGES,
) -> tuple[np.ndarray, list[np.ndarray], native.Segments]:
    """Time in each state (n x len(STATE_NAMES), ns) of the windows [starts, ends) on the
    causal critical path (timeline.c, ipt_causal) of the threads tls (the measuring thread
    first, its peers, then other threads of the workload), the same of each of the first
    nsides threads on its own, and up to `segments` native.Segments of the path. data_kind:
    timeline.data_kinds' table, for what ended a wait that a wake-up had not (timeline.deliveries);
    None: the wake-ups alone. edge_states: the states the windows' edges happen in (CLOCK_EDGES,
    SYSCALL_EDGES)."""
    wakers = [_index_of(tl.sleep_waker, tids) for tl in tls]
    if data_kind is None:
        sent = [(np.zeros(0, np.int64), np.zeros(0, np.int32))] * len(tls)
    else:
        sent = deliveries(tls, tids, data_kind)
    threads = [
        (tl.ts, tl.state, tl.sleep_end, w, tl.in_ts, tl.in_cpu, at, by) for tl, w, (at, by) in zip(tls, wakers, sent)
    ]
    crit, seg = native.causal(
        threads, occupancy.of(tids), nsides, starts, ends, len(STATE_NAMES), segments, holders_only, edge_states
    )
    per_side = [time_in(tl.ts, [tl.state], starts, ends)[0] for tl in tls[:nsides]]
    return crit, per_side, seg


def _where_timed(cpus: list[int], cal: dict[str, Any], workload: dict[str, Any]) -> str:
    """Where the entry calibration ran and what that says of the program's CPUs: a run's
    measuring thread times it on its own CPU; `ipctrace trace` before the program starts, in
    --cpus if given, else wherever the scheduler put it (a program that places itself, as
    taskset -c in CMD does, runs elsewhere: the path is taken as costing the same there)."""
    cpus = cpus or ([int(cal["cpu"])] if cal.get("cpu") is not None else [])
    on = f"on CPU{'s' if len(cpus) > 1 else ''} {','.join(map(str, cpus))}" if cpus else "on a CPU not known"
    params = workload.get("params") or {}
    if not params.get("iterations_from"):
        measuring = [t.get("cpu", -1) for t in workload.get("threads") or [] if t.get("role") == "measuring"]
        moved = measuring and measuring[0] >= 0 and cpus and cpus != measuring[:1]
        return f"{on} at the run's start" + (f" (the measuring thread's CPU: {measuring[0]})" if moved else "")
    if params.get("cpus"):
        return f"{on} before the program started (within its --cpus {','.join(map(str, params['cpus']))})"
    return (
        f"{on} before the program started, unplaced: a program that places itself (taskset -c in its "
        "command) may run elsewhere; the entry path is taken as costing the same on every CPU"
    )


def entry_costs(ev: Events, workload: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
    """(ns of the entry path before sys_enter, after sys_exit, what they rest on) from the
    driver's calibration (workload.json entry_calibration), joined with its traced calls.
    The whole: the mean gap from one call's sys_exit to the next one's sys_enter where the
    calls run back to back ("tight"; gaps over ten times the median left out). Its split: the null syscalls timed by the workload's
    clock, t0 before and t1 after each, as median(sys_enter - t0) against
    median(t1 - sys_exit) (the clock reads overlap the paths: a loop with them runs no
    slower than one without). (0, 0, why) where there is no calibration to join."""
    cal = workload.get("entry_calibration") or {}
    calls = np.asarray(cal.get("calls") or [], np.int64).reshape(-1, 2)
    if not len(calls) or "tid" not in cal or "syscall_nr" not in cal:
        why = cal.get("absent") or "the run has no entry calibration (older driver)"
        return 0, 0, {"source": f"not calibrated: {why}"}
    tid, nr = int(cal["tid"]), int(cal["syscall_nr"])

    def rows(kind: str) -> np.ndarray:
        i = ev.of(kind)
        return i[(ev.tid[i] == tid) & (ev.nr[i] == nr)]

    enter_rows = rows("sys_enter")
    enter, leave = ev.ts[enter_rows], ev.ts[rows("sys_exit")]
    t0, t1 = calls[:, 0], calls[:, 1]
    # The call's sys_enter: the first at or after t0; its sys_exit: the last at or before t1.
    ei = np.searchsorted(enter, t0, side="left")
    xi = np.searchsorted(leave, t1, side="right") - 1
    ok = (ei < len(enter)) & (xi >= 0)
    ei, xi = np.minimum(ei, max(len(enter) - 1, 0)), np.maximum(xi, 0)
    if len(enter) and len(leave):
        ok &= (enter[ei] <= t1) & (leave[xi] >= t0) & (leave[xi] >= enter[ei])
    else:
        ok[:] = False
    if ok.sum() < 10:
        return 0, 0, {"source": f"not calibrated: {int(ok.sum())} of {len(calls)} calibration calls were traced"}
    before = float(np.median(enter[ei[ok]] - t0[ok]))
    after = float(np.median(t1[ok] - leave[xi[ok]]))
    inside = float(np.median(leave[xi[ok]] - enter[ei[ok]]))
    whole, basis = before + after, "clock-bracketed calls"
    tight = cal.get("tight") or []
    if len(tight) >= 2:
        a, b = np.searchsorted(leave, tight[0]), np.searchsorted(leave, tight[1])
        exits = leave[a:b]
        nxt = np.searchsorted(enter, exits, side="right")
        has = nxt < len(enter)
        gaps = enter[nxt[has]] - exits[has]
        gaps = gaps[enter[nxt[has]] <= tight[1]]
        if len(gaps) >= 10:
            # The mean, as many calls add up; a gap over ten times the typical one held
            # something else (an interrupt, the hypervisor).
            gaps = gaps[gaps <= 10 * np.median(gaps)]
            whole, basis = float(gaps.mean()), "calls back to back"
    e_in = max(0, int(round(whole * before / (before + after)))) if before + after > 0 else 0
    e_out = max(0, int(round(whole)) - e_in)
    # where the calls ran, as traced (the driver's sched_getcpu is one look, at the start)
    timed_on = sorted({int(c) for c in ev.cpu[enter_rows[ei[ok]]]}) if len(enter_rows) else []
    return (
        e_in,
        e_out,
        {
            "source": f"estimated: null syscalls timed {_where_timed(timed_on, cal, workload)} ({basis})",
            "cpus": timed_on,
            "entry_ns": e_in,
            "exit_ns": e_out,
            "traced_syscall_ns": inside,
            "clock_read_ns": float(cal.get("empty_ns") or 0),
            "calls": int(ok.sum()),
        },
    )


# --- summary ------------------------------------------------------------------


def _stat_entries(
    values: np.ndarray,
    name: str,
    runs: np.ndarray,
    rows: slice | np.ndarray = slice(None),
    owned: bool = False,
    run_index: stats.RunIndex | None = None,
) -> dict[str, Any]:
    """Statistics like summary.json's metrics of one component's values[rows] (runs: the run
    of each of values, run_index: its stats.RunIndex); owned: values are the caller's to give
    away (sorted here in place, not copied: a long run's column once in memory, not twice)."""
    if owned and isinstance(rows, slice) and rows == slice(None):
        row, _ = stats.describe_group(lambda: (values.astype(np.float64, copy=False), runs), run_index=run_index)
        return metric_entry(pd.Series(row))
    table, _ = stats.describe_groups(values, [(name, rows, 1.0)], runs)
    return metric_entry(table.iloc[0])


def _closure_by_metric(
    rows: KeptRows, column: Callable[..., np.ndarray], mcode: np.ndarray, nmetrics: int
) -> dict[int, float]:
    """{metric code: mean of (latency - measured components) / latency in %} over the windows
    whose latency is above zero (none: left out), a block of rows at a time (column(name, a, b):
    rows [a, b) of a breakdown column)."""
    total, count = np.zeros(nmetrics), np.zeros(nmetrics)
    for a in range(0, len(mcode), BLOCK):
        measured = np.zeros(len(mcode[a : a + BLOCK]))
        for c in MEASURED:
            measured += column(c, a, a + BLOCK)
        lat = rows.column("latency_ns", a, a + BLOCK).astype(np.float64)
        ok = lat > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            pct = (lat[ok] - measured[ok]) / lat[ok] * 100
        fin = np.isfinite(pct)
        code = mcode[a : a + BLOCK][ok][fin]
        total += np.bincount(code, weights=pct[fin], minlength=nmetrics)
        count += np.bincount(code, minlength=nmetrics)
    return {k: float(total[k] / count[k]) for k in range(nmetrics) if count[k]}


def _light_stats_of(v: np.ndarray) -> dict[str, float]:
    """{n, mean, median, p99} of one column's values (the caller's to give away: partitioned
    in place where they are float64 already)."""
    x = v.astype(np.float64, copy=False)
    mean = float(x.mean())
    q = np.percentile(x, [50, 99], overwrite_input=True)
    return {"n": len(x), "mean": mean, "median": float(q[0]), "p99": float(q[1])}


def _metric_codes(iterations: pd.DataFrame, workload: dict[str, Any]) -> tuple[np.ndarray, list[str]]:
    """(codes per iteration, names): the metric column as integer codes."""
    m = iterations["metric"]
    if isinstance(m.dtype, pd.CategoricalDtype):
        return m.cat.codes.to_numpy(np.int64), [str(c) for c in m.cat.categories]
    if pd.api.types.is_integer_dtype(m):
        return m.to_numpy(np.int64), list(workload["metrics"])
    codes, names = pd.factorize(m)
    return codes.astype(np.int64), [str(c) for c in names]


def sides_of(workload: dict[str, Any], measuring_tid: int) -> list[tuple[str, int]]:
    """[(role, tid)] with the measuring thread first, then the peers in workload.json order."""
    threads = workload.get("threads") or []
    peers = [
        (t.get("role", "peer"), int(t["tid"]))
        for t in threads
        if t.get("tid") and int(t["tid"]) != measuring_tid and t.get("role") != "measuring"
    ]
    return [("measuring", int(measuring_tid))] + peers


def _p99(x: np.ndarray) -> float:
    return float(np.percentile(x, 99)) if len(x) else np.nan


TAIL_LABELS = ("irq", "softirq", "preemption", "migration", "page_fault", "long_wakeup", "steal")


def steal_in(spans: tuple[np.ndarray, np.ndarray], starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """ns of steal overlapping each window [starts, ends) (on the CPUs of the spans; spans on two
    CPUs at once both count): F(end) - F(start), where F(t) is the steal before t, in integers."""
    a, b = np.asarray(spans[0], np.int64), np.asarray(spans[1], np.int64)
    if not len(a):
        return np.zeros(len(starts))
    t0 = int(a.min())  # times from the first span: the sums stay far from overflow
    a, b = np.sort(a - t0), np.sort(b - t0)
    sum_a, sum_b = np.concatenate(([0], np.cumsum(a))), np.concatenate(([0], np.cumsum(b)))

    def before(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, np.int64) - t0
        i, j = np.searchsorted(a, t, side="right"), np.searchsorted(b, t, side="right")
        return (t * i - sum_a[i]) - (t * j - sum_b[j])

    return (before(ends) - before(starts)).astype(np.float64)


def tail_event_times(ev: Events, tids: npt.ArrayLike) -> list[np.ndarray]:
    """The sorted times of what labels a slow iteration, of the threads tids: interrupts,
    softirqs, preemptions (a switch away in favour of a task that is not the workload's, with
    prev_state 0), migrations, page faults (TAIL_LABELS' first five)."""

    def times(names: Iterable[str], extra: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        i = ev.of(*names)
        i = i[np.isin(ev.tid[i], tids)]
        if extra is not None:
            i = i[extra(i)]
        return np.sort(ev.ts[i])

    return [
        times(("irq_entry", "vector_entry")),
        times(("softirq_entry",)),
        times(("switch",), lambda i: (ev.prev_state[i] == 0) & ~np.isin(ev.next_tid[i], tids)),
        times(("migrate",)),
        times(("page_fault",)),
    ]


def labels_in(
    times: Sequence[np.ndarray], starts: np.ndarray, ends: np.ndarray, steal: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Boolean matrix (n x len(TAIL_LABELS)): what happened in each window, from the sorted
    times of each label but the last (steal: its spans)."""
    labels = [_count_in(c, starts, ends) > 0 for c in times]
    labels.append(steal_in(steal, starts, ends) > 0)
    return np.stack(labels, axis=1)


def _label_text(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Categorical of the labels joined by "," ("" outside the tail, "none" if nothing happened)."""
    mask = labels @ (1 << np.arange(len(TAIL_LABELS)))
    uniq, codes = np.unique(mask, return_inverse=True)
    names = [",".join(lb for k, lb in enumerate(TAIL_LABELS) if m >> k & 1) or "none" for m in uniq]
    return uniq, codes, names


@dataclass(frozen=True)
class Windows:
    """The iterations broken down, whose columns the statistics read one at a time."""

    rows: KeptRows
    mnames: list[str]


@dataclass(frozen=True)
class BreakdownFacts:
    """What compute() found besides the per-iteration frame."""

    critical_path: bool  # the workload has a peer: the components follow the critical path
    copy_measured: bool  # the copy routines were probed (else copy is estimated)
    copies: bool  # the workload's data syscalls copy (workload.json "copies"; orwc's /dev/null does not)
    entry: dict[str, Any]  # the entry path's estimate and its source
    holders: list[tuple[np.ndarray, np.ndarray, np.ndarray]]  # who held the CPU while the path waited
    path: list[Any]  # with path=True: each window's critical-path segments and the threads they name
    timelines: dict[int, Timeline]  # each thread's step function by tid
    ns_per_call: float  # the copy estimate's costs and where they come from
    ns_per_byte: float
    copy_basis: str
    roles: list[str]  # the sides of the workload (measuring, peer)
    wake: dict[str, dict[str, dict[str, Any]]]  # per side and metric: its wake-ups in the windows
    tail: dict[str, dict[str, Any]]  # per metric: the p99 threshold and the tail's labels
    long_wakeup_ns: float | None
    windows: Windows  # the iterations broken down: their metric, window and run


@dataclass(frozen=True)
class TraceFacts:
    """What compute() needs of the whole trace where its events are only a part of it (a piece
    of a long run, the row groups around explain's window): the entry path's estimate (from the
    calibration calls at the run's start), whether the copy routines were probed, the threads of
    the workload's processes seen anywhere in it, and the CPUs each task was switched in on
    (whose steal counts; None: those its events show)."""

    entry: tuple[int, int, dict[str, Any]]
    copy_measured: bool
    seen_tids: np.ndarray  # tid > 0 of the records of the workload's processes
    in_cpus: dict[int, set[int]] | None = None

    @classmethod
    def of(cls, ev: Events, workload: dict[str, Any]) -> TraceFacts:
        fe = ev.of("func_entry")
        return cls(
            entry=entry_costs(ev, workload),
            copy_measured=bool(np.isin(ev.func[fe], records.COPY_FUNC_IDS).any()),
            seen_tids=seen_tids(ev.pid, ev.tid, workload),
        )


def whole_of(events: pd.DataFrame, entry: tuple[int, int, dict[str, Any]], workload: dict[str, Any]) -> TraceFacts:
    """TraceFacts from the type, func (decoded.stored), pid, tid, next_tid and cpu columns of every event."""
    fe = (events["type"] == "func_entry").to_numpy()
    copy = bool(np.isin(decoded.column(events, "func")[fe], records.COPY_FUNC_IDS).any())
    sw = (events["type"] == "switch").to_numpy()
    return TraceFacts(
        entry,
        copy,
        seen_tids(events["pid"].to_numpy(), events["tid"].to_numpy(), workload),
        in_cpus(events["next_tid"].to_numpy()[sw], events["cpu"].to_numpy()[sw]),
    )


def in_cpus(next_tid: np.ndarray, cpu: np.ndarray, into: dict[int, set[int]] | None = None) -> dict[int, set[int]]:
    """{tid: the CPUs it was switched in on} from switches' next_tid and cpu (added to `into`)."""
    # One 64-bit key a pair: a hash of 10 M integers, not of 10 M rows of a frame.
    pairs = pd.unique((np.asarray(next_tid, np.int64) << 16) | np.asarray(cpu, np.int64))
    out = {} if into is None else into
    for t, c in zip((pairs >> 16).tolist(), (pairs & 0xFFFF).tolist()):
        out.setdefault(t, set()).add(c)
    return out


def seen_tids(pid: np.ndarray, tid: np.ndarray, workload: dict[str, Any]) -> np.ndarray:
    """The distinct tids (> 0) of the records of the workload's processes."""
    pids = {int(t["pid"]) for t in workload.get("threads") or [] if t.get("pid")}
    mask = np.zeros(len(tid), bool)
    for p in pids:
        mask |= pid == p
    mask &= tid > 0
    return np.unique(tid[mask]).astype(np.int64)


def other_threads(facts: TraceFacts, sides: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """[("thread", tid)] of the other threads of the workload's processes that the trace saw
    (e.g. ZeroMQ's I/O threads): they can work on a message while both sides block."""
    listed = {t for _, t in sides}
    return [("thread", int(t)) for t in facts.seen_tids if int(t) not in listed]


def _role_names(sides: Sequence[tuple[str, int]]) -> list[str]:
    """The column prefix of each side: a role named twice gets its position appended."""
    names = []
    for k, (role, _) in enumerate(sides):
        if k > 0 and role in ("measuring", *[r for r, _ in sides[:k]]):
            role = f"{role}{k}"
        names.append(role)
    return names


def _in(ts: np.ndarray, own: tuple[float, float]) -> np.ndarray:
    return (ts >= own[0]) & (ts < own[1])


class BreakdownPass:
    """The per-iteration breakdown of a run computed over its events in time-ordered pieces
    (all of them at once is one piece). Each piece holds some iterations whole, with enough
    events before them that every thread's state is known (the caller's lead-in); add()
    returns those iterations' components; what needs the whole run is gathered compactly and
    settled by finish(). Each piece `owns` a span of time: what it finds there (wake-ups, the
    tail's events, steal) is kept once, although the next piece sees it again as its lead-in.

    Nothing of it grows with the iterations but a mask of those kept: their columns are read a
    range at a time (KeptRows); the tail's thresholds (each metric's p99) are known from the
    latencies before the events, so only what happens inside the tail's windows is kept for
    its labels; each side's wake-ups go to a temporary file in time order and are matched with
    the windows of each metric at the end, their delays counted by value (exact order
    statistics)."""

    def __init__(
        self,
        iterations: IterationColumns,
        workload: dict[str, Any],
        facts: TraceFacts,
        copy_ns_per_byte: float | None = None,
        arch: str = "x86_64",
        path: bool = False,
        keep: np.ndarray | None = None,
        spools: SpoolMaker | None = None,
    ):
        """keep: a mask of the iterations to break down (all if None); spools: what keeps the
        wake-ups until finish() (store.spool.spools_in: temporary files beside the results;
        the system's temporary directory if None)."""
        self.workload, self.facts, self.path = workload, facts, path
        self.ns_per_call, self.ns_per_byte, self.copy_basis = copy_costs(workload, copy_ns_per_byte)
        entry_in, entry_out, self.entry_basis = facts.entry
        # No estimate where the copy is measured, or where the workload says its data syscalls copy
        # nothing (orwc's /dev/null: write() returns the bytes it was given and copies none).
        self.copies = workload.get("copies", True) is not False
        copy_call = -1.0 if facts.copy_measured or not self.copies else self.ns_per_call
        self.rules = StepRules(arch, entry_in, entry_out, copy_call, self.ns_per_byte)
        self.arch = arch
        # a traced program's round trips run from a sys_enter to a sys_exit, not between clock reads
        rtt = (workload.get("params") or {}).get("iterations_from") == "rtt"
        self.edge_states = SYSCALL_EDGES if rtt else CLOCK_EDGES
        self.iterations, self.keep = iterations, keep
        self.spools = spools or spool.spools_in(None)
        self.rows = KeptRows(iterations, keep)
        self.mnames = list(iterations.metrics)
        self.n = self.rows.n
        measuring, kept = set(), np.zeros(len(self.mnames), np.int64)
        for a in range(0, self.n, BLOCK):
            measuring.update(np.unique(self.rows.column("tid", a, a + BLOCK)).tolist())
            kept += np.bincount(self.rows.column("metric", a, a + BLOCK), minlength=len(self.mnames))
        self.kept_per_metric = kept
        # The threads of each measuring thread's critical path, and the side columns, are the
        # run's: the same in every piece.
        self.everyone = {}
        self.roles = []
        for tid in sorted(measuring):
            sides = sides_of(workload, tid)
            self.everyone[int(tid)] = (sides, sides + other_threads(facts, sides))
            self.roles += [r for r in _role_names(sides) if r not in self.roles]
        self.all_tids = np.array(sorted({t for _, ev in self.everyone.values() for _, t in ev}), np.int64)
        self.critical = any(len(s) > 1 for s, _ in self.everyone.values())
        self.tail = self._tail_windows()
        self.holders = []
        self.wake = {}  # role -> its wake-ups (_WakeUps)
        self.delays = stats.ValueCounts()  # every wake-up's delay: the long wake-ups' threshold
        self.long = []  # (time on CPU, delay) of the wake-ups inside a window of the tail
        self.label_times = [[] for _ in range(len(TAIL_LABELS) - 2)]  # the tail's event times in its windows
        self.steal = []  # (start, end, cpu) of the steal records
        self.cpus = set()
        self.paths = []
        self.timelines = {}

    def _tail_windows(self) -> dict[int, tuple[float, np.ndarray, np.ndarray, np.ndarray]]:
        """{metric code: (p99 of its latencies, the rows above it, their starts and ends)}, and
        all those windows in start order with the latest end so far (to keep what falls in them)."""
        codes = self.rows.column("metric")
        lat = self.rows.column("latency_ns")
        tail, values = {}, None
        for code in range(len(self.mnames)):
            if not self.kept_per_metric[code]:
                continue
            sel = None if self.kept_per_metric[code] == self.n else np.flatnonzero(codes == code)
            values = lat if sel is None else lat[sel]
            threshold = _p99(values)
            over = np.flatnonzero(values > threshold)
            tail[code] = (threshold, over if sel is None else sel[over])
        del codes, lat, values
        clib.release_memory()
        out = {}
        for code, (threshold, over) in tail.items():
            starts, ends = np.zeros(len(over), np.int64), np.zeros(len(over), np.int64)
            for a in range(0, self.n, BLOCK):
                i, j = np.searchsorted(over, [a, a + BLOCK])
                if j > i:
                    starts[i:j] = self.rows.column("t_start_ns", a, a + BLOCK)[over[i:j] - a]
                    ends[i:j] = self.rows.column("t_end_ns", a, a + BLOCK)[over[i:j] - a]
            out[code] = (threshold, over, starts, ends)
        s = np.concatenate([v[2] for v in out.values()]) if out else np.zeros(0, np.int64)
        e = np.concatenate([v[3] for v in out.values()]) if out else np.zeros(0, np.int64)
        order = np.argsort(s, kind="stable")
        self.tail_starts, self.tail_reach = s[order], np.maximum.accumulate(e[order]) if len(e) else e
        return out

    def _in_tail(self, ts: np.ndarray) -> np.ndarray:
        """Mask of the times inside a window of the tail (ends included)."""
        j = np.searchsorted(self.tail_starts, ts, side="right") - 1
        if not len(self.tail_starts):
            return np.zeros(len(ts), bool)
        return (j >= 0) & (ts <= self.tail_reach[np.maximum(j, 0)])

    def add(
        self, rows: np.ndarray, events: pd.DataFrame | Events, own: tuple[float, float] = (-np.inf, np.inf)
    ) -> dict[str, np.ndarray]:
        """The components of the iterations at rows (consecutive numbers of the kept iterations,
        whose windows the events cover) as {column: array}: the states of the critical path
        (STATE_NAMES), each side's (`role.state`), copy_bytes."""
        ev = events if isinstance(events, Events) else Events(events)
        rows = np.asarray(rows, np.int64)
        k = len(rows)
        first = int(rows[0]) if k else 0
        if k and int(rows[-1]) - first + 1 != k:
            raise ValueError("BreakdownPass.add takes consecutive rows")
        starts, ends, tids = (self.rows.column(c, first, first + k) for c in ("t_start_ns", "t_end_ns", "tid"))
        timelines = {}
        occupancy = Occupancy(ev)
        copy = CopyBytes(ev, self.arch)
        # Column-major: each component a contiguous column, handed on without a copy.
        comp = np.zeros((k, len(STATE_NAMES)), order="F")
        side = {role: np.full((k, len(STATE_NAMES)), np.nan, order="F") for role in self.roles}
        moved = np.zeros(k, np.int64)
        waked = {}  # role -> {tid: its wake-ups in this piece's own span}: a thread's once a piece
        for tid in np.unique(tids):
            sides, everyone = self.everyone[int(tid)]
            sel = np.flatnonzero(tids == tid)
            for _, t in everyone:
                if t not in timelines:
                    timelines[t] = thread_timeline(ev, t, self.rules)
            tls = [timelines[t] for _, t in everyone]
            ids = [t for _, t in everyone]
            c, per_side, seg = window_components(
                tls,
                ids,
                occupancy,
                starts[sel],
                ends[sel],
                len(sides),
                segments=(256 if self.path else 4) * len(sel) + 1024,
                holders_only=not self.path,
                data_kind=self.rules.data_kind,
                edge_states=self.edge_states,
            )
            keep = seg.holder > 0
            self.holders.append((seg.holder[keep], seg.state[keep], (seg.b - seg.a)[keep]))
            if self.path:
                seg.w = rows[sel][seg.w]
                self.paths.append((everyone, seg))
            for t in ids:
                moved[sel] += copy.calls_bytes(t, starts[sel], ends[sel])[1]
            comp[sel] = c
            for role, (_, t), tl, m in zip(_role_names(sides), sides, tls, per_side):
                side[role][sel] = m
                if t not in waked.setdefault(role, {}):
                    on, delay, rq = wakeup_delays(tl)
                    mine = _in(on, own)
                    waked[role][t] = (on[mine], delay[mine], rq[mine])
        for role, found in waked.items():
            on, delay, rq = (np.concatenate([f[k] for f in found.values()]) for k in range(3))
            order = np.argsort(on, kind="stable")
            on, delay, rq = on[order], delay[order], rq[order]
            if role not in self.wake:
                self.wake[role] = _WakeUps(self.spools)
            self.wake[role].add(on, delay, rq)
            self.delays.add(delay)
            inside = self._in_tail(on)
            self.long.append((on[inside], delay[inside]))
        for tl in timelines.values():
            self.cpus.update(int(c) for c in np.unique(tl.in_cpu))
        if self.path:
            self.timelines.update(timelines)
        for k, ts in enumerate(tail_event_times(ev, self.all_tids)):
            self.label_times[k].append(ts[_in(ts, own) & self._in_tail(ts)])
        i = ev.of("steal")
        i = i[_in(ev.ts[i], own)]
        self.steal.append((ev.ts[i] - np.maximum(ev.steal_ns[i], 0), ev.ts[i], ev.steal_cpu[i]))
        cols = {name: comp[:, j] for j, name in enumerate(STATE_NAMES)}
        for role, m in side.items():
            cols.update({f"{role}.{name}": m[:, j] for j, name in enumerate(STATE_NAMES)})
        cols["copy_bytes"] = moved
        return cols

    def finish(self) -> tuple[Late, BreakdownFacts]:
        """What needs the whole run, once every iteration was added: (the steal_ns and tail
        columns of the iterations, the facts)."""
        # Wake-up delays pooled over the sides; those above the p99 of all of them label the tail.
        long_threshold = self.delays.percentile(99)
        long_ts = (
            np.concatenate([on[d > long_threshold] for on, d in self.long]) if self.long else np.zeros(0, np.int64)
        )
        steal_all = [np.concatenate([s[k] for s in self.steal]) for k in range(3)] if self.steal else []
        if self.facts.in_cpus is not None:
            cpus = {c for t in self.all_tids.tolist() for c in self.facts.in_cpus.get(t, ())}
        else:
            cpus = self.cpus
        if steal_all:
            on = np.isin(steal_all[2], list(cpus))
            steal = (steal_all[0][on], steal_all[1][on])
        else:
            steal = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        # Each side's wake-ups that end inside a window of each metric, as statistics: from
        # sched_waking (or sched_wakeup) to running; and from sched_wakeup to running, what
        # perf sched timehist and runqlat call the scheduling delay.
        wake_stats = {}
        for role, wakeups in self.wake.items():
            for code, name in enumerate(self.mnames):
                if not self.kept_per_metric[code]:
                    continue
                windows = WindowCursor(self.iterations, code, self.keep)
                delay, rq, count = stats.ValueCounts(), stats.ValueCounts(), 0
                for on, d, r in wakeups.blocks():
                    s_, e_ = windows.covering(int(on[0]), int(on[-1]))[:2]
                    j = native.count_upto(s_, on) - 1  # on ascending: a merge, not a search each
                    inside = (j >= 0) & (on <= e_[np.maximum(j, 0)]) if len(s_) else np.zeros(len(on), bool)
                    delay.add(d[inside])
                    rq.add(r[inside])
                    count += int(inside.sum())
                wake_stats.setdefault(role, {})[name] = {
                    "wakeups": count,
                    "wakeup_delay": delay.light(),
                    "runqueue_delay": rq.light(),
                }
            wakeups.close()
        label_cols = [np.sort(np.concatenate(t)) if t else np.zeros(0, np.int64) for t in self.label_times]
        label_cols.append(np.sort(long_ts))
        tail_rows, tail_codes = [], []  # the rows in the tail, and 1 + their index into tail_names
        tail_names = []
        tail_info = {}
        for code, (threshold, over, starts, ends) in self.tail.items():
            labels = labels_in(label_cols, starts, ends, steal)
            if len(over):
                _, codes, names = _label_text(labels)
                index = [
                    tail_names.index(x) if x in tail_names else tail_names.append(x) or len(tail_names) - 1
                    for x in names
                ]
                tail_rows.append(over)
                tail_codes.append(1 + np.asarray(index)[codes])
            counts = {label: int(labels[:, k].sum()) for k, label in enumerate(TAIL_LABELS)}
            counts["none"] = int((~labels.any(axis=1)).sum())
            tail_info[self.mnames[code]] = {"threshold_ns": threshold, "iterations": int(len(over)), "labels": counts}
        rows = np.concatenate(tail_rows) if tail_rows else np.zeros(0, np.int64)
        codes = np.concatenate(tail_codes) if tail_codes else np.zeros(0, np.int64)
        order = np.argsort(rows)
        late = Late(self, steal, rows[order], codes[order], ["", *tail_names])
        info = BreakdownFacts(
            critical_path=bool(self.critical),
            copy_measured=self.facts.copy_measured,
            copies=self.copies,
            entry=self.entry_basis,
            holders=self.holders,
            path=self.paths,
            timelines=self.timelines,
            ns_per_call=self.ns_per_call,
            ns_per_byte=self.ns_per_byte,
            copy_basis=self.copy_basis,
            roles=self.roles,
            wake=wake_stats,
            tail=tail_info,
            # None: no wake-up among the kept iterations (e.g. null-syscall), so no threshold
            long_wakeup_ns=None if np.isnan(long_threshold) else long_threshold,
            windows=Windows(self.rows, self.mnames),
        )
        return late, info


class _WakeUps:
    """One side's wake-ups (time on CPU, delay, run-queue delay) in time order, spilled to a
    store.spool.RecordSpool: 24 B each on disk, none in memory."""

    RECORD = np.dtype([("on", "<i8"), ("delay", "<i8"), ("rq", "<i8")])

    def __init__(self, spools: SpoolMaker):
        self.spool = spools(self.RECORD, "ipctrace-wakeups-")

    def add(self, on: np.ndarray, delay: np.ndarray, rq: np.ndarray) -> None:
        rec = np.empty(len(on), self.RECORD)
        rec["on"], rec["delay"], rec["rq"] = on, delay, rq
        self.spool.add(rec)

    def blocks(self, size: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for rec in self.spool.blocks(size):
            yield rec["on"], rec["delay"], rec["rq"]

    def close(self) -> None:
        self.spool.close()


class Late:
    """The columns of breakdown.parquet that need the whole run (BreakdownPass.finish()), made
    for a range of its rows at a time: steal_ns (the hypervisor's steal in the window, on the
    CPUs the workload's threads ran on) and tail (the labels of an iteration above the p99)."""

    def __init__(
        self,
        bp: BreakdownPass,
        steal: tuple[np.ndarray, np.ndarray],
        rows: np.ndarray,
        codes: np.ndarray,
        names: list[str],
    ):
        self.windows, self.steal = bp.rows, steal
        self.rows, self.codes, self.names = rows, codes, names

    def columns(self, a: int, b: int) -> dict[str, Any]:
        code = np.zeros(b - a, np.int64)
        i, j = np.searchsorted(self.rows, [a, b])
        code[self.rows[i:j] - a] = self.codes[i:j]
        return {"steal_ns": self.steal_ns(a, b), "tail": pd.Categorical.from_codes(code, categories=self.names)}

    def steal_ns(self, a: int = 0, b: int | None = None) -> np.ndarray:
        """The steal_ns column of rows [a, b) (all by default), a block of windows at a time."""
        b = self.windows.n if b is None else min(b, self.windows.n)
        out = np.empty(max(b - a, 0))
        for lo in range(a, b, BLOCK):
            hi = min(lo + BLOCK, b)
            out[lo - a : hi - a] = steal_in(
                self.steal, self.windows.column("t_start_ns", lo, hi), self.windows.column("t_end_ns", lo, hi)
            )
        return out


def compute(
    iterations: pd.DataFrame,
    events: pd.DataFrame | Events,
    workload: dict[str, Any],
    copy_ns_per_byte: float | None = None,
    arch: str = "x86_64",
    path: bool = False,
    facts: TraceFacts | None = None,
) -> tuple[pd.DataFrame, BreakdownFacts]:
    """Per-iteration breakdown and what summary.json needs, from all the events at once (or
    from a part of them, with facts: what is needed of the whole trace).

    Returns (frame, info): frame has run, iteration, seq, metric, latency_ns, the
    COMPONENTS, `<role>.<component>` per side, copy_bytes, steal_ns and tail (labels joined
    by ",", "" outside the tail); info: BreakdownFacts. path: info.path also holds the
    critical path's segments of every window (for explain: few windows), with the
    threads they name.
    """
    ev = events if isinstance(events, Events) else Events(events)
    # info.windows reads these columns later: their file goes with the last reference to it
    columns = IterationColumns.from_frame(iterations, metrics=workload.get("metrics"))
    bp = BreakdownPass(columns, workload, facts or TraceFacts.of(ev, workload), copy_ns_per_byte, arch, path)
    cols = bp.add(np.arange(len(iterations)), ev)
    late, info = bp.finish()
    return frame_of(iterations, bp, cols, late.columns(0, len(iterations))), info


def frame_of(
    iterations: pd.DataFrame, bp: BreakdownPass, cols: dict[str, np.ndarray], late: dict[str, Any]
) -> pd.DataFrame:
    """breakdown.parquet's rows of these iterations from add()'s and finish()'s columns."""
    n = len(iterations)
    starts = iterations["t_start_ns"].to_numpy(np.int64)
    ends = iterations["t_end_ns"].to_numpy(np.int64)
    mcode, names = _metric_codes(iterations, bp.workload)
    if names != bp.mnames:  # a part of the iterations: the run's names for the codes
        mcode = np.asarray([bp.mnames.index(m) for m in names], np.int64)[mcode]
    out = {
        "run": iterations["run"].to_numpy(),
        "iteration": iterations["iteration"].to_numpy(),
        "seq": iterations["seq"].to_numpy() if "seq" in iterations else np.arange(n),
        "metric": pd.Categorical.from_codes(mcode, categories=bp.mnames),
        "latency_ns": ends - starts,
    }
    out.update({c: cols[c] for c in COMPONENTS})
    for role in bp.roles:
        out.update({f"{role}.{c}": cols[f"{role}.{c}"] for c in COMPONENTS})
    out["copy_bytes"] = cols["copy_bytes"]
    out.update(late)
    return pd.DataFrame(out, copy=False)


@dataclass(frozen=True)
class MetricBreakdown:
    """Where one metric's time went (summary.json's breakdown[metric])."""

    components: dict[str, dict[str, Any]]
    # The rest may be absent from a file (the schema's optional fields: a merged directory's
    # breakdown, model/crosshost.py, has components, critical_path and closure only).
    closure_residual_pct: float | None = None
    critical_path: Any = None
    per_side: dict[str, dict[str, Any]] = field(default_factory=dict)
    copy_source: str | None = None
    copy_bytes_mean: float | None = None
    copy_costs: dict[str, float] = field(default_factory=dict)
    entry_source: str | None = None
    entry_calibration: dict[str, Any] = field(default_factory=dict)
    steal_ns_mean: float | None = None
    preempted_by: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Tail:
    """The slowest iterations of the primary metric and what they share (summary.json's tail)."""

    metric: str | None = None  # every field may be absent from a file (the schema's TAIL)
    threshold_ns: float | None = None
    iterations: int | None = None
    long_wakeup_ns: float | None = None
    labels: dict[str, int] = field(default_factory=dict)
    by_metric: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Breakdown:
    metrics: dict[str, MetricBreakdown]
    tail: Tail | None


def summarize(
    iterations: pd.DataFrame,
    events: pd.DataFrame | Events,
    workload: dict[str, Any],
    primary: str | None = None,
    machine: str | None = None,
    tasks: dict[str, Any] | None = None,
    tracer_tids: Collection[int] = (),
    copy_ns_per_byte: float | None = None,
) -> Breakdown:
    """The breakdown of every metric and the tail of the primary one (the workload's first
    metric if not given), from all the events at once.

    machine: the one the trace was taken on (syscall numbers), x86_64 if not known.
    tasks, tracer_tids: trace.json's names of the tasks (the ones that preempted the workload)
    and the tracer's own threads.
    copy_ns_per_byte: the per-byte cost from a size sweep, if one was made; else the
    driver's calibration in workload.json (copy_costs).
    """
    frame, info = compute(iterations, events, workload, copy_ns_per_byte, machine or "x86_64")
    return summarize_frame(frame, info, workload, primary, tasks, tracer_tids)


def summarize_frame(
    frame: pd.DataFrame,
    info: BreakdownFacts,
    workload: dict[str, Any],
    primary: str | None = None,
    tasks: dict[str, Any] | None = None,
    tracer_tids: Collection[int] = (),
) -> Breakdown:
    """summarize() from compute()'s frame and info (a caller that writes the frame as
    breakdown.parquet meanwhile: store.rundir.breakdown_written_alongside)."""
    primary = primary or (workload.get("metrics") or [None])[0]

    def column(name: str, a: int = 0, b: int | None = None) -> np.ndarray:
        return frame[name].to_numpy()[a:b].copy()  # summarize_columns sorts what it is given

    return summarize_columns(column, info, primary, tasks or {}, set(tracer_tids))


def holders_table(
    holders: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n: int,
    tasks: dict[str, Any] | None,
    tracer: Collection[int],
    top: int = 5,
) -> list[dict[str, Any]]:
    """The tasks outside the workload that held the CPU while a thread on the critical path
    waited for it (the path's `runqueue` after a wake-up, `preempted` after an involuntary switch
    out): per task, ns per iteration on average, its share of that time, its name, and whether
    it is the tracer's own thread."""
    if not holders:
        return []
    tid = np.concatenate([h[0] for h in holders])
    state = np.concatenate([h[1] for h in holders])
    ns = np.concatenate([h[2] for h in holders]).astype(np.float64)
    rows = []
    sel = (tid > 0) & np.isin(state, (RUNQUEUE, PREEMPTED))
    if sel.any():
        uniq, inv = np.unique(tid[sel], return_inverse=True)
        total = np.bincount(inv, weights=ns[sel])
        for k in np.argsort(-total)[:top]:
            t = int(uniq[k])
            task = (tasks or {}).get(str(t)) or {}
            rows.append(
                {
                    "tid": t,
                    "comm": task.get("comm"),
                    "pid": task.get("pid"),
                    "tracer": t in tracer,
                    "ns_per_iteration": float(total[k] / max(n, 1)),
                    "share": float(total[k] / total.sum()),
                }
            )
    return rows


def summarize_columns(
    column: Callable[..., np.ndarray],
    info: BreakdownFacts,
    primary: str | None,
    tasks: dict[str, Any],
    tracer: set[int],
) -> Breakdown:
    """The per-metric breakdown and the tail from the breakdown's columns (column(name[, a, b]):
    one column of breakdown.parquet's, all rows or rows [a, b), a new array this may sort: a
    frame's copy, or read from the file one at a time, so that no more than one is in memory)
    and compute()'s info."""
    if info.copy_measured:
        copy_source = "measured"
    elif not info.copies:
        copy_source = "none: this workload's data syscalls copy nothing (workload.json copies: false)"
    else:
        copy_source = (
            f"estimated: calls x {info.ns_per_call:.3g} ns + bytes x {info.ns_per_byte:.3g} ns/byte "
            f"({info.copy_basis}); "
            f"the copy routines are not probed on this kernel"
        )
    w = info.windows
    mnames = w.mnames
    mcode = w.rows.column("metric")
    runs_all = w.rows.column("run")
    if len(runs_all) and runs_all.min() >= 0 and runs_all.max() < 2**15:
        runs_all = runs_all.astype(np.int16)  # held through the statistics: 2 B an iteration
    metrics = []
    for code, name in enumerate(mnames):
        sel = mcode == code
        if sel.any():
            metrics.append((str(name), slice(None) if sel.all() else sel))
    # the runs' counts once for every column (the one metric's: all rows)
    run_index = stats.RunIndex(runs_all) if len(metrics) == 1 else None
    # Column by column: each one's statistics for every metric, then it goes.
    components = {name: {} for name, _ in metrics}
    for c in COMPONENTS:
        x = column(c)
        for name, rows in metrics:
            # one metric: the column itself is sorted in place, no copy of it
            components[name][c] = _stat_entries(x, c, runs_all, rows, len(metrics) == 1, run_index)
        del x
        clib.release_memory()
    # Readers of results from before the wake-up was split into wakeup and runqueue find
    # their sum under its old name, marked derived (the table and the report skip it).
    waiting = column("wakeup").astype(np.float64, copy=False)
    for a in range(0, len(waiting), BLOCK):  # the other column a block at a time beside it
        waiting[a : a + BLOCK] += column("runqueue", a, a + BLOCK)
    for name, rows in metrics:
        components[name]["sched_delay"] = dict(
            _stat_entries(waiting, "sched_delay", runs_all, rows, len(metrics) == 1, run_index),
            derived="wakeup + runqueue",
        )
    del waiting
    clib.release_memory()
    closure = _closure_by_metric(w.rows, column, mcode, len(mnames))
    per_side = {name: {} for name, _ in metrics}
    for role in info.roles:
        present = ~np.isnan(column(f"{role}.{COMPONENTS[0]}"))  # the side's columns are NaN elsewhere
        clib.release_memory()
        for name, rows in metrics:
            ok = present[rows]
            if not ok.any():
                continue
            vals = {}
            for c in COMPONENTS:
                v = column(f"{role}.{c}")[rows]
                vals[c] = _light_stats_of(v if ok.all() else v[ok])
                del v  # before the next column is read beside it
                clib.release_memory()
            ws = info.wake.get(role, {}).get(name) or {"wakeups": 0, "wakeup_delay": None, "runqueue_delay": None}
            per_side[name][role] = {"components": vals, **ws}
        del present
        clib.release_memory()
    means = {}
    for c in ("copy_bytes", "steal_ns"):  # one column at a time
        x = column(c)
        means[c] = {name: float(x[rows].mean()) for name, rows in metrics}
        del x
    out = {}
    for name, rows in metrics:
        n = len(mcode) if isinstance(rows, slice) else int(rows.sum())
        out[name] = MetricBreakdown(
            components=components[name],
            closure_residual_pct=closure.get(mnames.index(name)),
            critical_path=info.critical_path,
            per_side=per_side[name],
            copy_source=copy_source,
            copy_bytes_mean=means["copy_bytes"][name],
            copy_costs={"ns_per_call": info.ns_per_call, "ns_per_byte": info.ns_per_byte},
            entry_source=info.entry["source"],
            entry_calibration={k: v for k, v in info.entry.items() if k != "source"},
            steal_ns_mean=means["steal_ns"][name],
            preempted_by=holders_table(info.holders, n, tasks, tracer),
        )
    if primary not in info.tail and info.tail:
        primary = next(iter(info.tail))
    tail = None
    if primary in info.tail:
        t = info.tail[primary]
        tail = Tail(
            metric=primary,
            threshold_ns=t["threshold_ns"],
            iterations=t["iterations"],
            long_wakeup_ns=info.long_wakeup_ns,
            labels=t["labels"],
            by_metric=info.tail,
        )
    return Breakdown(out, tail)
