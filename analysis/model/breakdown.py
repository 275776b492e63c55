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

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from analysis.model import native, stats
from analysis.model.summary import metric_entry
from analysis.model.timeline import (
    DATA_SYSCALLS,
    PREEMPTED,
    STATE_NAMES,
    Events,
    StepRules,
    Timeline,
    thread_timeline,
    time_in,
    wakeup_delays,
)
from analysis.store import records, syscalls
from analysis.store.results import write_parquet, written_alongside

if TYPE_CHECKING:
    import numpy.typing as npt

COMPONENTS = ("user", "entry", "syscall", "copy", "irq", "wakeup", "runqueue", "blocked", "preempted", "residual")
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
        aux = ev.aux[i]
        i = i[(aux < len(data)) & data[np.clip(aux, 0, len(data) - 1)] & (ev.a0[i] > 0)]
        self.ev, self.idx, self.cache = ev, i, {}

    def calls_bytes(self, tid: int, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if tid not in self.cache:
            i = self.idx[self.ev.tid[self.idx] == tid]
            self.cache[tid] = self.ev.ts[i], np.concatenate(([0], np.cumsum(self.ev.a0[i])))
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
) -> tuple[np.ndarray, list[np.ndarray], native.Segments]:
    """Time in each state (n x len(STATE_NAMES), ns) of the windows [starts, ends) on the
    causal critical path (timeline.c, ipt_causal) of the threads tls (the measuring thread
    first, its peers, then other threads of the workload), the same of each of the first
    nsides threads on its own, and up to `segments` native.Segments of the path."""
    threads = [(tl.ts, tl.state, tl.sleep_end, _index_of(tl.sleep_waker, tids), tl.in_ts, tl.in_cpu) for tl in tls]
    crit, seg = native.causal(
        threads, occupancy.of(tids), nsides, starts, ends, len(STATE_NAMES), segments, holders_only
    )
    per_side = [time_in(tl.ts, [tl.state], starts, ends)[0] for tl in tls[:nsides]]
    return crit, per_side, seg


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
        return 0, 0, {"source": "not calibrated: the run has no entry calibration (older driver)"}
    tid, nr = int(cal["tid"]), int(cal["syscall_nr"])

    def times(kind: str) -> np.ndarray:
        i = ev.of(kind)
        i = i[(ev.tid[i] == tid) & (ev.aux[i] == nr)]
        return ev.ts[i]

    enter, leave = times("sys_enter"), times("sys_exit")
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
    return (
        e_in,
        e_out,
        {
            "source": f"estimated: null syscalls timed on CPU {cal.get('cpu', '?')} at the run's start ({basis})",
            "entry_ns": e_in,
            "exit_ns": e_out,
            "traced_syscall_ns": inside,
            "clock_read_ns": float(cal.get("empty_ns") or 0),
            "calls": int(ok.sum()),
        },
    )


# --- summary ------------------------------------------------------------------


def _stat_entries(values: np.ndarray, names: list[str], runs: np.ndarray) -> dict[str, dict[str, Any]]:
    """{name: statistics like summary.json's metrics} for each column of values."""
    # A column each (describe_columns): a long frame of all of them costs a copy of each and
    # a sort of n x columns rows; each group's figures are the same either way.
    frame = pd.DataFrame(values, columns=names)
    frame["component"] = np.zeros(len(values), np.int8)
    frame["run"] = runs
    tables = stats.describe_columns(frame, names, by="component", run="run")
    return {name: metric_entry(tables[name].iloc[0]) for name in names}


def _light_stats(values: np.ndarray, names: list[str]) -> dict[str, dict[str, Any]]:
    """{name: {n, mean, median, p99}} per column: the per-side view, kept cheap."""
    if len(values) == 0:
        return {}
    # Each column made contiguous first: partitioning the strided columns of an n x 8 matrix
    # costs several times as much; the order statistics are the same.
    q = np.percentile(np.ascontiguousarray(values.T), [50, 99], axis=1)
    mean = values.mean(axis=0)
    return {
        name: {"n": len(values), "mean": float(mean[k]), "median": float(q[0, k]), "p99": float(q[1, k])}
        for k, name in enumerate(names)
    }


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


def other_threads(
    ev: Events | Whole, workload: dict[str, Any], sides: Iterable[tuple[str, int]]
) -> list[tuple[str, int]]:
    """[("thread", tid)] of the other threads of the workload's processes that the trace saw
    (e.g. ZeroMQ's I/O threads): they can work on a message while both sides block."""
    pids = {int(t["pid"]) for t in workload.get("threads") or [] if t.get("pid")}
    if not pids:
        return []
    listed = {t for _, t in sides}
    # The sides' own events (most of them) are left out before the distinct tids are sought;
    # a comparison per pid and tid (a few) is cheaper over 10 M events than np.isin.
    mask = np.zeros(len(ev.tid), bool)
    for p in pids:
        mask |= ev.pid == p
    mask &= ev.tid > 0
    for t in listed:
        mask &= ev.tid != t
    seen = pd.unique(ev.tid[mask])
    return [("thread", int(t)) for t in np.sort(seen)]


def _p99(x: np.ndarray) -> float:
    return float(np.percentile(x, 99)) if len(x) else np.nan


TAIL_LABELS = ("irq", "softirq", "preemption", "migration", "page_fault", "long_wakeup", "steal")


def steal_spans(ev: Events, cpus: Iterable[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the time the hypervisor took a CPU (one of cpus, if given), from the
    STEAL records: each says how much was taken since that CPU's previous one, placed just
    before it."""
    i = ev.of("steal")
    if cpus is not None:
        i = i[np.isin(ev.aux[i], list(cpus))]
    end = ev.ts[i]
    return end - np.maximum(ev.a0[i], 0), end


def steal_in(spans: tuple[np.ndarray, np.ndarray], starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """ns of steal overlapping each window [starts, ends) (on the CPUs of the spans)."""
    out = np.zeros(len(starts))
    for a, b in zip(*spans):
        out += np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0, None)
    return out


def tail_labels(
    ev: Events,
    tids: npt.ArrayLike,
    starts: np.ndarray,
    ends: np.ndarray,
    long_wakeup_ts: np.ndarray,
    steal: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Boolean matrix (n x len(TAIL_LABELS)): what happened in each window."""

    def times(names: Iterable[str], extra: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        i = ev.of(*names)
        i = i[np.isin(ev.tid[i], tids)]
        if extra is not None:
            i = i[extra(i)]
        return np.sort(ev.ts[i])

    cols = [
        times(("irq_entry", "vector_entry")),
        times(("softirq_entry",)),
        # Preempted (prev_state 0) in favour of a task that is not the workload's.
        times(("switch",), lambda i: (ev.aux[i] == 0) & ~np.isin(ev.next_tid[i], tids)),
        times(("migrate",)),
        times(("page_fault",)),
        np.sort(long_wakeup_ts),
    ]
    labels = [_count_in(c, starts, ends) > 0 for c in cols]
    labels.append(steal_in(steal, starts, ends) > 0 if steal is not None else np.zeros(len(starts), bool))
    return np.stack(labels, axis=1)


def _label_text(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Categorical of the labels joined by "," ("" outside the tail, "none" if nothing happened)."""
    mask = labels @ (1 << np.arange(len(TAIL_LABELS)))
    uniq, codes = np.unique(mask, return_inverse=True)
    names = [",".join(lb for k, lb in enumerate(TAIL_LABELS) if m >> k & 1) or "none" for m in uniq]
    return uniq, codes, names


@dataclass(frozen=True)
class Whole:
    """What compute() reads of the whole trace besides the events of its windows, for events
    that are only a part of it (explain reads the row groups around its window): the tasks
    of the records (distinct pid, tid pairs: other_threads reads them), whether the copy
    routines were probed, the entry path's estimate (entry_costs) from the calibration's
    events, and the CPUs each task was switched in on (whose steal counts)."""

    pid: np.ndarray
    tid: np.ndarray
    copy_measured: bool
    entry: tuple[int, int, dict[str, Any]]
    in_cpus: dict[int, set[int]]


def whole_of(events: pd.DataFrame, entry: tuple[int, int, dict[str, Any]]) -> Whole:
    """Whole from the type, aux, pid, tid, next_tid and cpu columns of every event."""
    # One 64-bit key a pair: a hash of 10 M integers, not of 10 M rows of a frame.
    key = pd.unique((events["pid"].to_numpy(np.int64) << 32) | (events["tid"].to_numpy(np.int64) & 0xFFFFFFFF))
    fe = (events["type"] == "func_entry").to_numpy()
    copy = bool(np.isin(events["aux"].to_numpy()[fe], records.COPY_FUNC_IDS).any())
    sw = (events["type"] == "switch").to_numpy()
    ins = pd.unique((events["next_tid"].to_numpy(np.int64)[sw] << 16) | events["cpu"].to_numpy(np.int64)[sw])
    in_cpus = {}
    for t, c in zip((ins >> 16).tolist(), (ins & 0xFFFF).tolist()):
        in_cpus.setdefault(t, set()).add(c)
    return Whole(key >> 32, (key & 0xFFFFFFFF).astype(np.int32), copy, entry, in_cpus)


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
    wake: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # per side: its wake-up delays
    tail: dict[str, dict[str, Any]]  # per metric: the p99 threshold and the tail's labels
    states: np.ndarray  # the matrix (n x STATE_NAMES) whose columns the frame's components are
    side_states: dict[str, np.ndarray]  # the same per side
    long_wakeup_ns: float | None


def compute(
    iterations: pd.DataFrame,
    events: pd.DataFrame | Events,
    workload: dict[str, Any],
    copy_ns_per_byte: float | None = None,
    arch: str = "x86_64",
    path: bool = False,
    whole: Whole | None = None,
) -> tuple[pd.DataFrame, BreakdownFacts]:
    """Per-iteration breakdown and what summary.json needs.

    Returns (frame, info): frame has run, iteration, seq, metric, latency_ns, the
    COMPONENTS, `<role>.<component>` per side, copy_bytes and tail (labels joined
    by ",", "" outside the tail); info: BreakdownFacts. path: info.path also holds the
    critical path's segments of every window (for explain: few windows), with the
    threads they name. whole: where events are only a part of the trace, what is read of
    all of it (Whole).
    """
    ev = events if isinstance(events, Events) else Events(events)
    ns_per_call, ns_per_byte, copy_basis = copy_costs(workload, copy_ns_per_byte)
    if whole is None:
        fe = ev.of("func_entry")
        copy_measured = bool(np.isin(ev.aux[fe], records.COPY_FUNC_IDS).any())
        entry_in, entry_out, entry_basis = entry_costs(ev, workload)
    else:
        copy_measured = whole.copy_measured
        entry_in, entry_out, entry_basis = whole.entry
    # No estimate where the copy is measured, or where the workload says its data syscalls copy
    # nothing (orwc's /dev/null: write() returns the bytes it was given and copies none).
    copies = workload.get("copies", True) is not False
    rules = StepRules(arch, entry_in, entry_out, -1.0 if copy_measured or not copies else ns_per_call, ns_per_byte)
    mcode, mnames = _metric_codes(iterations, workload)
    starts_all = iterations["t_start_ns"].to_numpy(np.int64)
    ends_all = iterations["t_end_ns"].to_numpy(np.int64)
    tid_all = iterations["tid"].to_numpy(np.int64)
    n = len(iterations)

    timelines = {}
    copy = CopyBytes(ev, arch)
    occupancy = Occupancy(ev)
    # Matrices of time per state (n x len(STATE_NAMES)); the frame's columns are views of them.
    comp = None
    moved = np.zeros(n, np.int64)
    side_comp = {}
    wake = {}
    all_tids = set()
    holders = []
    paths = []
    critical = False
    for tid in np.unique(tid_all):
        rows = np.flatnonzero(tid_all == tid)
        sides = sides_of(workload, tid)
        everyone = sides + other_threads(whole or ev, workload, sides)
        for _, t in everyone:
            if t not in timelines:
                timelines[t] = thread_timeline(ev, t, rules)
        tls = [timelines[t] for _, t in everyone]
        tids = [t for _, t in everyone]
        all_tids.update(tids)
        critical |= len(sides) > 1
        c, per_side, seg = window_components(
            tls,
            tids,
            occupancy,
            starts_all[rows],
            ends_all[rows],
            len(sides),
            segments=(256 if path else 4) * len(rows) + 1024,
            holders_only=not path,
        )
        holders.append((seg.holder, seg.state, seg.b - seg.a))
        if path:
            seg.w = rows[seg.w]
            paths.append((everyone, seg))
        for t in tids:
            moved[rows] += copy.calls_bytes(t, starts_all[rows], ends_all[rows])[1]
        # One measuring thread (the rule): its matrices are the frame's as they are.
        everything = len(rows) == n
        if comp is None:
            comp = c if everything else np.zeros((n, len(STATE_NAMES)))
        if comp is not c:
            comp[rows] = c
        for k, ((role, t), tl, m) in enumerate(zip(sides, tls, per_side)):
            if k > 0 and role in ("measuring", *[r for r, _ in sides[:k]]):
                role = f"{role}{k}"
            if role not in side_comp:
                side_comp[role] = m if everything else np.full((n, len(STATE_NAMES)), np.nan)
            if side_comp[role] is not m:
                side_comp[role][rows] = m
            if t not in [w[3] for w in wake.get(role, [])]:
                wake.setdefault(role, []).append(wakeup_delays(tl) + (t,))

    cols = {
        "run": iterations["run"].to_numpy(),
        "iteration": iterations["iteration"].to_numpy(),
        "seq": iterations["seq"].to_numpy() if "seq" in iterations else np.arange(n),
        "metric": pd.Categorical.from_codes(mcode, categories=mnames),
        "latency_ns": ends_all - starts_all,
    }
    if comp is None:
        comp = np.zeros((n, len(STATE_NAMES)))
    cols.update({c: comp[:, STATE_NAMES.index(c)] for c in COMPONENTS})
    for role, m in side_comp.items():
        cols.update({f"{role}.{c}": m[:, STATE_NAMES.index(c)] for c in COMPONENTS})
    # The columns stay views of the component matrices: no consolidating copy.
    frame = pd.DataFrame(cols, copy=False)
    frame["copy_bytes"] = moved

    # Wake-up delays pooled per role; those above the p99 of all of them label the tail.
    wake = {role: tuple(np.concatenate([w[k] for w in ws]) for k in range(3)) for role, ws in wake.items()}
    delays = np.concatenate([d for _, d, _ in wake.values()]) if wake else np.zeros(0)
    long_threshold = _p99(delays)
    long_ts = np.concatenate([ts[d > long_threshold] for ts, d, _ in wake.values()]) if wake else np.zeros(0, np.int64)

    # the CPUs the workload's threads ran on
    if whole is None:
        steal = steal_spans(ev, {int(c) for tl in timelines.values() for c in np.unique(tl.in_cpu)})
    else:
        steal = steal_spans(ev, {c for t in timelines for c in whole.in_cpus.get(t, ())})
    frame["steal_ns"] = steal_in(steal, starts_all, ends_all)
    tail_code = np.zeros(n, np.int64)  # 0: not in the tail; else 1 + index into tail_names
    tail_names = []
    tail_info = {}
    all_tids = np.array(sorted(all_tids))
    for code, name in enumerate(mnames):
        rows = np.flatnonzero(mcode == code)
        if len(rows) == 0:
            continue
        lat = ends_all[rows] - starts_all[rows]
        threshold = _p99(lat)
        over = rows[lat > threshold]
        labels = tail_labels(ev, all_tids, starts_all[over], ends_all[over], long_ts, steal)
        if len(over):
            _, codes, names = _label_text(labels)
            index = [
                tail_names.index(x) if x in tail_names else tail_names.append(x) or len(tail_names) - 1 for x in names
            ]
            tail_code[over] = 1 + np.asarray(index)[codes]
        counts = {label: int(labels[:, k].sum()) for k, label in enumerate(TAIL_LABELS)}
        counts["none"] = int((~labels.any(axis=1)).sum())
        tail_info[name] = {"threshold_ns": threshold, "iterations": int(len(over)), "labels": counts}
    frame["tail"] = pd.Categorical.from_codes(tail_code, categories=[""] + tail_names)

    info = BreakdownFacts(
        critical_path=bool(critical),
        copy_measured=copy_measured,
        copies=copies,
        entry=entry_basis,
        holders=holders,
        path=paths,
        timelines=timelines,
        ns_per_call=ns_per_call,
        ns_per_byte=ns_per_byte,
        copy_basis=copy_basis,
        roles=list(side_comp),
        wake=wake,
        tail=tail_info,
        states=comp,
        side_states=side_comp,
        # None: no wake-up among the kept iterations (e.g. null-syscall), so no threshold
        long_wakeup_ns=None if np.isnan(long_threshold) else long_threshold,
    )
    return frame, info


def _wake_in_windows(on_ts: np.ndarray, delay: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Delays of the wake-ups that end (thread on CPU) inside one of the windows."""
    order = np.argsort(starts)
    s, e = starts[order], ends[order]
    j = np.searchsorted(s, on_ts, side="right") - 1
    inside = (j >= 0) & (on_ts <= e[np.maximum(j, 0)])
    return delay[inside]


def _row_major(states: np.ndarray, columns: Sequence[str]) -> np.ndarray:
    """The columns (STATE_NAMES) of a state matrix as one row-major float64 matrix, in the
    order given: one gather along the rows (np.take) instead of a stack of strided columns
    (1 M x 8: 0.02 s against 0.1-0.2 s)."""
    return np.take(states, [STATE_NAMES.index(c) for c in columns], axis=1)


@dataclass(frozen=True)
class MetricBreakdown:
    """Where one metric's time went (summary.json's breakdown[metric])."""

    components: dict[str, dict[str, Any]]
    closure_residual_pct: float | None
    critical_path: Any
    per_side: dict[str, dict[str, Any]]
    copy_source: str
    copy_bytes_mean: float
    copy_costs: dict[str, float]
    entry_source: str
    entry_calibration: dict[str, Any]
    steal_ns_mean: float
    preempted_by: list[dict[str, Any]]


@dataclass(frozen=True)
class Tail:
    """The slowest iterations of the primary metric and what they share (summary.json's tail)."""

    metric: str
    threshold_ns: float
    iterations: int
    long_wakeup_ns: float
    labels: dict[str, int]
    by_metric: dict[str, dict[str, Any]]


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
    out_dir: Path | str | None = None,
    copy_ns_per_byte: float | None = None,
) -> Breakdown:
    """The breakdown of every metric and the tail of the primary one (the workload's first
    metric if not given); writes out_dir/breakdown.parquet if given.

    machine: the one the trace was taken on (syscall numbers), x86_64 if not known.
    tasks, tracer_tids: trace.json's names of the tasks (the ones that preempted the workload)
    and the tracer's own threads.
    copy_ns_per_byte: the per-byte cost from a size sweep, if one was made; else the
    driver's calibration in workload.json (copy_costs).
    """
    frame, info = compute(iterations, events, workload, copy_ns_per_byte, machine or "x86_64")
    primary = primary or (workload.get("metrics") or [None])[0]
    if out_dir is None:
        return _summarize(frame, info, iterations, primary, tasks or {}, set(tracer_tids))
    # breakdown.parquet is written while its statistics are computed; the thread that writes
    # it is handed an Arrow table, and never touches the frame.
    table = pa.Table.from_pandas(frame, preserve_index=False)
    with written_alongside(write_parquet, table, f"{out_dir}/breakdown.parquet"):
        return _summarize(frame, info, iterations, primary, tasks or {}, set(tracer_tids))


def holders_table(
    holders: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n: int,
    tasks: dict[str, Any] | None,
    tracer: Collection[int],
    top: int = 5,
) -> list[dict[str, Any]]:
    """The tasks outside the workload that held the CPU while a thread on the critical path
    waited for it (the path's `preempted`): per task, ns per iteration on average, its share
    of that time, its name, and whether it is the tracer's own thread."""
    if not holders:
        return []
    tid = np.concatenate([h[0] for h in holders])
    state = np.concatenate([h[1] for h in holders])
    ns = np.concatenate([h[2] for h in holders]).astype(np.float64)
    rows = []
    for st in (PREEMPTED,):
        sel = (state == st) & (tid > 0)
        if not sel.any():
            continue
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


def _summarize(
    frame: pd.DataFrame,
    info: BreakdownFacts,
    iterations: pd.DataFrame,
    primary: str | None,
    tasks: dict[str, Any],
    tracer: set[int],
) -> Breakdown:
    """The per-metric breakdown and the tail from compute()'s frame and info."""
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
    mcode = frame["metric"].cat.codes.to_numpy()
    starts = iterations["t_start_ns"].to_numpy(np.int64)
    ends = iterations["t_end_ns"].to_numpy(np.int64)
    runs_all = frame["run"].to_numpy()
    # Each matrix is made once (n x 8: 64 MB for 1 M iterations), and selected per metric
    # only where there are several. Row-major, as the statistics below have always summed them.
    lat_all = frame["latency_ns"].to_numpy(np.float64)
    comp_all = _row_major(info.states, COMPONENTS)
    side_all = {role: _row_major(info.side_states[role], COMPONENTS) for role in info.roles}
    out = {}
    for code, name in enumerate(frame["metric"].cat.categories):
        sel = mcode == code
        if not sel.any():
            continue
        rows = slice(None) if sel.all() else sel
        lat = lat_all[rows]
        comp = comp_all[rows]
        runs = runs_all[rows]
        measured = comp[:, [COMPONENTS.index(c) for c in MEASURED]].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            closure = np.where(lat > 0, (lat - measured) / lat * 100, np.nan)
        per_side = {}
        for role in info.roles:
            vals = side_all[role][rows]
            ok = ~np.isnan(vals).any(axis=1)
            if not ok.any():
                continue
            on_ts, delay, rq = info.wake[role]
            delays = _wake_in_windows(on_ts, np.stack([delay, rq], axis=1), starts[rows], ends[rows])
            delays = delays.astype(np.float64).reshape(-1, 2)
            per_side[role] = {
                "components": _light_stats(vals if ok.all() else vals[ok], list(COMPONENTS)),
                "wakeups": int(len(delays)),
                # from sched_waking (or sched_wakeup) to running; and from sched_wakeup to running,
                # what perf sched timehist and runqlat call the scheduling delay
                "wakeup_delay": _light_stats(delays[:, :1], ["delay"]).get("delay"),
                "runqueue_delay": _light_stats(delays[:, 1:], ["delay"]).get("delay"),
            }
        components = _stat_entries(comp, list(COMPONENTS), runs)
        # Readers of results from before the wake-up was split into wakeup and runqueue find
        # their sum under its old name, marked derived (the table and the report skip it).
        waiting = comp[:, COMPONENTS.index("wakeup")] + comp[:, COMPONENTS.index("runqueue")]
        components["sched_delay"] = dict(
            _stat_entries(waiting[:, None], ["sched_delay"], runs)["sched_delay"], derived="wakeup + runqueue"
        )
        out[str(name)] = MetricBreakdown(
            components=components,
            closure_residual_pct=float(np.nanmean(closure)) if np.isfinite(closure).any() else None,
            critical_path=info.critical_path,
            per_side=per_side,
            copy_source=copy_source,
            copy_bytes_mean=float(frame["copy_bytes"].to_numpy()[rows].mean()),
            copy_costs={"ns_per_call": info.ns_per_call, "ns_per_byte": info.ns_per_byte},
            entry_source=info.entry["source"],
            entry_calibration={k: v for k, v in info.entry.items() if k != "source"},
            steal_ns_mean=float(frame["steal_ns"].to_numpy()[rows].mean()),
            preempted_by=holders_table(info.holders, len(lat), tasks, tracer),
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
