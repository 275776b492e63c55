"""The measuring side of `ipctrace bench-analysis`: the analysis of a synthetic traced run
(store/synthetic.py writes it) stage by stage, by the
whole-trace path or the streaming one (run/analyse_run.py), with each stage's time and peak memory
(analysis/run/analysis_benchmark.py runs each in a fresh process and prints them against the
targets)."""

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.errors import MeasureError
from analysis.store.host import host_info

# "trace": the streaming path with the whole-trace view per thread (what ipctrace trace adds).
PATHS = ("whole", "streaming", "trace")
# analyse()'s stages in order; "events and breakdown" is the streaming path's, the one after it
# the trace path's, the four before them the whole path's.
STAGES = (
    "imports",
    "statistics",
    "decode events.bin",
    "breakdown (+ events.parquet)",
    "events.parquet (rest)",
    "events and breakdown (analyse_run.finish)",
    "+ the whole-trace view (trace)",
    "breakdown flame graph (folded)",
    "heat maps and histogram",
)
# The stages of the report, after the breakdown: analyse(report=False) leaves them out.
REPORT_STAGES = ("breakdown flame graph (folded)", "heat maps and histogram")


def peak_rss() -> int:
    """This process' peak resident memory in bytes (VmHWM). Not getrusage: its maxrss
    survives exec and would count the parent's memory at fork."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise MeasureError("bench-analysis: /proc/self/status has no VmHWM")


def reset_peak_rss() -> bool:
    """Start VmHWM again from the memory held now (Linux 4.0: clear_refs "5"), so that each
    stage's peak is its own; False if this kernel refuses (the peaks are then cumulative)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def analyse(outdir: Path | str, path: str = "streaming", report: bool = True) -> dict[str, Any]:
    """The analysis a traced run and its report do, by the whole-trace path (today's functions:
    the events as one frame, the breakdown of them at once) or the streaming one
    (analyse_run.finish); {"times": {stage: [wall s, CPU s, peak RSS bytes]}, ...}. Each stage's
    peak is its own when the kernel can reset VmHWM ("stage_peaks"), else the peak so far.
    report=False: without the REPORT_STAGES (where they would not fit in memory)."""
    if path not in PATHS:
        raise MeasureError(f"bench-analysis: no analysis path {path!r} (one of {', '.join(PATHS)})")
    times: dict[str, list[float]] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    stage_peaks = reset_peak_rss()  # the interpreter's start-up (as a run's is) counts in "imports"

    def lap(stage: str) -> None:
        # Wall and CPU time: on a shared machine the two differ by what others ran meanwhile.
        nonlocal t0, c0
        now, cpu = time.perf_counter(), time.process_time()
        times[stage] = [now - t0, cpu - c0, peak_rss()]
        if stage_peaks:
            reset_peak_rss()
        t0, c0 = time.perf_counter(), time.process_time()

    import pyarrow as pa

    from analysis import freeze_imports
    from analysis.model import breakdown, heatmaps
    from analysis.model import summary as summary_mod
    from analysis.render import plots
    from analysis.run import analyse_run
    from analysis.run import report as run_report
    from analysis.store import events as ev_mod
    from analysis.store import folded as folded_file
    from analysis.store import rundir
    from analysis.store.itercolumns import IterationColumns
    from analysis.store.jsonfiles import Workload
    from analysis.store.results import written_alongside

    freeze_imports()  # as the command line does before it runs a command
    lap("imports")
    base = _rss()
    outdir = Path(outdir)
    wl = Workload.from_json(json.loads((outdir / "workload.json").read_text()))
    # As a run reads its iterations: into columns beside the results, read a column at a time.
    iters = IterationColumns.from_parquet(outdir / "iterations.parquet", dir=outdir)
    s = summary_mod.build(wl, iters, {}, {"iterations": len(iters), "runs": 1}, "complete", [], False, host_info())
    lap("statistics")
    if path == "whole":
        frame = iters.frame()  # today's path: the iterations as one frame
        ev, header, warnings = ev_mod.load(outdir / "events.bin", frame, "rtt")
        lap("decode events.bin")
        # events.parquet is written while the breakdown is computed, as analyse_run.finish does.
        with written_alongside(
            ev_mod.write_table, outdir / "events.parquet", pa.Table.from_pandas(ev, preserve_index=False)
        ):
            bd_frame, bd_info = breakdown.compute(frame, ev, wl, None, "x86_64")
            with rundir.breakdown_written_alongside(bd_frame, outdir):
                s = s.with_breakdown(breakdown.summarize_frame(bd_frame, bd_info, wl, primary=s.primary_metric))
            lap("breakdown (+ events.parquet)")
        lap("events.parquet (rest)")
        del ev, frame
    elif path == "streaming":
        s = analyse_run.finish(outdir, iters, s)
        lap("events and breakdown (analyse_run.finish)")
    else:
        s = analyse_run.finish(outdir, iters, s, whole_trace=True)
        lap("+ the whole-trace view (trace)")
    if report:
        # As the report reads breakdown.parquet: a few columns at a time.
        _, grid, folded = run_report.breakdown_pictures(outdir, "rtt")
        folded_file.write_folded(outdir / "breakdown.folded", folded)
        lap("breakdown flame graph (folded)")  # with the breakdown heat map's grid, read as the report does
        run_report.saved(outdir, plots.latency_heatmap(heatmaps.latency_heatmap(iters, "rtt"), "heatmap-latency.png"))
        if grid is not None:
            run_report.saved(outdir, plots.breakdown_heatmap(grid, "heatmap-breakdown.png"))
        run_report.saved(
            outdir, plots.histogram(heatmaps.histogram(iters.column("latency_ns"), "rtt"), "histogram-rtt.png")
        )
        lap("heat maps and histogram")
    iters.close()
    j = s.to_json()
    # The two paths' statistics of the breakdown, to compare without sending them over.
    digest = hashlib.sha256(json.dumps([j.get("breakdown"), j.get("tail")], sort_keys=True).encode()).hexdigest()
    return {
        "path": path,
        "times": times,
        "peak_rss_bytes": max(v[2] for v in times.values()),
        "stage_peaks": stage_peaks,
        "base_rss_bytes": base,
        "closure_residual_pct": (s.breakdown or {})["rtt"].closure_residual_pct,
        "breakdown_digest": digest,
    }


def _rss() -> int:
    """This process' resident memory now, in bytes (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise MeasureError("bench-analysis: /proc/self/status has no VmRSS")


def total(result: dict[str, Any]) -> tuple[float, float]:
    """(wall s, CPU s) of an analysis, without the imports (a run has them done before)."""
    rows = [v for k, v in result["times"].items() if k != "imports"]
    return sum(r[0] for r in rows), sum(r[1] for r in rows)


def peak_estimates(known: Sequence[tuple[int, dict[str, Any]]], events: int) -> dict[str, float]:
    """{stage: its peak in bytes} for a run of `events` events, from the same path measured at
    smaller sizes (known: [(events, analyse() result)], ascending): along the line through the
    two largest (a stage whose memory is bounded stays near its figure), or from one alone, its
    memory_estimate (bytes per event above the imports' memory: an upper bound for a bounded
    stage). A stage left out at the largest ("skipped": {stage: estimate}) grows with the events."""
    e1, r1 = known[-1]
    out: dict[str, float] = {}
    for stage, v in r1["times"].items():
        if stage == "imports":
            continue
        if len(known) >= 2 and stage in known[-2][1]["times"]:
            e0, r0 = known[-2]
            slope = max((v[2] - r0["times"][stage][2]) / (e1 - e0), 0.0)
            out[stage] = v[2] + slope * (events - e1)
        else:
            base = r1["base_rss_bytes"]
            out[stage] = base + max(v[2] - base, 0) / e1 * events
    for stage, est in (r1.get("skipped") or {}).items():
        out[stage] = est * events / e1
    return out


def memory_estimate(result: dict[str, Any], measured_events: int, events: int) -> float:
    """A path's peak for `events` events from its result (analyse()) for measured_events: the
    memory after the imports, plus the bytes per event above it at the measured size."""
    base = result["base_rss_bytes"]
    return base + (result["peak_rss_bytes"] - base) / measured_events * events
