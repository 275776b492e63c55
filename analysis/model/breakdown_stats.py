"""The breakdown's statistics (summary.json's breakdown and tail) from its per-iteration columns,
read one column at a time (summarize_columns), so that no more than one is in memory."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from analysis.model import stats
from analysis.model.breakdown_types import COMPONENTS, MEASURED, BreakdownFacts
from analysis.model.stats import metric_entry
from analysis.model.timeline import PREEMPTED, RUNQUEUE
from analysis.store import clib
from analysis.store.itercolumns import BLOCK, KeptRows
from analysis.store.jsonfiles import Stats, Task, Tasks
from analysis.store.summaryfile import Breakdown, Holder, MetricBreakdown, SideStats, SideView, Tail


def _stat_entries(
    values: np.ndarray,
    name: str,
    runs: np.ndarray,
    rows: slice | np.ndarray = slice(None),
    owned: bool = False,
    run_index: stats.RunIndex | None = None,
) -> dict[str, Any]:
    """Statistics like summary.json's metrics of one component's values[rows] (runs: the run
    of each of values, run_index: its stats.RunIndex); owned: values are the caller's to give
    away (sorted here in place, not copied: a long run's column once in memory, not twice)."""
    if owned and isinstance(rows, slice) and rows == slice(None):
        row, _ = stats.describe_group(lambda: (values.astype(np.float64, copy=False), runs), run_index=run_index)
        return metric_entry(row)  # the dict as it is: a Series of it cost 0.27 ms a component
    table, _ = stats.describe_groups(values, [(name, rows, 1.0)], runs)
    return metric_entry(table.iloc[0])


def _closure_by_metric(
    rows: KeptRows, column: Callable[..., np.ndarray], mcode: np.ndarray, nmetrics: int
) -> dict[int, float]:
    """{metric code: mean of (latency - measured components) / latency in %} over the windows
    whose latency is above zero (none: left out), a block of rows at a time (column(name, a, b):
    rows [a, b) of a breakdown column)."""
    total, count = np.zeros(nmetrics), np.zeros(nmetrics)
    for a in range(0, len(mcode), BLOCK):
        measured = np.zeros(len(mcode[a : a + BLOCK]))
        for c in MEASURED:
            measured += column(c, a, a + BLOCK)
        lat = rows.column("latency_ns", a, a + BLOCK).astype(np.float64)
        ok = lat > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            pct = (lat[ok] - measured[ok]) / lat[ok] * 100
        fin = np.isfinite(pct)
        code = mcode[a : a + BLOCK][ok][fin]
        total += np.bincount(code, weights=pct[fin], minlength=nmetrics)
        count += np.bincount(code, minlength=nmetrics)
    return {k: float(total[k] / count[k]) for k in range(nmetrics) if count[k]}


def _light_stats_of(v: np.ndarray) -> SideStats:
    """{n, mean, median, p99} of one column's values (the caller's to give away: partitioned
    in place where they are float64 already)."""
    x = v.astype(np.float64, copy=False)
    mean = float(x.mean())
    q = np.percentile(x, [50, 99], overwrite_input=True)
    return SideStats(n=len(x), mean=mean, median=float(q[0]), p99=float(q[1]))


def holders_table(
    holders: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n: int,
    tasks: Tasks | None,
    tracer: Collection[int],
    top: int = 5,
) -> list[dict[str, Any]]:
    """The tasks outside the workload that held the CPU while a thread on the critical path
    waited for it (the path's `runqueue` after a wake-up, `preempted` after an involuntary switch
    out): per task, ns per iteration on average, its share of that time, its name, and whether
    it is the tracer's own thread."""
    if not holders:
        return []
    tid = np.concatenate([h[0] for h in holders])
    state = np.concatenate([h[1] for h in holders])
    ns = np.concatenate([h[2] for h in holders]).astype(np.float64)
    rows = []
    sel = (tid > 0) & np.isin(state, (RUNQUEUE, PREEMPTED))
    if sel.any():
        uniq, inv = np.unique(tid[sel], return_inverse=True)
        total = np.bincount(inv, weights=ns[sel])
        for k in np.argsort(-total)[:top]:
            t = int(uniq[k])
            task = (tasks or {}).get(t) or Task()
            rows.append(
                {
                    "tid": t,
                    "comm": task.comm,
                    "pid": task.pid,
                    "tracer": t in tracer,
                    "ns_per_iteration": float(total[k] / max(n, 1)),
                    "share": float(total[k] / total.sum()),
                }
            )
    return rows


def summarize_columns(
    column: Callable[..., np.ndarray],
    info: BreakdownFacts,
    primary: str | None,
    tasks: Tasks,
    tracer: set[int],
) -> Breakdown:
    """The per-metric breakdown and the tail from the breakdown's columns (column(name[, a, b]):
    one column of breakdown.parquet's, all rows or rows [a, b), a new array this may sort: a
    frame's copy, or read from the file one at a time, so that no more than one is in memory)
    and compute()'s info."""
    if info.copy_measured:
        copy_source = "measured"
    elif not info.copies:
        copy_source = "none: this workload's data syscalls copy nothing (workload.json copies: false)"
    else:
        copy_source = (
            f"estimated: calls x {info.ns_per_call:.3g} ns + bytes x {info.ns_per_byte:.3g} ns/byte "
            f"({info.copy_basis}); "
            f"the copy routines are not probed on this kernel"
        )
    w = info.windows
    mnames = w.mnames
    mcode = w.rows.column("metric")
    runs_all = w.rows.column("run")
    if len(runs_all) and runs_all.min() >= 0 and runs_all.max() < 2**15:
        runs_all = runs_all.astype(np.int16)  # held through the statistics: 2 B an iteration
    metrics = []
    for code, name in enumerate(mnames):
        sel = mcode == code
        if sel.any():
            metrics.append((str(name), slice(None) if sel.all() else sel))
    # the runs' counts once for every column (the one metric's: all rows)
    run_index = stats.RunIndex(runs_all) if len(metrics) == 1 else None
    # Column by column: each one's statistics for every metric, then it goes.
    components: dict[str, dict[str, Any]] = {name: {} for name, _ in metrics}
    for c in COMPONENTS:
        x = column(c)
        for name, rows in metrics:
            # one metric: the column itself is sorted in place, no copy of it
            components[name][c] = _stat_entries(x, c, runs_all, rows, len(metrics) == 1, run_index)
        del x
        clib.release_memory_of(len(runs_all))
    # Readers of results from before the wake-up was split into wakeup and runqueue find
    # their sum under its old name, marked derived (the table and the report skip it).
    waiting = column("wakeup").astype(np.float64, copy=False)
    for a in range(0, len(waiting), BLOCK):  # the other column a block at a time beside it
        waiting[a : a + BLOCK] += column("runqueue", a, a + BLOCK)
    for name, rows in metrics:
        components[name]["sched_delay"] = dict(
            _stat_entries(waiting, "sched_delay", runs_all, rows, len(metrics) == 1, run_index),
            derived="wakeup + runqueue",
        )
    del waiting
    clib.release_memory_of(len(runs_all))
    closure = _closure_by_metric(w.rows, column, mcode, len(mnames))
    per_side: dict[str, dict[str, SideView]] = {name: {} for name, _ in metrics}
    for role in info.roles:
        present = ~np.isnan(column(f"{role}.{COMPONENTS[0]}"))  # the side's columns are NaN elsewhere
        clib.release_memory_of(len(runs_all))
        for name, rows in metrics:
            ok = present[rows]
            if not ok.any():
                continue
            vals = {}
            for c in COMPONENTS:
                v = column(f"{role}.{c}")[rows]
                vals[c] = _light_stats_of(v if ok.all() else v[ok])
                del v  # before the next column is read beside it
                clib.release_memory_of(len(runs_all))
            ws = info.wake.get(role, {}).get(name) or {"wakeups": 0, "wakeup_delay": None, "runqueue_delay": None}
            per_side[name][role] = SideView(components=vals, **ws)
        del present
        clib.release_memory_of(len(runs_all))
    means = {}
    for c in ("copy_bytes", "steal_ns"):  # one column at a time
        x = column(c)
        means[c] = {name: float(x[rows].mean()) for name, rows in metrics}
        del x
    out = {}
    for name, rows in metrics:
        n = len(mcode) if isinstance(rows, slice) else int(rows.sum())
        out[name] = MetricBreakdown(
            components={c: Stats.from_json(e) for c, e in components[name].items()},
            closure_residual_pct=closure.get(mnames.index(name)),
            critical_path=info.critical_path,
            per_side=per_side[name],
            copy_source=copy_source,
            copy_bytes_mean=means["copy_bytes"][name],
            copy_costs={"ns_per_call": info.ns_per_call, "ns_per_byte": info.ns_per_byte},
            entry_source=info.entry["source"],
            entry_calibration={k: v for k, v in info.entry.items() if k != "source"},
            steal_ns_mean=means["steal_ns"][name],
            preempted_by=[Holder(**h) for h in holders_table(info.holders, n, tasks, tracer)],
        )
    if primary not in info.tail and info.tail:
        primary = next(iter(info.tail))
    tail = None
    if primary in info.tail:
        t = info.tail[primary]
        tail = Tail(
            metric=primary,
            threshold_ns=t["threshold_ns"],
            iterations=t["iterations"],
            long_wakeup_ns=info.long_wakeup_ns,
            labels=t["labels"],
            by_metric=info.tail,
        )
    return Breakdown(out, tail)
