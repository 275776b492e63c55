"""What a breakdown found besides its per-iteration columns (BreakdownFacts, Windows), and its
components (store.schema.COMPONENTS, the one list of them). What summary.json holds of it
(Breakdown: a MetricBreakdown per metric and the Tail) is store/summaryfile.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis.model.timeline import Timeline
from analysis.store.itercolumns import KeptRows
from analysis.store.schema import COMPONENTS

# the components measured, the residual being what they leave of the latency
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
