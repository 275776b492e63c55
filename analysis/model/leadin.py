"""The part of events.parquet that one window's breakdown and account depend on, so that
explain reads a few row groups of a long run instead of all of them. This module reads no
file: lead_in asks its caller for row groups (store.events.answer reads them) and computes
from the tables handed back.

A thread's step function (timeline.py) at a time depends on a few of its events around it:
each step on the event that starts it and the next one; a wake-up on the switch before it
(which of its sleeps it ends, whether it marks the next switch out as a wait in the run
queue); the copy routines on their depth since the trace began. Who held a CPU on the
switches there before and after. So the events of the window [s, e] are enough, with:
- before s, for each thread of the workload: a sys_enter and three switches (from the
  second on, its steps are those of the whole trace; the third lets the account see where
  its last time off CPU began), its first interrupt of each kind an entry and its copy
  routines' depth never below zero (the read part does not begin inside one);
- before s, for each CPU with a switch in the window: a switch there (who held it);
- after e, for each thread: a syscall event and a switch, and of each interrupt kind it has
  in the window one more event (its last steps there end on the next one); for each CPU
  with a switch in the window one more switch there;
- the steal records whose span (the time since the CPU's previous one, placed before the
  record) meets the window, found from their row groups' ts and steal_ns.
The read part grows by row groups, back and forth, until these hold; a requirement that
no unread row group could meet (the thread has no records there, the CPU no switch) is
dropped: the whole trace would not meet it either. What the breakdown reads of the whole
trace (the workload's other threads, whether copy routines were probed, the entry
calibration, the CPUs each thread ran on) comes from breakdown.TraceFacts: the type, func, pid,
tid, next_tid and cpu columns of every row group and the row groups of the calibration."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analysis.model import breakdown as bd
from analysis.model import decoded, timeline
from analysis.store import events as events_mod
from analysis.store import records
from analysis.store.jsonfiles import Workload

BEFORE_SWITCHES = 3
PAIRS = (("irq_entry", "irq_exit"), ("softirq_entry", "softirq_exit"), ("vector_entry", "vector_exit"))
NARROW = ["type", decoded.stored("func"), "pid", "tid", "next_tid", "cpu"]


@dataclass
class Part:
    """The events read for a window, what was read of the whole trace, and how much."""

    events: pd.DataFrame
    whole: bd.TraceFacts
    groups_read: int  # row groups asked for with all their columns
    groups: int  # row groups in the file


def calibration_spans(workload: Workload) -> list[tuple[int, int]]:
    """The time spans entry_costs reads: the calibration calls and the calls back to back."""
    cal = workload.entry_calibration or {}
    calls = np.asarray(cal.get("calls") or [], np.int64).reshape(-1, 2)
    spans = [(int(calls[:, 0].min()), int(calls[:, 1].max()))] if len(calls) else []
    tight = cal.get("tight") or []
    if len(tight) >= 2:
        spans.append((int(tight[0]), int(tight[1])))
    return spans


def lead_in(
    row_groups: events_mod.RowGroups, s: int, e: int, workload: Workload, measuring_tid: int
) -> Generator[events_mod.Read, Any, Part]:
    """The events window [s, e] of the measuring thread measuring_tid depends on (see above),
    asked for by row group: this generator reads nothing, it yields what it needs of
    events.parquet (row_groups: its footer, as store/ read it), a ColumnsRead (answered with an
    Arrow table) or an EventsRead (answered with the checked events DataFrame), and returns
    the Part (store.events.answer drives it)."""
    asked: set[int] = set()  # the row groups asked for with all their columns

    def part(groups: Sequence[int]) -> Generator[events_mod.Read, Any, pd.DataFrame]:
        asked.update(groups)
        frame: pd.DataFrame = yield events_mod.EventsRead(tuple(groups))
        return frame

    narrow = (yield events_mod.ColumnsRead(tuple(NARROW))).to_pandas()
    group = np.repeat(np.arange(row_groups.count), row_groups.rows)
    kinds = {
        "tid": (np.ones(len(narrow), bool), narrow["tid"].to_numpy()),
        "cpu": (decoded.of_type(narrow, "switch"), narrow["cpu"].to_numpy()),
    }
    steal = yield from _steal_groups(row_groups, group[decoded.of_type(narrow, "steal")], s, e)
    calibration = yield from part(row_groups.meeting(calibration_spans(workload)))
    entry = bd.entry_costs(timeline.Events(calibration), workload)
    whole = bd.whole_of(narrow, entry, workload)
    sides = bd.sides_of(workload, measuring_tid)
    tids = [t for _, t in sides + bd.other_threads(whole, sides)]
    window = row_groups.meeting([(s, e)]) or [_group_at(row_groups, s)]
    lo, hi = min(window + steal), max(window + steal)
    while True:
        ev = yield from part(range(lo, hi + 1))
        back, ahead = _missing(ev, s, e, tids)
        back = [m for m in back if _in_groups(kinds, group < lo, m)]
        ahead = [m for m in ahead if _in_groups(kinds, group > hi, m)]
        if not back and not ahead:
            break
        # Doubling: a few reads of the file, each at most twice what is needed.
        step = hi - lo + 1
        lo = max(0, lo - step) if back else lo
        hi = min(row_groups.count - 1, hi + step) if ahead else hi
    return Part(ev, whole, len(asked), row_groups.count)


def _steal_groups(
    row_groups: events_mod.RowGroups, groups: np.ndarray, s: int, e: int
) -> Generator[events_mod.Read, Any, list[int]]:
    """The row groups of the steal records whose span meets [s, e] (steal_spans: the steal_ns
    before the record); groups: the row group of each steal record. Asks for their ts and
    steal_ns columns."""
    wanted: list[int] = np.unique(groups).tolist()
    if not wanted:
        return []
    read = yield events_mod.ColumnsRead(("type", "ts", decoded.stored("steal_ns")), tuple(wanted))
    t = read.to_pandas()
    at = np.repeat(wanted, [row_groups.rows[g] for g in wanted])
    st = decoded.of_type(t, "steal")
    end = t["ts"].to_numpy(np.int64)
    meets = st & (end >= s) & (end - np.maximum(decoded.column(t, "steal_ns", np.int64), 0) <= e)
    return sorted(set(at[meets].tolist()))


def _group_at(row_groups: events_mod.RowGroups, t: int) -> int:
    """The row group holding time t or the last one before it (an empty window)."""
    before = [g for g, lo in enumerate(row_groups.ts_min) if lo is not None and lo <= t]
    return max(before) if before else 0


def _in_groups(kinds: dict[str, tuple[np.ndarray, np.ndarray]], rows: np.ndarray, missing: tuple[str, int]) -> bool:
    """Could the unread row groups (rows of the narrow columns) meet a missing requirement:
    ("tid", t) records of thread t, ("cpu", c) switches on CPU c. kinds: per kind, which records count and their value (tid, CPU)."""
    which, value = kinds[missing[0]]
    return bool((which[rows] & (value[rows] == missing[1])).any())


def _missing(
    events: pd.DataFrame, s: int, e: int, tids: Sequence[int]
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The requirements (see the module's text) the events read do not meet: those before
    s, those after e; each ("tid", t) or ("cpu", c)."""
    ts = events["ts"].to_numpy(np.int64)
    tid, nxt = events["tid"].to_numpy(), events["next_tid"].to_numpy()
    cpu, func = events["cpu"].to_numpy(), decoded.column(events, "func")
    before, after, inside = ts < s, ts > e, (ts >= s) & (ts <= e)

    def of(*names: str) -> np.ndarray:
        return decoded.of_type(events, *names)

    # the type masks once: the loop below is per thread
    switch, enter, sys_ev = of("switch"), of("sys_enter"), of("sys_enter", "sys_exit")
    func_entry, func_exit = of("func_entry"), of("func_exit")
    pairs = [(of(entry), of(entry, exit_)) for entry, exit_ in PAIRS]  # (its entries, the pair's events)
    back, ahead = [], []
    for t in tids:
        own = tid == t
        mine = own | (switch & (nxt == t))
        ok = (own & before & enter).any() and (mine & switch & before).sum() >= BEFORE_SWITCHES
        ok = ok and _copy_depth_ok(func_entry[own], func_exit[own], func[own])
        for is_entry, either in pairs:
            k = np.flatnonzero(own & either)
            ok = ok and (len(k) == 0 or bool(is_entry[k[0]]))
        if not ok:
            back.append(("tid", int(t)))
        ok = (own & after & sys_ev).any() and (mine & switch & after).any()
        for _, either in pairs:
            kind = own & either
            ok = ok and (not (kind & inside).any() or (kind & after).any())
        if not ok:
            ahead.append(("tid", int(t)))
    for c in np.unique(cpu[switch & inside]):
        on = switch & (cpu == c)
        if not (on & before).any():
            back.append(("cpu", int(c)))
        if not (on & after).any():
            ahead.append(("cpu", int(c)))
    return back, ahead


def _copy_depth_ok(entry: np.ndarray, leave: np.ndarray, func: np.ndarray) -> bool:
    """The copy routines' depth (timeline._overlay) never below zero over a thread's events
    (entry, leave: which of them are func_entry, func_exit)."""
    m = (entry | leave) & np.isin(func, records.COPY_FUNC_IDS)
    return not (np.cumsum(np.where(entry[m], 1, -1)) < 0).any()
