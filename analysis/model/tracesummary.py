"""What the tracer recorded and lost in one run (summary.json's "trace"), from trace.json and
the decoded events, and the warnings that make a breakdown partial."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from analysis.model import lost
from analysis.store import records
from analysis.store.jsonfiles import LeftTrace, Task, tasks_from_json


@dataclass(frozen=True)
class TraceDrops:
    """What the tracer lost (summary.json's trace.drops): events (the ring buffer full), per CPU;
    probe runs the kernel skipped; context switches it missed (of the workload's tasks, of others)."""

    total: int | None = None  # every field may be absent from a file (the schema's TRACE_SUMMARY)
    per_cpu: list[int] | None = None
    recursion_misses: int | None = None
    switches_missed: int | None = None
    switches_missed_other: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TraceDrops:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass(frozen=True)
class TraceSummary:
    # Every field may be absent from a file (the schema's TRACE_SUMMARY): read as empty or None.
    drops: TraceDrops = field(default_factory=TraceDrops)
    events: dict[str, int] = field(default_factory=dict)
    records: int | None = None
    attach: dict[str, Any] = field(default_factory=dict)
    pids: list[int] = field(default_factory=list)
    tids: list[int] | None = None  # absent: the threads are found in the events
    features: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, Any] = field(default_factory=dict)  # names of the tasks the tracer saw (task_names)
    tracer: dict[str, Any] = field(default_factory=dict)  # its own threads
    steal: dict[str, Any] = field(default_factory=dict)  # hypervisor steal per CPU
    # --only-uid: the tasks that took another user's rights and were no longer traced
    left_trace: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    floor: bool | None = None
    ringbuf_bytes: int | None = None
    in_iterations: int | None = None
    lost_spans: int | None = None
    iterations_left_out: int | None = None
    partial: bool | None = None

    def task_names(self) -> dict[int, Task]:
        """tasks by tid, typed."""
        return tasks_from_json(self.tasks)


@dataclass(frozen=True)
class TraceResult:
    """The trace's summary, the mask of the iterations left out of the breakdown (their
    events may be incomplete), and the warnings: what was lost goes before the run's own
    warnings, the decoder's after them."""

    summary: TraceSummary
    left_out: np.ndarray
    warnings_first: list[str]
    warnings_after: list[str]


@dataclass
class Tally:
    """What the summary counts of the events, added up piece by piece."""

    types: np.ndarray  # records of each type (records.TYPES order)
    records: int = 0
    in_iterations: int = 0
    first_ns: int | None = None  # the first and the last record's time: the span the trace covers
    last_ns: int | None = None

    @classmethod
    def none(cls) -> Tally:
        return cls(np.zeros(len(records.TYPES), np.int64))

    def add(self, events: pd.DataFrame) -> None:
        t = events["type"]
        codes = t.cat.codes.to_numpy() if isinstance(t.dtype, pd.CategoricalDtype) else None
        if codes is None or list(t.cat.categories) != list(records.TYPES):
            counts = t.astype(str).value_counts()
            self.types += np.array([int(counts.get(name, 0)) for name in records.TYPES], np.int64)
        else:
            self.types += np.bincount(codes[codes >= 0], minlength=len(records.TYPES))[: len(records.TYPES)]
        self.records += len(events)
        if len(events):
            ts = events["ts"].to_numpy()
            lo, hi = int(ts.min()), int(ts.max())
            self.first_ns = lo if self.first_ns is None else min(self.first_ns, lo)
            self.last_ns = hi if self.last_ns is None else max(self.last_ns, hi)
        self.in_iterations += int((events["iteration"].to_numpy() >= 0).sum())

    @classmethod
    def of(cls, events: pd.DataFrame) -> Tally:
        tally = cls.none()
        tally.add(events)
        return tally


def summarize(
    trace_json: dict[str, Any],
    tally: Tally,
    header_drops: int,
    iterations: pd.DataFrame,
    load_warnings: list[str],
) -> TraceResult:
    tj = trace_json
    drops = tj.get("drops", {})
    total = int(drops.get("total", header_drops))
    misses = int(drops.get("recursion_misses", 0))
    switches_missed = int(drops.get("switches_missed", 0))
    left_out = lost.incomplete(iterations, {**drops, "total": total})
    warnings = list(load_warnings)
    summary = TraceSummary(
        drops=TraceDrops(
            total=total,
            per_cpu=list(drops.get("per_cpu", [])),
            recursion_misses=misses,
            switches_missed=switches_missed,
            # between two tasks not traced: none of the workload's records in doubt
            switches_missed_other=int(drops.get("switches_missed_other", 0)),
        ),
        events={t: int(n) for t, n in zip(records.TYPES, tally.types)},
        records=int(tally.records),
        attach=tj.get("attach", {}),
        pids=tj.get("pids", []),
        tids=tj.get("tids", []),
        features=tj.get("features", {}),
        tasks=tj.get("tasks", {}),
        tracer=tj.get("tracer", {}),
        steal=tj.get("steal", {}),
        left_trace=tj.get("left_trace") or {},
        status=tj.get("status", "unknown"),
        floor=bool(tj.get("floor", False)),
        ringbuf_bytes=tj.get("ringbuf_bytes"),
        in_iterations=int(tally.in_iterations),
        lost_spans=len(drops.get("lost_spans", [])),
        iterations_left_out=int(left_out.sum()),
        partial=bool(total or misses or switches_missed or warnings),
    )
    if tj.get("records") is not None and int(tj["records"]) != tally.records:
        warnings.append(f"the tracer counted {tj['records']} records but events.bin holds {tally.records}")
    n, out = len(iterations), int(left_out.sum())
    first = []
    if total:
        first.append(
            f"tracing lost {total} events (ring buffer full); "
            + (
                f"{out} of {n} iterations overlap them and are left out of the breakdown"
                if n
                else "the whole trace's per-thread times miss them"
            )
            + ": rerun with a larger --ringbuf-mb"
        )
    if misses:
        first.append(
            f"tracing: the kernel skipped {misses} probe runs (a probe was already running on that "
            f"CPU), so events may be missing at unknown times; "
            + (f"all {n} iterations are left out of the breakdown" if n else "the whole trace's figures may miss them")
        )
    if switches_missed and (out or not n):
        # Said only where it costs something: an iteration left out, or a whole trace's
        # per-thread times (no iterations to leave out). Otherwise summary.json's
        # trace.drops keeps the count, and the run's figures are whole.
        first.append(
            f"tracing: the sched_switch probe missed {switches_missed} context switches, so a CPU's "
            f"events were incomplete for a while; "
            + (
                f"{out} of {n} iterations overlap that and are left out of the breakdown"
                if n
                else "the whole trace's per-thread times over those stretches are incomplete"
            )
        )
    # --only-uid: a task gone from the trace (a setuid program) is said, as one whose events stop
    left = LeftTrace.from_json(tj.get("left_trace") or {}).line()
    if left:
        first.append(f"tracing: {left}")
    stolen = steal_warning(tj.get("steal") or {}, tally)
    return TraceResult(summary, left_out, first + ([stolen] if stolen else []), [f"tracing: {w}" for w in warnings])


STEAL_WARN_SHARE = 0.05


def steal_warning(steal: dict[str, Any], tally: Tally) -> str | None:
    """A warning where the hypervisor took a CPU for more than STEAL_WARN_SHARE of the span the
    trace covers (trace.json's steal per CPU over the run), else None."""
    per_cpu = steal.get("per_cpu_ns") or []
    if tally.first_ns is None or tally.last_ns is None or tally.last_ns <= tally.first_ns:
        return None
    span = tally.last_ns - tally.first_ns
    over = [(c, int(ns)) for c, ns in enumerate(per_cpu) if ns is not None and int(ns) > STEAL_WARN_SHARE * span]
    if not over:
        return None
    each = ", ".join(f"CPU {c} {ns / 1e9:.3g} s ({100 * ns / span:.0f} %)" for c, ns in over)
    return (
        f"steal: the hypervisor took CPUs from the machine for over {100 * STEAL_WARN_SHARE:.0f} % of the "
        f"{span / 1e9:.3g} s traced ({each}): times measured there include it (the `steal` component "
        f"is the part on each iteration's path)"
    )
