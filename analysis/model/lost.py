"""Which iterations records lost by the kernel (a full ring buffer, a missed context
switch) may touch: they are left out of the breakdown and of the Perfetto slices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from analysis.store.itercolumns import BLOCK, IterationColumns

if TYPE_CHECKING:
    import pandas as pd

    from analysis.store.jsonfiles import Drops


def overlaps_lost(
    iterations: pd.DataFrame | IterationColumns, spans: Sequence[Sequence[int]], unrecorded: int
) -> np.ndarray:
    """Mask of the iterations whose [t_start_ns, t_end_ns] overlaps a lost span
    [start, end, ...]; every iteration if some spans went unrecorded."""
    n = len(iterations)
    if unrecorded:
        return np.ones(n, bool)
    if not len(spans):
        return np.zeros(n, bool)
    sp = np.asarray([s[:2] for s in spans], np.int64).reshape(-1, 2)
    sp = sp[np.argsort(sp[:, 0], kind="stable")]
    reach = np.maximum.accumulate(sp[:, 1])  # the latest end among the spans started so far

    def hit(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        j = np.searchsorted(sp[:, 0], ends, side="right") - 1
        return (j >= 0) & (reach[np.maximum(j, 0)] >= starts)

    if isinstance(iterations, IterationColumns):  # a block at a time
        return np.concatenate(
            [np.zeros(0, bool)]
            + [
                hit(iterations.column("t_start_ns", a, a + BLOCK), iterations.column("t_end_ns", a, a + BLOCK))
                for a in range(0, n, BLOCK)
            ]
        )
    return hit(iterations["t_start_ns"].to_numpy(np.int64), iterations["t_end_ns"].to_numpy(np.int64))


def incomplete(iterations: pd.DataFrame | IterationColumns, drops: Drops) -> np.ndarray:
    """Mask of the iterations whose events may be incomplete, from trace.json's "drops":
    those overlapping a lost span (records lost, or a context switch the probe missed)."""
    # Records lost at times nobody knows leave every iteration in doubt: spans that did
    # not fit, a tracer that gave no spans, and probe runs the kernel skipped because
    # a probe was already running on that CPU (each may have been a record).
    unknown = bool(
        drops.spans_unrecorded
        or drops.gaps_unrecorded
        or (drops.total and not drops.spans_given())
        or drops.recursion_misses
    )
    return overlaps_lost(iterations, drops.lost_spans, unknown)
