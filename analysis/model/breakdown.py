"""Where each iteration's latency went, measured from the kernel events of its threads.

Components (ns per iteration): user, entry, syscall, copy, irq, wakeup, runqueue, blocked,
preempted, residual. Each one is the time some thread spent in a state that its events
prove; none is latency minus the others. The method:

1. Per thread, its state step function from its events (model/timeline.py, timeline.c).
2. The critical path of a ping-pong: while the measuring thread A is on CPU or
   runnable, its own state; while A is blocked, the state of another thread that
   works on the message: the peers of workload.json first, then any other thread
   of the workload's processes seen in the trace (ZeroMQ's I/O threads), one on
   CPU (its user/syscall/irq time) before one woken and waiting (wakeup, runqueue)
   before one preempted (preempted). `blocked` is left only where all of them
   are blocked, i.e. nobody works on the message. The per-side view integrates
   each side's own states over the whole window.
3. The edges of a window come from the workload's own clock reads, which happen
   in user space: if no side is in user space at t_start (just before t_end) by
   the kernel's account, the events and the clock disagree there and the
   critical-path step holding that edge counts as residual.
4. A window's time in each state: one pass over the windows and the steps inside
   them. The passes over all events (1, the union of 2, 4) are in analysis/model/timeline.c,
   called through ctypes: as whole-array numpy operations they cost seconds of
   temporaries at 10 M events.

closure_residual_pct is the mean over iterations of (latency - the measured
components) / latency * 100, i.e. the share of the latency in no known state.

Copy: when the copy routines are probed, copy time is measured like the other
states (it is carved out of syscall time because it nests inside it). Otherwise it
is estimated from the bytes the data-moving syscalls of the window returned
(read/write/send/recv..., measured from sys_exit) as calls x ns/call +
bytes x ns/byte (copy_costs: the driver's timing of this CPU's copy instruction), capped by and taken out of the syscall time, and marked
"estimated" in copy_source.

The modules of the breakdown, by concern: breakdown_types (the components and the result
types), copycost (the copy estimate), entrycal (the entry path's cost), occupancy (who held each
CPU; the windows' time on the critical path), tail (the slow iterations' labels, steal),
tracefacts (what a part of a trace needs of the whole; the sides), wakeups (the wake-ups kept
until the end), breakdown_pass (the pass over the events), breakdown_stats (the statistics).
This module is the one the rest of ipctrace imports: their names, and summarize.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from analysis.model.breakdown_pass import BreakdownPass, Late, compute, frame_of
from analysis.model.breakdown_stats import holders_table, summarize_columns
from analysis.model.breakdown_types import COMPONENTS, MEASURED, BreakdownFacts, Windows
from analysis.model.copycost import COPY_NS_PER_BYTE, COPY_NS_PER_CALL, CopyBytes, copy_costs
from analysis.model.entrycal import entry_costs
from analysis.model.occupancy import Occupancy, window_components
from analysis.model.tail import TAIL_LABELS, labels_in, steal_in, tail_event_times
from analysis.model.timeline import Events
from analysis.model.tracefacts import TraceFacts, in_cpus, other_threads, seen_tids, sides_of, whole_of
from analysis.store.jsonfiles import Tasks, Workload
from analysis.store.summaryfile import Breakdown

__all__ = [
    "COMPONENTS",
    "COPY_NS_PER_BYTE",
    "COPY_NS_PER_CALL",
    "MEASURED",
    "TAIL_LABELS",
    "BreakdownFacts",
    "BreakdownPass",
    "CopyBytes",
    "Late",
    "Occupancy",
    "TraceFacts",
    "Windows",
    "compute",
    "copy_costs",
    "entry_costs",
    "frame_of",
    "holders_table",
    "in_cpus",
    "labels_in",
    "other_threads",
    "seen_tids",
    "sides_of",
    "steal_in",
    "summarize",
    "summarize_columns",
    "summarize_frame",
    "tail_event_times",
    "whole_of",
    "window_components",
]


def summarize(
    iterations: pd.DataFrame,
    events: pd.DataFrame | Events,
    workload: Workload,
    primary: str | None = None,
    machine: str | None = None,
    tasks: Tasks | None = None,
    tracer_tids: Collection[int] = (),
    copy_ns_per_byte: float | None = None,
) -> Breakdown:
    """The breakdown of every metric and the tail of the primary one (the workload's first
    metric if not given), from all the events at once.

    machine: the one the trace was taken on (syscall numbers), x86_64 if not known.
    tasks, tracer_tids: trace.json's names of the tasks (the ones that preempted the workload)
    and the tracer's own threads.
    copy_ns_per_byte: the per-byte cost from a size sweep, if one was made; else the
    driver's calibration in workload.json (copy_costs).
    """
    frame, info = compute(iterations, events, workload, copy_ns_per_byte, machine or "x86_64")
    return summarize_frame(frame, info, workload, primary, tasks, tracer_tids)


def summarize_frame(
    frame: pd.DataFrame,
    info: BreakdownFacts,
    workload: Workload,
    primary: str | None = None,
    tasks: Tasks | None = None,
    tracer_tids: Collection[int] = (),
) -> Breakdown:
    """summarize() from compute()'s frame and info (a caller that writes the frame as
    breakdown.parquet meanwhile: store.rundir.breakdown_written_alongside)."""
    primary = primary or next(iter(workload.metrics), None)

    def column(name: str, a: int = 0, b: int | None = None) -> np.ndarray:
        return frame[name].to_numpy()[a:b].copy()  # summarize_columns sorts what it is given

    return summarize_columns(column, info, primary, tasks or {}, set(tracer_tids))
