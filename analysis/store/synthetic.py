"""A synthetic traced run for the analysis benchmark (ipctrace bench-analysis,
run/bench_analysis.py): n ping-pong round trips on one CPU written as the tracer and the
driver write theirs (events.bin, iterations.parquet, workload.json, trace.json), a chunk of
round trips at a time, so that a 50 M-iteration run is written in bounded memory. Its records
are laid out here, beside the format they are written in (store/events.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

A_TID, B_TID, CPU = 1000, 1001, 0


NR_READ, NR_WRITE = 0, 1


RECORDS_PER_ITERATION = 12
# Round trips synthesised at a time: ~100 MB of records, times and draws at once.
CHUNK = 250_000
FIRST_START_NS = 10_000

# One round trip's records: (type, tid, aux, a0).
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


def _round_trips(n: int, rng: np.random.Generator, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
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


def _records(ts: np.ndarray) -> np.ndarray:
    """events.bin's records of the round trips whose times are ts (n x 12)."""
    from analysis.store import events as ev_mod

    return ev_mod.records_of(ts.ravel(), PATTERN, CPU)


def _iterations(first: int, t_start: np.ndarray, t_end: np.ndarray) -> pd.DataFrame:
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


def workload_json(n: int) -> dict[str, Any]:
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


def trace_json(n: int) -> dict[str, Any]:
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


def write_synthetic(outdir: Path | str, n: int, seed: int = 7, chunk: int = CHUNK) -> int:
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
    h["magic"], h["version"], h["rec_size"], h["count"], h["ncpus"] = (
        ev_mod.MAGIC,
        ev_mod.VERSION,
        ev_mod.REC.itemsize,
        count,
        2,
    )
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
