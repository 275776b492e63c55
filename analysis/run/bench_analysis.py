"""The measuring side of `ipctrace bench-analysis`: a synthetic traced run of known round trips
written as the tracer and the driver write theirs (a chunk of round trips at a time, so that a
50 M-iteration run is written in bounded memory), and its analysis stage by stage, by the
whole-trace path or the streaming one (run/tracing.py), with each stage's time and peak memory
(analysis/cli/bench_analysis.py runs each in a fresh process and prints them against the
targets)."""

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from analysis.errors import MeasureError

A_TID, B_TID, CPU = 1000, 1001, 0


NR_READ, NR_WRITE = 0, 1


RECORDS_PER_ITERATION = 12
# Round trips synthesised at a time: ~100 MB of records, times and draws at once.
CHUNK = 250_000
FIRST_START_NS = 10_000

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
    "events and breakdown (tracing.finish)",
    "+ the whole-trace view (trace)",
    "breakdown flame graph (folded)",
    "heat maps and histogram",
)
# The stages of the report, after the breakdown: analyse(report=False) leaves them out.
REPORT_STAGES = ("breakdown flame graph (folded)", "heat maps and histogram")

# One round trip's records: (type, tid, the number or state or target CPU, the argument or
# return value or other task), as bpf/ipctrace.h lays them out (store/events.records_of).
PATTERN = (
    ("sys_enter", A_TID, NR_WRITE, 0),
    ("waking", B_TID, CPU, A_TID | A_TID << 32),
    ("sys_exit", A_TID, NR_WRITE, 1),
    ("sys_enter", A_TID, NR_READ, 0),
    ("switch", A_TID, 1, B_TID | B_TID << 32),
    ("sys_exit", B_TID, NR_READ, 1),
    ("sys_enter", B_TID, NR_WRITE, 0),
    ("waking", A_TID, CPU, B_TID | B_TID << 32),
    ("sys_exit", B_TID, NR_WRITE, 1),
    ("sys_enter", B_TID, NR_READ, 0),
    ("switch", B_TID, 1, A_TID | A_TID << 32),
    ("sys_exit", A_TID, NR_READ, 1),
)
assert len(PATTERN) == RECORDS_PER_ITERATION


def _round_trips(n, rng, first):
    """n round trips, the first starting at time `first`: record times (n x 12), each
    iteration's window (start, end) and the time the round trip after them starts.
    Chunk after chunk from one generator gives the same times as all at once."""
    # Offsets vary per iteration so that the statistics and heat maps see a spread.
    gap = rng.gamma(4.0, 250.0, size=(n, RECORDS_PER_ITERATION)).astype(np.int64) + 50
    t = np.cumsum(gap, axis=1)
    period = t[:, -1] + 300
    start = first + np.concatenate(([0], np.cumsum(period[:-1])))
    ts = start[:, None] + t
    # The measuring side reads the clock in user space before its write and after its read returns.
    return ts, ts[:, 0] - 40, ts[:, -1] + 40, int(start[-1] + period[-1])


def _records(ts):
    """events.bin's records of the round trips whose times are ts (n x 12)."""
    from analysis.store import events as ev_mod

    return ev_mod.records_of(ts.ravel(), PATTERN, CPU)


def _iterations(first, t_start, t_end):
    """iterations.parquet's rows of the round trips numbered from `first`."""
    import pandas as pd

    n = len(t_start)
    seq = np.arange(first, first + n, dtype=np.int64)
    return pd.DataFrame(
        {
            "run": np.zeros(n, np.int32),
            "iteration": seq,
            "seq": seq,
            "metric": pd.Categorical.from_codes(np.zeros(n, np.int8), ["rtt"]),
            "t_start_ns": t_start,
            "t_end_ns": t_end,
            "latency_ns": t_end - t_start,
            "cpu": np.zeros(n, np.int16),
            "tid": np.full(n, A_TID, np.int32),
        }
    )


def workload_json(n):
    return {
        "workload": "pipe",
        "metrics": ["rtt"],
        "primary_metric": "rtt",
        "placement": "same-cpu",
        "threads": [
            {"role": "measuring", "pid": A_TID, "tid": A_TID, "cpu": CPU},
            {"role": "peer", "pid": B_TID, "tid": B_TID, "cpu": CPU},
        ],
        "runs_completed": 1,
        "iterations_completed": n,
    }


def trace_json(n):
    """The tracer's trace.json for the synthetic run: nothing lost, the two threads named, the
    records counted by type as the loader counts them (loaders/tracejson.c)."""
    from analysis.store import records

    per_type = {name: 0 for name in records.TYPES}
    for p in PATTERN:
        per_type[p[0]] += n
    return {
        "drops": {"total": 0, "per_cpu": [0, 0], "lost_spans": []},
        "events": per_type,
        "records": RECORDS_PER_ITERATION * n,
        "unknown_records": 0,
        "pids": [A_TID, B_TID],
        "tids": [A_TID, B_TID],
        "tasks": {str(t): {"comm": "ipcbench", "pid": t} for t in (A_TID, B_TID)},
        "tracer": {"tids": []},
        "status": "complete",
        "clock": "CLOCK_MONOTONIC",
    }


def write_synthetic(outdir, n, seed=7, chunk=CHUNK):
    """events.bin, iterations.parquet, workload.json and trace.json of n synthetic round trips
    in outdir, written `chunk` round trips at a time; returns the number of events."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.store import events as ev_mod
    from analysis.store import safeio
    from analysis.store.results import write_json

    outdir = Path(outdir)
    rng = np.random.default_rng(seed)
    count = RECORDS_PER_ITERATION * n
    h = np.zeros(1, ev_mod.HEADER)
    h["magic"], h["version"], h["rec_size"], h["count"], h["ncpus"] = ev_mod.MAGIC, ev_mod.VERSION, 32, count, 2
    first = FIRST_START_NS
    with safeio.created(outdir / "events.bin") as ev_tmp, safeio.created(outdir / "iterations.parquet") as it_tmp:
        writer = None
        try:
            with open(ev_tmp, "wb") as f:
                f.write(h.tobytes())
                for i in range(0, n, chunk):
                    ts, t_start, t_end, first = _round_trips(min(chunk, n - i), rng, first)
                    _records(ts).tofile(f)
                    table = pa.Table.from_pandas(_iterations(i, t_start, t_end), preserve_index=False)
                    if writer is None:
                        writer = pq.ParquetWriter(it_tmp, table.schema)
                    writer.write_table(table)
                    del ts, table
        finally:
            if writer is not None:
                writer.close()
    write_json(outdir / "workload.json", workload_json(n))
    write_json(outdir / "trace.json", trace_json(n))
    return count


def peak_rss():
    """This process' peak resident memory in bytes (VmHWM). Not getrusage: its maxrss
    survives exec and would count the parent's memory at fork."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise MeasureError("bench-analysis: /proc/self/status has no VmHWM")


def reset_peak_rss():
    """Start VmHWM again from the memory held now (Linux 4.0: clear_refs "5"), so that each
    stage's peak is its own; False if this kernel refuses (the peaks are then cumulative)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def analyse(outdir, path="streaming", report=True):
    """The analysis a traced run and its report do, by the whole-trace path (today's functions:
    the events as one frame, the breakdown of them at once) or the streaming one
    (tracing.finish); {"times": {stage: [wall s, CPU s, peak RSS bytes]}, ...}. Each stage's
    peak is its own when the kernel can reset VmHWM ("stage_peaks"), else the peak so far.
    report=False: without the REPORT_STAGES (where they would not fit in memory)."""
    if path not in PATHS:
        raise MeasureError(f"bench-analysis: no analysis path {path!r} (one of {', '.join(PATHS)})")
    times = {}
    t0, c0 = time.perf_counter(), time.process_time()
    stage_peaks = reset_peak_rss()  # the interpreter's start-up (as a run's is) counts in "imports"

    def lap(stage):
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
    from analysis.render import flame, plots, report
    from analysis.run import tracing
    from analysis.store import events as ev_mod
    from analysis.store.itercolumns import IterationColumns
    from analysis.store.results import written_alongside

    freeze_imports()  # as the command line does before it runs a command
    lap("imports")
    base = _rss()
    outdir = Path(outdir)
    wl = json.loads((outdir / "workload.json").read_text())
    # As a run reads its iterations: into columns beside the results, read a column at a time.
    iters = IterationColumns.from_parquet(outdir / "iterations.parquet", dir=outdir)
    s = summary_mod.build(wl, iters, {}, {"iterations": len(iters), "runs": 1}, "complete", [], False)
    lap("statistics")
    if path == "whole":
        frame = iters.frame()  # today's path: the iterations as one frame
        ev, header, warnings = ev_mod.load(outdir / "events.bin", frame, "rtt")
        lap("decode events.bin")
        # events.parquet is written while the breakdown is computed, as tracing.finish does.
        with written_alongside(
            ev_mod.write_table, outdir / "events.parquet", pa.Table.from_pandas(ev, preserve_index=False)
        ):
            s = s.with_breakdown(breakdown.summarize(frame, ev, wl, primary=s.primary_metric, out_dir=outdir))
            lap("breakdown (+ events.parquet)")
        lap("events.parquet (rest)")
        del ev, frame
    elif path == "streaming":
        s = tracing.finish(outdir, iters, s)
        lap("events and breakdown (tracing.finish)")
    else:
        s = tracing.finish(outdir, iters, s, whole_trace=True)
        lap("+ the whole-trace view (trace)")
    if report:
        # As the report reads breakdown.parquet: a few columns at a time.
        _, grid, folded = report.breakdown_pictures(outdir, "rtt")
        flame.write_folded(outdir / "breakdown.folded", folded)
        lap("breakdown flame graph (folded)")  # with the breakdown heat map's grid, read as the report does
        plots.latency_heatmap(heatmaps.latency_heatmap(iters, "rtt"), outdir / "heatmap-latency.png")
        plots.breakdown_heatmap(grid, outdir / "heatmap-breakdown.png")
        plots.histogram(heatmaps.histogram(iters.column("latency_ns"), "rtt"), outdir / "histogram-rtt.png")
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
        "closure_residual_pct": s.breakdown["rtt"].closure_residual_pct,
        "breakdown_digest": digest,
    }


def _rss():
    """This process' resident memory now, in bytes (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise MeasureError("bench-analysis: /proc/self/status has no VmRSS")


def total(result):
    """(wall s, CPU s) of an analysis, without the imports (a run has them done before)."""
    rows = [v for k, v in result["times"].items() if k != "imports"]
    return sum(r[0] for r in rows), sum(r[1] for r in rows)


def peak_estimates(known, events):
    """{stage: its peak in bytes} for a run of `events` events, from the same path measured at
    smaller sizes (known: [(events, analyse() result)], ascending): along the line through the
    two largest (a stage whose memory is bounded stays near its figure), or from one alone, its
    memory_estimate (bytes per event above the imports' memory: an upper bound for a bounded
    stage). A stage left out at the largest ("skipped": {stage: estimate}) grows with the events."""
    e1, r1 = known[-1]
    out = {}
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


def memory_estimate(result, measured_events, events):
    """A path's peak for `events` events from its result (analyse()) for measured_events: the
    memory after the imports, plus the bytes per event above it at the measured size."""
    base = result["base_rss_bytes"]
    return base + (result["peak_rss_bytes"] - base) / measured_events * events
