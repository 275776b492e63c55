"""After a traced run: events.bin -> events.parquet, trace.json -> summary["trace"],
then the breakdown (analysis.model.breakdown). Iterations
whose time window overlaps records the kernel lost (ring buffer full) are left
out of the breakdown, and the summary says how many."""

import os
from pathlib import Path

import pyarrow as pa

from analysis.errors import MeasureError
from analysis.model import breakdown, lost
from analysis.store import events as events_mod
from analysis.store import records
from analysis.store.results import read_trace, read_workload, written_alongside


def read_trace_json(outdir):
    path = Path(outdir) / "trace.json"
    if not os.path.lexists(path):
        raise MeasureError(f"{path} is missing: the tracer ended before writing it")
    return read_trace(outdir, MeasureError)


def finish(outdir, iterations_df, summary):
    """Add summary["trace"] (and "breakdown") for the traced run in outdir; write events.parquet."""
    outdir = Path(outdir)
    tj = read_trace_json(outdir)
    primary = summary.get("primary_metric")
    ev, header, warnings = events_mod.load(outdir / "events.bin", iterations_df, primary)
    # events.parquet is written while the breakdown is computed (10 M events: seconds each);
    # the thread that writes it is handed an Arrow table, and never touches the frame.
    table = pa.Table.from_pandas(ev, preserve_index=False)
    with written_alongside(events_mod.write_table, outdir / "events.parquet", table):
        return _add_trace(outdir, iterations_df, summary, tj, ev, header, warnings)


def _add_trace(outdir, iterations_df, summary, tj, ev, header, warnings):
    """summary["trace"] from trace.json and the events, then the breakdown."""
    drops = tj.get("drops", {})
    total = int(drops.get("total", header["drops"]))
    misses = int(drops.get("recursion_misses", 0))
    switches_missed = int(drops.get("switches_missed", 0))
    left_out = lost.incomplete(iterations_df, {**drops, "total": total})
    counts = ev["type"].value_counts()
    trace = {
        "drops": {
            "total": total,
            "per_cpu": list(drops.get("per_cpu", [])),
            "recursion_misses": misses,
            "switches_missed": switches_missed,
            # between two tasks not traced: none of the workload's records in doubt
            "switches_missed_other": int(drops.get("switches_missed_other", 0)),
        },
        "events": {t: int(counts.get(t, 0)) for t in records.TYPES},
        "records": int(len(ev)),
        "attach": tj.get("attach", {}),
        "pids": tj.get("pids", []),
        "tids": tj.get("tids", []),
        "features": tj.get("features", {}),
        # names of the tasks the tracer saw, its own threads, hypervisor steal per CPU
        "tasks": tj.get("tasks", {}),
        "tracer": tj.get("tracer", {}),
        "steal": tj.get("steal", {}),
        "status": tj.get("status", "unknown"),
        "floor": bool(tj.get("floor", False)),
        "ringbuf_bytes": tj.get("ringbuf_bytes"),
        "in_iterations": int((ev["iteration"] >= 0).sum()),
        "lost_spans": len(drops.get("lost_spans", [])),
        "iterations_left_out": int(left_out.sum()),
        "partial": bool(total or misses or switches_missed or warnings),
    }
    if tj.get("records") is not None and int(tj["records"]) != len(ev):
        warnings.append(f"the tracer counted {tj['records']} records but events.bin holds {len(ev)}")
    # What the tracer lost makes the breakdown partial: said first, lost records first of all.
    first = []
    if total:
        first.append(
            f"tracing lost {total} events (ring buffer full); {int(left_out.sum())} of "
            f"{len(iterations_df)} iterations overlap them and are left out of the "
            f"breakdown: rerun with a larger --ringbuf-mb"
        )
    if misses:
        first.append(
            f"tracing: the kernel skipped {misses} probe runs (a probe was already running on that "
            f"CPU), so events may be missing at unknown times; all {len(iterations_df)} iterations "
            f"are left out of the breakdown"
        )
    if switches_missed:
        first.append(
            f"tracing: the sched_switch probe missed {switches_missed} context switches, so a CPU's "
            f"events were incomplete for a while; {int(left_out.sum())} of {len(iterations_df)} "
            f"iterations overlap that and are left out of the breakdown"
        )
    summary["warnings"] = first + summary.get("warnings", [])
    summary["warnings"].extend(f"tracing: {w}" for w in warnings)
    summary["trace"] = trace

    kept = iterations_df[~left_out] if left_out.any() else iterations_df
    if len(kept):
        workload = read_workload(outdir, MeasureError)
        summary = breakdown.add_breakdown(summary, kept, ev, workload, out_dir=str(outdir))
    return summary
