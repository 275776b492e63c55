"""Who held each CPU (Occupancy, from the recorded switches) and the time of each window in each
state on the causal critical path of the workload's threads (window_components: timeline.c's
ipt_causal through native)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from analysis.model import native
from analysis.model.timeline import CLOCK_EDGES, STATE_NAMES, Events, Timeline, deliveries, time_in

if TYPE_CHECKING:
    import numpy.typing as npt


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
