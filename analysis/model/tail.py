"""What labels a slow iteration (above its metric's p99): the tail's labels (interrupts,
softirqs, preemptions, migrations, page faults, long wake-ups, steal), the times of the events
behind them, and the hypervisor's steal inside a window."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from analysis.model.timeline import Events

if TYPE_CHECKING:
    import numpy.typing as npt


def _count_in(ts_sorted: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    return np.searchsorted(ts_sorted, ends, side="right") - np.searchsorted(ts_sorted, starts, side="left")


def p99(x: np.ndarray) -> float:
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


def label_text(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Categorical of the labels joined by "," ("" outside the tail, "none" if nothing happened)."""
    mask = labels @ (1 << np.arange(len(TAIL_LABELS)))
    uniq, codes = np.unique(mask, return_inverse=True)
    names = [",".join(lb for k, lb in enumerate(TAIL_LABELS) if m >> k & 1) or "none" for m in uniq]
    return uniq, codes, names
