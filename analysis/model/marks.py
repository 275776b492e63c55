"""Iterations a program marks itself (`ipctrace trace --markers`: the USDT probes of
examples/ipctrace_marker.h) or that a function's calls delimit (`--iteration
BINARY:FUNCTION`: a uprobe at its entry, a uretprobe at its return). Both reach the trace
as `mark` records (bpf/ipctrace.h): aux 1 begins an iteration, 2 ends one, a0 the address
of its metric name in the program (0: none), whose text trace.json's marks.names holds.

On each thread an end closes the latest begin still open (a recursive function's calls
nest); an end without a begin (the trace started inside an iteration) and a begin never
ended (it ended inside one) give no iteration. The metric is the name at the end, else at
the begin, else `iteration`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analysis.model.rtt import as_iterations

BEGIN, END = 1, 2
UNNAMED = "iteration"


def windows(ev: pd.DataFrame, marks: dict[str, Any] | None, unnamed: str = UNNAMED) -> pd.DataFrame:
    """The marked iterations of every thread, as the iterations frame a workload gives;
    unnamed: the metric of those without a name (--iteration: the function's)."""
    names = {int(k): str(v) for k, v in ((marks or {}).get("names") or {}).items()}
    m = ev.loc[(ev["type"] == "mark").to_numpy(), ["tid", "ts", "aux", "a0", "cpu"]].sort_values(
        ["tid", "ts"], kind="stable"
    )
    starts, ends, tids, cpus, metric = [], [], [], [], []
    for tid, rows in m.groupby("tid", sort=True):
        open_ = []  # (ts, cpu, name address) of the begins not yet ended, innermost last
        for ts, aux, a0, cpu in zip(
            rows["ts"].to_numpy(np.int64), rows["aux"].to_numpy(), rows["a0"].to_numpy(np.int64), rows["cpu"].to_numpy()
        ):
            if aux == BEGIN:
                open_.append((ts, cpu, a0))
            elif aux == END and open_:
                t0, c0, a_begin = open_.pop()
                starts.append(t0)
                ends.append(ts)
                tids.append(tid)
                cpus.append(c0)
                metric.append(names.get(int(a0)) or names.get(int(a_begin)) or unnamed)
    labels = list(dict.fromkeys(metric)) or [unnamed]
    code = np.array([labels.index(x) for x in metric], np.int64)
    return as_iterations(
        np.array(starts, np.int64),
        np.array(ends, np.int64),
        np.array(tids, np.int64),
        np.array(cpus, np.int64),
        code,
        labels,
    )
