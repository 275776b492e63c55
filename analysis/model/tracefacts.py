"""What the breakdown needs of the whole trace where it reads a part of it (TraceFacts: a piece
of a long run, the row groups around explain's window), and the threads of a window: the
measuring thread and its peers (sides_of), the workload's other threads (other_threads)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.model import decoded
from analysis.model.entrycal import entry_costs
from analysis.model.timeline import Events
from analysis.store import records
from analysis.store.jsonfiles import Workload


def sides_of(workload: Workload, measuring_tid: int) -> list[tuple[str, int]]:
    """[(role, tid)] with the measuring thread first, then the peers in workload.json order."""
    peers = [(t.role, t.tid) for t in workload.threads if t.tid and t.tid != measuring_tid and t.role != "measuring"]
    return [("measuring", int(measuring_tid))] + peers


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
    def of(cls, ev: Events, workload: Workload) -> TraceFacts:
        fe = ev.of("func_entry")
        return cls(
            entry=entry_costs(ev, workload),
            copy_measured=bool(np.isin(ev.func[fe], records.COPY_FUNC_IDS).any()),
            seen_tids=seen_tids(ev.pid, ev.tid, workload),
        )


def whole_of(events: pd.DataFrame, entry: tuple[int, int, dict[str, Any]], workload: Workload) -> TraceFacts:
    """TraceFacts from the type, func (decoded.stored), pid, tid, next_tid and cpu columns of every event."""
    fe = decoded.of_type(events, "func_entry")
    copy = bool(np.isin(decoded.column(events, "func")[fe], records.COPY_FUNC_IDS).any())
    sw = decoded.of_type(events, "switch")
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


def seen_tids(pid: np.ndarray, tid: np.ndarray, workload: Workload) -> np.ndarray:
    """The distinct tids (> 0) of the records of the workload's processes."""
    pids = {t.pid for t in workload.threads if t.pid}
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
