"""summary.json of one run as a typed result (RunSummary), computed once: the statistics
of the iterations (build), then what tracing adds (trace, breakdown, tail) and what the
untraced twin adds (probe_effect), each a value of its own that the runner puts in its place
with dataclasses.replace. render/table.py prints it; store/results.py reads it back."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from analysis.store.jsonfiles import Host, Stats, SummaryTrace, Thread, Workload, threads_from_json
from analysis.store.results import SCHEMA_VERSION

if TYPE_CHECKING:
    import pandas as pd

    from analysis.model.activity import Activity
    from analysis.model.breakdown import Breakdown, MetricBreakdown, Tail
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


@dataclass(frozen=True)
class MetricEffect:
    """One metric's probe effect: the traced and the untraced median and traced / untraced,
    with its 95 % interval (None below 6 iterations)."""

    traced_median: float
    untraced_median: float
    ratio: float
    ratio_ci95: list[float] | None = None
    unit: str | None = None


@dataclass(frozen=True)
class ProbeEffect:
    """The traced run against its untraced twin: per metric, the two medians and their ratio."""

    untraced_dir: str | None  # absent from a file that has no directory of the twin
    metrics: dict[str, MetricEffect]


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


@dataclass(frozen=True)
class Settings:
    """The settings of summary.json's params that the tables and pages say, as read: each None
    where the file has none. A run's (ipctrace run: counts, size, duration) or a traced
    program's (ipctrace trace: how its iterations were found, what it ran and followed)."""

    iterations: int | None = None
    warmup: int | None = None
    runs: int | None = None
    size: int | None = None
    duration_s: float | None = None
    cpus: list[int] | None = None
    traced: bool | None = None
    iterations_from: str | None = None  # rtt, markers, a function, "none": a traced program
    command: list[str] | None = None
    pids: list[int] | None = None
    sides: str | None = None
    all_cpus: bool | None = None
    syscalls: list[str] | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Settings:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass(frozen=True)
class ProbeCalibration:
    """What the probes of a traced program's markers or functions add to each iteration's
    window (model/marks.py calibration; summary.json's probe_calibration): the cost subtracted
    (None: nothing was, source says why), split between the window's begin and end."""

    mode: str | None = None
    probe_in_window_ns: int | None = None
    begin_tail_ns: int | None = None
    end_head_ns: int | None = None
    windows: int | None = None  # absent from the file while None: the calibration windows traced
    source: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProbeCalibration:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.windows is None:
            del out["windows"]
        return out


@dataclass(frozen=True)
class RunSummary:
    """summary.json of one run; its fields in the file's order. The last seven are absent from
    the file while None: an untraced run has no trace, a run without a twin no probe_effect,
    copy_estimate comes from a sweep."""

    schema_version: int
    workload: str | None
    status: str | None
    params: dict[str, Any]
    mode: str | None
    host: Host
    warnings: list[str]
    placement: str | None
    threads: list[Thread]
    runs_completed: int | None
    iterations_completed: int | None
    primary_metric: str | None
    clock: str | None
    extra: dict[str, Any]
    metrics: dict[str, Stats]
    trace: SummaryTrace | None = None
    breakdown: dict[str, MetricBreakdown] | None = None
    tail: Tail | None = None
    probe_effect: ProbeEffect | None = None
    copy_estimate: dict[str, Any] | None = None
    activity: Activity | None = None  # a traced program's whole trace (ipctrace trace)
    # a traced program's markers and functions: what each probe adds (run/trace.py)
    probe_calibration: ProbeCalibration | None = None

    def settings(self) -> Settings:
        """params as Settings (params itself keeps every setting given, for the environment table)."""
        return Settings.from_json(self.params)

    def stats(self, metric: str | None) -> Stats | None:
        """metrics[metric] as Stats; None if the run has no such metric."""
        return self.metrics.get(metric) if metric is not None else None

    def with_breakdown(self, bd: Breakdown) -> RunSummary:
        """This summary with a (re)computed breakdown; a tail only if the breakdown has one."""
        return dataclasses.replace(self, breakdown=bd.metrics, tail=bd.tail or self.tail)

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in _ABSENT_WHILE_NONE:
                continue
            out[f.name] = _plain(v)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunSummary:
        """A summary.json this version wrote, read back (store.results.read_summary checked it).
        ValueError if it is not one (an earlier version's)."""
        from analysis.model.breakdown import MetricBreakdown, Tail

        try:
            # what the schema lets a file leave out is read as empty (a collection) or None
            kw = {
                f.name: _or_empty(d.get(f.name), f.name)
                for f in dataclasses.fields(cls)
                if f.name not in _ABSENT_WHILE_NONE
            }
            kw["schema_version"], kw["metrics"] = d["schema_version"], _stats_of(d["metrics"])
            kw["host"] = Host.from_json(kw["host"])
            kw["threads"] = threads_from_json(kw["threads"])
            if d.get("trace") is not None:
                kw["trace"] = SummaryTrace.from_json(d["trace"])
            if d.get("breakdown") is not None:
                kw["breakdown"] = {m: MetricBreakdown.from_json(b) for m, b in d["breakdown"].items()}
            if d.get("tail") is not None:
                kw["tail"] = _known(Tail, d["tail"])
            if d.get("probe_effect") is not None:
                pe = d["probe_effect"]
                effects = {m: _known(MetricEffect, e) for m, e in pe["metrics"].items()}
                kw["probe_effect"] = ProbeEffect(pe.get("untraced_dir"), effects)
            kw["copy_estimate"] = d.get("copy_estimate")
            if d.get("probe_calibration") is not None:
                kw["probe_calibration"] = ProbeCalibration.from_json(d["probe_calibration"])
            if d.get("activity") is not None:
                from analysis.model.activity import Activity

                kw["activity"] = Activity.from_json(d["activity"])
            return cls(**kw)
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a summary of this version ({e})") from None


@dataclass(frozen=True)
class Fit:
    """A figure of the sweep's fit with its 95 % interval (NaN with too few sizes)."""

    value: float
    ci95: list[float]


@dataclass(frozen=True)
class CopyFit:
    """The sweep's fit of copy cost over the sizes (summary.json's copy): ns per byte and fixed ns."""

    ns_per_byte: Fit
    fixed_ns: Fit
    method: str | None = None
    estimated: bool | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CopyFit:
        return cls(Fit(**d["ns_per_byte"]), Fit(**d["fixed_ns"]), method=d.get("method"), estimated=d.get("estimated"))


@dataclass(frozen=True)
class SweepSize:
    """One size of a sweep (summary.json's per_size[size]): its directory, the bytes it copies
    an iteration, the fitted y's median, the metric's own median and the copy the fit gives."""

    dir: str
    bytes_per_iteration: float
    median_ns: float | None = None
    metric_median_ns: float | None = None
    copy_ns_estimated: float | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SweepSize:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass(frozen=True)
class SweepSummary:
    """summary.json of a sweep over message sizes (run/sweep.py), its fields in the file's order:
    the fit of copy cost over the sizes (copy) and each size's directory and figures (per_size);
    no metrics of its own (each size's are in its directory)."""

    schema_version: int
    kind: str  # "sweep"
    workload: str | None
    status: str | None
    metric: str | None
    sizes: list[int]
    x: str | None  # what the fit's x and y are
    y: str | None
    params: dict[str, Any]
    host: Host
    copy: CopyFit
    per_size: dict[str, SweepSize]
    metrics: dict[str, Stats]

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SweepSummary:
        """A sweep's summary.json, read back. ValueError if it is not one of this version."""
        try:
            # what the schema lets a file leave out is read as empty (a collection) or None
            kw = {f.name: _or_empty(d.get(f.name), f.name) for f in dataclasses.fields(cls)}
            for name in ("schema_version", "kind"):
                kw[name] = d[name]
            kw["metrics"] = _stats_of(d["metrics"])
            kw["host"] = Host.from_json(kw["host"])
            kw["copy"] = CopyFit.from_json(d["copy"])
            kw["per_size"] = {size: SweepSize.from_json(e) for size, e in d["per_size"].items()}
            return cls(**kw)
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a sweep summary of this version ({e})") from None


_READ_WHEN_ABSENT: dict[str, Callable[[], Any]] = {
    "params": dict,
    "host": dict,
    "warnings": list,
    "threads": list,
    "extra": dict,
    "sizes": list,
}


def _or_empty(v: Any, name: str) -> Any:  # noqa: ANN401 - a JSON value
    """A summary's field as read: absent or null, a collection field is read empty."""
    return _READ_WHEN_ABSENT.get(name, lambda: None)() if v is None else v


def _stats_of(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Stats]:
    return {name: Stats.from_json(e) for name, e in entries.items()}


_T = TypeVar("_T")


def _known(cls: type[_T], d: Mapping[str, Any]) -> _T:
    """cls of the fields of d it knows (a newer file's other keys are left out); a field that
    is absent or null takes its default (empty for a collection) if it has one."""
    kw = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        v = d.get(f.name)
        if v is None and f.default_factory is not dataclasses.MISSING:
            continue
        if f.name in d:
            kw[f.name] = v
    return cls(**kw)


_ABSENT_WHILE_NONE = {"trace", "breakdown", "tail", "probe_effect", "copy_estimate", "activity", "probe_calibration"}


def _plain(v: Any) -> Any:  # noqa: ANN401 - any JSON value or dataclass of them
    """A field's value as JSON data: dataclasses become objects, in field order (or as their
    to_json has them)."""
    if isinstance(v, (ProbeCalibration, Stats, SummaryTrace)):
        return v.to_json()
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


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
