"""`ipctrace export` (and watch's kept requests) of a results directory for Perfetto: reads the
summary, iterations, events (only the row groups a part needs), breakdown, workload.json and
trace.json, has render/perfetto.py and perfetto_proto.py build the trace from them, and writes
it. A merged directory (ipctrace merge) goes through render/crosshost.py's events."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.errors import UsageError
from analysis.model.breakdown import COMPONENTS
from analysis.render import crosshost, perfetto
from analysis.render import perfetto_proto as proto
from analysis.store import events as events_mod
from analysis.store import jsonfiles, results, rundir, safeio
from analysis.store.results import (
    breakdown_columns,
    read_breakdown,
    read_iterations,
    run_summary_file,
    trace_file,
    workload_file,
)
from analysis.store.summaryfile import RunSummary

if TYPE_CHECKING:
    import pandas as pd

    from analysis.store.jsonfiles import Drops, Workload


def read_events(
    resdir: Path | str, summary: RunSummary | None = None, spans: Iterable[tuple[int, int]] | None = None
) -> pd.DataFrame:
    """events.parquet of resdir (only the row groups that meet spans, if given)."""
    path = Path(resdir) / "events.parquet"
    if not os.path.lexists(path):
        if summary is not None and results.was_traced(summary):
            raise UsageError(f"{resdir} was traced but its events.parquet is missing: nothing to export for Perfetto")
        raise UsageError(f"{resdir} was not traced (no events.parquet): nothing to export for Perfetto")
    return events_mod.read_parquet(resdir, spans)


@dataclasses.dataclass
class _Part:
    """What both Perfetto formats are built from: the whole run, or the part --window /
    --around choose, read once, and the trace events render/perfetto.py built of it."""

    summary: RunSummary
    iterations: pd.DataFrame
    events: pd.DataFrame
    built: list[dict[str, Any]]


def _read_part(resdir: Path, window: str | None, around: str | None) -> _Part:
    summary = run_summary_file(resdir)
    iterations = read_iterations(resdir)
    span = _span(summary, iterations, window, around)
    # A part of the run: only the row groups of events.parquet that meet it are read.
    events = read_events(resdir, summary, None if span is None else [span])
    workload = workload_file(resdir) if os.path.lexists(resdir / "workload.json") else None
    drops = trace_file(resdir).drops if os.path.lexists(resdir / "trace.json") else None
    return _part(summary, iterations, events, workload, drops, span)


def _span(
    summary: RunSummary, iterations: pd.DataFrame, window: str | None, around: str | None
) -> tuple[int, int] | None:
    metric = summary.primary_metric or (str(iterations["metric"].iloc[0]) if len(iterations) else None)
    return perfetto.select(iterations, metric, window, around) if (window or around) else None


def _part(
    summary: RunSummary,
    iterations: pd.DataFrame,
    events: pd.DataFrame,
    workload: Workload | None,
    drops: Drops | None,
    span: tuple[int, int] | None,
) -> _Part:
    if span is not None:
        lo, hi = span
        iterations = iterations[(iterations["t_start_ns"] >= lo) & (iterations["t_end_ns"] <= hi)]
        events = events[(events["ts"] >= lo) & (events["ts"] <= hi)]
    trace = summary.trace.file if summary.trace else None
    built = perfetto.build(
        iterations,
        events,
        workload,
        trace.tids if trace else None,
        drops.lost_spans if drops else [],
        trace.tasks if trace else None,
        summary.host.machine or "x86_64",
        drops.total if drops else None,
    )
    return _Part(summary, iterations, events, built)


def perfetto_json(
    resdir: Path | str, window: str | None = None, around: str | None = None, path: Path | None = None
) -> Path:
    """path (default resdir/trace.perfetto.json, or trace-around-p99.perfetto.json and so on
    for a part) from the iterations and events of the whole run, or of the part --window /
    --around choose (select); returns the path."""
    resdir = Path(resdir)
    if os.path.lexists(resdir / "merge.json"):  # two hosts joined (ipctrace merge): a group per host
        return merged_perfetto_json(resdir, perfetto.FILE)
    part = _read_part(resdir, window, around)
    trace = {
        "traceEvents": part.built,
        "displayTimeUnit": "ns",
        "otherData": {
            "workload": part.summary.workload,
            "clock": "CLOCK_MONOTONIC",
            "origin": "first iteration or event",
        },
    }
    path = path or resdir / perfetto.part_name(perfetto.FILE, window, around)
    try:
        with safeio.created(path) as p, open(p, "w") as f:
            f.write(json.dumps(trace, separators=(",", ":")))  # the C encoder: 3x json.dump
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path


def perfetto_proto(
    resdir: Path | str, window: str | None = None, around: str | None = None, path: Path | None = None
) -> Path:
    """path (default: resdir/trace.perfetto-trace of the whole run, resdir/trace-around-p99
    .perfetto-trace and so on of a part, so a part never replaces the whole) of the whole run,
    or of the part --window / --around choose."""
    resdir = Path(resdir)
    part = _read_part(resdir, window, around)
    # the columns the arguments take, not the sides' and the rest (a third of the time of a
    # request `ipctrace watch` keeps went to reading them)
    have = breakdown_columns(resdir)
    comps = [c for c in COMPONENTS if have is not None and c in have]
    # and the metric (a small categorical), so that rows of a metric the run lacks are refused
    checked = ["metric"] if have is not None and "metric" in have else []
    bd = read_breakdown(resdir, ["run", "seq", *checked, *comps]) if have is not None else None
    return _write_proto(part, bd, path or resdir / perfetto.part_name(proto.FILE, window, around))


def perfetto_proto_of(
    resdir: Path,
    summary: RunSummary,
    iterations: pd.DataFrame,
    events: pd.DataFrame,
    workload: Workload | None,
    drops: Drops | None,
    breakdown: pd.DataFrame | None,
    around: str,
) -> Path:
    """perfetto_proto(resdir, around=around) of a run whose files' contents the caller holds
    (`ipctrace watch`'s keeper: what it has just written, not read back); breakdown: its rows
    with run, seq and the components."""
    part = _part(summary, iterations, events, workload, drops, _span(summary, iterations, None, around))
    return _write_proto(part, breakdown, resdir / perfetto.part_name(proto.FILE, None, around))


def _write_proto(part: _Part, bd: pd.DataFrame | None, path: Path) -> Path:
    comps = [c for c in COMPONENTS if bd is not None and c in bd.columns]
    args = {}
    if bd is not None:
        for row in bd[["run", "seq", *comps]].itertuples(index=False):
            # whole ns as varints, the zero ones left out: an iteration's arguments in tens of bytes
            args[(int(row[0]), int(row[1]))] = {f"{c}_ns": int(round(v)) for c, v in zip(comps, row[2:]) if round(v)}
    data = proto.encode(
        part.built,
        perfetto.origin_of(part.iterations, part.events),
        proto.cpu_bundles(part.events, part.summary.trace.file.tasks if part.summary.trace else None),
        args,
    )
    try:
        safeio.write_bytes(path, data)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path


def merged_perfetto_json(resdir: Path | str, file: str) -> Path:
    """resdir/file: the Perfetto (Chrome JSON) trace of a merged directory; returns the path."""
    resdir = Path(resdir)
    doc, breakdown = rundir.read_merged(resdir)
    trace = {
        "traceEvents": crosshost.perfetto_events(doc, results.read_iterations(resdir), breakdown),
        "displayTimeUnit": "ns",
        "otherData": {"merge": jsonfiles.as_written(doc.clock), "clock": "the client's CLOCK_MONOTONIC"},
    }
    path = resdir / file
    try:
        with safeio.created(path) as p, open(p, "w") as f:
            f.write(json.dumps(trace, separators=(",", ":")))
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path
