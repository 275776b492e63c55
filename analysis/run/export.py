"""`ipctrace export` (and watch's kept requests) of a results directory for Perfetto: reads the
summary, iterations, events (only the row groups a part needs), breakdown, workload.json and
trace.json, has render/perfetto.py and perfetto_proto.py build the trace from them, and writes
it. A merged directory (ipctrace merge) goes through render/crosshost.py's events."""

from __future__ import annotations

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
from analysis.store import results, safeio
from analysis.store.jsonfiles import TraceFile
from analysis.store.results import (
    breakdown_columns,
    read_breakdown,
    read_iterations,
    read_summary,
    trace_file,
    workload_file,
)
from analysis.store.summaryfile import RunSummary

if TYPE_CHECKING:
    import pandas as pd


def read_events(
    resdir: Path | str, summary: dict[str, Any] | None = None, spans: Iterable[tuple[int, int]] | None = None
) -> pd.DataFrame:
    """events.parquet of resdir (only the row groups that meet spans, if given)."""
    path = Path(resdir) / "events.parquet"
    if not os.path.lexists(path):
        if summary is not None and results.was_traced(summary):
            raise UsageError(f"{resdir} was traced but its events.parquet is missing: nothing to export for Perfetto")
        raise UsageError(f"{resdir} was not traced (no events.parquet): nothing to export for Perfetto")
    return events_mod.read_parquet(resdir, spans)


def perfetto_json(
    resdir: Path | str, window: str | None = None, around: str | None = None, path: Path | None = None
) -> Path:
    """path (default resdir/trace.perfetto.json, or trace-around-p99.perfetto.json and so on
    for a part) from the iterations and events of the whole run, or of the part --window /
    --around choose (select); returns the path."""
    resdir = Path(resdir)
    if os.path.lexists(resdir / "merge.json"):  # two hosts joined (ipctrace merge): a group per host
        return merged_perfetto_json(resdir, perfetto.FILE)
    data = read_summary(resdir)
    summary = RunSummary.from_json(data)
    iterations = read_iterations(resdir)
    metric = summary.primary_metric or (str(iterations["metric"].iloc[0]) if len(iterations) else None)
    part = perfetto.select(iterations, metric, window, around) if (window or around) else None
    events = read_events(resdir, data, None if part is None else [part])
    if part is not None:
        lo, hi = part
        iterations = iterations[(iterations["t_start_ns"] >= lo) & (iterations["t_end_ns"] <= hi)]
        events = events[(events["ts"] >= lo) & (events["ts"] <= hi)]
    workload = workload_file(resdir) if os.path.lexists(resdir / "workload.json") else None
    tids = summary.trace.file.tids if summary.trace else None
    drops = trace_file(resdir).drops if os.path.lexists(resdir / "trace.json") else None
    lost = drops.lost_spans if drops else []
    tasks = summary.trace.file.tasks if summary.trace else None
    arch = summary.host.machine or "x86_64"
    trace = {
        "traceEvents": perfetto.build(
            iterations, events, workload, tids, lost, tasks, arch, drops.total if drops else None
        ),
        "displayTimeUnit": "ns",
        "otherData": {
            "workload": summary.workload,
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
    summary_json = read_summary(resdir)
    summary = RunSummary.from_json(summary_json)
    iterations = read_iterations(resdir)
    workload = workload_file(resdir) if os.path.lexists(resdir / "workload.json") else None
    metric = summary.primary_metric or str(iterations["metric"].iloc[0])
    part = perfetto.select(iterations, metric, window, around)
    # A part of the run: only the row groups of events.parquet that meet it are read.
    events = read_events(resdir, summary_json, None if part is None else [part])
    if part is not None:
        lo, hi = part
        iterations = iterations[(iterations["t_start_ns"] >= lo) & (iterations["t_end_ns"] <= hi)]
        events = events[(events["ts"] >= lo) & (events["ts"] <= hi)]
    trace = summary.trace.file if summary.trace else TraceFile()
    drops = trace_file(resdir).drops if os.path.lexists(resdir / "trace.json") else None
    arch = summary.host.machine or "x86_64"
    tasks = trace.tasks
    built = perfetto.build(
        iterations,
        events,
        workload,
        trace.tids,
        drops.lost_spans if drops else [],
        tasks,
        arch,
        drops.total if drops else None,
    )
    # the columns the arguments take, not the sides' and the rest (a third of the time of a
    # request `ipctrace watch` keeps went to reading them)
    have = breakdown_columns(resdir)
    comps = [c for c in COMPONENTS if have is not None and c in have]
    # and the metric (a small categorical), so that rows of a metric the run lacks are refused
    checked = ["metric"] if have is not None and "metric" in have else []
    bd = read_breakdown(resdir, ["run", "seq", *checked, *comps]) if have is not None else None
    args = {}
    if bd is not None:
        for row in bd[["run", "seq", *comps]].itertuples(index=False):
            # whole ns as varints, the zero ones left out: an iteration's arguments in tens of bytes
            args[(int(row[0]), int(row[1]))] = {f"{c}_ns": int(round(v)) for c, v in zip(comps, row[2:]) if round(v)}
    data = proto.encode(built, perfetto.origin_of(iterations, events), proto.cpu_bundles(events, tasks), args)
    path = path or resdir / perfetto.part_name(proto.FILE, window, around)
    try:
        safeio.write_bytes(path, data)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path


def merged_perfetto_json(resdir: Path | str, file: str) -> Path:
    """resdir/file: the Perfetto (Chrome JSON) trace of a merged directory; returns the path."""
    resdir = Path(resdir)
    doc = results.read_json(resdir / "merge.json")
    trace = {
        "traceEvents": crosshost.perfetto_events(
            doc, results.read_iterations(resdir), results.read_parquet(resdir / "breakdown.parquet")
        ),
        "displayTimeUnit": "ns",
        "otherData": {"merge": doc["clock"], "clock": "the client's CLOCK_MONOTONIC"},
    }
    path = resdir / file
    try:
        with safeio.created(path) as p, open(p, "w") as f:
            f.write(json.dumps(trace, separators=(",", ":")))
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path
