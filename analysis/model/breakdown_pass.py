"""The breakdown's pass over the events (BreakdownPass): the components of each iteration's
window from its threads' step functions and the critical path, in time-ordered pieces (all the
events at once is one piece: compute()); what needs the whole run is gathered compactly and
settled by finish()."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.model import native, stats
from analysis.model.breakdown_types import COMPONENTS, BreakdownFacts, Windows
from analysis.model.copycost import CopyBytes, copy_costs
from analysis.model.occupancy import Occupancy, window_components
from analysis.model.tail import TAIL_LABELS, label_text, labels_in, p99, steal_in, tail_event_times
from analysis.model.timeline import (
    CLOCK_EDGES,
    STATE_NAMES,
    SYSCALL_EDGES,
    Events,
    StepRules,
    Timeline,
    thread_timeline,
    wakeup_delays,
)
from analysis.model.tracefacts import TraceFacts, other_threads, sides_of
from analysis.model.wakeups import WakeUps
from analysis.store import clib, spool
from analysis.store.itercolumns import BLOCK, IterationColumns, KeptRows, WindowCursor
from analysis.store.jsonfiles import Workload
from analysis.store.spool import SpoolMaker


def _metric_codes(iterations: pd.DataFrame, workload: Workload) -> tuple[np.ndarray, list[str]]:
    """(codes per iteration, names): the metric column as integer codes."""
    m = iterations["metric"]
    if isinstance(m.dtype, pd.CategoricalDtype):
        return m.cat.codes.to_numpy(np.int64), [str(c) for c in m.cat.categories]
    if pd.api.types.is_integer_dtype(m):
        return m.to_numpy(np.int64), list(workload.metrics)
    codes, names = pd.factorize(m)
    return codes.astype(np.int64), [str(c) for c in names]


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
        workload: Workload,
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
        self.copies = workload.copies is not False
        copy_call = -1.0 if facts.copy_measured or not self.copies else self.ns_per_call
        self.rules = StepRules(arch, entry_in, entry_out, copy_call, self.ns_per_byte)
        self.arch = arch
        # a traced program's round trips run from a sys_enter to a sys_exit, not between clock reads
        rtt = workload.params.get("iterations_from") == "rtt"
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
        self.roles: list[str] = []
        for tid in sorted(measuring):
            sides = sides_of(workload, tid)
            self.everyone[int(tid)] = (sides, sides + other_threads(facts, sides))
            self.roles += [r for r in _role_names(sides) if r not in self.roles]
        self.all_tids = np.array(sorted({t for _, ev in self.everyone.values() for _, t in ev}), np.int64)
        self.critical = any(len(s) > 1 for s, _ in self.everyone.values())
        self.tail = self._tail_windows()
        self.holders: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.wake: dict[str, WakeUps] = {}  # role -> its wake-ups
        self.delays = stats.ValueCounts()  # every wake-up's delay: the long wake-ups' threshold
        self.long: list[
            tuple[np.ndarray, np.ndarray]
        ] = []  # (time on CPU, delay) of the wake-ups inside a window of the tail
        self.label_times: list[list[np.ndarray]] = [
            [] for _ in range(len(TAIL_LABELS) - 2)
        ]  # the tail's event times in its windows
        self.steal: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (start, end, cpu) of the steal records
        self.cpus: set[int] = set()
        self.paths: list[Any] = []
        self.timelines: dict[int, Timeline] = {}

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
            threshold = p99(values)
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
        waked: dict[
            str, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
        ] = {}  # role -> {tid: its wake-ups in this piece's own span}: a thread's once a piece
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
                self.wake[role] = WakeUps(self.spools)
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
        cols: dict[str, np.ndarray] = {name: comp[:, j] for j, name in enumerate(STATE_NAMES)}
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
        wake_stats: dict[str, dict[str, dict[str, Any]]] = {}
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
                _, codes, names = label_text(labels)
                index = []
                for x in names:
                    if x not in tail_names:
                        tail_names.append(x)
                    index.append(tail_names.index(x))
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
    workload: Workload,
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
    columns = IterationColumns.from_frame(iterations, metrics=workload.metrics)
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
