"""summary.json of one run as a typed result (RunSummary), computed once: the statistics
of the iterations (build), then what tracing adds (trace, breakdown, tail) and what the
untraced twin adds (probe_effect), each a value of its own that the runner puts in its place
with dataclasses.replace. render/table.py prints it; store/results.py reads it back."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from analysis.store.jsonfiles import Host, Stats, Workload
from analysis.store.results import SCHEMA_VERSION
from analysis.store.summaryfile import MetricEffect, ProbeEffect, RunSummary

if TYPE_CHECKING:
    import pandas as pd

    from analysis.store.itercolumns import IterationColumns


def metric_stats(
    iters: pd.DataFrame | IterationColumns, metrics: Iterable[str], derived: dict[str, dict[str, Any]], iqr: bool
) -> dict[str, Stats]:
    """{name: entry} for every measured metric (in workload order) and every derived one.

    derived: {"one_way": {"from": "rtt", "factor": 0.5}}; a derived value is the source
    iteration's latency times the factor. One metric's values at a time (stats.describe_group):
    a long run's columns are not copied into rows of metric, run and value."""
    from analysis.model import stats

    metrics = list(metrics)
    read = _group_reader(iters)
    groups = [(name, name, 1.0) for name in metrics]
    groups += [(name, d["from"], d["factor"]) for name, d in derived.items()]
    from analysis.store.clib import release_memory_of

    found = []
    for _, source, factor in groups:
        found.append(stats.describe_group(functools.partial(read, source, factor), iqr))
        release_memory_of(len(iters))  # the group's values, before the next one's
    names = [name for name, _, _ in groups]
    table = stats.describe_table([f[0] for f in found], names)
    filtered = stats.describe_table([f[1] or {} for f in found], names) if iqr else table
    out = {}
    for name, _, _ in groups:
        entry = stats.metric_entry(table.loc[name])
        entry["derived"] = name in derived
        if name in derived:
            entry.update({"from": derived[name]["from"], "factor": derived[name]["factor"]})
        if iqr:
            entry["iqr"] = stats.metric_entry(filtered.loc[name])
            entry["iqr"]["removed"] = entry["n"] - entry["iqr"]["n"]
        out[name] = Stats.from_json(entry)
    return out


def _group_reader(iters: pd.DataFrame | IterationColumns) -> Callable[[str, float], tuple[Any, Any]]:
    """read(metric, factor) -> (its latencies as float64 times factor, a new array; their runs).
    IterationColumns are read a block at a time: one metric's values in memory, not the run's
    columns."""
    import numpy as np

    from analysis.model import stats
    from analysis.store.itercolumns import BLOCK, IterationColumns

    if isinstance(iters, IterationColumns):
        counts = iters.counts()

        def read_columns(metric: str, factor: float) -> tuple[np.ndarray, np.ndarray]:
            code = iters.metrics.index(metric) if metric in iters.metrics else -1
            n = int(counts[code]) if code >= 0 else 0
            v, r, at = np.empty(n), np.empty(n, np.int32), 0
            for a in range(0, len(iters) if n else 0, BLOCK):
                mine = iters.column("metric", a, a + BLOCK) == code
                k = int(mine.sum())
                v[at : at + k] = iters.column("latency_ns", a, a + BLOCK)[mine]
                r[at : at + k] = iters.column("run", a, a + BLOCK)[mine]
                at += k
            if factor != 1:
                v *= factor
            return v, r

        return read_columns
    measured = iters["metric"].astype("category")
    names = [str(c) for c in measured.cat.categories]
    codes = measured.cat.codes.to_numpy()
    latency, runs = iters["latency_ns"].to_numpy(), iters["run"].to_numpy()

    def read_frame(metric: str, factor: float) -> tuple[np.ndarray, np.ndarray]:
        sel = codes == (names.index(metric) if metric in names else -1)
        rows = slice(None) if sel.all() else sel
        return stats.group_values(latency, rows, factor), runs[rows]

    return read_frame


def probe_effect(traced: dict[str, Stats], untraced: dict[str, Stats], untraced_dir: str) -> ProbeEffect:
    """Per measured metric: medians with their 95 % intervals and traced/untraced, whose interval
    comes from the two medians' intervals (the ratio of the far ends: conservative)."""
    out = {}
    for m, t in traced.items():
        u = untraced.get(m)
        if not u or t.derived or not u.median or t.median is None:
            continue
        tlo, thi = t.ci95_median or (None, None)  # none below 6 iterations
        ulo, uhi = u.ci95_median or (None, None)
        out[m] = MetricEffect(
            traced_median=t.median,
            untraced_median=u.median,
            ratio=t.median / u.median,
            ratio_ci95=(
                [tlo / uhi, thi / ulo]
                if tlo is not None and thi is not None and ulo is not None and uhi is not None and ulo > 0
                else None
            ),
            unit=t.unit or "ns",
        )
    return ProbeEffect(untraced_dir, out)


def build(
    wl: Workload,
    iters: pd.DataFrame | IterationColumns,
    derived: dict[str, dict[str, Any]],
    params: dict[str, Any],
    status: str,
    warnings: list[str],
    iqr: bool,
    host: Host,
) -> RunSummary:
    """The statistics of one run's iterations (a frame, or IterationColumns: a column read at a
    time), before tracing adds to them; host: the machine's facts (store.host.host_info)."""
    import numpy as np

    metrics = wl.metrics
    if status == "complete" and wl.mode:
        # A mode measures some of the workload's metrics (spin's lock mode: lock_unlock, not
        # rtt): those it did not measure are left out, not shown as n = 0.
        m = iters["metric"].astype("category")
        present = np.bincount(m.cat.codes.to_numpy(), minlength=len(m.cat.categories)) > 0
        seen = {str(c) for c, here in zip(m.cat.categories, present) if here}
        metrics = [m for m in metrics if m in seen or m == wl.primary_metric]
    derived = {k: v for k, v in derived.items() if v.get("from") in metrics}
    return RunSummary(
        schema_version=SCHEMA_VERSION,
        workload=wl.workload,
        status=status,
        params=params,
        mode=wl.mode,
        host=host,
        warnings=warnings,
        placement=wl.placement,
        threads=wl.threads,
        runs_completed=wl.runs_completed,
        iterations_completed=wl.iterations_completed,
        primary_metric=wl.primary_metric or (metrics[0] if metrics else None),
        clock=wl.clock or "CLOCK_MONOTONIC",  # the driver writes it; a file without it was
        extra=wl.extra,
        metrics=metric_stats(iters, metrics, derived, iqr),
    )
