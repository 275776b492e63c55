"""The breakdown's result types: its components, what a breakdown found besides its per-iteration
columns (BreakdownFacts, Windows), and what summary.json holds of it (Breakdown: a MetricBreakdown
per metric and the Tail)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from analysis.model.timeline import Timeline
from analysis.store.itercolumns import KeptRows
from analysis.store.jsonfiles import Stats

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
class MetricBreakdown:
    """Where one metric's time went (summary.json's breakdown[metric])."""

    components: dict[str, Stats]
    # The rest may be absent from a file (the schema's optional fields: a merged directory's
    # breakdown, model/crosshost.py, has components, critical_path and closure only).
    closure_residual_pct: float | None = None
    critical_path: bool | None = None  # the components follow the critical path (else the measuring thread)
    per_side: dict[str, SideView] = field(default_factory=dict)
    copy_source: str | None = None
    copy_bytes_mean: float | None = None
    copy_costs: dict[str, float] = field(default_factory=dict)
    entry_source: str | None = None
    entry_calibration: dict[str, Any] = field(default_factory=dict)
    steal_ns_mean: float | None = None
    preempted_by: list[Holder] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MetricBreakdown:
        """breakdown[metric] of a summary.json (the schema's BREAKDOWN); keys it does not know are
        left out, a field absent or null takes its default."""
        kw = {f.name: d[f.name] for f in fields(cls) if d.get(f.name) is not None}
        kw["components"] = {c: Stats.from_json(e) for c, e in d["components"].items()}
        kw["per_side"] = {role: SideView.from_json(v) for role, v in (d.get("per_side") or {}).items()}
        kw["preempted_by"] = [Holder.from_json(h) for h in d.get("preempted_by") or []]
        return cls(**kw)


@dataclass(frozen=True, kw_only=True)
class Holder:
    """A task outside the workload that held the CPU while the critical path waited for it
    (holders_table; summary.json's breakdown[metric].preempted_by): its share of that time."""

    tid: int
    comm: str | None = None
    pid: int | None = None
    tracer: bool | None = None  # the tracer's own thread: probe effect
    ns_per_iteration: float | None = None
    share: float

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Holder:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass(frozen=True)
class SideView:
    """One side's own view of a metric's iterations (summary.json's breakdown[metric].per_side[role]):
    its components' statistics, and its wake-ups with their delays."""

    components: dict[str, SideStats] = field(default_factory=dict)
    wakeups: int | None = None
    wakeup_delay: dict[str, Any] | None = None
    runqueue_delay: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SideView:
        kw = {f.name: d[f.name] for f in fields(cls) if d.get(f.name) is not None}
        kw["components"] = {c: SideStats.from_json(e) for c, e in (d.get("components") or {}).items()}
        return cls(**kw)


@dataclass(frozen=True)
class SideStats:
    """One component's statistics in one side's own view (per_side[role].components[name]), in
    the file's order: every one the breakdown writes has the four."""

    n: int | None = None
    mean: float | None = None
    median: float | None = None
    p99: float | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SideStats:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


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
