"""What the tracer recorded and lost in one run (summary.json's "trace"), from trace.json and
the decoded events, and the warnings that make a breakdown partial."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from analysis.model import lost
from analysis.store import records

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


@dataclass(frozen=True)
class TraceSummary:
    drops: dict[str, Any]
    events: dict[str, int]
    records: int
    attach: dict[str, Any]
    pids: list[int]
    tids: list[int]
    features: dict[str, Any]
    tasks: dict[str, Any]  # names of the tasks the tracer saw
    tracer: dict[str, Any]  # its own threads
    steal: dict[str, Any]  # hypervisor steal per CPU
    status: str
    floor: bool
    ringbuf_bytes: int | None
    in_iterations: int
    lost_spans: int
    iterations_left_out: int
    partial: bool


@dataclass(frozen=True)
class TraceResult:
    """The trace's summary, the mask of the iterations left out of the breakdown (their
    events may be incomplete), and the warnings: what was lost goes before the run's own
    warnings, the decoder's after them."""

    summary: TraceSummary
    left_out: np.ndarray
    warnings_first: list[str]
    warnings_after: list[str]


def summarize(
    trace_json: dict[str, Any],
    events: pd.DataFrame,
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
    counts = events["type"].value_counts()
    warnings = list(load_warnings)
    summary = TraceSummary(
        drops={
            "total": total,
            "per_cpu": list(drops.get("per_cpu", [])),
            "recursion_misses": misses,
            "switches_missed": switches_missed,
            # between two tasks not traced: none of the workload's records in doubt
            "switches_missed_other": int(drops.get("switches_missed_other", 0)),
        },
        events={t: int(counts.get(t, 0)) for t in records.TYPES},
        records=int(len(events)),
        attach=tj.get("attach", {}),
        pids=tj.get("pids", []),
        tids=tj.get("tids", []),
        features=tj.get("features", {}),
        tasks=tj.get("tasks", {}),
        tracer=tj.get("tracer", {}),
        steal=tj.get("steal", {}),
        status=tj.get("status", "unknown"),
        floor=bool(tj.get("floor", False)),
        ringbuf_bytes=tj.get("ringbuf_bytes"),
        in_iterations=int((events["iteration"] >= 0).sum()),
        lost_spans=len(drops.get("lost_spans", [])),
        iterations_left_out=int(left_out.sum()),
        partial=bool(total or misses or switches_missed or warnings),
    )
    if tj.get("records") is not None and int(tj["records"]) != len(events):
        warnings.append(f"the tracer counted {tj['records']} records but events.bin holds {len(events)}")
    n, out = len(iterations), int(left_out.sum())
    first = []
    if total:
        first.append(
            f"tracing lost {total} events (ring buffer full); {out} of {n} iterations overlap them and are "
            f"left out of the breakdown: rerun with a larger --ringbuf-mb"
        )
    if misses:
        first.append(
            f"tracing: the kernel skipped {misses} probe runs (a probe was already running on that "
            f"CPU), so events may be missing at unknown times; all {n} iterations "
            f"are left out of the breakdown"
        )
    if switches_missed:
        first.append(
            f"tracing: the sched_switch probe missed {switches_missed} context switches, so a CPU's "
            f"events were incomplete for a while; {out} of {n} "
            f"iterations overlap that and are left out of the breakdown"
        )
    return TraceResult(summary, left_out, first, [f"tracing: {w}" for w in warnings])
