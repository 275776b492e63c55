"""The measuring side of `ipctrace bench-analysis`: a synthetic traced run of known round trips
written as the tracer and the driver write theirs, and the analysis of it stage by stage with
its time and peak memory (analysis/cli/bench_analysis.py prints them against the targets)."""

import json
import time
from pathlib import Path

import numpy as np

from analysis.errors import MeasureError

A_TID, B_TID, CPU = 1000, 1001, 0


NR_READ, NR_WRITE = 0, 1


def _round_trips(n, rng):
    """n round trips: record times (n x 12), the per-record pattern (type, tid, aux, a0), and the windows."""
    code = {name: i + 1 for i, name in enumerate(("sys_enter", "sys_exit", "switch", "waking"))}
    # Offsets vary per iteration so that the statistics and heat maps see a spread.
    gap = rng.gamma(4.0, 250.0, size=(n, 12)).astype(np.int64) + 50
    t = np.cumsum(gap, axis=1)
    period = t[:, -1] + 300
    start = np.concatenate(([10_000], 10_000 + np.cumsum(period[:-1])))
    ts = start[:, None] + t
    pattern = [  # (type, tid, aux, a0)
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
    ]
    types = np.array([code[p[0]] for p in pattern], np.uint16)
    tids = np.array([p[1] for p in pattern], np.uint32)
    aux = np.array([p[2] for p in pattern], np.uint32)
    a0 = np.array([p[3] for p in pattern], np.uint64)
    # The measuring side reads the clock in user space before its write and after its read returns.
    return ts, types, tids, aux, a0, ts[:, 0] - 40, ts[:, -1] + 40


def write_synthetic(outdir, n, seed=7):
    import pandas as pd

    from analysis.store import events as ev_mod
    from analysis.store.results import write_iterations

    rng = np.random.default_rng(seed)
    ts, types, tids, aux, a0, t_start, t_end = _round_trips(n, rng)
    rec = np.zeros(ts.size, ev_mod.REC)
    rec["ts"] = ts.ravel()
    rec["type"] = np.tile(types, n)
    rec["tid"] = np.tile(tids, n)
    rec["pid"] = rec["tid"]
    rec["aux"] = np.tile(aux, n)
    rec["a0"] = np.tile(a0, n)
    rec["cpu"] = CPU
    h = np.zeros(1, ev_mod.HEADER)
    h["magic"], h["version"], h["rec_size"], h["count"], h["ncpus"] = ev_mod.MAGIC, ev_mod.VERSION, 32, len(rec), 2
    with open(outdir / "events.bin", "wb") as f:
        f.write(h.tobytes())
        rec.tofile(f)
    iters = pd.DataFrame(
        {
            "run": np.zeros(n, np.int32),
            "iteration": np.arange(n, dtype=np.int64),
            "seq": np.arange(n, dtype=np.int64),
            "metric": pd.Categorical(["rtt"] * n),
            "t_start_ns": t_start,
            "t_end_ns": t_end,
            "latency_ns": t_end - t_start,
            "cpu": np.zeros(n, np.int16),
            "tid": np.full(n, A_TID, np.int32),
        }
    )
    write_iterations(outdir / "iterations.parquet", iters)
    wl = {
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
    (outdir / "workload.json").write_text(json.dumps(wl))
    return len(rec)


def peak_rss():
    """This process' peak resident memory in bytes (VmHWM). Not getrusage: its maxrss
    survives exec and would count the parent's memory at fork."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise MeasureError("bench-analysis: /proc/self/status has no VmHWM")


def analyse(outdir):
    """The analysis a traced run and its report do; {stage: seconds} and the peak RSS in bytes."""
    times = {}
    t0, c0 = time.perf_counter(), time.process_time()

    def lap(stage):
        # Wall and CPU time: on a shared machine the two differ by what others ran meanwhile.
        nonlocal t0, c0
        now, cpu = time.perf_counter(), time.process_time()
        times[stage] = [now - t0, cpu - c0, peak_rss()]
        t0, c0 = now, cpu

    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis import freeze_imports
    from analysis.model import breakdown, heatmaps
    from analysis.model import summary as summary_mod
    from analysis.render import flame, plots
    from analysis.store import events as ev_mod
    from analysis.store.results import written_alongside

    freeze_imports()  # as the command line does before it runs a command
    lap("imports")
    outdir = Path(outdir)
    wl = json.loads((outdir / "workload.json").read_text())
    iters = pq.read_table(outdir / "iterations.parquet").to_pandas()
    s = summary_mod.build(wl, iters, {}, {"iterations": len(iters), "runs": 1}, "complete", [], False)
    lap("statistics")
    ev, header, warnings = ev_mod.load(outdir / "events.bin", iters, "rtt")
    lap("decode events.bin")
    # As tracing.finish does: events.parquet is written while the breakdown is computed.
    with written_alongside(
        ev_mod.write_table, outdir / "events.parquet", pa.Table.from_pandas(ev, preserve_index=False)
    ):
        s = s.with_breakdown(breakdown.summarize(iters, ev, wl, primary=s.primary_metric, out_dir=outdir))
        lap("breakdown (+ events.parquet)")
    lap("events.parquet (rest)")
    del ev
    bd = pq.read_table(outdir / "breakdown.parquet").to_pandas()
    flame.write_folded(outdir / "breakdown.folded", flame.breakdown_folded(bd, heatmaps.component_columns(bd)))
    lap("breakdown flame graph (folded)")
    plots.latency_heatmap(heatmaps.latency_heatmap(iters, "rtt"), outdir / "heatmap-latency.png")
    plots.breakdown_heatmap(heatmaps.breakdown_heatmap(bd, "rtt")[0], outdir / "heatmap-breakdown.png")
    plots.histogram(heatmaps.histogram(iters["latency_ns"].to_numpy(), "rtt"), outdir / "histogram-rtt.png")
    lap("heat maps and histogram")
    closure = s.breakdown["rtt"].closure_residual_pct
    return {"times": times, "peak_rss_bytes": peak_rss(), "closure_residual_pct": closure}
