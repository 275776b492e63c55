"""What the tracer recorded and lost in one run (summary.json's "trace", store.jsonfiles.SummaryTrace),
from trace.json and the decoded events, and the warnings that make a breakdown partial."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.model import decoded, lost
from analysis.store import records
from analysis.store.jsonfiles import SUMMARY_DROPS, Steal, SummaryTrace, TraceFile


@dataclass(frozen=True)
class TraceResult:
    """The trace's summary, the mask of the iterations left out of the breakdown (their
    events may be incomplete), and the warnings: what was lost goes before the run's own
    warnings, the decoder's after them."""

    summary: SummaryTrace
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
        self.types += decoded.type_counts(events)
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
    tf: TraceFile,
    tally: Tally,
    header_drops: int,
    iterations: pd.DataFrame,
    load_warnings: list[str],
) -> TraceResult:
    d = tf.drops
    total = d.total_or(header_drops)
    misses = d.recursion_misses or 0
    switches_missed = d.switches_missed or 0
    drops = dataclasses.replace(
        d,
        total=total,
        recursion_misses=misses,
        switches_missed=switches_missed,
        # between two tasks not traced: none of the workload's records in doubt
        switches_missed_other=d.switches_missed_other or 0,
        keys=SUMMARY_DROPS,
    )
    left_out = lost.incomplete(iterations, dataclasses.replace(d, total=total))
    warnings = list(load_warnings)
    summary = SummaryTrace(
        file=dataclasses.replace(
            tf, drops=drops, status="unknown" if tf.status is None else tf.status, floor=bool(tf.floor)
        ),
        events={t: int(n) for t, n in zip(records.TYPES, tally.types)},
        records=int(tally.records),
        in_iterations=int(tally.in_iterations),
        lost_spans=len(d.lost_spans),
        iterations_left_out=int(left_out.sum()),
        partial=bool(total or misses or switches_missed or warnings),
    )
    if tf.records is not None and tf.records != tally.records:
        warnings.append(f"the tracer counted {tf.records} records but events.bin holds {tally.records}")
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
    left = tf.left_trace.line()
    if left:
        first.append(f"tracing: {left}")
    stolen = steal_warning(tf.steal, tally)
    return TraceResult(summary, left_out, first + ([stolen] if stolen else []), [f"tracing: {w}" for w in warnings])


STEAL_WARN_SHARE = 0.05


def steal_warning(steal: Steal, tally: Tally) -> str | None:
    """A warning where the hypervisor took a CPU for more than STEAL_WARN_SHARE of the span the
    trace covers (trace.json's steal per CPU over the run), else None."""
    per_cpu = steal.per_cpu_ns or []
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
