"""After a traced run: events.bin -> events.parquet, trace.json -> summary["trace"],
then the breakdown (analysis.breakdown) when that module is present."""
import importlib
import json
from pathlib import Path

from analysis import events as events_mod
from analysis.errors import MeasureError


def read_trace_json(outdir):
    path = Path(outdir) / "trace.json"
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise MeasureError(f"{path} is missing: the tracer ended before writing it") from None
    except (OSError, ValueError) as e:
        raise MeasureError(f"{path} is unreadable: {e}") from None


def _breakdown_module():
    try:
        return importlib.import_module("analysis.breakdown")
    except ModuleNotFoundError as e:
        if e.name == "analysis.breakdown":
            return None
        raise


def finish(outdir, iterations_df, summary):
    """Add summary["trace"] (and "breakdown") for the traced run in outdir; write events.parquet."""
    outdir = Path(outdir)
    tj = read_trace_json(outdir)
    primary = summary.get("primary_metric")
    ev, header, warnings = events_mod.load(outdir / "events.bin", iterations_df, primary)
    events_mod.write_parquet(outdir / "events.parquet", ev)

    drops = tj.get("drops", {})
    total = int(drops.get("total", header["drops"]))
    counts = ev["type"].value_counts()
    trace = {
        "drops": {"total": total, "per_cpu": list(drops.get("per_cpu", []))},
        "events": {t: int(counts.get(t, 0)) for t in events_mod.TYPES},
        "records": int(len(ev)),
        "attach": tj.get("attach", {}),
        "pids": tj.get("pids", []),
        "tids": tj.get("tids", []),
        "features": tj.get("features", {}),
        "status": tj.get("status", "unknown"),
        "floor": bool(tj.get("floor", False)),
        "ringbuf_bytes": tj.get("ringbuf_bytes"),
        "in_iterations": int((ev["iteration"] >= 0).sum()),
        "partial": bool(total or warnings),
    }
    if tj.get("records") is not None and int(tj["records"]) != len(ev):
        warnings.append(f"the tracer counted {tj['records']} records but events.bin holds {len(ev)}")
    summary.setdefault("warnings", [])
    if total:
        # Lost events make the breakdown partial: say so first.
        summary["warnings"].insert(0, f"tracing lost {total} events (ring buffer full); the breakdown is "
                                      f"partial: rerun with a larger --ringbuf-mb")
    summary["warnings"].extend(f"tracing: {w}" for w in warnings)
    summary["trace"] = trace

    bd = _breakdown_module()
    if bd is not None and len(iterations_df):
        with open(outdir / "workload.json") as f:
            workload = json.load(f)
        summary = bd.add_breakdown(summary, iterations_df, ev, workload, out_dir=str(outdir))
    return summary
