"""After a traced run: events.bin -> events.parquet, trace.json -> the summary's trace
(analysis.model.trace), then the breakdown (analysis.model.breakdown). Iterations
whose time window overlaps records the kernel lost (ring buffer full) are left
out of the breakdown, and the summary says how many."""

import dataclasses
import os
from pathlib import Path

import pyarrow as pa

from analysis.errors import MeasureError
from analysis.model import activity, breakdown, trace
from analysis.model.summary import RunSummary
from analysis.store import events as events_mod
from analysis.store.results import read_trace, read_workload, written_alongside


def read_trace_json(outdir):
    path = Path(outdir) / "trace.json"
    if not os.path.lexists(path):
        raise MeasureError(f"{path} is missing: the tracer ended before writing it")
    return read_trace(outdir, MeasureError)


def finish(
    outdir: Path | str, iterations_df, summary: RunSummary, stage=lambda text: None, whole_trace: bool = False
) -> RunSummary:
    """summary with the trace of the traced run in outdir and its breakdown; writes
    events.parquet and breakdown.parquet. stage(text) names each step as it starts.
    whole_trace: also the whole trace per thread (model/activity.py: a traced program's)."""
    outdir = Path(outdir)
    tj = read_trace_json(outdir)
    stage("decoding the kernel events")
    ev, header, warnings = events_mod.load(outdir / "events.bin", iterations_df, summary.primary_metric)
    # events.parquet is written while the breakdown is computed (10 M events: seconds each);
    # the thread that writes it is handed an Arrow table, and never touches the frame.
    table = pa.Table.from_pandas(ev, preserve_index=False)
    with written_alongside(events_mod.write_table, outdir / "events.parquet", table):
        tr = trace.summarize(tj, ev, header["drops"], iterations_df, warnings)
        summary = dataclasses.replace(
            summary,
            warnings=tr.warnings_first + summary.warnings + tr.warnings_after,
            trace=tr.summary,
        )
        if whole_trace:
            stage("the whole trace per thread")
            summary = dataclasses.replace(
                summary,
                activity=activity.summarize(ev, tr.summary.tasks, tr.summary.tids, summary.host.get("machine")),
            )
        kept = iterations_df[~tr.left_out] if tr.left_out.any() else iterations_df
        stage(f"the breakdown of {len(kept):,} iterations ({len(ev):,} kernel events)")
        if not len(kept):
            return summary
        bd = breakdown.summarize(
            kept,
            ev,
            read_workload(outdir, MeasureError),
            primary=summary.primary_metric,
            machine=summary.host.get("machine"),
            tasks=tr.summary.tasks,
            tracer_tids=tr.summary.tracer.get("tids") or (),
            out_dir=outdir,
        )
        return summary.with_breakdown(bd)
